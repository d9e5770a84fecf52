//! `ConnectionActor`: one per socket connection, short-lived. It reads one bounded
//! request line, authenticates the token, decodes it into a typed [`Call`], routes it to
//! the registry or a session actor, writes one response line and stops.
//!
//! This is the JSON edge: nothing behind it sees a JSON string. No input can panic it;
//! every rejection is a typed error and changes nothing.

use crate::bus::{subscriber_queue, BusMsg, Delivered};
use crate::control_dir::constant_time_eq;
use crate::persistence::PersistMsg;
use crate::registry::{RegistryMsg, Resolved};
use crate::session::{
    new_id, ReadAnswer, SessionActor, SessionArgs, SessionMsg, SessionStart, SpawnContext,
    WatchLine,
};
use crate::session_supervisor::SESSION_ACTOR_PREFIX;
use crate::stats::Stats;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::{
    REQUEST_LINE_MAX_BYTES, REQUEST_READ_TIMEOUT, RESPONSE_WRITE_TIMEOUT, UNAUTH_BUDGET_BYTES,
    UNAUTH_FREE_BYTES, WATCH_BUFFER,
};
use maxx_protocol::request::{
    ActionKind, ActionParams, Call, CreateParams, StreamWaitFor, StreamWaitParams,
    StreamWatchParams, WaitCondition, WaitParams, WatchParams,
};
use maxx_protocol::session::Outcome;
use maxx_protocol::session::SessionView;
use maxx_protocol::stream::{StreamEvent, STREAM_SCHEMA};
use maxx_protocol::{RequestEnvelope, Response};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, Message, RpcReplyPort};
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

/// What every connection needs to route a request.
pub struct DaemonContext {
    /// The capability token every request must carry.
    pub token: String,
    /// The session table.
    pub registry: ActorRef<RegistryMsg>,
    /// The event bus.
    pub bus: ActorRef<BusMsg>,
    /// How many events the bus retains (sizes stream queues).
    pub bus_capacity: usize,
    /// The durable registry.
    pub persist: ActorRef<PersistMsg>,
    /// The agent profiles file, if any.
    pub profiles_path: Option<PathBuf>,
    /// The capability policy every request passes before any side effect.
    pub policy: ActorRef<crate::policy::PolicyMsg>,
    /// Parent of new session actors.
    pub session_supervisor: ActorCell,
    /// Facts for building a child's environment.
    pub spawn: Arc<SpawnContext>,
    /// Default working directory for sessions created without `cwd`.
    pub default_cwd: PathBuf,
    /// Slots for long-lived requests (see [`Call::is_long_lived`]).
    pub long_lived: Arc<tokio::sync::Semaphore>,
    /// Their number.
    pub max_long_lived: usize,
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
            let stats = ctx.spawn.stats.clone();
            Stats::add(&stats.connections, 1);
            if let Some(response) = serve(&mut stream, &ctx).await {
                let _ = write_bounded(&mut stream, &response.to_line()).await;
            }
            let _ = stream.shutdown().await;
            drop(stream);
            drop(permit);
            crate::memory::churn(&stats, crate::memory::REQUEST_CHURN);
            if stats.connections.fetch_sub(1, Ordering::Relaxed) == 1 {
                crate::memory::idle(&stats);
            }
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
}

