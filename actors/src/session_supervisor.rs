//! `SessionSupervisor`: the parent of every `SessionActor`, the only place one is spawned,
//! and its failure policy.
//!
//! Session actors start through [`StartSession`] (from `create`, a wake of a dormant
//! record, and the records restored at start; senders hold a `DerivedActorRef<StartSession>`
//! and so never import this module), each linked to the supervisor, which
//! keeps a map from actor id to session id: a supervision event names its session by that
//! map, never by parsing an actor name (session actors are unnamed).
//!
//! A session actor that panics or returns an error takes only itself down: its `Drop` hangs
//! up and reaps its child, and no other session notices. The supervisor then:
//! 1. tells the registry (the record is marked `closed`, routing to the dead actor stops);
//! 2. puts a maxx-owned `failed` event on the bus with the reason;
//! 3. starts a replacement actor from the durable copy of the record (the persistence
//!    actor holds every acknowledged change and the audit log), detached like a record
//!    restored at start: `closed`, no pid, readable, declarable, archivable and restartable.
//!
//! It never restarts the *process* on its own: a caller (or the session's restart policy
//! after a later exit) decides that.
//!
//! On daemon stop, [`SessionSupervisorMsg::StopAll`] stops every session actor and waits
//! for each; since it is handled in the same mailbox as `Start`, no session actor can be
//! spawned between the list being taken and the stop, nor after it (later starts are
//! refused), so every session's `Pty` is dropped by it.

use crate::bus::BusMsg;
use crate::persistence::PersistMsg;
use crate::registry::RegistryMsg;
use crate::session::{
    SessionActor, SessionArgs, SessionMsg, SessionStart, SpawnContext, StartSession,
};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::session::Lifecycle;
use maxx_protocol::stream::StreamEvent;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The actor.
pub struct SessionSupervisor;

/// Messages.
pub enum SessionSupervisorMsg {
    /// Spawn a session actor linked to the supervisor; answers with it once its
    /// `pre_start` is done.
    Start(StartSession),
    /// The daemon is stopping: stop every session actor, wait for each to be gone (its
    /// state dropped, so its `Pty` starts ending its process group), and refuse any later
    /// `Start`.
    StopAll(RpcReplyPort<StopAllReport>),
    /// `StopAll`'s answer, sent by the supervisor to itself so that it is served after
    /// the stopped actors' supervision events (which carry their states).
    StoppedAll {
        /// Actors that stopped within the grace.
        stopped: usize,
        /// Actors asked to stop.
        of: usize,
        /// Answer.
        reply: RpcReplyPort<StopAllReport>,
    },
}

impl From<StartSession> for SessionSupervisorMsg {
    fn from(start: StartSession) -> Self {
        SessionSupervisorMsg::Start(start)
    }
}

/// Lets a `DerivedActorRef<StartSession>` hand back a request the mailbox refused.
impl TryFrom<SessionSupervisorMsg> for StartSession {
    type Error = ();
    fn try_from(msg: SessionSupervisorMsg) -> Result<Self, ()> {
        match msg {
            SessionSupervisorMsg::Start(start) => Ok(start),
            _ => Err(()),
        }
    }
}

/// How long `StopAll` waits for the session actors to stop.
pub const STOP_ALL_GRACE: Duration = Duration::from_secs(10);

/// What `StopAll` did.
#[derive(Debug, Clone, Copy)]
pub struct StopAllReport {
    /// Session actors that stopped within [`STOP_ALL_GRACE`].
    pub stopped: usize,
    /// Session actors there were.
    pub of: usize,
    /// Session states still alive afterwards (`Stats::sessions`): 0 unless an actor did
    /// not stop in time, so every session's `Pty` was dropped.
    pub live_states: i64,
}

/// What the supervisor needs to start and recover sessions.
pub struct SupervisorArgs {
    /// The session table.
    pub registry: ActorRef<RegistryMsg>,
    /// The durable copy of every record.
    pub persist: ActorRef<PersistMsg>,
    /// The event bus.
    pub bus: ActorRef<BusMsg>,
    /// Facts for the sessions' children.
    pub spawn: Arc<SpawnContext>,
}

/// The supervisor's state.
pub struct SupervisorState {
    args: SupervisorArgs,
    /// Every live session actor it spawned, by actor id: how a supervision event is
    /// tied to its session.
    sessions: HashMap<ActorId, (String, ActorRef<SessionMsg>)>,
    /// `StopAll` was handled: no session actor starts any more.
    stopping: bool,
}

impl SupervisorState {
    /// Spawn a session actor linked to `supervisor` and remember whose it is.
    async fn start(
        &mut self,
        supervisor: &ActorRef<SessionSupervisorMsg>,
        session_id: String,
        start: SessionStart,
    ) -> Result<ActorRef<SessionMsg>, ErrorBody> {
        if self.stopping {
            return Err(ErrorBody::internal(
                "could not start the session: the daemon is stopping",
            ));
        }
        // A new session's program may ask the daemon about itself before its actor has
        // registered: the registry holds such requests until it does (or the start fails).
        let fresh = matches!(start, SessionStart::New { .. });
        if fresh {
            let _ = self
                .args
                .registry
                .cast(RegistryMsg::Creating(session_id.clone()));
        }
        let args = SessionArgs {
            session_id: session_id.clone(),
            start,
            registry: self.args.registry.clone(),
            spawn: self.args.spawn.clone(),
            bus: self.args.bus.clone(),
            persist: self.args.persist.clone(),
        };
        let spawned = Actor::spawn_linked(None, SessionActor, args, supervisor.get_cell()).await;
        if spawned.is_err() && fresh {
            let _ = self
                .args
                .registry
                .cast(RegistryMsg::CreateFailed(session_id.clone()));
        }
        let (actor, _) = spawned.map_err(|e| match crate::pty::pty_exhausted(&e) {
            Some(p) => ErrorBody::new(ErrorCode::PtyExhausted, p.to_string()),
            None => ErrorBody::internal(format!("could not start the session: {e}")),
        })?;
        self.sessions
            .insert(actor.get_id(), (session_id, actor.clone()));
        Ok(actor)
    }
}

