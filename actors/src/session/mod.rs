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
//!
//! # Layout
//!
//! - `mod.rs`: the actor, [`SessionMsg`] and its dispatch, [`SessionState`].
//! - `record.rs`: declarations and updates, audit entries, publishing, acknowledgements.
//! - `lifecycle.rs`: start, surface spawn and release, exit, retire, archive, restart.
//! - `restart.rs`: the restart policy's decision about an exit, and its backoff.
//! - `waits.rs`: waits and `watch` subscribers.
//! - `terminal.rs`: PTY output and input, actions, `run`, resize, attach, screen reads.

mod lifecycle;
mod record;
mod request;
mod restart;
mod terminal;
mod waits;

pub use request::{Reply, SessionReply};
pub use terminal::paste_bytes;
use waits::{Waiter, Watcher};

use crate::audit_log::AuditLog;
use crate::bus::BusMsg;
use crate::control_dir::constant_time_eq;
use crate::persistence::{PersistMsg, Record};
use crate::pty::{Pty, PumpEvent};
use crate::registry::RegistryMsg;
use crate::screen_model::ScreenModel;
use crate::stats::Stats;
use maxx_protocol::audit::AuditEntry;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::request::{CreateParams, WaitCondition};
use maxx_protocol::screen::RunResult;
use maxx_protocol::session::{Lifecycle, Outcome, SessionView};
use ractor::{Actor, ActorProcessingErr, ActorRef, DerivedActorRef, RpcReplyPort};
use serde_json::Value;
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
    /// The keeper this daemon runs under (`maxx daemon`), which is handed every new
    /// session's master; `None` for a daemon run without one (tests in this crate).
    pub keeper: Option<crate::keeper_link::Keeper>,
}

/// A request to start a session actor. The session supervisor serves it (it is the only
/// place a session actor is spawned); it is defined here, beside the actor it starts, so a
/// sender holds a `DerivedActorRef<StartSession>` and names neither the supervisor nor its
/// other messages: the registry (waking a dormant record) and the connection (`create`)
/// depend on the session module only, and no import cycle runs through the supervisor.
pub struct StartSession {
    /// The session's id.
    pub session_id: String,
    /// New, restored, woken or recovered.
    pub start: SessionStart,
    /// The actor once its `pre_start` is done (for a new session: its child runs and it
    /// has registered), or why it could not start (`pty_exhausted` when the system had no
    /// PTY to give, `internal` otherwise).
    pub reply: RpcReplyPort<Result<ActorRef<SessionMsg>, ErrorBody>>,
}

/// A start asked of the supervisor; [`Started::wait`] for its answer.
pub struct Started(
    Option<ractor::concurrency::OneshotReceiver<Result<ActorRef<SessionMsg>, ErrorBody>>>,
);

fn start_failed(why: &str) -> ErrorBody {
    ErrorBody::internal(format!("could not start the session: {why}"))
}

impl StartSession {
    /// Ask `starter` to start `session_id`'s actor and wait at most `timeout` for it.
    pub async fn ask(
        starter: &DerivedActorRef<StartSession>,
        session_id: String,
        start: SessionStart,
        timeout: Duration,
    ) -> Result<ActorRef<SessionMsg>, ErrorBody> {
        StartSession::send(starter, session_id, start)
            .wait(timeout)
            .await
    }

    /// Ask `starter` to start `session_id`'s actor, without waiting (a create waits for
    /// its record instead, and for this answer only if the record never comes).
    pub fn send(
        starter: &DerivedActorRef<StartSession>,
        session_id: String,
        start: SessionStart,
    ) -> Started {
        let (tx, rx) = ractor::concurrency::oneshot();
        let request = StartSession {
            session_id,
            start,
            reply: tx.into(),
        };
        Started(starter.send_message(request).is_ok().then_some(rx))
    }
}

impl Started {
    /// The started actor, or why it did not start; at most `timeout`.
    pub async fn wait(self, timeout: Duration) -> Result<ActorRef<SessionMsg>, ErrorBody> {
        let Some(rx) = self.0 else {
            return Err(start_failed("the session supervisor is not running"));
        };
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(started)) => started,
            Ok(Err(_)) => Err(start_failed("the session supervisor dropped the request")),
            Err(_) => Err(start_failed(
                "the session supervisor did not answer in time",
            )),
        }
    }
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
        /// Where the new record goes once the journal holds it (`sessions.create`'s
        /// answer), sent from the actor's start: no request to the new actor after it.
        created: Option<RpcReplyPort<Result<SessionView, ErrorBody>>>,
    },
    /// A record restored from `registry.json`: detached, no surface until restarted.
    Restored(Box<Record>),
    /// The durable copy of a session whose actor failed this run: detached the same way.
    Recovered(Box<Record>),
    /// A restored record whose own program outlived the previous daemon: the keeper handed
    /// over its master and [`crate::keeper_link::proof`] accepted it. It comes back
    /// `running` on that program.
    Readopted(Box<Record>, Box<crate::keeper_link::Survivor>),
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