/// Serve one request. `None` when the answer was already streamed.
async fn serve(stream: &mut UnixStream, ctx: &DaemonContext) -> Option<Response> {
    let stats = ctx.spawn.stats.clone();
    let (line, held) = match read_request_line(stream, &stats).await {
        Ok(read) => read,
        Err(e) => return Some(Response::err(e)),
    };
    let decoded = decode_request(&line, ctx);
    // Authenticated or refused: the line no longer counts against the budget, and is not
    // held for the life of a stream.
    drop(line);
    drop(held);
    let Request {
        id,
        call,
        caller,
        claimed,
        confirm,
    } = match decoded {
        Ok(request) => request,
        Err(response) => return Some(*response),
    };
    tracing::debug!(method = call.method(), caller, "request");
    // The policy decides before anything runs — before any session or parent lookup, so a
    // denied caller learns nothing about which ids exist.
    if let Err(e) = authorize(&call, call.capabilities(), claimed.clone(), confirm, ctx).await {
        return Some(Response::err(e).with_id(id));
    }
    if let Err(e) = authorize_new_command(&call, claimed, confirm, ctx).await {
        return Some(Response::err(e).with_id(id));
    }
    let _slot = if call.is_long_lived() {
        match long_lived_slot(ctx, call.method()) {
            Ok(slot) => Some(slot),
            Err(e) => return Some(Response::err(e).with_id(id)),
        }
    } else {
        None
    };
    let result = match call {
        // A wait whose caller hangs up ends at once: nobody is left to answer.
        Call::Wait(p) => wait(p, ctx, stream).await?,
        Call::StreamWait(p) => stream_wait(p, ctx, stream).await?,
        Call::Watch(p) => match watch(p, ctx, stream).await {
            Ok(()) => return None,
            Err(e) => Err(e),
        },
        Call::StreamWatch(p) => match stream_watch(p, ctx, stream).await {
            Ok(()) => return None,
            Err(e) => Err(e),
        },
        Call::Attach { session_id, size } => match attach(session_id, size, ctx, stream).await {
            Ok(()) => return None,
            Err(e) => Err(e),
        },
        other => route(other, &caller, ctx).await,
    };
    Some(
        match result {
            Ok(value) => Response::ok(value),
            Err(e) => Response::err(e),
        }
        .with_id(id),
    )
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
    let call =
        Call::decode(method, envelope.params).map_err(|e| Response::err(e).with_id(id.clone()))?;
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
    })
}

