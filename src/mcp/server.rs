//! The MCP server: rmcp's stdio service with one handler. `tools/list` prints the catalog
//! ([`super::tools::TOOLS`]); `tools/call` decodes the arguments through the tool's wire
//! type and sends exactly one socket request, as the `--as` source, never with `confirm`.
//!
//! A refusal (`unauthorized`, `confirmation_required`, `not_found`, ...) comes back as a tool
//! result with `isError: true` carrying `{ok:false, error:{code, message, remedy}}`, the
//! same object the CLI prints on stderr. A call the client cancels (`notifications/cancelled`)
//! drops its socket connection at once, which ends a daemon-side wait (the daemon notices
//! the hang-up); rmcp sends no answer for a cancelled request.

use super::tools::{self, Tool};
use crate::client::{self, ClientError, Target};
use crate::request::{Request, CLIENT_TIMEOUT, WAIT_SLACK};
use maxx_protocol::duration::duration_from_json;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::{RESPONSE_LINE_MAX_BYTES, RUN_DEFAULT_TIMEOUT, WAIT_DEFAULT_TIMEOUT};
use maxx_protocol::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::convert::Infallible;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

/// How often a waiting tool reports progress (when the client gave a progress token).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The newest MCP revision this server speaks: the newest with an `initialize` handshake
/// (2025-11-25). The stateless revisions after it (no `initialize`) are not offered.
pub const PROTOCOL: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// What `initialize` tells the model about the server, before any tool is listed.
const INSTRUCTIONS: &str = "maxx controls terminal sessions (real PTYs) run by a local daemon. \
Loop: read (get / snapshot) -> act (send_keys, paste, submit, run) -> wait (wait with \
lifecycle, state, event, until or regex) -> read again. Every call is one request under the \
daemon's capability policy for this server's source; a refusal is an error result with \
error.code and error.remedy. maxx never infers workflow meaning from output: a session's \
state and result are only what an agent declared. `maxx mcp --skill` prints the full guide.";

/// The server: where the daemon is and which policy source every call claims.
#[derive(Clone)]
pub struct MaxxMcp {
    /// The daemon to call (`--socket` / `$MAXX_CONTROL_DIR`, as for the CLI).
    target: Target,
    /// `--as SOURCE`, sent as every request's `caller`; `None` is the daemon's local source.
    caller: Option<String>,
}

/// Serve MCP on stdin/stdout until the client closes stdin. Returns the exit code.
pub fn run(target: Target, caller: Option<String>) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::report::print_error(&ErrorBody::internal(format!(
                "cannot start the MCP server's runtime: {e}"
            )));
            return crate::exit::FAILED;
        }
    };
    let server = MaxxMcp { target, caller };
    let served = runtime.block_on(async move {
        let running = server.serve(rmcp::transport::stdio_pipes()).await?;
        running.waiting().await?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    });
    // Pending blocking stdin reads must not hold the process after the client left.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match served {
        Ok(()) => crate::exit::OK,
        Err(e) => {
            crate::report::print_error(&ErrorBody::internal(format!("MCP session failed: {e}")));
            crate::exit::FAILED
        }
    }
}

impl ServerHandler for MaxxMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(PROTOCOL)
            .with_server_info(
                Implementation::new("maxx", env!("CARGO_PKG_VERSION")).with_title("maxx"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            tools::TOOLS.iter().map(Tool::to_mcp).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = tools::find(&request.name) else {
            return Err(McpError::invalid_params(
                format!("no tool named {:?} (tools/list lists them)", request.name),
                None,
            ));
        };
        let params = match tool.params(request.arguments) {
            Ok(p) => p,
            Err(e) => return Ok(refused(&e).into()),
        };
        let req = Request {
            method: tool.method,
            timeout: socket_timeout(tool, &params),
            params,
        };
        let progress = context.meta.get_progress_token().filter(|_| tool.waits);
        // The wait's own budget, for the progress `total` (none for an unlimited `run`).
        let total = (req.timeout != Duration::MAX).then(|| req.timeout.saturating_sub(WAIT_SLACK));
        let answer = tokio::select! {
            answer = self.send(req) => answer,
            never = report_progress(&context, progress, total, tool) => match never {},
            // Dropping `send` closes the socket: the daemon ends the wait and frees its slot.
            // rmcp sends no answer to a cancelled request, so this result goes nowhere.
            () = context.ct.cancelled() => {
                return Ok(refused(&ErrorBody::new(ErrorCode::Timeout, "cancelled by the client")).into())
            }
        };
        Ok(match answer {
            Ok(Response {
                ok: true,
                result: Some(result),
                ..
            }) => CallToolResult::structured(result),
            Ok(Response {
                ok: true,
                result: None,
                ..
            }) => CallToolResult::structured(json!({})),
            Ok(Response { error, .. }) => {
                refused(&error.unwrap_or_else(|| ErrorBody::internal("ok:false without an error")))
            }
            Err(ClientError::NoDaemon(e) | ClientError::Failed(e)) => refused(&e),
            Err(ClientError::Usage(message)) => refused(&ErrorBody::invalid(message)),
        }
        .into())
    }
}

