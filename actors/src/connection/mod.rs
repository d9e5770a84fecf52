//! `ConnectionActor`: one per socket connection, short-lived. It reads one bounded
//! request line, authenticates the token, decodes it into a typed [`Call`], asks the
//! policy, and hands the call on: a unary request to `route` (one session's actor or the
//! daemon's own), a stream or a wait to `streams`. It writes the answer and stops.
//!
//! This is the JSON edge: nothing behind it sees a JSON string. No input can panic it;
//! every rejection is a typed error and changes nothing.

mod route;
mod streams;

pub use crate::context::DaemonContext;
use route::*;
use streams::*;

use crate::bus::{subscriber_queue, BusMsg};
use crate::control_dir::constant_time_eq;
use crate::persistence::PersistMsg;
use crate::registry::{RegistryMsg, Resolved};
use crate::session::{
    new_id, ReadAnswer, Reply, SessionMsg, SessionReply, SessionStart, StartSession, WatchLine,
};
use crate::stats::Stats;
use maxx_protocol::envelope::Warning;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::{
    REQUEST_LINE_MAX_BYTES, REQUEST_READ_TIMEOUT, RESPONSE_WRITE_TIMEOUT, UNAUTH_BUDGET_BYTES,
    UNAUTH_FREE_BYTES, WATCH_BUFFER,
};
use maxx_protocol::request::{
    ActionKind, ActionParams, Call, CreateCall, CreateParams, DaemonCall, RecordsCall,
    RegisterParams, RunParams, ScreenCall, Serve, StreamWaitFor, StreamWaitParams,
    StreamWatchParams, WaitCall, WaitCondition, WaitParams, WatchParams,
};
use maxx_protocol::session::Outcome;
use maxx_protocol::session::SessionView;
use maxx_protocol::stream::{StreamEvent, STREAM_SCHEMA};
use maxx_protocol::{RequestEnvelope, Response};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, Message, RpcReplyPort};
use serde_json::{json, Value};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// The policy source a request is attributed to when it names none.
pub const DEFAULT_SOURCE: &str = "local-cli";

/// How long an internal request to an actor may take before the caller gets `internal`.
const ACTOR_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Input waits for the child's tty to take it; give it more than a plain call.
const INPUT_TIMEOUT: Duration = Duration::from_secs(30);

/// The actor.
pub struct ConnectionActor;

/// Arguments: the accepted stream and its slot in the connection limit.
pub struct ConnectionArgs {
    /// The accepted socket.
    pub stream: UnixStream,
    /// Released when the connection ends.
    pub permit: OwnedSemaphorePermit,
    /// Routing context.
    pub ctx: Arc<DaemonContext>,
}

/// The only message: serve the connection.
pub enum ConnectionMsg {
    /// Read, route, reply, stop.
    Serve,
}

/// State: the not-yet-served connection.
pub struct ConnectionState {
    args: Option<ConnectionArgs>,
}

impl Actor for ConnectionActor {
    type Msg = ConnectionMsg;
    type State = ConnectionState;
    type Arguments = ConnectionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ConnectionMsg>,
        args: ConnectionArgs,
    ) -> Result<ConnectionState, ActorProcessingErr> {
        myself.cast(ConnectionMsg::Serve)?;
        Ok(ConnectionState { args: Some(args) })
    }

    async fn handle(
        &self,
        myself: ActorRef<ConnectionMsg>,
        _msg: ConnectionMsg,
        state: &mut ConnectionState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(ConnectionArgs {
            mut stream,
            permit,
            ctx,
        }) = state.args.take()
        {
            let stats = ctx.spawn.stats.clone();
            Stats::add(&stats.connections, 1);
            match serve(&mut stream, &ctx).await {
                Some(Outgoing::Response(response)) => {
                    let _ = write_bounded(&mut stream, &response.to_line()).await;
                }
                Some(Outgoing::Stop(response)) => {
                    let stopping = response.ok;
                    let _ = write_bounded(&mut stream, &response.to_line()).await;
                    let _ = stream.shutdown().await;
                    if stopping {
                        // The one clean stop path there is: the daemon's own SIGTERM handler
                        // (journal folded, sessions ended, socket and pid file removed).
                        tracing::info!("daemon.stop: stopping");
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::this(),
                            nix::sys::signal::Signal::SIGTERM,
                        );
                    }
                }
                Some(Outgoing::Read(answer, id, warnings)) => {
                    let _ = write_read_answer(&mut stream, answer, id, &warnings).await;
                }
                None => {}
            }
            let _ = stream.shutdown().await;
            drop(stream);
            drop(permit);
            crate::memory::churn(&stats, crate::memory::REQUEST_CHURN);
            if stats.connections.fetch_sub(1, Ordering::Relaxed) == 1 {
                crate::memory::idle(&stats);
            }
            stats.connection_changed.notify_waiters();
        }
        myself.stop(None);
        Ok(())
    }
}