impl Actor for SessionSupervisor {
    type Msg = SessionSupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState {
            args,
            sessions: HashMap::new(),
            stopping: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: SessionSupervisorMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionSupervisorMsg::Start(StartSession {
                session_id,
                start,
                reply,
            }) => {
                let started = state.start(&myself, session_id, start).await;
                let _ = reply.send(started);
            }
            SessionSupervisorMsg::StopAll(reply) => {
                state.stopping = true;
                let actors: Vec<_> = state.sessions.drain().map(|(_, (_, a))| a).collect();
                for actor in &actors {
                    actor.stop(Some("the daemon is stopping".into()));
                }
                let deadline = tokio::time::Instant::now() + STOP_ALL_GRACE;
                let mut stopped = 0;
                for actor in &actors {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    if actor.wait(Some(left)).await.is_ok() {
                        stopped += 1;
                    }
                }
                // A stopped actor's state travels in its `ActorTerminated` event, queued on
                // this actor's supervision port before `wait` returned, and that port is
                // served before any message: answering from a message queued now means
                // every stopped session's state (and `Pty`) has been dropped by then.
                let _ = myself.cast(SessionSupervisorMsg::StoppedAll {
                    stopped,
                    of: actors.len(),
                    reply,
                });
            }
            SessionSupervisorMsg::StoppedAll { stopped, of, reply } => {
                let live_states = state
                    .args
                    .spawn
                    .stats
                    .sessions
                    .load(std::sync::atomic::Ordering::Relaxed);
                let _ = reply.send(StopAllReport {
                    stopped,
                    of,
                    live_states,
                });
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, reason) = match event {
            SupervisionEvent::ActorFailed(cell, reason) => (cell, reason),
            // A retired (or stopped) session actor: forget it.
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                state.sessions.remove(&cell.get_id());
                return Ok(());
            }
            _ => return Ok(()),
        };
        let Some((session_id, _)) = state.sessions.remove(&cell.get_id()) else {
            return Ok(());
        };
        if state.stopping {
            return Ok(());
        }
        let reason = reason.to_string();
        tracing::error!(
            session_id,
            reason,
            "session actor failed; recovering its record"
        );
        let _ = state.args.registry.cast(RegistryMsg::Failed {
            session_id: session_id.clone(),
            reason: reason.clone(),
        });
        let record = match state
            .args
            .persist
            .call(
                |r| PersistMsg::Get(session_id.clone(), r),
                Some(Duration::from_secs(10)),
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(Some(r))) => r,
            _ => return Ok(()),
        };
        let mut record = record;
        let v = &mut record.session;
        if v.lifecycle != Lifecycle::Archived {
            v.lifecycle = Lifecycle::Closed;
        }
        v.pid = None;
        v.next_restart_at = None;
        let _ = state.args.bus.cast(BusMsg::Publish(Box::new(StreamEvent {
            message: Some(reason),
            ..StreamEvent::mechanical("failed", v)
        })));
        let recovered = SessionStart::Recovered(Box::new(record));
        if let Err(e) = state.start(&myself, session_id.clone(), recovered).await {
            tracing::error!(session_id, error = %e, "could not recover the session's record");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_actors::sink;
    use maxx_protocol::request::CreateParams;

    /// Daemon stop: `StopAll` answers once every session actor has stopped *and* its state
    /// (so its `Pty`, which hangs up the child) has been dropped, and nothing starts after
    /// it. (`stop_children_and_wait` returned with most states still inside queued
    /// `ActorTerminated` events.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stop_all_drops_every_session_state_and_refuses_later_starts() {
        let stats = Arc::new(crate::stats::Stats::default());
        let args = SupervisorArgs {
            registry: sink().await,
            persist: sink().await,
            bus: sink().await,
            spawn: Arc::new(SpawnContext {
                control_dir: std::env::temp_dir(),
                bin_dir: None,
                stats: stats.clone(),
                keeper: None,
            }),
        };
        let (sup, _) = Actor::spawn(None, SessionSupervisor, args).await.unwrap();
        let start = |command: &str| {
            let params = CreateParams {
                command: Some(command.into()),
                cols: 80,
                rows: 24,
                ..Default::default()
            };
            let start = SessionStart::New {
                params: Box::new(params),
                cwd: std::env::temp_dir(),
                caller: "test".into(),
                created: None,
            };
            let session_id = crate::session::new_id();
            sup.call(
                |reply| {
                    SessionSupervisorMsg::Start(StartSession {
                        session_id,
                        start,
                        reply,
                    })
                },
                Some(Duration::from_secs(10)),
            )
        };
        for _ in 0..8 {
            start("exec sleep 1000").await.unwrap().unwrap().unwrap();
        }
        assert_eq!(stats.sessions.load(std::sync::atomic::Ordering::Relaxed), 8);
        let report = sup
            .call(SessionSupervisorMsg::StopAll, Some(Duration::from_secs(20)))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((report.stopped, report.of), (8, 8));
        assert_eq!(report.live_states, 0, "every session state was dropped");
        assert_eq!(stats.sessions.load(std::sync::atomic::Ordering::Relaxed), 0);
        let refused = start("exec sleep 1000").await.unwrap().unwrap();
        assert!(refused.is_err(), "no session starts once the daemon stops");
        sup.stop(None);
    }
}