/// An error result: the maxx error object the CLI would print, with `isError: true`.
fn refused(error: &ErrorBody) -> CallToolResult {
    CallToolResult::structured_error(json!({ "ok": false, "error": error }))
}

/// How long to wait for the daemon's answer: a wait's or run's own budget plus the slack
/// the CLI gives it (the daemon answers `timeout` itself), else the CLI's default.
/// `Duration::MAX` is no limit (`run` with `timeout: 0`), as in `crate::request`.
fn socket_timeout(tool: &Tool, params: &Value) -> Duration {
    if !tool.waits {
        return CLIENT_TIMEOUT;
    }
    let default = if tool.method == "sessions.run" {
        RUN_DEFAULT_TIMEOUT
    } else {
        WAIT_DEFAULT_TIMEOUT
    };
    // A bad duration is the daemon's to refuse, promptly.
    let budget = params
        .get("timeout")
        .map(|t| duration_from_json(t).unwrap_or_default())
        .unwrap_or(default);
    if budget.is_zero() && tool.method == "sessions.run" {
        return Duration::MAX;
    }
    budget + WAIT_SLACK
}

/// Send `notifications/progress` for a waiting call every [`PROGRESS_EVERY`]: seconds
/// waited so far, of `total` when the wait has a budget. Never returns; without a token it
/// only waits.
async fn report_progress(
    context: &RequestContext<RoleServer>,
    token: Option<ProgressToken>,
    total: Option<Duration>,
    tool: &Tool,
) -> Infallible {
    let Some(token) = token else {
        return std::future::pending().await;
    };
    let started = Instant::now();
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    loop {
        tick.tick().await;
        let waited = started.elapsed().as_secs_f64().floor();
        let mut note = ProgressNotificationParam::new(token.clone(), waited)
            .with_message(format!("{}: waiting ({waited:.0}s)", tool.name));
        if let Some(total) = total {
            note = note.with_total(total.as_secs_f64());
        }
        // A client that went away is noticed by the service loop, not here.
        let _ = context.peer.notify_progress(note).await;
    }
}

impl MaxxMcp {
    /// One request; `sessions.create` starts a daemon first when none answers, as the CLI
    /// does.
    async fn send(&self, req: Request) -> Result<Response, ClientError> {
        match self.send_once(&req).await {
            Err(ClientError::NoDaemon(_)) if req.starts_daemon() => {
                let control = self.target.control_dir.clone();
                let started = tokio::task::spawn_blocking(move || {
                    crate::daemon_cmd::spawn_detached(&control, "info", &[])
                })
                .await
                .map_err(|e| ClientError::Failed(ErrorBody::internal(e.to_string())))?;
                match started {
                    Ok(()) => {}
                    Err(e) if e.code == ErrorCode::AlreadyRunning => {}
                    Err(mut e) => {
                        e.message = format!(
                            "no daemon was running and starting one failed: {}",
                            e.message
                        );
                        return Err(ClientError::Failed(e));
                    }
                }
                self.send_once(&req).await
            }
            other => other,
        }
    }

    /// Connect and write the request (blocking, short: a local socket), then read the one
    /// answer line without blocking the runtime. Dropping the future closes the socket.
    async fn send_once(&self, req: &Request) -> Result<Response, ClientError> {
        let target = self.target.clone();
        let caller = self.caller.clone();
        let (method, params) = (req.method, req.params.clone());
        let stream = tokio::task::spawn_blocking(move || {
            client::send_request(&target, method, params, caller.as_deref(), false, true)
        })
        .await
        .map_err(|e| ClientError::Failed(ErrorBody::internal(e.to_string())))??;
        let io = |e: std::io::Error| {
            ClientError::Failed(ErrorBody::internal(format!(
                "talking to the daemon failed: {e}"
            )))
        };
        stream.set_nonblocking(true).map_err(io)?;
        let stream = tokio::net::UnixStream::from_std(stream).map_err(io)?;
        let mut reader = BufReader::new(stream.take(RESPONSE_LINE_MAX_BYTES as u64));
        let mut line = Vec::new();
        // tokio treats a deadline past the end of time (`Duration::MAX`) as none.
        match tokio::time::timeout(req.timeout, reader.read_until(b'\n', &mut line)).await {
            Ok(read) => read.map_err(io)?,
            Err(_) => {
                return Err(ClientError::Failed(ErrorBody::new(
                    ErrorCode::Timeout,
                    format!(
                        "the daemon did not answer within {}s",
                        req.timeout.as_secs()
                    ),
                )))
            }
        };
        client::parse_response(&line)
    }
}