/// Write one answer (or one stream line, one attach chunk), giving the client
/// [`RESPONSE_WRITE_TIMEOUT`] to take it. A client that stops reading is cut off instead of
/// holding its connection slot (and whatever the answer pins) for ever.
async fn write_bounded<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(RESPONSE_WRITE_TIMEOUT, w.write_all(bytes)).await {
        Ok(result) => result,
        Err(_) => {
            tracing::info!(
                bytes = bytes.len(),
                "client took no answer within {}s; closing",
                RESPONSE_WRITE_TIMEOUT.as_secs()
            );
            Err(std::io::ErrorKind::TimedOut.into())
        }
    }
}

/// What a connection answers with: a response, or a screen read's answer, whose `result`
/// the session's actor already encoded (it is written as it is, never copied into a
/// `Value` or a second buffer).
enum Outgoing {
    Response(Response),
    /// `daemon.stop`'s answer: written, then the daemon stops as on SIGTERM.
    Stop(Response),
    /// The answer, the request's `id` and the warnings the response carries.
    Read(ReadAnswer, Option<Value>, Vec<Warning>),
}

impl From<Response> for Outgoing {
    fn from(response: Response) -> Self {
        Outgoing::Response(response)
    }
}

/// Write a screen read's answer as the response line `{"ok":true,"result":…,"id":…,
/// "warnings":…}` (the bytes serde writes for a [`Response`]; `id` and `warnings` only when
/// there are some), within [`RESPONSE_WRITE_TIMEOUT`]. Its charge
/// against the budget for answers in flight is given back once the write has ended, however
/// it ended.
async fn write_read_answer<W: AsyncWrite + Unpin>(
    w: &mut W,
    answer: ReadAnswer,
    id: Option<Value>,
    warnings: &[Warning],
) -> std::io::Result<()> {
    let mut tail = Vec::new();
    if let Some(id) = &id {
        tail.extend_from_slice(b",\"id\":");
        serde_json::to_writer(&mut tail, id)?;
    }
    if !warnings.is_empty() {
        tail.extend_from_slice(b",\"warnings\":");
        serde_json::to_writer(&mut tail, warnings)?;
    }
    tail.extend_from_slice(b"}\n");
    let write = async {
        w.write_all(b"{\"ok\":true,\"result\":").await?;
        w.write_all(&answer.json).await?;
        w.write_all(&tail).await
    };
    let result = match tokio::time::timeout(RESPONSE_WRITE_TIMEOUT, write).await {
        Ok(result) => result,
        Err(_) => {
            tracing::info!(
                bytes = answer.json.len(),
                "client took no answer within {}s; closing",
                RESPONSE_WRITE_TIMEOUT.as_secs()
            );
            Err(std::io::ErrorKind::TimedOut.into())
        }
    };
    drop(answer);
    result
}

/// A held long-lived slot; counted in `daemon.stats` `long_lived` until dropped.
struct LongLivedSlot {
    _permit: tokio::sync::OwnedSemaphorePermit,
    stats: Arc<Stats>,
}

