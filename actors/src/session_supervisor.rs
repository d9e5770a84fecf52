//! `SessionSupervisor`: the parent of every `SessionActor`. Its failure policy: a session
//! actor that panics or returns an error is *not* restarted and does not touch any other
//! session. Its `Drop` has already hung up and reaped its child; the supervisor tells the
//! registry, which keeps the record, marks it `closed` and stops routing to the dead actor.
//! A caller can read the record and create a new session.

use crate::registry::RegistryMsg;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

/// Name prefix of session actors: `session:<session_id>`.
pub const SESSION_ACTOR_PREFIX: &str = "session:";

/// The actor.
pub struct SessionSupervisor;

/// Messages (none besides supervision events).
pub enum SessionSupervisorMsg {}

impl Actor for SessionSupervisor {
    type Msg = SessionSupervisorMsg;
    type State = ActorRef<RegistryMsg>;
    type Arguments = ActorRef<RegistryMsg>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        registry: ActorRef<RegistryMsg>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(registry)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        registry: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, reason) = event {
            let session_id = cell
                .get_name()
                .and_then(|n| n.strip_prefix(SESSION_ACTOR_PREFIX).map(str::to_string));
            if let Some(session_id) = session_id {
                let _ = registry.cast(RegistryMsg::Failed {
                    session_id,
                    reason: reason.to_string(),
                });
            }
        }
        Ok(())
    }
}
