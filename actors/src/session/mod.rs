//! `SessionActor`: one per session. It owns the session's PTY and child, the light
//! screen state fed from the PTY's bytes, the authoritative record, and its lifecycle.
//!
//! Every change to the record is published to the `RegistryActor` (which serves reads
//! from that copy) *before* the request that caused it is answered, so a caller always
//! reads its own writes.
//!
//! Lifecycle is mechanical: `running` until the kernel reports the child's exit through
//! its pidfd (`exited`, with code or signal), `closed` once a caller closes the surface.
//! Nothing here looks at output to decide anything.

use crate::audit_log::AuditLog;
use crate::bus::BusMsg;
use crate::control_dir::constant_time_eq;
use crate::grid::{logical, output_lines, Row};
use crate::persistence::{PersistMsg, Record};
use crate::pty::{ExitInfo, Pty, PumpEvent, SpawnSpec};
use crate::registry::RegistryMsg;
use crate::screen::ScreenEvent;
use crate::screen_model::{recent_rows, GridGuard, ScreenModel, Watch};
use crate::stats::Stats;
use maxx_protocol::audit::{AuditEntry, AuditKind};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::keys::KeyToken;
use maxx_protocol::limits::{DEFAULT_SCROLLBACK_LINES, RUN_OUTPUT_MAX_BYTES};
use maxx_protocol::request::{
    ActionKind, ActionParams, CreateParams, Declaration, InterruptSignal, ReadKind, ReadParams,
    ScrollbackWindow, TextWait, WaitCondition,
};
use maxx_protocol::screen::{
    Cursor, Foreground, InspectDoc, ResizeResult, RunResult, ScreenState, ScrollbackInfo, Size,
    SoftWrap, SCREEN_SCHEMA,
};
use maxx_protocol::session::{Lifecycle, Outcome, SessionView};
use maxx_protocol::stream::{SourceKind, StreamEvent, STREAM_SCHEMA};
use maxx_protocol::time::now_rfc3339;
use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Daemon-wide facts every session needs to build its child's environment.
#[derive(Debug, Clone)]
pub struct SpawnContext {
    /// Exported as `MAXX_CONTROL_DIR`.
    pub control_dir: PathBuf,
    /// Folder of the `maxx` binary, put first on the child's `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// Live-object counters.
    pub stats: Arc<Stats>,
}

/// How a session actor starts.
pub enum SessionStart {
    /// A new session from `sessions.create`.
    New {
        /// Validated create params (env included; it is kept in memory only).
        params: Box<CreateParams>,
        /// Resolved, existing working directory.
        cwd: PathBuf,
        /// The policy source of the creating request (source of create-time declarations).
        caller: String,
    },
    /// A record restored from `registry.json`: detached, no surface until restarted.
    Restored(Box<Record>),
    /// The durable copy of a session whose actor failed this run: detached the same way.
    Recovered(Box<Record>),
    /// A closed or archived record the registry kept while no actor was needed, woken for a
    /// request (see [`Dormant`]).
    Woken(Box<Dormant>),
}

/// How long a closed or archived session's actor stays after its last request before it
/// retires (see [`Dormant`]).
pub const RETIRE_IDLE: Duration = Duration::from_secs(1);

/// What a closed or archived session keeps when its actor retires: the record, its audit
/// log, and the in-memory facts a restart in this run reuses. The registry holds it, so a
/// closed record costs this rather than an idle actor (mailboxes, task: ~11 KiB), and wakes
/// an actor from it when a request needs one.
pub struct Dormant {
    /// The record as the actor had it, encoded (one allocation). The registry's copy is not
    /// used to wake: it may hold a parent edge reserved by the very request being served.
    view: Box<serde_json::value::RawValue>,
    /// Its audit log (complete: the live log is never trimmed).
    audit: AuditLog,
    /// The create-time env (memory only), for a restart.
    env: Vec<(String, String)>,
    /// The history lines its screen keeps, for a restart.
    scrollback_lines: usize,
    /// Automatic restarts within the policy window.
    restart_times: std::collections::VecDeque<std::time::Instant>,
}

/// Everything needed to start a session.
pub struct SessionArgs {
    /// The session id (minted, or restored).
    pub session_id: String,
    /// New or restored.
    pub start: SessionStart,
    /// Where record changes are published.
    pub registry: ActorRef<RegistryMsg>,
    /// Daemon-wide spawn facts.
    pub spawn: Arc<SpawnContext>,
    /// The event bus.
    pub bus: ActorRef<BusMsg>,
    /// The durable registry.
    pub persist: ActorRef<PersistMsg>,
}

/// A wait's answer.
#[derive(Debug, Clone)]
pub struct WaitAnswer {
    /// matched / timeout / ended.
    pub outcome: Outcome,
    /// The record when the wait ended.
    pub session: SessionView,
    /// For an `event` wait that matched: the entry.
    pub event: Option<AuditEntry>,
    /// The surface's output had carried an OSC 133 `B` mark by the answer, so
    /// `output_only` had input lines to leave out.
    pub input_marks: bool,
}

/// An attachment's start: its id, the record, and bytes that repaint the screen.
pub type Attached = (u64, SessionView, Vec<u8>);

/// A screen read's answer.
#[derive(Debug, Clone)]
pub enum ReadAnswer {
    /// `sessions.snapshot`.
    Snapshot(Box<ScreenState>),
    /// `sessions.dump`.
    Dump(String),
    /// `sessions.inspect`.
    Inspect(Box<InspectDoc>),
}

struct RunWaiter {
    id: u64,
    command: String,
    begin: String,
    end: regex::Regex,
    started: std::time::Instant,
    reply: RpcReplyPort<Result<RunResult, ErrorBody>>,
}

/// One line of a `sessions.watch` stream after its snapshot.
#[derive(Debug, Clone)]
pub enum WatchLine {
    /// A new audit entry.
    Event(Box<AuditEntry>),
    /// A mechanical lifecycle transition, with the record after it.
    Lifecycle(Box<SessionView>),
    /// The session reached a terminal lifecycle; nothing more will come.
    End,
}