impl Drop for LongLivedSlot {
    fn drop(&mut self) {
        Stats::add(&self.stats.long_lived, -1);
    }
}

/// Take a long-lived slot, or `busy` when all [`DaemonContext::max_long_lived`] are taken.
fn long_lived_slot(ctx: &DaemonContext, method: &str) -> Result<LongLivedSlot, ErrorBody> {
    let permit = ctx.long_lived.clone().try_acquire_owned().map_err(|_| {
        ErrorBody::new(
            ErrorCode::Busy,
            format!(
                "refused {method}: all {} slots for long-lived requests (watch, attach, wait, \
                 run) are taken; short requests are still served",
                ctx.max_long_lived
            ),
        )
        .with_remedy(
            "retry later, or end a watch/attach/wait you no longer need; `maxx daemon \
             --max-long-lived N` sets the cap",
        )
    })?;
    Stats::add(&ctx.spawn.stats.long_lived, 1);
    ctx.spawn.stats.connection_changed.notify_waiters();
    Ok(LongLivedSlot {
        _permit: permit,
        stats: ctx.spawn.stats.clone(),
    })
}

/// What one connection's not-yet-authenticated request line holds of the shared budget
/// (`UNAUTH_BUDGET_BYTES`); given back when dropped.
struct Unauthenticated<'a> {
    stats: &'a Stats,
    charged: i64,
}

impl Unauthenticated<'_> {
    /// Charge `n` more bytes, unless that would spend more than the budget.
    fn charge(&mut self, n: i64) -> bool {
        let before = self
            .stats
            .unauthenticated_bytes
            .fetch_add(n, Ordering::Relaxed);
        if before + n > UNAUTH_BUDGET_BYTES as i64 {
            self.stats
                .unauthenticated_bytes
                .fetch_sub(n, Ordering::Relaxed);
            return false;
        }
        self.charged += n;
        true
    }
}

impl Drop for Unauthenticated<'_> {
    fn drop(&mut self) {
        self.stats
            .unauthenticated_bytes
            .fetch_sub(self.charged, Ordering::Relaxed);
    }
}

/// Read one request line: up to a newline or EOF (a half-closed write side), bounded in
/// size and time, and in memory across connections: the line's buffer beyond
/// `UNAUTH_FREE_BYTES` is charged to the process-wide `UNAUTH_BUDGET_BYTES` until the
/// request is authenticated (the returned guard is dropped).
async fn read_request_line<'s>(
    stream: &mut UnixStream,
    stats: &'s Stats,
) -> Result<(Vec<u8>, Unauthenticated<'s>), ErrorBody> {
    let deadline = tokio::time::Instant::now() + REQUEST_READ_TIMEOUT;
    let mut held = Unauthenticated { stats, charged: 0 };
    let mut line = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => {
                return Err(ErrorBody::invalid(format!(
                    "no complete request line within {}s",
                    REQUEST_READ_TIMEOUT.as_secs()
                )))
            }
            Ok(Err(e)) => return Err(ErrorBody::invalid(format!("read failed: {e}"))),
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            return Ok((line, held));
        }
        let data = &chunk[..n];
        let end = data.iter().position(|b| *b == b'\n');
        let take = end.unwrap_or(n);
        let need = line.len() + take;
        if need > REQUEST_LINE_MAX_BYTES {
            return Err(ErrorBody::new(
                ErrorCode::TooLarge,
                format!("request line exceeds {REQUEST_LINE_MAX_BYTES} bytes"),
            ));
        }
        if need > line.capacity() {
            // Grow by doubling, but charge what is allocated, not what is used.
            let cap = need.max(line.capacity() * 2).min(REQUEST_LINE_MAX_BYTES);
            let owed = cap.saturating_sub(UNAUTH_FREE_BYTES) as i64 - held.charged;
            if owed > 0 && !held.charge(owed) {
                Stats::add(&stats.unauthenticated_refused, 1);
                return Err(ErrorBody::new(
                    ErrorCode::TooLarge,
                    format!(
                        "connections not yet authenticated hold {} MiB of request lines, \
                         the daemon's limit; this line is past {} KiB and would take more",
                        UNAUTH_BUDGET_BYTES >> 20,
                        UNAUTH_FREE_BYTES >> 10
                    ),
                )
                .with_remedy(
                    "retry shortly (partial lines time out after 10 s); if it keeps \
                     happening, something is flooding the socket: see `maxx daemon stats`",
                ));
            }
            line.reserve_exact(cap - line.len());
        }
        line.extend_from_slice(&data[..take]);
        if end.is_some() {
            return Ok((line, held));
        }
    }
}

