//! `ConnectionActor`: one per socket connection, short-lived. It reads one bounded
//! request line, authenticates the token, decodes it into a typed [`Call`], routes it to
//! the registry or a session actor, writes one response line and stops.
//!
//! This is the JSON edge: nothing behind it sees a JSON string. No input can panic it;
//! every rejection is a typed error and changes nothing.

use crate::control_dir::constant_time_eq;
use crate::registry::{RegistryMsg, Resolved};
use crate::session::{new_id, SessionActor, SessionArgs, SessionMsg, SpawnContext};
use crate::session_supervisor::SESSION_ACTOR_PREFIX;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::{REQUEST_LINE_MAX_BYTES, REQUEST_READ_TIMEOUT};
use maxx_protocol::request::{ActionKind, ActionParams, Call, CreateParams, WaitParams};
use maxx_protocol::session::SessionView;
use maxx_protocol::{RequestEnvelope, Response};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, Message, RpcReplyPort};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::OwnedSemaphorePermit;

/// How long an internal request to an actor may take before the caller gets `internal`.
const ACTOR_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection needs to route a request.
pub struct DaemonContext {
    /// The capability token every request must carry.
    pub token: String,
    /// The session table.
    pub registry: ActorRef<RegistryMsg>,
    /// Parent of new session actors.
    pub session_supervisor: ActorCell,
    /// Facts for building a child's environment.
    pub spawn: Arc<SpawnContext>,
    /// Default working directory for sessions created without `cwd`.
    pub default_cwd: PathBuf,
}

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
            let response = serve(&mut stream, &ctx).await;
            let _ = stream.write_all(&response.to_line()).await;
            let _ = stream.shutdown().await;
            drop(permit);
        }
        myself.stop(None);
        Ok(())
    }
}

/// Read one request line: up to a newline or EOF (a half-closed write side), bounded in
/// size and time.
async fn read_request_line(stream: &mut UnixStream) -> Result<Vec<u8>, ErrorBody> {
    let deadline = tokio::time::Instant::now() + REQUEST_READ_TIMEOUT;
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
            return Ok(line);
        }
        let data = &chunk[..n];
        let end = data.iter().position(|b| *b == b'\n');
        line.extend_from_slice(&data[..end.unwrap_or(n)]);
        if line.len() > REQUEST_LINE_MAX_BYTES {
            return Err(ErrorBody::new(
                ErrorCode::TooLarge,
                format!("request line exceeds {REQUEST_LINE_MAX_BYTES} bytes"),
            ));
        }
        if end.is_some() {
            return Ok(line);
        }
    }
}