/// An attachment's start: its id, the record, bytes that repaint the screen, and their
/// charge against the budget for screen reads in flight (dropped once they are written).
pub type Attached = (u64, SessionView, Vec<u8>, crate::stats::ReadCharge);

/// A screen read's answer (`sessions.snapshot`, `dump`, `inspect`): the JSON of its
/// `result`, encoded by the session's actor straight from the grid and at most
/// `SCREEN_ANSWER_MAX_BYTES`, with its share of the daemon's budget for answers in flight,
/// held until the connection has written it.
#[derive(Debug)]
pub struct ReadAnswer {
    /// The `result` as JSON.
    pub json: Vec<u8>,
    /// Its charge against `SCREEN_READ_TOTAL_MAX_BYTES`; given back when dropped.
    pub charge: crate::stats::ReadCharge,
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
    /// A request to this session, one of the methods served by its actor
    /// ([`maxx_protocol::request::Serve::Session`]); `request.rs` has their handlers.
    Request {
        /// The decoded call.
        call: maxx_protocol::request::Call,
        /// The caller's policy source, recorded on what the call changes.
        caller: String,
        /// Answer.
        reply: Reply,
    },
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
    /// `sessions.watch`: subscribe; the reply is the snapshot, then lines flow on `lines`.
    Watch {
        /// Where lines go; bounded, a watcher that falls behind is dropped.
        lines: mpsc::Sender<WatchLine>,
        /// Answer: subscription id and snapshot.
        reply: RpcReplyPort<(u64, SessionView)>,
    },
    /// A watcher ended (timeout or disconnect).
    Unwatch(u64),
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

/// Mutable state of one session.
pub struct SessionState {
    // Field order is drop order: the PTY (and its child) goes first.
    /// Live PTY; `None` once the surface is closed.
    pty: Option<Pty>,
    /// The record, authoritative.
    view: SessionView,
    /// Recent raw output and, once someone read it, the full screen model (parsed off the
    /// drain path by the grid workers, see `screen_model/`).
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
    /// A caller interrupted this run: its exit is not a crash, the restart policy does not
    /// fire.
    restart_suppressed: bool,
    /// The last exit status, for the payload of a `restarted` event it triggers.
    last_exit: Option<crate::pty::ExitInfo>,
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
    /// A surface was spawned and its master queued for the keeper: resolves once that
    /// packet is with the kernel. The next acknowledgement waits for it too, so an `ok` for
    /// a create or a restart means the session survives a kill -9 of the daemon from then on.
    keeper_sent: Option<tokio::sync::oneshot::Receiver<()>>,
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
        SessionState::start(myself, args)
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
                    let mut trigger = state
                        .last_exit
                        .as_ref()
                        .map_or(Value::Null, lifecycle::exit_payload);
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
                // The repaint is a screen read: it holds its share of the budget for read
                // answers in flight until the connection has written it.
                let charge = match crate::stats::ReadCharge::take(
                    &state.spawn.stats,
                    repaint.len(),
                    "sessions.attach",
                ) {
                    Ok(charge) => charge,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        state.attachers_changed();
                        return Ok(());
                    }
                };
                if reply
                    .send(Ok((id, state.view.clone(), repaint, charge)))
                    .is_ok()
                {
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
            SessionMsg::Request {
                call,
                caller,
                reply,
            } => state.request(&myself, call, caller, reply),
            SessionMsg::Watch { lines, reply } => {
                state.next_id += 1;
                let id = state.next_id;
                let ended = state.view.lifecycle.has_ended();
                // Counted before the answer goes: a caller holding its snapshot finds its
                // watch in `daemon.stats` (counted after, a preempted actor was seen to let
                // the caller look first).
                let counted = if ended { 0 } else { 1 };
                Stats::add(&state.spawn.stats.watchers, counted);
                if reply.send((id, state.view.clone())).is_err() {
                    Stats::add(&state.spawn.stats.watchers, -counted);
                } else if ended {
                    let _ = lines.try_send(WatchLine::End);
                } else {
                    state.watchers.push(Watcher { id, lines });
                }
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
            SessionMsg::Unwatch(id) => {
                let before = state.watchers.len();
                state.watchers.retain(|w| w.id != id);
                Stats::add(
                    &state.spawn.stats.watchers,
                    state.watchers.len() as i64 - before as i64,
                );
            }
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