/// A decoded, authenticated request.
struct Request {
    id: Option<Value>,
    call: Call,
    caller: String,
    /// The `caller` field as sent (`None` = the default local source).
    claimed: Option<String>,
    confirm: bool,
    /// The method and params again when a session is named by a prefix or `%title`: the
    /// call is decoded anew once they are resolved (after the policy has decided).
    selectors: Option<(String, Value)>,
    /// Params the method does not take: ignored, and told to the caller.
    warnings: Vec<Warning>,
}

/// Serve one request. `None` when the answer was already streamed.
async fn serve(stream: &mut UnixStream, ctx: &DaemonContext) -> Option<Outgoing> {
    let stats = ctx.spawn.stats.clone();
    let (line, held) = match read_request_line(stream, &stats).await {
        Ok(read) => read,
        Err(e) => return Some(Response::err(e).into()),
    };
    let decoded = decode_request(&line, ctx);
    // Authenticated or refused: the line no longer counts against the budget, and is not
    // held for the life of a stream.
    drop(line);
    drop(held);
    let Request {
        id,
        mut call,
        caller,
        claimed,
        confirm,
        selectors,
        warnings,
    } = match decoded {
        Ok(request) => request,
        Err(response) => return Some((*response).into()),
    };
    tracing::debug!(method = call.method(), caller, "request");
    // The policy decides before anything runs — before any session or parent lookup, so a
    // denied caller learns nothing about which ids exist.
    if let Err(e) = authorize(
        &call,
        &call.capabilities(),
        claimed.as_deref(),
        confirm,
        ctx,
    ) {
        return Some(Response::err(e).with_id(id).into());
    }
    let claimed_source = claimed.is_some();
    if let Err(e) = authorize_new_command(&call, claimed, confirm, ctx).await {
        return Some(Response::err(e).with_id(id).into());
    }
    if let Some((method, params)) = selectors {
        match resolve_selectors(&method, params, ctx).await {
            Ok(resolved) => call = resolved,
            Err(e) => return Some(Response::err(e).with_id(id).into()),
        }
    }
    let _slot = if call.is_long_lived() {
        match long_lived_slot(ctx, call.method()) {
            Ok(slot) => Some(slot),
            Err(e) => return Some(Response::err(e).with_id(id).into()),
        }
    } else {
        None
    };
    let result = match call {
        // A wait whose caller hangs up ends at once: nobody is left to answer.
        Call::Wait(WaitCall::Wait(p)) => wait(p, ctx, stream).await?,
        Call::Wait(WaitCall::StreamWait(p)) => stream_wait(p, ctx, stream).await?,
        Call::Wait(WaitCall::Watch(p)) => match watch(p, &warnings, ctx, stream).await {
            Ok(()) => return None,
            Err(e) => Err(e),
        },
        Call::Wait(WaitCall::StreamWatch(p)) => match stream_watch(p, &warnings, ctx, stream).await
        {
            Ok(()) => return None,
            Err(e) => Err(e),
        },
        Call::Screen(ScreenCall::Attach { session_id, size }) => {
            match attach(session_id, size, &warnings, ctx, stream).await {
                Ok(()) => return None,
                Err(e) => Err(e),
            }
        }
        Call::Screen(ScreenCall::Run(p)) => run(p, ctx).await,
        Call::Screen(ScreenCall::Read(p)) => match read_screen(p, &caller, ctx).await {
            Ok(answer) => return Some(Outgoing::Read(answer, id, warnings)),
            Err(e) => Err(e),
        },
        Call::Daemon(DaemonCall::Whoami) => whoami(stream, &caller, claimed_source, ctx).await,
        Call::Daemon(DaemonCall::Stop) => {
            // The keeper (if any) ends with it: the CLI waits for both.
            let keeper = ctx
                .spawn
                .keeper
                .as_ref()
                .map(crate::keeper_link::Keeper::status);
            let mut response = Response::ok(json!({
                "stopping": true,
                "pid": std::process::id(),
                "keeper": keeper,
            }))
            .with_id(id);
            response.warnings = warnings;
            return Some(Outgoing::Stop(response));
        }
        other => route(other, &caller, ctx).await,
    };
    let mut response = match result {
        Ok(value) => Response::ok(value),
        Err(e) => Response::err(e),
    }
    .with_id(id);
    response.warnings = warnings;
    Some(response.into())
}