async fn serve(stream: &mut UnixStream, ctx: &DaemonContext) -> Response {
    let line = match read_request_line(stream).await {
        Ok(line) => line,
        Err(e) => return Response::err(e),
    };
    if line.iter().all(u8::is_ascii_whitespace) {
        return Response::err(ErrorBody::invalid("empty request"));
    }
    let envelope: RequestEnvelope = match serde_json::from_slice(&line) {
        Ok(env) => env,
        Err(e) => {
            return Response::err(
                ErrorBody::invalid(format!("malformed request: {e}"))
                    .with_remedy("send one JSON object {token, method, params} per line"),
            )
        }
    };
    let id = envelope.id.clone();
    let authenticated = envelope
        .token
        .as_deref()
        .is_some_and(|t| constant_time_eq(t.as_bytes(), ctx.token.as_bytes()));
    if !authenticated {
        tracing::info!("request refused: missing or wrong token");
        return Response::err(
            ErrorBody::new(ErrorCode::Unauthenticated, "missing or wrong token")
                .with_remedy("read the token from <control dir>/token"),
        )
        .with_id(id);
    }
    let Some(method) = envelope.method.as_deref() else {
        return Response::err(ErrorBody::invalid("method is required")).with_id(id);
    };
    let call = match Call::decode(method, envelope.params) {
        Ok(call) => call,
        Err(e) => return Response::err(e).with_id(id),
    };
    tracing::debug!(method = call.method(), "request");
    match route(call, ctx).await {
        Ok(result) => Response::ok(result),
        Err(e) => Response::err(e),
    }
    .with_id(id)
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

fn session_result(view: SessionView) -> Value {
    json!({ "session": view })
}

/// The live actor of a session, or `not_found` / `already_ended`.
async fn session_actor(
    ctx: &DaemonContext,
    session_id: &str,
) -> Result<ActorRef<SessionMsg>, ErrorBody> {
    let resolved: Option<Resolved> = ask(
        &ctx.registry,
        |r| RegistryMsg::Resolve(session_id.to_string(), r),
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    match resolved {
        None => Err(ErrorBody::no_session(session_id)),
        Some(Resolved { actor: None, .. }) => Err(ErrorBody::ended(
            session_id,
            "its session actor failed; the record is kept",
        )),
        Some(Resolved {
            actor: Some(actor), ..
        }) => Ok(actor),
    }
}

async fn route(call: Call, ctx: &DaemonContext) -> Result<Value, ErrorBody> {
    match call {
        Call::Create(params) => create(params, ctx).await.map(session_result),
        Call::Get(r) => {
            let view = ask(
                &ctx.registry,
                |reply| RegistryMsg::Get(r.session_id.clone(), reply),
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            view.map(session_result)
                .ok_or_else(|| ErrorBody::no_session(&r.session_id))
        }
        Call::List(_) => {
            let sessions = ask(&ctx.registry, RegistryMsg::List, ACTOR_CALL_TIMEOUT).await?;
            Ok(json!({ "sessions": sessions }))
        }
        Call::Update(p) => {
            let actor = session_actor(ctx, &p.session_id).await?;
            ask(
                &actor,
                |reply| SessionMsg::Update {
                    status: p.status,
                    metadata: p.metadata,
                    reply,
                },
                ACTOR_CALL_TIMEOUT,
            )
            .await?
            .map(session_result)
        }
        Call::Action(p) => action(p, ctx).await,
        Call::Cancel(r) => {
            action(
                ActionParams {
                    session_id: r.session_id,
                    action: ActionKind::Cancel,
                    input: None,
                    signal: None,
                },
                ctx,
            )
            .await
        }
        Call::Wait(p) => wait(p, ctx).await,
        Call::RegisterCurrent(p) => {
            let refused = crate::session::registration_refused;
            let surface = maxx_protocol::request::parse_session_id("surface_id", &p.surface_id)
                .map_err(|_| refused())?;
            let actor = ask(
                &ctx.registry,
                |reply| RegistryMsg::ResolveSurface(surface, reply),
                ACTOR_CALL_TIMEOUT,
            )
            .await?
            .ok_or_else(refused)?;
            ask(
                &actor,
                |reply| SessionMsg::Register {
                    registration_token: p.registration_token,
                    reply,
                },
                ACTOR_CALL_TIMEOUT,
            )
            .await?
            .map(session_result)
        }
    }
}

async fn action(p: ActionParams, ctx: &DaemonContext) -> Result<Value, ErrorBody> {
    let actor = session_actor(ctx, &p.session_id).await?;
    let action = p.action;
    // A paste waits for the child's tty to take it; give it more than a plain call.
    let timeout = match action {
        ActionKind::Input | ActionKind::Submit => Duration::from_secs(30),
        _ => ACTOR_CALL_TIMEOUT,
    };
    let view = ask(&actor, |reply| SessionMsg::Action(p, reply), timeout).await??;
    Ok(session_result(view))
}

async fn wait(p: WaitParams, ctx: &DaemonContext) -> Result<Value, ErrorBody> {
    let actor = session_actor(ctx, &p.session_id).await?;
    // The session actor owns the timer; the call timeout is only a backstop.
    let answer = ask(
        &actor,
        |reply| SessionMsg::Wait {
            condition: p.condition,
            timeout: p.timeout,
            reply,
        },
        p.timeout + ACTOR_CALL_TIMEOUT,
    )
    .await?;
    Ok(json!({ "outcome": answer.outcome, "session": answer.session }))
}

async fn create(params: CreateParams, ctx: &DaemonContext) -> Result<SessionView, ErrorBody> {
    if let Some(target) = &params.split_target {
        let resolved: Option<Resolved> = ask(
            &ctx.registry,
            |r| RegistryMsg::Resolve(target.clone(), r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?;
        match resolved {
            None => return Err(ErrorBody::no_session(target)),
            Some(r) if r.actor.is_none() || !r.lifecycle.has_surface() => {
                return Err(ErrorBody::ended(
                    target,
                    "a split needs a live target surface",
                ))
            }
            Some(_) => {}
        }
    }
    let cwd = params
        .cwd
        .as_ref()
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.default_cwd.clone());
    if !cwd.is_dir() {
        return Err(ErrorBody::invalid(format!(
            "cwd {} is not an existing directory",
            cwd.display()
        )));
    }
    let session_id = new_id();
    let args = SessionArgs {
        session_id: session_id.clone(),
        params,
        cwd,
        registry: ctx.registry.clone(),
        spawn: ctx.spawn.clone(),
    };
    let (actor, _) = Actor::spawn_linked(
        Some(format!("{SESSION_ACTOR_PREFIX}{session_id}")),
        SessionActor,
        args,
        ctx.session_supervisor.clone(),
    )
    .await
    .map_err(|e| ErrorBody::internal(format!("could not start the session: {e}")))?;
    ask(&actor, SessionMsg::View, ACTOR_CALL_TIMEOUT).await
}
