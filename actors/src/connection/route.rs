//! Unary requests: one answer per request, from a session's actor or the daemon's own.

use super::*;

pub(super) fn session_result(view: SessionView) -> Value {
    json!({ "session": view })
}

/// Times a request is routed to a session before giving up (see [`ask_session`]).
const ROUTE_ATTEMPTS: usize = 8;

/// Ask a session's actor: resolve it (`not_found` / `already_ended`), then ask. A closed
/// record's actor retires when idle (`session::Dormant`); a request that reached it as it
/// stopped was dropped unhandled with its mailbox, so it is routed again, and resolving
/// wakes a fresh actor. `build` may therefore run more than once.
pub(super) async fn ask_session<T: Send + 'static>(
    ctx: &DaemonContext,
    session_id: &str,
    build: impl Fn(RpcReplyPort<T>) -> SessionMsg,
    timeout: Duration,
) -> Result<T, ErrorBody> {
    Ok(ask_session_actor(ctx, session_id, build, timeout).await?.1)
}

/// [`ask_session`], also returning the actor that answered (for a later `Unwatch`).
pub(super) async fn ask_session_actor<T: Send + 'static>(
    ctx: &DaemonContext,
    session_id: &str,
    build: impl Fn(RpcReplyPort<T>) -> SessionMsg,
    timeout: Duration,
) -> Result<(ActorRef<SessionMsg>, T), ErrorBody> {
    // The registry's published route first; once an actor turns out to have stopped,
    // every further attempt asks the registry itself.
    let mut published = ctx.routes.get(session_id);
    for _ in 0..ROUTE_ATTEMPTS {
        let actor = match published.take() {
            Some(actor) => actor,
            None => session_actor(ctx, session_id).await?,
        };
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
pub(super) async fn session_actor(
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

/// Answer a unary request: from the target session's actor ([`Serve::Session`]) or from
/// the daemon's own actors ([`Serve::Daemon`]). A request that would change a record is
/// refused first while the journal cannot be written.
pub(super) async fn route(
    call: Call,
    caller: &str,
    ctx: &DaemonContext,
) -> Result<Value, ErrorBody> {
    if call.changes_records() {
        journal_writable(ctx).await?;
    }
    match call.spec().serve {
        Serve::Session { input } => session_request(call, caller, input, ctx).await,
        Serve::Daemon => daemon_request(call, caller, ctx).await,
        Serve::Held => Err(ErrorBody::internal(
            "a stream or wait is served with its connection",
        )),
    }
}

/// One request to one session's actor, which holds the method's handler
/// (`session::request`). Every session method goes this one way.
async fn session_request(
    call: Call,
    caller: &str,
    input: bool,
    ctx: &DaemonContext,
) -> Result<Value, ErrorBody> {
    let id = call
        .session_id()
        .ok_or_else(|| ErrorBody::internal("a session method without a session"))?
        .to_string();
    let budget = if input {
        INPUT_TIMEOUT
    } else {
        ACTOR_CALL_TIMEOUT
    };
    let reply = ask_session_request(ctx, &id, call, caller, budget).await?;
    Ok(reply_json(reply, &id))
}

/// Send `call` to session `id`'s actor as `SessionMsg::Request` and wait `budget` for its
/// answer (routed again if it reached an actor as it retired).
async fn ask_session_request(
    ctx: &DaemonContext,
    id: &str,
    call: Call,
    caller: &str,
    budget: Duration,
) -> Result<SessionReply, ErrorBody> {
    ask_session(
        ctx,
        id,
        |reply| SessionMsg::Request {
            call: call.clone(),
            caller: caller.to_string(),
            reply,
        },
        budget,
    )
    .await?
}

/// `sessions.snapshot`, `dump`, `inspect`: the session's actor answers with the bytes of
/// the `result`, already encoded and charged (`session::ReadAnswer`).
pub(super) async fn read_screen(
    p: maxx_protocol::request::ReadParams,
    caller: &str,
    ctx: &DaemonContext,
) -> Result<ReadAnswer, ErrorBody> {
    let id = p.session_id.clone();
    // A closed or archived session released its screen with its surface: answer without
    // waking its actor.
    let lifecycle = ask(
        &ctx.registry,
        |r| RegistryMsg::Lifecycle(id.clone(), r),
        ACTOR_CALL_TIMEOUT,
    )
    .await?;
    if lifecycle.is_some_and(|l| l.is_terminal()) {
        return Err(ErrorBody::ended(&id, "its screen went with its surface"));
    }
    let call = Call::Screen(ScreenCall::Read(p));
    let reply = ask_session_request(ctx, &id, call, caller, ACTOR_CALL_TIMEOUT).await?;
    match reply {
        SessionReply::Read(answer) => Ok(answer),
        _ => Err(ErrorBody::internal(
            "a screen read answered with something else",
        )),
    }
}

/// A session's answer as the response's `result`.
fn reply_json(reply: SessionReply, session_id: &str) -> Value {
    match reply {
        SessionReply::View(view) => session_result(view),
        // Screen reads go through `read_screen`; their bytes are never made a `Value`.
        SessionReply::Read(answer) => serde_json::from_slice(&answer.json)
            .unwrap_or_else(|_| json!({ "error": "unreadable screen answer" })),
        SessionReply::Resized(result) => json!(result),
        SessionReply::Events(page) => {
            let mut answer = json!({
                "session_id": session_id,
                "events": page.events,
                "next_since": page.next_since,
                "more": page.more,
            });
            // A `since` from before what is kept: the gap is reported as the bus reports a
            // `since` that predates its ring, never left silent.
            if let Some(through) = page.dropped_through {
                answer["reset"] = json!(true);
                answer["dropped_through"] = json!(through);
            }
            answer
        }
    }
}

/// The methods the daemon answers without (or with more than) one session's actor.
async fn daemon_request(call: Call, caller: &str, ctx: &DaemonContext) -> Result<Value, ErrorBody> {
    match call {
        Call::Create(CreateCall::Create(params)) => {
            create(*params, caller, ctx).await.map(session_result)
        }
        Call::Create(CreateCall::RegisterCurrent(p)) => register_current(p, ctx).await,
        Call::Records(RecordsCall::Get(r)) => {
            let view = ask(
                &ctx.registry,
                |reply| RegistryMsg::Get(r.session_id.clone(), reply),
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            view.map(session_result)
                .ok_or_else(|| ErrorBody::no_session(&r.session_id))
        }
        Call::Records(RecordsCall::List(p)) => {
            let sessions = ask(
                &ctx.registry,
                |reply| RegistryMsg::List(p, reply),
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            Ok(json!({ "sessions": sessions }))
        }
        Call::Records(RecordsCall::SetParent { session_id, parent }) => {
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
            let call = Call::Records(RecordsCall::SetParent { session_id, parent });
            session_request(call, caller, false, ctx).await
        }
        Call::Daemon(DaemonCall::Stats) => {
            // `records` counts every create the caller has seen acknowledged.
            ask(&ctx.registry, RegistryMsg::Settled, ACTOR_CALL_TIMEOUT).await?;
            Ok(json!(ctx.spawn.stats.snapshot()))
        }
        Call::Daemon(DaemonCall::Status) => status(ctx).await,
        Call::Daemon(DaemonCall::ProfilesList) => crate::profiles::list(ctx.profiles_path.as_ref()),
        Call::Daemon(DaemonCall::PolicyCheck { capability, target }) => {
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
        Call::Daemon(DaemonCall::Reload) => {
            let report = ask(
                &ctx.policy,
                crate::policy::PolicyMsg::Reload,
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            Ok(json!({ "policy": report }))
        }
        Call::Daemon(DaemonCall::PolicySources) => {
            let report = ask(
                &ctx.policy,
                crate::policy::PolicyMsg::Sources,
                ACTOR_CALL_TIMEOUT,
            )
            .await?;
            Ok(json!(report))
        }
        #[cfg(debug_assertions)]
        Call::Daemon(DaemonCall::DebugPanic(r)) => {
            let actor = session_actor(ctx, &r.session_id).await?;
            actor
                .cast(SessionMsg::DebugPanic)
                .map_err(|_| ErrorBody::internal("the session actor is gone"))?;
            Ok(json!({ "injected": true }))
        }
        other => Err(ErrorBody::internal(format!(
            "{} is not answered by the daemon",
            other.method()
        ))),
    }
}

/// `sessions.register-current`: the surface's actor checks the proof.
async fn register_current(p: RegisterParams, ctx: &DaemonContext) -> Result<Value, ErrorBody> {
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

/// `sessions.run`: the call waits as long as the run does (no limit with `timeout: 0`).
pub(super) async fn run(p: RunParams, ctx: &DaemonContext) -> Result<Value, ErrorBody> {
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
        p.timeout.map_or(Duration::MAX, |t| t + ACTOR_CALL_TIMEOUT),
    )
    .await??;
    Ok(json!(result))
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
    let asking: Vec<&str> = sessions
        .iter()
        .filter(|s| s.ask.is_some())
        .map(|s| s.session_id.as_str())
        .collect();
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
        "asking": asking,
        "bus_cursor": cursor,
        "policy": policy,
        "registry_unreadable": ctx.spawn.stats.registry_unreadable.get(),
        "keeper": ctx.spawn.keeper.as_ref().map(crate::keeper_link::Keeper::status),
    }))
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
    let budget = ctx.spawn.stats.fd_budget;
    let live = ctx
        .spawn
        .stats
        .sessions
        .load(std::sync::atomic::Ordering::Relaxed);
    if budget.sessions > 0 && live.max(0) as u64 >= budget.sessions {
        return Err(ErrorBody::new(
            ErrorCode::FdLimit,
            format!(
                "{live} sessions are live, as many as this daemon's open-files limit ({}) \
                 leaves room for at {} descriptors each",
                budget.limit,
                crate::daemon::FDS_PER_SESSION
            ),
        ));
    }
    let session_id = new_id();
    let (created, view) = ractor::concurrency::oneshot();
    let start = SessionStart::New {
        params: Box::new(params),
        cwd,
        caller: caller.to_string(),
        created: Some(created.into()),
    };
    let started = StartSession::send(&ctx.sessions, session_id.clone(), start);
    // The record comes from the new actor once journaled: the supervisor's answer is
    // needed only when it does not.
    let created = match tokio::time::timeout(ACTOR_CALL_TIMEOUT, view).await {
        Ok(Ok(created)) => created,
        Ok(Err(_)) => {
            // The actor never answered: its start failed, and the supervisor says why.
            started.wait(ACTOR_CALL_TIMEOUT).await?;
            return Err(ErrorBody::internal(
                "the new session's actor dropped its answer",
            ));
        }
        Err(_) => Err(ErrorBody::internal(
            "the new session's record was not journaled in time",
        )),
    };
    if let Err(e) = &created {
        if e.code == ErrorCode::PersistenceFailed {
            // The caller never learns this session's id: do not leave its program running.
            let close = Call::Records(RecordsCall::Action(ActionParams {
                session_id,
                action: ActionKind::Close,
                input: None,
                signal: None,
            }));
            if let Ok(actor) = started.wait(ACTOR_CALL_TIMEOUT).await {
                let _ = ask(
                    &actor,
                    |reply| SessionMsg::Request {
                        call: close,
                        caller: caller.to_string(),
                        reply,
                    },
                    ACTOR_CALL_TIMEOUT,
                )
                .await;
            }
        }
    }
    created
}