/// Parse, authenticate and decode a request line; any failure is the response to send.
fn decode_request(line: &[u8], ctx: &DaemonContext) -> Result<Request, Box<Response>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(Box::new(Response::err(ErrorBody::invalid("empty request"))));
    }
    serde_json::from_slice::<maxx_protocol::envelope::NoDuplicateKeys>(line).map_err(|e| {
        Box::new(Response::err(ErrorBody::invalid(format!(
            "malformed request: {}",
            maxx_protocol::request::redact_serde_values(&e.to_string())
        ))))
    })?;
    let envelope: RequestEnvelope = serde_json::from_slice(line).map_err(|e| {
        Box::new(Response::err(
            ErrorBody::invalid(format!(
                "malformed request: {}",
                maxx_protocol::request::redact_serde_values(&e.to_string())
            ))
            .with_remedy("send one JSON object {token, method, params} per line"),
        ))
    })?;
    let id = envelope.id.clone();
    let authenticated = envelope
        .token
        .as_deref()
        .is_some_and(|t| constant_time_eq(t.as_bytes(), ctx.token.as_bytes()));
    if !authenticated {
        tracing::info!("request refused: missing or wrong token");
        return Err(Box::new(
            Response::err(
                ErrorBody::new(ErrorCode::Unauthenticated, "missing or wrong token")
                    .with_remedy("read the token from <control dir>/token"),
            )
            .with_id(id),
        ));
    }
    let Some(method) = envelope.method.as_deref() else {
        return Err(Box::new(
            Response::err(ErrorBody::invalid("method is required")).with_id(id),
        ));
    };
    let selectors = envelope
        .params
        .as_ref()
        .filter(|p| !maxx_protocol::selector::unresolved(p).is_empty())
        .map(|p| (method.to_string(), p.clone()));
    let (call, ignored) = Call::decode_reporting(method, envelope.params)
        .map_err(|e| Response::err(e).with_id(id.clone()))?;
    let warnings = ignored.iter().map(|p| Warning::unknown_param(p)).collect();
    let claimed = envelope.caller;
    let caller = claimed
        .clone()
        .unwrap_or_else(|| DEFAULT_SOURCE.to_string());
    Ok(Request {
        id,
        call,
        caller,
        claimed,
        confirm: envelope.confirm.unwrap_or(false),
        selectors,
        warnings,
    })
}