/// Ask the policy about a request; `unauthorized` / `confirmation_required` stop it.
async fn authorize(
    call: &Call,
    capabilities: Vec<maxx_protocol::capability::Capability>,
    caller: Option<String>,
    confirm: bool,
    ctx: &DaemonContext,
) -> Result<(), ErrorBody> {
    if capabilities.is_empty() {
        return Ok(());
    }
    let decision = ask(
        &ctx.policy,
        |reply| crate::policy::PolicyMsg::Evaluate {
            caller,
            capabilities,
            target: call.target(),
            method: call.method(),
            confirm,
            reply,
        },
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    decision.into_result()
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
    let Call::Restart {
        session_id,
        command: Some(command),
    } = call
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
            let spawn = vec![maxx_protocol::capability::Capability::TabsSpawn];
            authorize(call, spawn, caller, confirm, ctx).await
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

fn session_result(view: SessionView) -> Value {
    json!({ "session": view })
}

/// Times a request is routed to a session before giving up (see [`ask_session`]).
const ROUTE_ATTEMPTS: usize = 8;

/// Ask a session's actor: resolve it (`not_found` / `already_ended`), then ask. A closed
/// record's actor retires when idle (`session::Dormant`); a request that reached it as it
/// stopped was dropped unhandled with its mailbox, so it is routed again, and resolving
/// wakes a fresh actor. `build` may therefore run more than once.
async fn ask_session<T: Send + 'static>(
    ctx: &DaemonContext,
    session_id: &str,
    build: impl Fn(RpcReplyPort<T>) -> SessionMsg,
    timeout: Duration,
) -> Result<T, ErrorBody> {
    Ok(ask_session_actor(ctx, session_id, build, timeout).await?.1)
}

/// [`ask_session`], also returning the actor that answered (for a later `Unwatch`).
async fn ask_session_actor<T: Send + 'static>(
    ctx: &DaemonContext,
    session_id: &str,
    build: impl Fn(RpcReplyPort<T>) -> SessionMsg,
    timeout: Duration,
) -> Result<(ActorRef<SessionMsg>, T), ErrorBody> {
    for _ in 0..ROUTE_ATTEMPTS {
        let actor = session_actor(ctx, session_id).await?;
        match actor.call(&build, Some(timeout)).await {
            Ok(CallResult::Success(t)) => return Ok((actor, t)),
            Ok(CallResult::Timeout) => {
                return Err(ErrorBody::internal("the daemon did not answer in time"))
            }
            Ok(CallResult::SenderError) | Err(_) => continue,
        }
    }
    Err(ErrorBody::internal(
        "the actor serving this request stopped",
    ))
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

/// Whether a call may change a session record (and so writes the journal). Reads, waits,
/// input and interrupts do not.
fn changes_records(call: &Call) -> bool {
    match call {
        Call::Create(_)
        | Call::Update(_)
        | Call::Cancel(_)
        | Call::Declare(_)
        | Call::SetGroup { .. }
        | Call::SetParent { .. }
        | Call::Archive { .. }
        | Call::Restart { .. }
        | Call::SetRestartPolicy { .. }
        | Call::Resize { .. } => true,
        Call::Action(p) => matches!(
            p.action,
            ActionKind::Focus | ActionKind::Cancel | ActionKind::Close
        ),
        _ => false,
    }
}

/// While the journal cannot be written, a request that would change a record is refused
/// before it changes anything: an answer of `ok` always means "on disk". Each refused
/// request first lets the persistence actor retry, so the first one after space is freed
/// goes through.
async fn journal_writable(ctx: &DaemonContext) -> Result<(), ErrorBody> {
    if let Some(u) = ctx.spawn.stats.registry_unreadable.get() {
        return Err(u.error());
    }
    if ctx.spawn.stats.journal_behind.load(Ordering::Relaxed) == 0 {
        return Ok(());
    }
    ask(&ctx.persist, PersistMsg::Writable, ACTOR_CALL_TIMEOUT)
        .await?
        .map_err(|mut e| {
            e.message = format!("refused, nothing was changed: {}", e.message);
            e
        })
}

async fn route(call: Call, caller: &str, ctx: &DaemonContext) -> Result<Value, ErrorBody> {
    if changes_records(&call) {
        journal_writable(ctx).await?;
    }
    match call {
        Call::Create(params) => create(*params, caller, ctx).await.map(session_result),
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
        Call::List(p) => {
            let sessions = ask(
                &ctx.registry,
                |reply| RegistryMsg::List(p, reply),
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            Ok(json!({ "sessions": sessions }))
        }
        Call::Declare(p) => {
            let source = p.source.unwrap_or_else(|| caller.to_string());
            ask_session(
                ctx,
                &p.session_id,
                |reply| SessionMsg::Declare {
                    declaration: p.declaration.clone(),
                    source: source.clone(),
                    reply,
                },
                ACTOR_CALL_TIMEOUT,
            )
            .await?
            .map(session_result)
        }
        Call::Events(p) => {
            let events = ask_session(
                ctx,
                &p.session_id,
                |reply| SessionMsg::Events {
                    since: p.since,
                    reply,
                },
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            Ok(json!({ "session_id": p.session_id, "events": events }))
        }
        Call::Stats => Ok(json!(ctx.spawn.stats.snapshot())),
        Call::Status => status(ctx).await,
        #[cfg(debug_assertions)]
        Call::DebugPanic(r) => {
            let actor = session_actor(ctx, &r.session_id).await?;
            actor
                .cast(SessionMsg::DebugPanic)
                .map_err(|_| ErrorBody::internal("the session actor is gone"))?;
            Ok(json!({ "injected": true }))
        }
        Call::PolicyCheck { capability, target } => {
            let claimed = (caller != DEFAULT_SOURCE).then(|| caller.to_string());
            let result = ask(
                &ctx.policy,
                |reply| crate::policy::PolicyMsg::Check {
                    caller: claimed,
                    capability,
                    target,
                    reply,
                },
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            Ok(json!(result))
        }
        Call::PolicySources => {
            let report = ask(
                &ctx.policy,
                crate::policy::PolicyMsg::Sources,
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            Ok(json!(report))
        }
        Call::Watch(_) | Call::StreamWatch(_) | Call::Attach { .. } => {
            Err(ErrorBody::internal("watch is served as a stream"))
        }
        Call::Wait(_) | Call::StreamWait(_) => {
            Err(ErrorBody::internal("a wait is served with its connection"))
        }
        Call::SetGroup { session_id, group } => ask_session(
            ctx,
            &session_id,
            |r| SessionMsg::SetGroup(group.clone(), r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?
        .map(session_result),
        Call::SetParent { session_id, parent } => {
            if ask(
                &ctx.registry,
                |r| RegistryMsg::Lifecycle(session_id.clone(), r),
                ACTOR_CALL_TIMEOUT,
            )
            .await?
            .is_none()
            {
                return Err(ErrorBody::no_session(&session_id));
            }
            ask(
                &ctx.registry,
                |reply| RegistryMsg::ValidateParent {
                    child: session_id.clone(),
                    parent: parent.clone(),
                    reply,
                },
                ACTOR_CALL_TIMEOUT,
            )
            .await??;
            ask_session(
                ctx,
                &session_id,
                |r| SessionMsg::SetParent(parent.clone(), r),
                ACTOR_CALL_TIMEOUT,
            )
            .await?
            .map(session_result)
        }
        Call::Archive { session_id, reason } => ask_session(
            ctx,
            &session_id,
            |r| SessionMsg::Archive(reason.clone(), r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?
        .map(session_result),
        Call::Restart {
            session_id,
            command,
        } => ask_session(
            ctx,
            &session_id,
            |r| SessionMsg::Restart(command.clone(), r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?
        .map(session_result),
        Call::ProfilesList => crate::profiles::list(ctx.profiles_path.as_ref()),
        Call::Read(p) => {
            let id = p.session_id.clone();
            let lifecycle = ask(
                &ctx.registry,
                |r| RegistryMsg::Lifecycle(id.clone(), r),
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            // A closed or archived session released its screen with its surface.
            if lifecycle.is_some_and(|l| l.is_terminal()) {
                return Err(ErrorBody::ended(&id, "its screen went with its surface"));
            }
            let answer = ask_session(
                ctx,
                &id,
                |r| SessionMsg::Read(p.clone(), r),
                ACTOR_CALL_TIMEOUT,
            )
            .await??;
            Ok(match answer {
                ReadAnswer::Snapshot(s) => json!(s),
                ReadAnswer::Dump(text) => json!({ "text": text }),
                ReadAnswer::Inspect(doc) => json!(doc),
            })
        }
        Call::Run(p) => {
            let started = std::time::Instant::now();
            let result = ask_session(
                ctx,
                &p.session_id,
                |reply| SessionMsg::Run {
                    command: p.command.clone(),
                    timeout: p.timeout,
                    started,
                    reply,
                },
                // No limit: the call waits as long as the run does.
                p.timeout.map_or(Duration::MAX, |t| t + ACTOR_CALL_TIMEOUT),
            )
            .await??;
            Ok(json!(result))
        }
        Call::SendKeys { session_id, keys } => ask_session(
            ctx,
            &session_id,
            |r| SessionMsg::SendKeys(keys.clone(), r),
            INPUT_TIMEOUT,
        )
        .await?
        .map(session_result),
        Call::Paste { session_id, text } => ask_session(
            ctx,
            &session_id,
            |r| SessionMsg::Paste(text.clone(), r),
            INPUT_TIMEOUT,
        )
        .await?
        .map(session_result),
        Call::SetRestartPolicy { session_id, policy } => ask_session(
            ctx,
            &session_id,
            |r| SessionMsg::SetRestartPolicy(policy.clone(), r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?
        .map(session_result),
        Call::Resize { session_id, size } => {
            let result = ask_session(
                ctx,
                &session_id,
                |r| SessionMsg::Resize(size, r),
                ACTOR_CALL_TIMEOUT,
            )
            .await??;
            Ok(json!(result))
        }
        Call::Update(p) => ask_session(
            ctx,
            &p.session_id,
            |reply| SessionMsg::Update {
                status: p.status.clone(),
                metadata: p.metadata.clone(),
                source: caller.to_string(),
                reply,
            },
            ACTOR_CALL_TIMEOUT,
        )
        .await?
        .map(session_result),
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
    let action = p.action;
    let timeout = match action {
        ActionKind::Input | ActionKind::Submit => INPUT_TIMEOUT,
        _ => ACTOR_CALL_TIMEOUT,
    };
    let view = ask_session(
        ctx,
        &p.session_id,
        |reply| SessionMsg::Action(p.clone(), reply),
        timeout,
    )
    .await??;
    Ok(session_result(view))
}

/// `sessions.wait`. `None` when the caller hung up first: its waiter is dropped at once.
async fn wait(
    p: WaitParams,
    ctx: &DaemonContext,
    stream: &UnixStream,
) -> Option<Result<Value, ErrorBody>> {
    let output_only = matches!(&p.condition, WaitCondition::Text(t) if t.output_only);
    // The session actor owns the timer; the call timeout is only a backstop.
    let asked = ask_session(
        ctx,
        &p.session_id,
        |reply| SessionMsg::Wait {
            condition: p.condition.clone(),
            timeout: p.timeout,
            reply,
        },
        p.timeout + ACTOR_CALL_TIMEOUT,
    );
    let answer = tokio::select! {
        answer = asked => answer,
        _ = peer_closed(stream) => {
            // Dropping the call closed the waiter's reply port; have the actor drop it now
            // rather than at its timeout.
            if let Ok(actor) = session_actor(ctx, &p.session_id).await {
                let _ = actor.cast(SessionMsg::PruneWaiters);
            }
            return None;
        }
    };
    Some(wait_result(answer, output_only))
}

fn wait_result(
    answer: Result<crate::session::WaitAnswer, ErrorBody>,
    output_only: bool,
) -> Result<Value, ErrorBody> {
    let answer = answer?;
    let mut result = json!({ "outcome": answer.outcome, "session": answer.session });
    if let Some(event) = answer.event {
        result["event"] = json!(event);
    }
    if output_only {
        // false: the session never marked input (OSC 133 B), so nothing was left out.
        result["output_only_filtered"] = json!(answer.input_marks);
    }
    Ok(result)
}

/// Resolves when the client has closed its end entirely (not merely half-closed its
/// write side, which a client may do right after sending its request). Event-driven: a
/// separate registration of the socket wakes on the kernel's hang-up, no polling.
async fn peer_closed(stream: &UnixStream) {
    // SAFETY: F_DUPFD_CLOEXEC on a live fd returns a new fd we own.
    let dup = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return std::future::pending().await;
    }
    // SAFETY: `dup` is ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(dup) };
    // SAFETY: the AsyncFd owns `fd` until it is dropped.
    let Ok(afd) = (unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::WRITABLE) })
    else {
        return std::future::pending().await;
    };
    loop {
        let Ok(mut guard) = afd.writable().await else {
            return std::future::pending().await;
        };
        if guard.ready().is_write_closed() {
            return;
        }
        // Writable but still connected: wait for the next change of state.
        guard.clear_ready();
    }
}

/// `sessions.watch`: a snapshot line, an event line per new audit entry, a lifecycle line
/// per transition, and an end line (`ended`, `timeout`, or `dropped` for a watcher that
/// fell more than `WATCH_BUFFER` lines behind). A caller that disconnects ends it, and
/// its subscription is removed at once.
async fn watch(
    p: WatchParams,
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    let (tx, mut rx) = mpsc::channel(WATCH_BUFFER);
    let (actor, (sub, snapshot)) = ask_session_actor(
        ctx,
        &p.session_id,
        |reply| SessionMsg::Watch {
            lines: tx.clone(),
            reply,
        },
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    drop(tx);
    let deadline = p.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut out = line(&json!({"type": "snapshot", "session": snapshot}));
    let (read_half, mut write_half) = stream.split();
    let gone = peer_closed(read_half.as_ref());
    tokio::pin!(gone);
    loop {
        if write_bounded(&mut write_half, &out).await.is_err() {
            break;
        }
        let next = tokio::select! {
            item = rx.recv() => item,
            _ = async { tokio::time::sleep_until(deadline.unwrap()).await }, if deadline.is_some() => {
                let _ = write_bounded(&mut write_half, &line(&json!({"type": "end", "reason": "timeout"}))).await;
                break;
            }
            _ = &mut gone => break,
        };
        out = match next {
            Some(WatchLine::Event(e)) => line(&json!({"type": "event", "event": e})),
            Some(WatchLine::Lifecycle(v)) => line(&json!({
                "type": "lifecycle", "lifecycle": v.lifecycle, "session": v
            })),
            Some(WatchLine::End) => {
                let _ = write_bounded(
                    &mut write_half,
                    &line(&json!({"type": "end", "reason": "ended"})),
                )
                .await;
                break;
            }
            None => {
                let _ = write_bounded(
                    &mut write_half,
                    &line(&json!({"type": "end", "reason": "dropped"})),
                )
                .await;
                break;
            }
        };
    }
    let _ = actor.cast(SessionMsg::Unwatch(sub));
    Ok(())
}

/// Subscribe to the bus; returns the hello and the queue events arrive on.
async fn subscribe(
    ctx: &DaemonContext,
    filter: maxx_protocol::stream::StreamFilter,
    since: Option<u64>,
) -> Result<(crate::bus::Hello, mpsc::Receiver<Delivered>), ErrorBody> {
    let (tx, rx) = mpsc::channel(subscriber_queue(ctx.bus_capacity));
    let hello = ask(
        &ctx.bus,
        |reply| BusMsg::Subscribe {
            filter,
            since,
            tx,
            reply,
        },
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    Ok((hello, rx))
}

/// Whether a session's run is over; `not_found` if there is no such session.
async fn run_ended(ctx: &DaemonContext, id: &str) -> Result<bool, ErrorBody> {
    let view = ask(
        &ctx.registry,
        |r| RegistryMsg::Get(id.to_string(), r),
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    view.map(|v| v.lifecycle.has_ended())
        .ok_or_else(|| ErrorBody::no_session(id))
}

/// Whether an event ends the run of its session.
fn ends_run(e: &StreamEvent) -> bool {
    // An exit its restart policy will restart does not end the session's run.
    let restart_pending = e
        .payload
        .as_ref()
        .is_some_and(|p| p["restart_pending"] == true);
    e.kind == "lifecycle"
        && matches!(e.name.as_deref(), Some("exited" | "closed" | "archived"))
        && !restart_pending
}

/// `stream.watch`: a hello line `{type: hello, schema, cursor, reset?, dropped_through?}`,
/// then `{type: event, event}` lines, and `{type: end}` when a single-session stream's
/// session ends. A subscriber that falls a whole queue behind gets `{type: reset,
/// reason: slow_consumer, resume_since}` and `{type: end}`.
async fn stream_watch(
    p: StreamWatchParams,
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    let single = p.filter.session_id.clone();
    if let Some(id) = &single {
        run_ended(ctx, id).await?;
    }
    let (hello, mut rx) = subscribe(ctx, p.filter, p.since).await?;
    let mut first = json!({"type": "hello", "schema": STREAM_SCHEMA, "cursor": hello.cursor});
    if hello.reset {
        first["reset"] = json!(true);
        first["dropped_through"] = json!(hello.dropped_through);
    }
    // Checked after subscribing, so an end cannot slip between the check and the stream:
    // a single-session stream whose session already ended replays, then ends.
    let ended_already = match &single {
        Some(id) => run_ended(ctx, id).await.unwrap_or(true),
        None => false,
    };
    let deadline = p.timeout.map(|t| tokio::time::Instant::now() + t);
    let (read_half, mut write_half) = stream.split();
    let gone = peer_closed(read_half.as_ref());
    tokio::pin!(gone);
    let mut out = line(&first);
    let mut last_cursor = hello.cursor;
    loop {
        if write_bounded(&mut write_half, &out).await.is_err() {
            break;
        }
        if ended_already && rx.is_empty() {
            let _ = write_bounded(&mut write_half, &line(&json!({"type": "end"}))).await;
            break;
        }
        let next = tokio::select! {
            item = rx.recv() => item,
            _ = async { tokio::time::sleep_until(deadline.unwrap()).await }, if deadline.is_some() => {
                let _ = write_bounded(&mut write_half, &line(&json!({"type": "end", "reason": "timeout"}))).await;
                break;
            }
            _ = &mut gone => break,
        };
        match next {
            Some(event) => {
                last_cursor = last_cursor.max(event.cursor);
                let mut bytes = line(&json!({"type": "event", "event": &*event}));
                if single.is_some() && ends_run(&event) {
                    bytes.extend(line(&json!({"type": "end"})));
                    let _ = write_bounded(&mut write_half, &bytes).await;
                    break;
                }
                out = bytes;
            }
            None => {
                // The bus dropped us: our queue was full.
                let mut bytes = line(&json!({
                    "type": "reset", "reason": "slow_consumer", "resume_since": last_cursor
                }));
                bytes.extend(line(&json!({"type": "end"})));
                let _ = write_bounded(&mut write_half, &bytes).await;
                break;
            }
        }
    }
    let _ = ctx.bus.cast(BusMsg::Unsubscribe(hello.id));
    Ok(())
}

/// `stream.wait`: `--event` (edge-triggered on the bus) or `--group G --all C` (the
/// registry's exact group counters). One response: outcome, and the event or members.
/// `None` when the caller hung up first: its waiter or subscription is dropped at once.
async fn stream_wait(
    p: StreamWaitParams,
    ctx: &DaemonContext,
    stream: &UnixStream,
) -> Option<Result<Value, ErrorBody>> {
    let gone = peer_closed(stream);
    tokio::pin!(gone);
    match p.wait_for {
        StreamWaitFor::All(condition) => {
            let group = p.filter.group.clone().unwrap_or_default();
            let asked = ask(
                &ctx.registry,
                |reply| RegistryMsg::GroupWait {
                    group: group.clone(),
                    condition,
                    timeout: p.timeout,
                    reply,
                },
                p.timeout + ACTOR_CALL_TIMEOUT,
            );
            let answer = tokio::select! {
                answer = asked => answer,
                _ = &mut gone => {
                    let _ = ctx.registry.cast(RegistryMsg::PruneWaiters);
                    return None;
                }
            };
            Some(answer.map(|answer| {
                json!({"outcome": answer.outcome, "group": group, "members": answer.members})
            }))
        }
        StreamWaitFor::Event(name) => {
            let single = p.filter.session_id.clone();
            if let Some(id) = &single {
                if let Err(e) = run_ended(ctx, id).await {
                    return Some(Err(e));
                }
            }
            let (hello, mut rx) = match subscribe(ctx, p.filter, None).await {
                Ok(subscribed) => subscribed,
                Err(e) => return Some(Err(e)),
            };
            let deadline = tokio::time::Instant::now() + p.timeout;
            let ended = match &single {
                Some(id) => run_ended(ctx, id).await.unwrap_or(true),
                None => false,
            };
            let result = loop {
                if ended && rx.is_empty() {
                    break Some(json!({"outcome": Outcome::Ended}));
                }
                let event = tokio::select! {
                    e = rx.recv() => e,
                    _ = tokio::time::sleep_until(deadline) => break Some(json!({"outcome": Outcome::Timeout})),
                    _ = &mut gone => break None,
                };
                match event {
                    Some(e) if e.kind == "event" && e.name.as_deref() == Some(name.as_str()) => {
                        break Some(json!({"outcome": Outcome::Matched, "stream_event": &*e}));
                    }
                    Some(e) if single.is_some() && ends_run(&e) => {
                        break Some(json!({"outcome": Outcome::Ended}));
                    }
                    Some(_) => continue,
                    None => {
                        break Some(json!({"outcome": Outcome::Ended, "reason": "slow_consumer"}))
                    }
                }
            };
            let _ = ctx.bus.cast(BusMsg::Unsubscribe(hello.id));
            result.map(Ok)
        }
    }
}

/// `daemon.status`: who is serving, and a count of sessions by lifecycle.
async fn status(ctx: &DaemonContext) -> Result<Value, ErrorBody> {
    let sessions = ask(
        &ctx.registry,
        |r| RegistryMsg::List(Default::default(), r),
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    let mut by_lifecycle = serde_json::Map::new();
    for s in &sessions {
        let n = by_lifecycle.entry(s.lifecycle.as_str()).or_insert(json!(0));
        *n = json!(n.as_u64().unwrap_or(0) + 1);
    }
    let cursor = ask(&ctx.bus, BusMsg::Cursor, ACTOR_CALL_TIMEOUT).await?;
    let focused = ask(&ctx.registry, RegistryMsg::Focused, ACTOR_CALL_TIMEOUT).await?;
    // The fate of the policy file: a rejected one means only the built-ins are enforced,
    // which a person must see where they look first.
    let policy = ask(
        &ctx.policy,
        crate::policy::PolicyMsg::Sources,
        ACTOR_CALL_TIMEOUT,
    )
    .await?
    .config;
    Ok(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": maxx_protocol::PROTOCOL_VERSION,
        "pid": std::process::id(),
        "control_dir": ctx.spawn.control_dir.display().to_string(),
        "sessions": sessions.len(),
        "by_lifecycle": by_lifecycle,
        "focused": focused,
        "bus_cursor": cursor,
        "policy": policy,
        "registry_unreadable": ctx.spawn.stats.registry_unreadable.get(),
    }))
}

/// `sessions.attach`: after one JSON answer line, the connection carries raw PTY output to
/// the client and framed input/resize/detach from it (see `maxx_protocol::attach`). Ends on
/// detach, disconnect, the session's end, or a client too slow to take the output.
async fn attach(
    session_id: Option<String>,
    size: Option<maxx_protocol::screen::Size>,
    ctx: &DaemonContext,
    stream: &mut UnixStream,
) -> Result<(), ErrorBody> {
    use maxx_protocol::attach::*;
    let id = match session_id {
        Some(id) => id,
        None => ask(&ctx.registry, RegistryMsg::Focused, ACTOR_CALL_TIMEOUT)
            .await?
            .ok_or_else(|| {
                ErrorBody::new(ErrorCode::NotFound, "no session is focused")
                    .with_remedy("name one: `maxx attach ID`")
            })?,
    };
    if let Some(size) = size {
        let _ = ask_session(
            ctx,
            &id,
            |r| SessionMsg::Resize(size, r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?;
    }
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(256);
    let (actor, attached) = ask_session_actor(
        ctx,
        &id,
        |reply| SessionMsg::Attach {
            output: tx.clone(),
            reply,
        },
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    drop(tx);
    let (sub, view, repaint) = attached?;
    let (mut read_half, mut write_half) = stream.split();
    let mut first = Response::ok(json!({ "session": view })).to_line();
    first.extend(repaint);
    let outbound = async {
        if write_bounded(&mut write_half, &first).await.is_err() {
            return;
        }
        while let Some(chunk) = rx.recv().await {
            if write_bounded(&mut write_half, &chunk).await.is_err() {
                return;
            }
        }
    };
    let inbound = async {
        let mut header = [0u8; 5];
        loop {
            if read_half.read_exact(&mut header).await.is_err() {
                return;
            }
            let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
            if len > FRAME_MAX {
                return;
            }
            let mut payload = vec![0u8; len];
            if read_half.read_exact(&mut payload).await.is_err() {
                return;
            }
            match header[0] {
                FRAME_INPUT => {
                    let _ = actor.cast(SessionMsg::AttachInput(payload));
                }
                FRAME_RESIZE if len == 4 => {
                    use maxx_protocol::limits::{MAX_DIMENSION, MIN_COLS};
                    let size = maxx_protocol::screen::Size {
                        cols: u16::from_be_bytes([payload[0], payload[1]])
                            .clamp(MIN_COLS, MAX_DIMENSION),
                        rows: u16::from_be_bytes([payload[2], payload[3]]).clamp(1, MAX_DIMENSION),
                    };
                    let _ = ask(&actor, |r| SessionMsg::Resize(size, r), ACTOR_CALL_TIMEOUT).await;
                }
                FRAME_DETACH => return,
                _ => return,
            }
        }
    };
    tokio::select! {
        _ = outbound => {}
        _ = inbound => {}
    }
    let _ = actor.cast(SessionMsg::Detach(sub));
    Ok(())
}

fn line(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

async fn create(
    mut params: CreateParams,
    caller: &str,
    ctx: &DaemonContext,
) -> Result<SessionView, ErrorBody> {
    crate::profiles::apply(&mut params, ctx.profiles_path.as_ref())?;
    if params.restart_policy.is_some() && params.command.is_none() {
        return Err(ErrorBody::invalid("a restart policy needs a command"));
    }
    if let Some(parent) = &params.parent {
        let known = ask(
            &ctx.registry,
            |r| RegistryMsg::Lifecycle(parent.clone(), r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?;
        if known.is_none() {
            return Err(ErrorBody::no_session(parent));
        }
    }
    if let Some(target) = &params.split_target {
        let lifecycle = ask(
            &ctx.registry,
            |r| RegistryMsg::Lifecycle(target.clone(), r),
            ACTOR_CALL_TIMEOUT,
        )
        .await?;
        // A failed actor's record reads `closed`; a dormant one is closed or archived.
        match lifecycle {
            None => return Err(ErrorBody::no_session(target)),
            Some(l) if !l.has_surface() => {
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
        start: SessionStart::New {
            params: Box::new(params),
            cwd,
            caller: caller.to_string(),
        },
        registry: ctx.registry.clone(),
        spawn: ctx.spawn.clone(),
        bus: ctx.bus.clone(),
        persist: ctx.persist.clone(),
    };
    let (actor, _) = Actor::spawn_linked(
        Some(format!("{SESSION_ACTOR_PREFIX}{session_id}")),
        SessionActor,
        args,
        ctx.session_supervisor.clone(),
    )
    .await
    .map_err(|e| ErrorBody::internal(format!("could not start the session: {e}")))?;
    let created = ask(&actor, SessionMsg::View, ACTOR_CALL_TIMEOUT).await?;
    if let Err(e) = &created {
        if e.code == ErrorCode::PersistenceFailed {
            // The caller never learns this session's id: do not leave its program running.
            let close = ActionParams {
                session_id,
                action: ActionKind::Close,
                input: None,
                signal: None,
            };
            let _ = ask(&actor, |r| SessionMsg::Action(close, r), ACTOR_CALL_TIMEOUT).await;
        }
    }
    created
}