/// Messages a `SessionActor` handles.
pub enum SessionMsg {
    /// From the pump.
    Pump(PumpEvent),
    /// The current record.
    View(RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.update`: status and/or metadata merge.
    Update {
        /// New status.
        status: Option<String>,
        /// Keys to merge.
        metadata: Option<Map<String, Value>>,
        /// Source recorded on the metadata audit entries.
        source: String,
        /// Answer.
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    },
    /// `sessions.action` / `sessions.cancel`.
    Action(ActionParams, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.wait`.
    Wait {
        /// Condition.
        condition: WaitCondition,
        /// When to give up.
        timeout: Duration,
        /// Answer.
        reply: RpcReplyPort<WaitAnswer>,
    },
    /// A wait's timer fired.
    WaitExpired(u64),
    /// A waiting caller hung up: drop every waiter whose caller has gone.
    PruneWaiters,
    /// [`RETIRE_IDLE`] passed since the message with this number: retire if nothing came
    /// since and the session still needs no actor.
    RetireIfIdle(u64),
    /// A declaration verb.
    Declare {
        /// What is declared.
        declaration: Declaration,
        /// Who declares it.
        source: String,
        /// Answer.
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    },
    /// `sessions.events --since N`.
    Events {
        /// Entries after this seq.
        since: u64,
        /// Answer.
        reply: RpcReplyPort<Vec<AuditEntry>>,
    },
    /// `sessions.watch`: subscribe; the reply is the snapshot, then lines flow on `lines`.
    Watch {
        /// Where lines go; bounded, a watcher that falls behind is dropped.
        lines: mpsc::Sender<WatchLine>,
        /// Answer: subscription id and snapshot.
        reply: RpcReplyPort<(u64, SessionView)>,
    },
    /// A watcher ended (timeout or disconnect).
    Unwatch(u64),
    /// `sessions.set-group`: join `group`, or leave with `None`.
    SetGroup(Option<String>, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.set-parent` (already validated by the registry).
    SetParent(Option<String>, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.archive`.
    Archive(Option<String>, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.snapshot` / `dump` / `inspect`.
    Read(ReadParams, RpcReplyPort<Result<ReadAnswer, ErrorBody>>),
    /// `sessions.run`: type a sentinel-wrapped command, answer when its end marker shows.
    Run {
        /// The command.
        command: String,
        /// Budget; `None` = no limit.
        timeout: Option<Duration>,
        /// When the budget started (the request's arrival).
        started: std::time::Instant,
        /// Answer.
        reply: RpcReplyPort<Result<RunResult, ErrorBody>>,
    },
    /// A run's budget is spent.
    RunExpired(u64),
    /// A grid worker saw these text waits' or runs' patterns on the screen.
    ScreenMatched(Vec<u64>),
    /// `sessions.send-keys`.
    SendKeys(Vec<KeyToken>, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.paste`.
    Paste(String, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.resize`.
    Resize(Size, RpcReplyPort<Result<ResizeResult, ErrorBody>>),
    /// `sessions.set-restart-policy`.
    SetRestartPolicy(
        Option<maxx_protocol::session::RestartPolicy>,
        RpcReplyPort<Result<SessionView, ErrorBody>>,
    ),
    /// A backoff elapsed; restart if the policy still wants it (generation matches).
    AutoRestart(u64),
    /// `sessions.attach`: output goes to `output` from now on; the reply carries the
    /// attachment id, the record, and bytes that repaint the current screen.
    Attach {
        /// Where PTY output goes; a full queue detaches the attacher.
        output: mpsc::Sender<Vec<u8>>,
        /// Answer.
        reply: RpcReplyPort<Result<Attached, ErrorBody>>,
    },
    /// Input typed by an attached person.
    AttachInput(Vec<u8>),
    /// An attacher left.
    Detach(u64),
    /// Test-only fault injection: panic inside this actor (debug builds only).
    #[cfg(debug_assertions)]
    DebugPanic,
    /// `sessions.restart`, with a replacement command or `None` for the recorded one.
    Restart(Option<String>, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// Another session took focus.
    Unfocused,
    /// `sessions.register-current`: check the per-surface proof.
    Register {
        /// The caller's `MAXX_REGISTRATION_TOKEN`.
        registration_token: String,
        /// Answer.
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    },
}

/// The actor (stateless configuration; see [`SessionState`]).
pub struct SessionActor;

/// What a restart policy decides about an exit.
enum PolicyDecision {
    /// No policy fires.
    None,
    /// Restart after this backoff.
    Restart(Duration),
    /// The budget (restarts, window seconds) is spent.
    GaveUp(u32, u64),
}

struct Waiter {
    id: u64,
    condition: WaitCondition,
    reply: RpcReplyPort<WaitAnswer>,
}

struct Watcher {
    id: u64,
    lines: mpsc::Sender<WatchLine>,
}

/// Mutable state of one session.
pub struct SessionState {
    // Field order is drop order: the PTY (and its child) goes first.
    /// Live PTY; `None` once the surface is closed.
    pty: Option<Pty>,
    /// The record, authoritative.
    view: SessionView,
    /// Recent raw output and, once someone read it, the full screen model (parsed off the
    /// drain path, see `grid_worker.rs`).
    model: Arc<ScreenModel>,
    /// History lines the grid keeps.
    scrollback_lines: usize,
    /// Pending `run`s.
    runs: Vec<RunWaiter>,
    /// Ids of the text waits and runs the grid workers were last given.
    watch_ids: Vec<u64>,
    /// People attached to the PTY (`sessions.attach`).
    /// Each with the stream offset its repaint covered (later output is forwarded).
    attachers: Vec<(u64, u64, mpsc::Sender<Vec<u8>>)>,
    /// When automatic restarts happened (pruned to the policy window).
    restart_times: std::collections::VecDeque<std::time::Instant>,
    /// Bumped whenever a pending automatic restart must not fire any more.
    restart_generation: u64,
    /// A caller interrupted this run: its exit is not a crash, the policy does not fire.
    policy_suppressed: bool,
    /// The last exit status, as the payload of a `restarted` event it triggers.
    last_exit: Option<Value>,
    /// Secret proof for `register-current`; exported to the child only.
    registration_token: String,
    /// Append-only audit log (never trimmed in memory), kept encoded.
    audit: AuditLog,
    /// Pending waits.
    waiters: Vec<Waiter>,
    /// Live `watch` subscriptions.
    watchers: Vec<Watcher>,
    /// Ids for waiters and watchers.
    next_id: u64,
    /// The create-time env, in memory only, reused by a restart in this run.
    env: Vec<(String, String)>,
    /// The message being handled sent something to the journal: its acknowledgement must
    /// say whether that reached the disk.
    journaled: bool,
    /// Restored or recovered: retire as soon as started (a woken actor first serves the
    /// request that woke it).
    retire_on_start: bool,
    /// Messages handled (not counting [`SessionMsg::RetireIfIdle`]): an idle check armed
    /// after message N retires only if N is still the last.
    handled: u64,
    registry: ActorRef<RegistryMsg>,
    bus: ActorRef<BusMsg>,
    persist: ActorRef<PersistMsg>,
    spawn: Arc<SpawnContext>,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        let stats = &self.spawn.stats;
        Stats::add(&stats.sessions, -1);
        Stats::add(&stats.waiters, -(self.waiters.len() as i64));
        Stats::add(&stats.watchers, -(self.watchers.len() as i64));
    }
}

/// A fresh 128-bit secret, hex.
pub fn random_secret() -> Result<String, ActorProcessingErr> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("getrandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A fresh uppercase UUID, the seed's id format.
pub fn new_id() -> String {
    uuid::Uuid::new_v4()
        .hyphenated()
        .to_string()
        .to_ascii_uppercase()
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<SessionState, ActorProcessingErr> {
        let SessionArgs {
            session_id,
            start,
            registry,
            spawn,
            bus,
            persist,
        } = args;
        let (params, cwd, caller) = match start {
            SessionStart::New {
                params,
                cwd,
                caller,
            } => (*params, cwd, caller),
            detached => {
                let (view, dormant, retire_on_start) = match detached {
                    SessionStart::Restored(record) | SessionStart::Recovered(record) => {
                        let Record { session, audit } = *record;
                        (
                            session,
                            Dormant {
                                view: Default::default(),
                                audit: AuditLog::from_entries(&audit),
                                env: Vec::new(),
                                scrollback_lines: DEFAULT_SCROLLBACK_LINES,
                                restart_times: Default::default(),
                            },
                            true,
                        )
                    }
                    SessionStart::Woken(dormant) => (
                        serde_json::from_str(dormant.view.get())
                            .map_err(|e| format!("a dormant record does not decode: {e}"))?,
                        *dormant,
                        false,
                    ),
                    SessionStart::New { .. } => unreachable!("matched above"),
                };
                let Dormant {
                    view: _,
                    audit,
                    env,
                    scrollback_lines,
                    restart_times,
                } = dormant;
                Stats::add(&spawn.stats.sessions, 1);
                let state = SessionState {
                    pty: None,
                    view,
                    model: screen_model(&myself),
                    scrollback_lines,
                    runs: Vec::new(),
                    watch_ids: Vec::new(),
                    attachers: Vec::new(),
                    restart_times,
                    restart_generation: 0,
                    policy_suppressed: false,
                    last_exit: None,
                    registration_token: String::new(),
                    audit,
                    waiters: Vec::new(),
                    watchers: Vec::new(),
                    next_id: 0,
                    env,
                    journaled: false,
                    retire_on_start,
                    handled: 0,
                    registry: registry.clone(),
                    bus,
                    persist,
                    spawn,
                };
                registry.cast(RegistryMsg::Register {
                    view: Box::new(state.view.clone()),
                    actor: myself,
                    focus: false,
                })?;
                return Ok(state);
            }
        };
        let now = now_rfc3339();
        let view = SessionView {
            session_id,
            surface_id: String::new(),
            title: params.title,
            command: params.command,
            cwd: cwd.display().to_string(),
            status: params.status,
            lifecycle: Lifecycle::Running,
            metadata: params.metadata,
            created_at: now.clone(),
            updated_at: now,
            pid: None,
            exit_code: None,
            exit_signal: None,
            location: params.location,
            split_target: params.split_target,
            split_direction: params.split_direction,
            focused: params.focus,
            restart_count: 0,
            terminal_title: None,
            cols: params.cols,
            rows: params.rows,
            restored: false,
            last_seen_at: None,
            archive_reason: None,
            group: params.group,
            parent_id: params.parent,
            workflow_state: None,
            workflow_state_at: None,
            workflow_state_source: None,
            summary: None,
            summary_at: None,
            summary_source: None,
            result: None,
            result_at: None,
            result_source: None,
            result_schema: params.result_schema,
            agent_type: None,
            agent_type_at: None,
            agent_type_source: None,
            restart_policy: params.restart_policy,
            next_restart_at: None,
            restart_gave_up: false,
        };
        let mut state = SessionState {
            pty: None,
            view,
            model: screen_model(&myself),
            scrollback_lines: params.scrollback_lines.unwrap_or(DEFAULT_SCROLLBACK_LINES),
            runs: Vec::new(),
            watch_ids: Vec::new(),
            attachers: Vec::new(),
            restart_times: Default::default(),
            restart_generation: 0,
            policy_suppressed: false,
            last_exit: None,
            registration_token: String::new(),
            audit: AuditLog::default(),
            waiters: Vec::new(),
            watchers: Vec::new(),
            next_id: 0,
            env: params.env,
            journaled: true,
            retire_on_start: false,
            handled: 0,
            registry: registry.clone(),
            bus,
            persist,
            spawn,
        };
        state.spawn_surface(&myself)?;
        Stats::add(&state.spawn.stats.sessions, 1);
        // A create emits `created` and, for a grouped launch, `group.joined`; create-time
        // metadata arrives in the record, not as events.
        state.mechanical("created", None);
        if let Some(group) = state.view.group.clone() {
            state.mechanical_in("group.joined", None, Some(group));
        }
        let _ = state
            .persist
            .cast(PersistMsg::Upsert(Box::new(state.view.clone())));
        // A create-time agent type is a declaration like a later set-agent-type.
        if let Some(agent_type) = params.agent_type {
            state.apply(Declaration::AgentType { agent_type }, caller)?;
        }
        registry.cast(RegistryMsg::Register {
            view: Box::new(state.view.clone()),
            actor: myself,
            focus: params.focus,
        })?;
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<SessionMsg>,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        if state.retire_on_start && state.retirable() {
            state.retire(&myself);
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        state.journaled = false;
        if let SessionMsg::RetireIfIdle(handled) = msg {
            if handled == state.handled && state.retirable() {
                state.retire(&myself);
            }
            return Ok(());
        }
        state.handled += 1;
        Self::dispatch(&myself, msg, state)?;
        // A closed record needs no actor between requests: retire once it has been idle a
        // moment, so a burst of requests is served by one actor rather than racing its
        // hand-over.
        if state.retirable() {
            let handled = state.handled;
            myself.send_after(RETIRE_IDLE, move || SessionMsg::RetireIfIdle(handled));
        }
        Ok(())
    }
}

impl SessionActor {
    /// Handle one message (the body of [`Actor::handle`]).
    fn dispatch(
        myself: &ActorRef<SessionMsg>,
        msg: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        let myself = myself.clone();
        match msg {
            SessionMsg::RetireIfIdle(_) => {} // handled in `handle`
            SessionMsg::Pump(event) => state.on_pump(&myself, event),
            SessionMsg::AutoRestart(generation) => {
                if generation == state.restart_generation
                    && state.view.lifecycle == Lifecycle::Backoff
                {
                    let attempt = state.restart_times.len() as u32 + 1;
                    state.restart_times.push_back(std::time::Instant::now());
                    let mut trigger = state.last_exit.clone().unwrap_or(Value::Null);
                    trigger["automatic"] = Value::Bool(true);
                    trigger["attempt"] = attempt.into();
                    if let Err(e) = state.restart(&myself, None, Some(trigger)) {
                        tracing::warn!(session_id = state.view.session_id, error = %e, "automatic restart failed");
                    }
                }
            }
            SessionMsg::Attach { output, reply } => {
                if state.pty.is_none() || state.view.lifecycle.has_ended() {
                    let _ = reply.send(Err(ErrorBody::ended(
                        &state.view.session_id,
                        "there is no running program to attach to",
                    )));
                    return Ok(());
                }
                state.next_id += 1;
                let id = state.next_id;
                let (repaint, upto) = state.model.attach();
                if reply.send(Ok((id, state.view.clone(), repaint))).is_ok() {
                    state.attachers.push((id, upto, output));
                }
                state.attachers_changed();
            }
            SessionMsg::AttachInput(bytes) => {
                if let Some(pty) = &state.pty {
                    drop(pty.write(bytes));
                }
            }
            SessionMsg::Detach(id) => {
                state.attachers.retain(|(a, _, _)| *a != id);
                state.attachers_changed();
            }
            #[cfg(debug_assertions)]
            SessionMsg::DebugPanic => panic!("fault injected by debug.panic"),
            SessionMsg::SetRestartPolicy(policy, reply) => {
                let result = if policy.is_some() && state.view.command.is_none() {
                    Err(ErrorBody::invalid(
                        "a restart policy needs a session with a command",
                    ))
                } else {
                    state.view.restart_policy = policy;
                    if state.view.restart_policy.is_none()
                        && state.view.lifecycle == Lifecycle::Backoff
                    {
                        // Turning the policy off cancels a pending restart.
                        state.restart_generation += 1;
                        state.view.lifecycle = Lifecycle::Exited;
                        state.view.next_restart_at = None;
                        state.lifecycle_changed();
                    } else {
                        state.touch();
                        state.publish();
                    }
                    Ok(state.view.clone())
                };
                state.ack(reply, result);
            }
            // `View` answers a create: it goes through the journal like any acknowledgement.
            SessionMsg::View(reply) => state.ack(reply, Ok(state.view.clone())),
            SessionMsg::Update {
                status,
                metadata,
                source,
                reply,
            } => {
                let result = state.update(status, metadata, source);
                state.ack(reply, result);
            }
            SessionMsg::Declare {
                declaration,
                source,
                reply,
            } => {
                let result = state.apply(declaration, source);
                state.ack(reply, result);
            }
            SessionMsg::Events { since, reply } => {
                let _ = reply.send(state.audit.since(since));
            }
            SessionMsg::Watch { lines, reply } => {
                state.next_id += 1;
                let id = state.next_id;
                if reply.send((id, state.view.clone())).is_ok() {
                    if state.view.lifecycle.has_ended() {
                        let _ = lines.try_send(WatchLine::End);
                    } else {
                        state.watchers.push(Watcher { id, lines });
                        Stats::add(&state.spawn.stats.watchers, 1);
                    }
                }
            }
            SessionMsg::SetGroup(group, reply) => {
                if state.view.group != group {
                    if let Some(old) = state.view.group.take() {
                        state.mechanical_in("group.left", None, Some(old));
                    }
                    state.view.group = group.clone();
                    if let Some(new) = group {
                        state.mechanical_in("group.joined", None, Some(new));
                    }
                    state.touch();
                    state.publish();
                }
                state.ack(reply, Ok(state.view.clone()));
            }
            SessionMsg::SetParent(parent, reply) => {
                // Re-setting the same parent is a no-op: no event, no updated_at bump.
                if state.view.parent_id != parent {
                    state.view.parent_id = parent.clone();
                    match parent {
                        Some(p) => state
                            .mechanical("parent.set", Some(serde_json::json!({ "parent_id": p }))),
                        None => state.mechanical("parent.cleared", None),
                    }
                    state.touch();
                    state.publish();
                }
                state.ack(reply, Ok(state.view.clone()));
            }
            SessionMsg::Read(params, reply) => {
                // A bug in the terminal emulator's readback must not take the session (and
                // its program) down with the actor: the read fails, the session goes on.
                let read =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| state.read(&params)));
                let _ = reply.send(read.map_err(|_| {
                    tracing::error!(session = %state.view.session_id, "a screen read panicked");
                    ErrorBody::internal("reading the screen failed (a bug; the session runs on)")
                }));
            }
            SessionMsg::Run {
                command,
                timeout,
                started,
                reply,
            } => state.start_run(&myself, command, timeout, started, reply),
            SessionMsg::RunExpired(id) => {
                if let Some(pos) = state.runs.iter().position(|r| r.id == id) {
                    let run = state.runs.swap_remove(pos);
                    let _ = run.reply.send(Err(ErrorBody::new(
                        ErrorCode::Timeout,
                        format!(
                            "run gave up after {} ms without seeing its end marker",
                            run.started.elapsed().as_millis()
                        ),
                    )
                    .with_remedy("raise --timeout, or check the session is at a shell prompt")));
                }
            }
            SessionMsg::ScreenMatched(ids) => state.screen_matched(ids),
            SessionMsg::SendKeys(keys, reply) => {
                let flags = state.model.flags();
                let mode = maxx_protocol::keys::KeyMode {
                    app_cursor: flags.app_cursor,
                    kitty_flags: flags.kitty_flags,
                };
                let bytes = maxx_protocol::keys::encode(&keys, mode);
                state.write_input(bytes, "send keys to", reply);
            }
            SessionMsg::Paste(text, reply) => {
                let bytes = paste_bytes(&text, state.model.flags().bracketed_paste);
                state.write_input(bytes, "paste into", reply);
            }
            SessionMsg::Resize(size, reply) => {
                let result = state.resize(size);
                state.ack(reply, result);
            }
            SessionMsg::Archive(reason, reply) => {
                state.archive(reason);
                state.ack(reply, Ok(state.view.clone()));
            }
            SessionMsg::Restart(command, reply) => {
                let result = state.restart(&myself, command, None);
                state.ack(reply, result);
            }
            SessionMsg::Unwatch(id) => {
                let before = state.watchers.len();
                state.watchers.retain(|w| w.id != id);
                Stats::add(
                    &state.spawn.stats.watchers,
                    state.watchers.len() as i64 - before as i64,
                );
            }
            SessionMsg::Action(params, reply) => state.action(params, reply),
            SessionMsg::Wait {
                condition,
                timeout,
                reply,
            } => {
                // An edge-triggered event wait starts from the log as it is now.
                let condition = match condition {
                    WaitCondition::Event { name, since: None } => WaitCondition::Event {
                        name,
                        since: Some(state.last_seq()),
                    },
                    other => other,
                };
                if let WaitCondition::Text(text) = &condition {
                    // Level-triggered: text already on the screen matches at once. A closed
                    // session has no screen (nor should a wait build one).
                    if state.pty.is_some() && state.screen_matches(text, None) {
                        let _ = reply.send(WaitAnswer {
                            outcome: Outcome::Matched,
                            session: state.view.clone(),
                            event: None,
                            input_marks: state.model.flags().input_marks,
                        });
                        return Ok(());
                    }
                }
                if let Some((outcome, event)) = state.check(&condition) {
                    let _ = reply.send(WaitAnswer {
                        outcome,
                        session: state.view.clone(),
                        event,
                        input_marks: state.model.flags().input_marks,
                    });
                    return Ok(());
                }
                state.prune_waiters();
                state.next_id += 1;
                let id = state.next_id;
                state.waiters.push(Waiter {
                    id,
                    condition,
                    reply,
                });
                Stats::add(&state.spawn.stats.waiters, 1);
                myself.send_after(timeout, move || SessionMsg::WaitExpired(id));
            }
            SessionMsg::Unfocused => {
                if state.view.focused {
                    state.view.focused = false;
                    state.publish();
                }
            }
            SessionMsg::PruneWaiters => state.prune_waiters(),
            SessionMsg::WaitExpired(id) => {
                if let Some(pos) = state.waiters.iter().position(|w| w.id == id) {
                    let waiter = state.waiters.swap_remove(pos);
                    Stats::add(&state.spawn.stats.waiters, -1);
                    let _ = waiter.reply.send(WaitAnswer {
                        outcome: Outcome::Timeout,
                        session: state.view.clone(),
                        event: None,
                        input_marks: state.model.flags().input_marks,
                    });
                }
            }
            SessionMsg::Register {
                registration_token,
                reply,
            } => {
                let ok = constant_time_eq(
                    registration_token.as_bytes(),
                    state.registration_token.as_bytes(),
                ) && state.pty.is_some();
                let _ = reply.send(if ok {
                    Ok(state.view.clone())
                } else {
                    Err(registration_refused())
                });
            }
        }
        // Text waits and runs may have come or gone: keep the grid workers' copy current.
        state.sync_watches();
        Ok(())
    }
}

/// A session's screen model, whose grid workers report matches back to `myself`.
fn screen_model(myself: &ActorRef<SessionMsg>) -> Arc<ScreenModel> {
    let me = myself.clone();
    ScreenModel::new(Box::new(move |ids| {
        let _ = me.cast(SessionMsg::ScreenMatched(ids));
    }))
}

/// The one answer for any failed registration, so it reveals nothing about which part
/// was wrong or whether the surface exists.
pub fn registration_refused() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::Unauthenticated,
        "registration proof does not match a live surface",
    )
    .with_remedy(
        "run `maxx sessions register-current` from inside a session maxx spawned; \
         it sends MAXX_SURFACE_ID and MAXX_REGISTRATION_TOKEN",
    )
}

/// Encode text as a paste: newlines become CR (what a terminal sends for a pasted line
/// break), and with bracketed paste on, the block is wrapped in `ESC[200~`…`ESC[201~`
/// after removing any end marker inside it, so pasted text cannot escape the bracket.
pub fn paste_bytes(text: &str, bracketed: bool) -> Vec<u8> {
    let normalized = text.replace("\r\n", "\r").replace('\n', "\r");
    if !bracketed {
        return normalized.into_bytes();
    }
    let inner = normalized.replace("\x1b[201~", "").replace("\x1b[200~", "");
    let mut out = Vec::with_capacity(inner.len() + 12);
    out.extend_from_slice(b"\x1b[200~");
    out.extend_from_slice(inner.as_bytes());
    out.extend_from_slice(b"\x1b[201~");
    out
}

impl SessionState {
    /// Answer a mutating request once everything it changed is in the journal, so an
    /// acknowledged mutation survives a crash of the daemon. If what it changed could not be
    /// written (disk full), a success becomes `persistence_failed`: never `ok` for a change
    /// that is only in memory.
    fn ack<T: Send + 'static>(
        &mut self,
        reply: RpcReplyPort<Result<T, ErrorBody>>,
        value: Result<T, ErrorBody>,
    ) {
        let journaled = std::mem::take(&mut self.journaled);
        let send = Box::new(move |durable: Result<(), ErrorBody>| {
            let value = match (value, durable) {
                (Ok(_), Err(e)) if journaled => Err(e),
                (value, _) => value,
            };
            let _ = reply.send(value);
        });
        if let Err(ractor::MessagingErr::SendErr(PersistMsg::Ack(send))) =
            self.persist.cast(PersistMsg::Ack(send))
        {
            send(Ok(()));
        }
    }

    /// Open a fresh PTY and start the recorded command in it, with a new surface id and
    /// registration secret.
    fn spawn_surface(&mut self, myself: &ActorRef<SessionMsg>) -> Result<(), ActorProcessingErr> {
        let surface_id = new_id();
        let registration_token = random_secret()?;
        let spawn = &self.spawn;
        let mut env = self.env.clone();
        env.push(("TERM".into(), "xterm-256color".into()));
        // Maxx's own variables come last so a caller cannot override them.
        env.push((
            "MAXX_CONTROL_DIR".into(),
            spawn.control_dir.display().to_string(),
        ));
        env.push(("MAXX_SESSION_ID".into(), self.view.session_id.clone()));
        env.push(("MAXX_SURFACE_ID".into(), surface_id.clone()));
        env.push(("MAXX_REGISTRATION_TOKEN".into(), registration_token.clone()));
        if let Some(bin) = &spawn.bin_dir {
            let base = self
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var("PATH").ok())
                .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
            env.push(("PATH".into(), format!("{}:{base}", bin.display())));
        }
        let me = myself.clone();
        // A fresh terminal: output, modes and grid of an earlier surface are gone.
        let generation = self
            .model
            .reset(self.view.cols, self.view.rows, self.scrollback_lines);
        let pty = Pty::spawn(
            SpawnSpec {
                command: self.view.command.clone(),
                cwd: PathBuf::from(&self.view.cwd),
                env,
                cols: self.view.cols,
                rows: self.view.rows,
            },
            self.model.clone(),
            generation,
            move |event| me.cast(SessionMsg::Pump(event)).is_ok(),
        )?;
        self.view.surface_id = surface_id;
        self.view.pid = Some(pty.pid());
        self.registration_token = registration_token;
        self.pty = Some(pty);
        Ok(())
    }

    /// The surface is gone for good (closed or archived): drop what only a surface needs —
    /// the raw-output ring, the screen model, attachments — and spare audit capacity, so a
    /// record kept for the daemon's life costs its record and audit log, not a terminal.
    /// Screen reads of such a session answer `already_ended`; a restart starts afresh.
    fn release_surface(&mut self) {
        self.pty = None;
        self.model
            .reset(self.view.cols, self.view.rows, self.scrollback_lines);
        self.attachers = Vec::new();
        self.audit.shrink_to_fit();
        crate::memory::churn(&self.spawn.stats, crate::memory::SURFACE_CHURN);
    }

    /// Nothing here needs an actor: no surface, and nobody waiting, watching or running.
    fn retirable(&self) -> bool {
        self.view.lifecycle.is_terminal()
            && self.pty.is_none()
            && self.waiters.is_empty()
            && self.watchers.is_empty()
            && self.runs.is_empty()
            && self.attachers.is_empty()
    }

    /// Hand the record to the registry as [`Dormant`] and stop. A request already routed
    /// here and not yet handled is dropped with the mailbox; its sender sees the actor
    /// gone and resolves the session again, which wakes a new actor.
    fn retire(&mut self, myself: &ActorRef<SessionMsg>) {
        let Ok(view) = serde_json::value::to_raw_value(&self.view) else {
            return;
        };
        let dormant = Box::new(Dormant {
            view,
            audit: std::mem::take(&mut self.audit),
            env: std::mem::take(&mut self.env),
            scrollback_lines: self.scrollback_lines,
            restart_times: std::mem::take(&mut self.restart_times),
        });
        match self.registry.cast(RegistryMsg::Retire {
            actor: myself.clone(),
            session_id: self.view.session_id.clone(),
            dormant,
        }) {
            Ok(()) => myself.stop(None),
            Err(ractor::MessagingErr::SendErr(RegistryMsg::Retire { dormant, .. })) => {
                // The registry is gone (daemon stopping): stay as we are.
                self.audit = dormant.audit;
                self.env = dormant.env;
                self.restart_times = dormant.restart_times;
            }
            Err(_) => {}
        }
    }

    /// `archive`: close the surface, keep the record; a second archive changes nothing.
    fn archive(&mut self, reason: Option<String>) {
        if self.view.lifecycle == Lifecycle::Archived {
            return;
        }
        self.release_surface();
        self.view.pid = None;
        self.restart_generation += 1;
        self.view.next_restart_at = None;
        self.view.lifecycle = Lifecycle::Archived;
        self.view.archive_reason = reason.clone();
        self.record(
            AuditKind::Lifecycle,
            Some("archived".into()),
            reason,
            None,
            "maxx".into(),
        );
        self.lifecycle_changed();
    }

    /// `restart`: a fresh surface and child under the same session id. Per-run declared
    /// fields (workflow state, summary, result) are cleared; status, metadata, result
    /// schema, group and parent are kept. A split comes back as a tab.
    fn restart(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        command: Option<String>,
        automatic: Option<Value>,
    ) -> Result<SessionView, ErrorBody> {
        let Some(command) = command.or_else(|| self.view.command.clone()) else {
            return Err(ErrorBody::new(
                ErrorCode::Unsupported,
                "this session has no recorded command to restart",
            )
            .with_remedy("pass --command to restart it with one"));
        };
        if !std::path::Path::new(&self.view.cwd).is_dir() {
            return Err(ErrorBody::invalid(format!(
                "the session's cwd {} no longer exists",
                self.view.cwd
            )));
        }
        // End the previous run, if any.
        self.pty = None;
        let previous = (self.view.command.clone(), self.view.surface_id.clone());
        self.view.command = Some(command);
        if let Err(e) = self.spawn_surface(myself) {
            self.view.command = previous.0;
            self.view.surface_id = previous.1;
            self.view.lifecycle = Lifecycle::Closed;
            self.view.pid = None;
            self.lifecycle_changed();
            return Err(ErrorBody::internal(format!("restart failed: {e}")));
        }
        let v = &mut self.view;
        v.lifecycle = Lifecycle::Running;
        v.restart_count += 1;
        v.restored = false;
        v.exit_code = None;
        v.exit_signal = None;
        v.archive_reason = None;
        v.terminal_title = None;
        if v.location == maxx_protocol::session::Location::Split {
            v.location = maxx_protocol::session::Location::Tab;
            v.split_target = None;
            v.split_direction = None;
        }
        v.workflow_state = None;
        v.workflow_state_at = None;
        v.workflow_state_source = None;
        v.summary = None;
        v.summary_at = None;
        v.summary_source = None;
        v.result = None;
        v.result_at = None;
        v.result_source = None;
        v.next_restart_at = None;
        v.restart_gave_up = false;
        let restart_count = v.restart_count;
        // Any pending automatic restart is superseded by this one.
        self.restart_generation += 1;
        self.policy_suppressed = false;
        let mut payload = automatic.unwrap_or_else(|| serde_json::json!({ "automatic": false }));
        payload["restart_count"] = restart_count.into();
        self.record(
            AuditKind::Lifecycle,
            Some("restarted".into()),
            None,
            Some(payload),
            "maxx".into(),
        );
        self.lifecycle_changed();
        Ok(self.view.clone())
    }

    /// What the restart policy says about the exit that just happened.
    fn policy_decision(&mut self) -> PolicyDecision {
        use maxx_protocol::session::RestartMode;
        let Some(policy) = self.view.restart_policy.clone() else {
            return PolicyDecision::None;
        };
        if self.policy_suppressed {
            return PolicyDecision::None;
        }
        let failed = self.view.exit_signal.is_some()
            || self
                .view
                .exit_code
                .is_some_and(|c| !policy.exit_codes.contains(&c));
        let fire = match policy.mode {
            RestartMode::Never => false,
            RestartMode::OnFailure => failed,
            RestartMode::Always => true,
        };
        if !fire {
            return PolicyDecision::None;
        }
        let window = Duration::from_secs(policy.window_secs);
        let now = std::time::Instant::now();
        while self
            .restart_times
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            self.restart_times.pop_front();
        }
        let recent = self.restart_times.len() as u32;
        if recent >= policy.max_restarts {
            return PolicyDecision::GaveUp(recent, policy.window_secs);
        }
        let factor = 1u64.checked_shl(recent).unwrap_or(u64::MAX);
        let delay_ms = policy
            .backoff_min_ms
            .saturating_mul(factor)
            .min(policy.backoff_max_ms);
        PolicyDecision::Restart(Duration::from_millis(delay_ms))
    }

    fn touch(&mut self) {
        self.view.updated_at = now_rfc3339();
    }

    /// Send the record to the registry and settle any waits it satisfies.
    fn publish(&mut self) {
        if self.pty.is_some() {
            self.view.last_seen_at = Some(self.view.updated_at.clone());
        }
        self.journaled = true;
        let _ = self
            .persist
            .cast(PersistMsg::Upsert(Box::new(self.view.clone())));
        let _ = self
            .registry
            .cast(RegistryMsg::Updated(Box::new(self.view.clone())));
        if self.waiters.is_empty() {
            return;
        }
        let waiters = std::mem::take(&mut self.waiters);
        for waiter in waiters {
            match self.check(&waiter.condition) {
                Some((outcome, event)) => {
                    Stats::add(&self.spawn.stats.waiters, -1);
                    let _ = waiter.reply.send(WaitAnswer {
                        outcome,
                        session: self.view.clone(),
                        event,
                        input_marks: self.model.flags().input_marks,
                    });
                }
                None => self.waiters.push(waiter),
            }
        }
    }

    /// Drop waiters whose caller has gone.
    fn prune_waiters(&mut self) {
        let before = self.waiters.len();
        self.waiters.retain(|w| !w.reply.is_closed());
        Stats::add(
            &self.spawn.stats.waiters,
            self.waiters.len() as i64 - before as i64,
        );
    }

    fn last_seq(&self) -> u64 {
        self.audit.last_seq()
    }

    /// Send a line to every watcher; a watcher that is gone or too far behind is dropped
    /// (its stream then ends with reason `dropped`).
    fn broadcast(&mut self, line: WatchLine) {
        if self.watchers.is_empty() {
            return;
        }
        let before = self.watchers.len();
        let end = matches!(line, WatchLine::End);
        self.watchers
            .retain(|w| w.lines.try_send(line.clone()).is_ok() && !end);
        Stats::add(
            &self.spawn.stats.watchers,
            self.watchers.len() as i64 - before as i64,
        );
    }

    /// A lifecycle transition happened: publish it, tell watchers, and end their streams
    /// once the run is over (the lifecycle left `running`).
    fn lifecycle_changed(&mut self) {
        self.touch();
        self.publish();
        if self.view.lifecycle.has_ended() {
            // Closing their queues ends every attachment.
            self.attachers.clear();
            self.attachers_changed();
            self.end_runs();
        }
        self.broadcast(WatchLine::Lifecycle(Box::new(self.view.clone())));
        if self.view.lifecycle.has_ended() {
            self.broadcast(WatchLine::End);
        }
    }

    /// Append an audit entry and deliver it to watchers.
    fn record(
        &mut self,
        kind: AuditKind,
        name: Option<String>,
        message: Option<String>,
        payload: Option<Value>,
        source: String,
    ) -> AuditEntry {
        let entry = AuditEntry {
            seq: self.last_seq() + 1,
            kind,
            name,
            message,
            payload,
            source,
            created_at: now_rfc3339(),
            session_id: self.view.session_id.clone(),
            surface_id: self.view.surface_id.clone(),
            pid: self.pty.as_ref().and_then(Pty::foreground_pgrp),
        };
        if let Some(encoded) = self.audit.push(&entry) {
            self.journaled = true;
            let _ = self.persist.cast(PersistMsg::Audit {
                session_id: entry.session_id.clone(),
                seq: entry.seq,
                entry: encoded,
            });
        }
        self.broadcast(WatchLine::Event(Box::new(entry.clone())));
        let source_kind = if kind == AuditKind::Lifecycle {
            SourceKind::Maxx
        } else {
            SourceKind::Agent
        };
        let _ = self.bus.cast(BusMsg::Publish(Box::new(StreamEvent {
            schema: STREAM_SCHEMA,
            cursor: 0,
            seq: Some(entry.seq),
            source_kind,
            kind: kind.as_str().to_string(),
            name: entry.name.clone(),
            source: entry.source.clone(),
            message: entry.message.clone(),
            payload: entry.payload.clone(),
            created_at: entry.created_at.clone(),
            resource_kind: "session".into(),
            session_id: entry.session_id.clone(),
            surface_id: entry.surface_id.clone(),
            group: self.view.group.clone(),
            pid: entry.pid,
        })));
        entry
    }

    /// Put a maxx-owned lifecycle event on the bus (no audit entry).
    fn mechanical(&self, name: &str, payload: Option<Value>) {
        self.mechanical_in(name, payload, self.view.group.clone());
    }

    /// [`Self::mechanical`] with an explicit group (the affected one for joins/leaves).
    fn mechanical_in(&self, name: &str, payload: Option<Value>, group: Option<String>) {
        let _ = self.bus.cast(BusMsg::Publish(Box::new(StreamEvent {
            schema: STREAM_SCHEMA,
            cursor: 0,
            seq: None,
            source_kind: SourceKind::Maxx,
            kind: "lifecycle".into(),
            name: Some(name.to_string()),
            source: "maxx".into(),
            message: None,
            payload,
            created_at: now_rfc3339(),
            resource_kind: "session".into(),
            session_id: self.view.session_id.clone(),
            surface_id: self.view.surface_id.clone(),
            group,
            pid: self.pty.as_ref().and_then(Pty::foreground_pgrp),
        })));
    }

    /// `Some(outcome)` when a wait on `condition` is settled by the current record.
    fn check(&self, condition: &WaitCondition) -> Option<(Outcome, Option<AuditEntry>)> {
        // A declared state or event can no longer be expected once the run is over.
        let ended = || {
            self.view
                .lifecycle
                .has_ended()
                .then_some((Outcome::Ended, None))
        };
        match condition {
            WaitCondition::Lifecycle(wanted) => {
                let current = self.view.lifecycle;
                let rank = |l: Lifecycle| match l {
                    Lifecycle::Running | Lifecycle::Backoff => 0,
                    Lifecycle::Exited => 1,
                    Lifecycle::Closed | Lifecycle::Archived => 2,
                };
                // A closed session can still be archived; nothing else follows a terminal one.
                let still_possible = current == Lifecycle::Closed && *wanted == Lifecycle::Archived;
                if current == *wanted {
                    Some((Outcome::Matched, None))
                } else if !still_possible
                    && (current.is_terminal() || rank(current) > rank(*wanted))
                {
                    Some((Outcome::Ended, None))
                } else {
                    None
                }
            }
            WaitCondition::State(wanted) => {
                if self.view.status.as_deref() == Some(wanted.as_str()) {
                    Some((Outcome::Matched, None))
                } else {
                    ended()
                }
            }
            // Matching is done by the grid workers (`ScreenMatched`); here only the end.
            WaitCondition::Text(_) => ended(),
            WaitCondition::Event { name, since } => {
                let since = since.unwrap_or(0);
                match self.audit.find_event(since, name) {
                    Some(e) => Some((Outcome::Matched, Some(e))),
                    None => ended(),
                }
            }
        }
    }

    fn on_pump(&mut self, myself: &ActorRef<SessionMsg>, event: PumpEvent) {
        match event {
            PumpEvent::Output(bytes, end, permit) => {
                // A person who cannot keep up is detached, never allowed to slow the child.
                // A chunk ends at or before an attachment's repaint (drawn from the grid
                // under the same lock the pump drains under) or begins after it, never
                // both: skip the ones the repaint already showed.
                self.attachers
                    .retain(|(_, upto, tx)| end <= *upto || tx.try_send(bytes.clone()).is_ok());
                drop(permit);
                self.attachers_changed();
            }
            PumpEvent::Screen(events) => {
                for event in events {
                    match event {
                        ScreenEvent::Title(title) => {
                            self.view.terminal_title = Some(title.clone());
                            self.mechanical("title", Some(serde_json::json!({ "title": title })));
                            self.touch();
                            self.publish();
                        }
                        ScreenEvent::CommandFinished(code) => self.mechanical(
                            "command.finished",
                            Some(serde_json::json!({ "exit_code": code })),
                        ),
                    }
                }
            }
            PumpEvent::OutputClosed => {}
            PumpEvent::ChildExited => {
                let Some(pty) = self.pty.as_mut() else { return };
                let Some(exit) = pty.reap() else { return };
                let payload = match exit {
                    ExitInfo::Code(code) => {
                        self.view.exit_code = Some(code);
                        serde_json::json!({ "exit_code": code })
                    }
                    ExitInfo::Signal(sig) => {
                        let p = serde_json::json!({ "exit_signal": sig });
                        self.view.exit_signal = Some(sig);
                        p
                    }
                };
                self.last_exit = Some(payload.clone());
                self.view.pid = None;
                if self.view.lifecycle == Lifecycle::Running {
                    // Decide before anyone sees `exited`: a session its policy will restart
                    // goes straight to `backoff`, and its `exited` event says so, so streams
                    // following the session do not end on it.
                    let decision = self.policy_decision();
                    let mut payload = payload;
                    if matches!(decision, PolicyDecision::Restart(_)) {
                        payload["restart_pending"] = Value::Bool(true);
                    }
                    self.mechanical("exited", Some(payload));
                    match decision {
                        PolicyDecision::Restart(delay) => {
                            self.view.lifecycle = Lifecycle::Backoff;
                            self.view.next_restart_at = Some(maxx_protocol::time::rfc3339(
                                std::time::SystemTime::now() + delay,
                            ));
                            self.restart_generation += 1;
                            let generation = self.restart_generation;
                            myself.send_after(delay, move || SessionMsg::AutoRestart(generation));
                        }
                        PolicyDecision::GaveUp(restarts, window) => {
                            self.view.lifecycle = Lifecycle::Exited;
                            self.view.restart_gave_up = true;
                            self.record(
                                AuditKind::Lifecycle,
                                Some("restart.gave_up".into()),
                                None,
                                Some(serde_json::json!({
                                    "restarts": restarts, "window_secs": window
                                })),
                                "maxx".into(),
                            );
                        }
                        PolicyDecision::None => self.view.lifecycle = Lifecycle::Exited,
                    }
                    self.lifecycle_changed();
                } else {
                    self.mechanical("exited", Some(payload));
                    self.touch();
                    self.publish();
                }
            }
        }
    }

    fn update(
        &mut self,
        status: Option<String>,
        metadata: Option<Map<String, Value>>,
        source: String,
    ) -> Result<SessionView, ErrorBody> {
        if let Some(merge) = metadata {
            let mut merged = self.view.metadata.clone();
            for (k, v) in &merge {
                merged.insert(k.clone(), v.clone());
            }
            // The merge result must obey the same bounds as any map.
            maxx_protocol::request::validate_metadata_map(&merged)?;
            self.view.metadata = merged;
            for (k, v) in merge {
                self.record(AuditKind::Metadata, Some(k), None, Some(v), source.clone());
            }
        }
        if let Some(status) = status {
            self.view.status = Some(status);
        }
        self.touch();
        self.publish();
        Ok(self.view.clone())
    }

    /// Apply a declaration: validate it against the record, change the record, append the
    /// audit entry, publish. A rejected declaration changes nothing.
    fn apply(
        &mut self,
        declaration: Declaration,
        source: String,
    ) -> Result<SessionView, ErrorBody> {
        let now = now_rfc3339();
        match declaration {
            Declaration::State { state, message } => {
                self.view.status = Some(state.clone());
                self.record(AuditKind::State, Some(state), message, None, source);
            }
            Declaration::Event {
                event,
                payload,
                message,
            } => {
                self.record(AuditKind::Event, Some(event), message, payload, source);
            }
            Declaration::SetMetadata { key, value } => {
                let mut merged = self.view.metadata.clone();
                merged.insert(key.clone(), value.clone());
                maxx_protocol::request::validate_metadata_map(&merged)?;
                self.view.metadata = merged;
                self.record(AuditKind::Metadata, Some(key), None, Some(value), source);
            }
            Declaration::RemoveMetadata { keys } => {
                for key in keys {
                    if self.view.metadata.shift_remove(&key).is_some() {
                        self.record(
                            AuditKind::Metadata,
                            Some(key),
                            Some("removed".into()),
                            None,
                            source.clone(),
                        );
                    }
                }
            }
            Declaration::ClearMetadata => {
                self.view.metadata.clear();
                self.record(
                    AuditKind::Metadata,
                    Some("*".into()),
                    Some("cleared".into()),
                    None,
                    source,
                );
            }
            Declaration::WorkflowState { state, message } => {
                self.view.workflow_state = Some(state);
                self.view.workflow_state_at = Some(now);
                self.view.workflow_state_source = Some(source.clone());
                self.record(
                    AuditKind::WorkflowState,
                    Some(state.as_str().into()),
                    message,
                    None,
                    source,
                );
            }
            Declaration::Summary { summary } => {
                self.view.summary = Some(summary.clone());
                self.view.summary_at = Some(now);
                self.view.summary_source = Some(source.clone());
                self.record(AuditKind::Summary, None, Some(summary), None, source);
            }
            Declaration::SetResult { result } => {
                if let Some(schema) = &self.view.result_schema {
                    let parsed: Value = serde_json::from_str(&result).map_err(|e| {
                        ErrorBody::invalid(format!(
                            "the session declares a result schema, and this result is not JSON: {e}"
                        ))
                    })?;
                    maxx_protocol::schema::check(schema, &parsed).map_err(|e| {
                        ErrorBody::invalid(format!(
                            "result does not satisfy the declared schema: {e}"
                        ))
                    })?;
                }
                self.view.result = Some(result.clone());
                self.view.result_at = Some(now);
                self.view.result_source = Some(source.clone());
                self.record(
                    AuditKind::Result,
                    Some("result.set".into()),
                    None,
                    Some(Value::String(result)),
                    source,
                );
            }
            Declaration::ClearResult => {
                self.view.result = None;
                self.view.result_at = None;
                self.view.result_source = None;
                self.record(
                    AuditKind::Result,
                    Some("result.cleared".into()),
                    None,
                    None,
                    source,
                );
            }
            Declaration::SetResultSchema { schema } => {
                self.view.result_schema = Some(schema.clone());
                self.record(
                    AuditKind::ResultSchema,
                    Some("result_schema.set".into()),
                    None,
                    Some(schema),
                    source,
                );
            }
            Declaration::ClearResultSchema => {
                self.view.result_schema = None;
                self.record(
                    AuditKind::ResultSchema,
                    Some("result_schema.cleared".into()),
                    None,
                    None,
                    source,
                );
            }
            Declaration::AgentType { agent_type } => {
                self.view.agent_type = Some(agent_type.clone());
                self.view.agent_type_at = Some(now);
                self.view.agent_type_source = Some(source.clone());
                self.record(AuditKind::AgentType, Some(agent_type), None, None, source);
            }
        }
        self.touch();
        self.publish();
        Ok(self.view.clone())
    }

    /// Ctrl-C through the tty (the line discipline turns it into SIGINT), or a signal to
    /// the foreground process group — never synthesised input for a signal.
    fn interrupt(&self, signal: Option<InterruptSignal>) -> Result<SessionView, ErrorBody> {
        let pty = self.require_running("interrupt")?;
        match signal {
            None => {
                let mut written = pty.write(vec![0x03]);
                match written.try_recv() {
                    Ok(Err(e)) => input_result(Ok(Err(e)), self.view.clone()),
                    _ => Ok(self.view.clone()),
                }
            }
            Some(sig) => {
                let signal = match sig {
                    InterruptSignal::Int => Signal::SIGINT,
                    InterruptSignal::Term => Signal::SIGTERM,
                    InterruptSignal::Kill => Signal::SIGKILL,
                    InterruptSignal::Hup => Signal::SIGHUP,
                    InterruptSignal::Quit => Signal::SIGQUIT,
                };
                pty.signal_foreground(signal)
                    .map(|_| self.view.clone())
                    .map_err(|e| ErrorBody::internal(format!("signal failed: {e}")))
            }
        }
    }

    fn require_running(&self, what: &str) -> Result<&Pty, ErrorBody> {
        match (&self.pty, self.view.lifecycle) {
            (Some(pty), Lifecycle::Running) => Ok(pty),
            (_, Lifecycle::Exited) => Err(ErrorBody::ended(
                &self.view.session_id,
                &format!("its child exited, so there is nothing to {what}"),
            )),
            _ => Err(ErrorBody::ended(&self.view.session_id, "it is closed")),
        }
    }

    fn action(
        &mut self,
        params: ActionParams,
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    ) {
        let result = match params.action {
            ActionKind::Focus => {
                if self.view.lifecycle.has_surface() {
                    if !self.view.focused {
                        self.view.focused = true;
                        self.mechanical("focus", None);
                        self.publish();
                    }
                    let _ = self
                        .registry
                        .cast(RegistryMsg::Focus(self.view.session_id.clone()));
                    Ok(self.view.clone())
                } else {
                    Err(ErrorBody::ended(&self.view.session_id, "it is closed"))
                }
            }
            ActionKind::Input | ActionKind::Submit => {
                let pty = match self.require_running("type into") {
                    Ok(pty) => pty,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                let text = params.input.unwrap_or_default();
                let mut bytes = if text.is_empty() {
                    Vec::new()
                } else {
                    paste_bytes(&text, self.model.flags().bracketed_paste)
                };
                if params.action == ActionKind::Submit {
                    bytes.push(b'\r');
                }
                let written = pty.write(bytes);
                let view = self.view.clone();
                // Answer once the bytes are in the kernel's tty queue, without holding
                // up this actor while a child that does not read its input catches up.
                tokio::spawn(async move {
                    let _ = reply.send(input_result(written.await, view));
                });
                return;
            }
            ActionKind::Interrupt => {
                // A person stopping a job is not a crash: this run's exit does not restart.
                if self.view.lifecycle == Lifecycle::Running {
                    self.policy_suppressed = true;
                }
                self.interrupt(params.signal)
            }
            ActionKind::Cancel | ActionKind::Close => {
                if self.view.lifecycle.has_surface() || self.view.lifecycle == Lifecycle::Backoff {
                    // A pending automatic restart must not fire after a close.
                    self.restart_generation += 1;
                    self.view.next_restart_at = None;
                    // Dropping the PTY hangs up the terminal, signals the child's group and
                    // reaps it (killing it after a grace period if it ignores the hangup).
                    self.release_surface();
                    self.view.lifecycle = Lifecycle::Closed;
                    self.view.pid = None;
                    self.mechanical("closed", None);
                    self.lifecycle_changed();
                }
                Ok(self.view.clone())
            }
        };
        self.ack(reply, result);
    }
}

/// Screen readback, waits on text, `run`, keys and resize.
impl SessionState {
    /// The grid, materialised on first use and brought up to date.
    fn grid(&self) -> GridGuard<'_> {
        self.model.grid()
    }

    /// The attachments changed: output is forwarded to the actor only while there are some.
    fn attachers_changed(&mut self) {
        if self.attachers.is_empty() {
            self.model.detach_all();
        }
    }

    /// Logical lines of the viewport plus the `back` newest history rows.
    fn recent_lines(&self, back: Option<usize>) -> Vec<String> {
        logical(&recent_rows(&self.grid(), back.unwrap_or(0)))
    }

    /// Whether a text wait matches a logical line of the viewport (and `back` history rows);
    /// `output_only` leaves out the lines holding OSC 133 input cells.
    fn screen_matches(&self, text: &TextWait, back: Option<usize>) -> bool {
        let rows = recent_rows(&self.grid(), back.unwrap_or(0));
        let lines = if text.output_only {
            output_lines(&rows)
        } else {
            logical(&rows)
        };
        lines.iter().any(|l| text.pattern.matches(l))
    }

    /// Give the grid workers the patterns of the pending text waits and runs, if they
    /// changed since the last call.
    fn sync_watches(&mut self) {
        let text_waits = self.waiters.iter().filter_map(|w| match w.condition {
            WaitCondition::Text(_) => Some(w.id),
            _ => None,
        });
        let current = text_waits.chain(self.runs.iter().map(|r| r.id));
        if current.eq(self.watch_ids.iter().copied()) {
            return;
        }
        let mut watches = Vec::new();
        for w in &self.waiters {
            if let WaitCondition::Text(p) = &w.condition {
                watches.push((w.id, Watch::Text(p.clone())));
            }
        }
        for r in &self.runs {
            watches.push((r.id, Watch::Run(r.end.clone())));
        }
        self.watch_ids = watches.iter().map(|(id, _)| *id).collect();
        self.model.set_watches(watches);
    }

    /// A grid worker saw these waits' or runs' patterns: answer them (a run cuts its
    /// output from the screen now).
    fn screen_matched(&mut self, ids: Vec<u64>) {
        for id in ids {
            if let Some(pos) = self.waiters.iter().position(|w| w.id == id) {
                let w = self.waiters.swap_remove(pos);
                Stats::add(&self.spawn.stats.waiters, -1);
                let _ = w.reply.send(WaitAnswer {
                    outcome: Outcome::Matched,
                    session: self.view.clone(),
                    event: None,
                    input_marks: self.model.flags().input_marks,
                });
            } else if let Some(pos) = self.runs.iter().position(|r| r.id == id) {
                let run = self.runs.swap_remove(pos);
                let result = self.finish_run(&run);
                let _ = run.reply.send(Ok(result));
            }
        }
    }

    fn start_run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        command: String,
        timeout: Option<Duration>,
        started: std::time::Instant,
        reply: RpcReplyPort<Result<RunResult, ErrorBody>>,
    ) {
        let remaining = timeout.map(|t| t.checked_sub(started.elapsed()));
        if let Some(None) = remaining {
            // Input is never started once the budget is spent.
            let _ = reply.send(Err(ErrorBody::new(
                ErrorCode::Timeout,
                "run's budget was spent before its input could start",
            )
            .with_remedy("raise --timeout (0 means no limit)")));
            return;
        }
        let pty = match self.require_running("run a command in") {
            Ok(pty) => pty,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        // The wrapper is shell syntax: typed into anything but the session's own program
        // it would edit a file, answer a prompt or feed a REPL. The kernel says who holds
        // the terminal.
        if !pty.foreground_is_own() {
            let child = pty.pid();
            let holder = match pty.foreground_pgrp() {
                Some(pgrp) => format!(
                    "process group {pgrp} ({:?})",
                    proc_cmdline(pgrp).unwrap_or_default()
                ),
                None => "no process group".to_string(),
            };
            let _ = reply.send(Err(ErrorBody::new(
                ErrorCode::ForegroundBusy,
                format!(
                    "run needs the session's own program (pid {child}, a POSIX shell at its \
                     prompt) in the foreground, but {holder} holds the terminal; nothing was typed"
                ),
            )
            .with_remedy(
                "wait for the foreground program to finish (e.g. `maxx sessions wait --until`), \
                 or drive it with `maxx sessions send-keys`",
            )));
            return;
        }
        let mut nonce = [0u8; 6];
        let _ = getrandom::fill(&mut nonce);
        let tag: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        // The markers are printed from two pieces, so the echoed command line (which has
        // them with a space in between) can never match them.
        let line = format!(
            "printf '%s_%s\\n' __MAXX_BEGIN {tag}; ({command}); printf '%s_%s:%d\\n' __MAXX_END {tag} \"$?\"\r"
        );
        let end = regex::Regex::new(&format!("__MAXX_END_{tag}:(-?[0-9]+)"))
            .expect("static pattern compiles");
        let mut written = pty.write(line.into_bytes());
        if let Ok(Err(e)) = written.try_recv() {
            // Refused at once (the program is not reading its input): say so now rather
            // than wait out the budget for a command that was never typed.
            let refused = input_result(Ok(Err(e)), self.view.clone())
                .err()
                .unwrap_or_else(|| ErrorBody::internal("input refused"));
            let _ = reply.send(Err(refused));
            return;
        }
        // Track the screen from now on.
        let _ = self.grid();
        // A run whose caller left (say one with no limit) stops being watched.
        self.runs.retain(|r| !r.reply.is_closed());
        self.next_id += 1;
        let id = self.next_id;
        self.runs.push(RunWaiter {
            id,
            command,
            begin: format!("__MAXX_BEGIN_{tag}"),
            end,
            started,
            reply,
        });
        if let Some(Some(remaining)) = remaining {
            myself.send_after(remaining, move || SessionMsg::RunExpired(id));
        }
    }

    /// The program ended: a pending `run` answers now (with its result if its end marker
    /// is on the screen) instead of waiting for a marker that cannot come — a run with no
    /// limit would wait forever.
    fn end_runs(&mut self) {
        for run in std::mem::take(&mut self.runs) {
            let shown = self
                .recent_lines(Some(usize::MAX))
                .iter()
                .any(|l| run.end.is_match(l));
            let answer = if shown {
                Ok(self.finish_run(&run))
            } else {
                Err(ErrorBody::ended(
                    &self.view.session_id,
                    "its program ended before the run's end marker appeared",
                ))
            };
            let _ = run.reply.send(answer);
        }
    }

    /// Cut the output between a run's markers out of the retained screen.
    fn finish_run(&self, run: &RunWaiter) -> RunResult {
        let lines = self.recent_lines(Some(usize::MAX));
        let end_idx = lines.iter().rposition(|l| run.end.is_match(l));
        let (exit_code, end_idx, end_prefix) = match end_idx {
            Some(i) => {
                let caps = run.end.captures(&lines[i]);
                let code = caps
                    .as_ref()
                    .and_then(|c| c.get(1))
                    .and_then(|m| m.as_str().parse().ok())
                    .unwrap_or(-1);
                let prefix = caps
                    .and_then(|c| c.get(0))
                    .map(|m| lines[i][..m.start()].to_string())
                    .unwrap_or_default();
                (code, i, prefix)
            }
            None => (-1, lines.len(), String::new()),
        };
        // The printed marker can only come from printf (the echoed command line has a space
        // where it has `_`), but a prompt printed late may share its line.
        let begin_idx = lines[..end_idx]
            .iter()
            .rposition(|l| l.contains(&run.begin));
        let mut output: Vec<&str> = match begin_idx {
            Some(b) => lines[b + 1..end_idx].iter().map(String::as_str).collect(),
            None => lines[..end_idx].iter().map(String::as_str).collect(),
        };
        if !end_prefix.is_empty() {
            output.push(&end_prefix);
        }
        let mut text = output.join("\n");
        if text.len() > RUN_OUTPUT_MAX_BYTES {
            let cut = text.len() - RUN_OUTPUT_MAX_BYTES;
            let cut = (cut..text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(cut);
            text.drain(..cut);
        }
        RunResult {
            command: run.command.clone(),
            exit_code,
            output: text,
            duration_ms: run.started.elapsed().as_millis() as u64,
            truncated: begin_idx.is_none(),
        }
    }

    /// Write input bytes; answer once they are in the tty queue.
    fn write_input(
        &self,
        bytes: Vec<u8>,
        what: &str,
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    ) {
        let pty = match self.require_running(what) {
            Ok(pty) => pty,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let written = pty.write(bytes);
        let view = self.view.clone();
        tokio::spawn(async move {
            let _ = reply.send(input_result(written.await, view));
        });
    }

    fn resize(&mut self, size: Size) -> Result<ResizeResult, ErrorBody> {
        let Some(pty) = &self.pty else {
            return Err(ErrorBody::ended(&self.view.session_id, "it is closed"));
        };
        let applied = pty
            .resize(size.cols, size.rows)
            .map_err(|e| ErrorBody::internal(format!("resize failed: {e}")))?;
        self.view.cols = applied.cols;
        self.view.rows = applied.rows;
        self.model.resize(applied.cols, applied.rows);
        self.touch();
        self.publish();
        Ok(ResizeResult {
            schema_version: SCREEN_SCHEMA,
            session_id: self.view.session_id.clone(),
            requested: size,
            applied,
            held: applied == size,
        })
    }

    fn read(&mut self, p: &ReadParams) -> ReadAnswer {
        match p.kind {
            ReadKind::Snapshot => ReadAnswer::Snapshot(Box::new(self.snapshot(p))),
            ReadKind::Dump => {
                let grid = self.grid();
                let from = match p.scrollback {
                    ScrollbackWindow::None => 0,
                    ScrollbackWindow::All => grid.history() as i32,
                    ScrollbackWindow::Last(n) => n.min(grid.history()) as i32,
                };
                let mut rows: Vec<String> = (-from..grid.rows() as i32)
                    .map(|l| grid.row(l).text)
                    .collect();
                while rows.last().is_some_and(|r| r.is_empty()) {
                    rows.pop();
                }
                ReadAnswer::Dump(rows.join("\n"))
            }
            ReadKind::Inspect => {
                let flags = self.model.flags();
                let foreground =
                    self.pty
                        .as_ref()
                        .and_then(Pty::foreground_pgrp)
                        .map(|pid| Foreground {
                            pid,
                            command: proc_cmdline(pid),
                        });
                let backlog_bytes = self.model.backlog() as u64;
                let exited = self.view.exit_code.is_some() || self.view.exit_signal.is_some();
                let (session_id, title) = (
                    self.view.session_id.clone(),
                    self.view.terminal_title.clone(),
                );
                let grid = self.grid();
                ReadAnswer::Inspect(Box::new(InspectDoc {
                    schema_version: SCREEN_SCHEMA,
                    session_id,
                    grid: Size {
                        cols: grid.cols(),
                        rows: grid.rows(),
                    },
                    scrollback: ScrollbackInfo {
                        total: (grid.history() + grid.rows() as usize) as u32,
                        offset: 0,
                        len: grid.rows() as u32,
                    },
                    alt_screen: grid.alt_screen(),
                    bracketed_paste: flags.bracketed_paste,
                    app_cursor: flags.app_cursor,
                    foreground,
                    exited,
                    title,
                    backlog_bytes,
                }))
            }
        }
    }

    fn snapshot(&mut self, p: &ReadParams) -> ScreenState {
        let session_id = self.view.session_id.clone();
        let title = self.view.terminal_title.clone();
        let scrollback_cap = self.scrollback_lines;
        let grid = self.grid();
        let rows = grid.rows() as i32;
        let history = grid.history();
        let mut window = p.scrollback;
        if let (ScrollbackWindow::None, Some(tail)) = (window, p.tail) {
            // The viewport is a floor: --tail N adds history rows to make N.
            if tail > rows as usize {
                window = ScrollbackWindow::Last(tail - rows as usize);
            }
        }
        // `All` asks for every row ever scrolled off: more than the history holds once
        // the scrollback limit has dropped some.
        let (want, asked) = match window {
            ScrollbackWindow::None => (0, 0),
            ScrollbackWindow::All => (history, history + 1),
            ScrollbackWindow::Last(n) => (n.min(history), n),
        };
        // Every byte was parsed: history is short of what was asked only when the
        // scrollback limit dropped rows (a full history is taken to have dropped some),
        // or when there never were that many.
        let lost_history = history >= scrollback_cap;
        let truncated = asked > history && lost_history;
        let history_rows: Vec<Row> = (-(want as i32)..0).map(|l| grid.row(l)).collect();
        let view_rows: Vec<Row> = (0..rows).map(|l| grid.row(l)).collect();
        let cells = p.cells.then(|| {
            let mut out = Vec::new();
            for line in 0..rows {
                grid.styled_cells(line, line as u32, &mut out);
            }
            out
        });
        let scrollback_cells = p.cells.then(|| {
            let mut out = Vec::new();
            for (i, line) in (-(want as i32)..0).enumerate() {
                grid.styled_cells(line, i as u32, &mut out);
            }
            out
        });
        let (x, y, visible) = grid.cursor();
        let (lines, scrollback, soft_wrap) = if p.unwrap {
            (logical(&view_rows), logical(&history_rows), None)
        } else {
            let wraps = |rows: &[Row]| -> Vec<u32> {
                rows.iter()
                    .enumerate()
                    .filter(|(_, r)| r.wrapped)
                    .map(|(i, _)| i as u32)
                    .collect()
            };
            let sw = SoftWrap {
                lines: wraps(&view_rows),
                scrollback: wraps(&history_rows),
            };
            (
                view_rows.into_iter().map(|r| r.text).collect(),
                history_rows.into_iter().map(|r| r.text).collect(),
                Some(sw),
            )
        };
        ScreenState {
            schema_version: SCREEN_SCHEMA,
            session_id,
            cols: grid.cols(),
            rows: grid.rows(),
            cursor: Cursor { x, y, visible },
            lines,
            scrollback,
            cells,
            scrollback_cells,
            soft_wrap,
            truncated,
            truncated_reason: truncated.then(|| "history_limit".to_string()),
            title,
        }
    }
}

/// The answer to an input write: the record, or why the bytes were not delivered.
fn input_result(
    written: Result<std::io::Result<()>, tokio::sync::oneshot::error::RecvError>,
    view: SessionView,
) -> Result<SessionView, ErrorBody> {
    match written {
        Ok(Ok(())) => Ok(view),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Err(ErrorBody::new(
            ErrorCode::Unsupported,
            format!(
                "session {}: the program is not reading its input ({} bytes are already queued)",
                view.session_id,
                crate::pty::INPUT_QUEUE_MAX
            ),
        )
        .with_remedy("nothing was written; retry once the program reads, or interrupt it")),
        _ => Err(ErrorBody::ended(&view.session_id, "its terminal closed")),
    }
}

/// `/proc/<pid>/cmdline`, space-joined, bounded (a kernel fact, not an inference).
fn proc_cmdline(pid: i32) -> Option<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .ok()?
        .take(4096)
        .read_to_end(&mut buf)
        .ok()?;
    let text: String = String::from_utf8_lossy(&buf)
        .split('\0')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paste_encoding() {
        assert_eq!(paste_bytes("a\nb", false), b"a\rb");
        assert_eq!(paste_bytes("a\r\nb", true), b"\x1b[200~a\rb\x1b[201~");
        assert_eq!(
            paste_bytes("x\x1b[201~rm -rf /\n", true),
            b"\x1b[200~xrm -rf /\r\x1b[201~"
        );
    }
}