/// `daemon.whoami`: the source the daemon resolved for this request (and whether the
/// policy knows it), the peer's credentials as the kernel reports them, and which daemon
/// answered. Never the token.
async fn whoami(
    stream: &UnixStream,
    caller: &str,
    claimed: bool,
    ctx: &DaemonContext,
) -> Result<Value, ErrorBody> {
    let sources = ask(
        &ctx.policy,
        crate::policy::PolicyMsg::Sources,
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    let source = sources.sources.iter().find(|s| s.id == caller);
    let peer = stream
        .peer_cred()
        .ok()
        .map(|c| json!({"uid": c.uid(), "gid": c.gid(), "pid": c.pid()}));
    Ok(json!({
        "source": caller,
        "source_claimed": claimed,
        "source_known": source.is_some(),
        "source_kind": source.map(|s| s.kind),
        "peer": peer,
        "daemon": {
            "version": env!("CARGO_PKG_VERSION"),
            "protocol": maxx_protocol::PROTOCOL_VERSION,
            "pid": std::process::id(),
        },
        "control_dir": ctx.spawn.control_dir.display().to_string(),
    }))
}

/// Resolve every session named by a prefix or `%title` in `params` to its id (the registry
/// answers from its own table: one session, or `not_found` / `ambiguous`), then decode the
/// call again from the rewritten params. Runs after the policy: a caller it refuses learns
/// nothing about which sessions exist.
async fn resolve_selectors(
    method: &str,
    mut params: Value,
    ctx: &DaemonContext,
) -> Result<Call, ErrorBody> {
    for (field, selector) in maxx_protocol::selector::unresolved(&params) {
        let id = ask(
            &ctx.registry,
            |reply| RegistryMsg::Select(selector, reply),
            ACTOR_CALL_TIMEOUT,
        )
        .await??;
        params[field] = Value::String(id);
    }
    Call::decode(method, Some(params))
}

/// Decide a request by the policy; `unauthorized` / `confirmation_required` stop it.
fn authorize(
    call: &Call,
    capabilities: &[maxx_protocol::capability::Capability],
    caller: Option<&str>,
    confirm: bool,
    ctx: &DaemonContext,
) -> Result<(), ErrorBody> {
    if capabilities.is_empty() {
        return Ok(());
    }
    let target = call.target();
    ctx.policy_gate
        .evaluate(
            caller,
            capabilities,
            target.as_deref(),
            call.method(),
            confirm,
        )
        .into_result()
}

/// `sessions.restart` with a `command` other than the recorded one starts a new program: it
/// needs `tabs:spawn` as well as the `tabs:restart` already granted. Only a caller holding
/// `tabs:restart` gets this far, so the lookup tells no one else which ids exist. An unknown
/// id is left to the restart itself (`not_found`).
async fn authorize_new_command(
    call: &Call,
    caller: Option<String>,
    confirm: bool,
    ctx: &DaemonContext,
) -> Result<(), ErrorBody> {
    let Call::Records(RecordsCall::Restart {
        session_id,
        command: Some(command),
    }) = call
    else {
        return Ok(());
    };
    let view = ask(
        &ctx.registry,
        |r| RegistryMsg::Get(session_id.clone(), r),
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    match view {
        Some(view) if view.command.as_deref() != Some(command.as_str()) => {
            let spawn = [maxx_protocol::capability::Capability::TabsSpawn];
            authorize(call, &spawn, caller.as_deref(), confirm, ctx)
        }
        _ => Ok(()),
    }
}

/// Ask an actor and wait for the answer, mapping a dead or stuck actor to `internal`.
async fn ask<M, T>(
    actor: &ActorRef<M>,
    build: impl FnOnce(RpcReplyPort<T>) -> M,
    timeout: Duration,
) -> Result<T, ErrorBody>
where
    M: Message,
    T: Send + 'static,
{
    match actor.call(build, Some(timeout)).await {
        Ok(CallResult::Success(t)) => Ok(t),
        Ok(CallResult::Timeout) => Err(ErrorBody::internal("the daemon did not answer in time")),
        Ok(CallResult::SenderError) | Err(_) => Err(ErrorBody::internal(
            "the actor serving this request stopped",
        )),
    }
}

fn line(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}
