//! `SessionSupervisor`: the parent of every `SessionActor`, and its failure policy.
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

use crate::bus::BusMsg;
use crate::persistence::PersistMsg;
use crate::registry::RegistryMsg;
use crate::session::{SessionActor, SessionArgs, SessionStart, SpawnContext};
use maxx_protocol::session::Lifecycle;
use maxx_protocol::stream::StreamEvent;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::sync::Arc;
use std::time::Duration;

/// Name prefix of session actors: `session:<session_id>`.
pub const SESSION_ACTOR_PREFIX: &str = "session:";

/// The actor.
pub struct SessionSupervisor;

/// Messages (none besides supervision events).
pub enum SessionSupervisorMsg {}

/// What the supervisor needs to recover a failed session.
pub struct SupervisorArgs {
    /// The session table.
    pub registry: ActorRef<RegistryMsg>,
    /// The durable copy of every record.
    pub persist: ActorRef<PersistMsg>,
    /// The event bus.
    pub bus: ActorRef<BusMsg>,
    /// Facts for replacement actors.
    pub spawn: Arc<SpawnContext>,
}

impl Actor for SessionSupervisor {
    type Msg = SessionSupervisorMsg;
    type State = SupervisorArgs;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let SupervisionEvent::ActorFailed(cell, reason) = event else {
            return Ok(());
        };
        let Some(session_id) = cell
            .get_name()
            .and_then(|n| n.strip_prefix(SESSION_ACTOR_PREFIX).map(str::to_string))
            // A woken actor's name carries `#N` after the id.
            .map(|n| n.split('#').next().unwrap_or_default().to_string())
        else {
            return Ok(());
        };
        let reason = reason.to_string();
        tracing::error!(
            session_id,
            reason,
            "session actor failed; recovering its record"
        );
        let _ = state.registry.cast(RegistryMsg::Failed {
            session_id: session_id.clone(),
            reason: reason.clone(),
        });
        let record = match state
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
        let _ = state.bus.cast(BusMsg::Publish(Box::new(StreamEvent {
            message: Some(reason),
            ..StreamEvent::mechanical("failed", v)
        })));
        let args = SessionArgs {
            session_id: session_id.clone(),
            start: SessionStart::Recovered(Box::new(record)),
            registry: state.registry.clone(),
            spawn: state.spawn.clone(),
            bus: state.bus.clone(),
            persist: state.persist.clone(),
        };
        if let Err(e) = Actor::spawn_linked(
            Some(format!("{SESSION_ACTOR_PREFIX}{session_id}")),
            SessionActor,
            args,
            myself.get_cell(),
        )
        .await
        {
            tracing::error!(session_id, error = %e, "could not recover the session's record");
        }
        Ok(())
    }
}
