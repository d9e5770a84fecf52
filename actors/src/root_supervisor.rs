//! `RootSupervisor`: starts the daemon's long-lived actors and owns the failure policy
//! for them. The registry, the session supervisor and the listener are the daemon's
//! spine: if one of them fails, the daemon cannot vouch for its state any more, so the
//! root stops, `maxx daemon` exits non-zero and its sessions are hung up.

use crate::bus::BusActor;
use crate::connection::DaemonContext;
use crate::listener::{Listener, ListenerArgs};
use crate::registry::RegistryActor;
use crate::session::SpawnContext;
use crate::session_supervisor::SessionSupervisor;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::UnixListener;

/// The actor.
pub struct RootSupervisor;

/// What the root needs to build the tree.
pub struct RootArgs {
    /// Bound `control.sock`.
    pub listener: UnixListener,
    /// The capability token.
    pub token: String,
    /// Facts for children's environments.
    pub spawn: Arc<SpawnContext>,
    /// Default cwd of new sessions.
    pub default_cwd: PathBuf,
    /// Events the bus retains.
    pub bus_capacity: usize,
}

/// No messages besides supervision events.
pub enum RootMsg {}

/// Why the root stopped, when it stopped on its own.
pub struct RootState;

impl Actor for RootSupervisor {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = RootArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<RootMsg>,
        args: RootArgs,
    ) -> Result<RootState, ActorProcessingErr> {
        let cell = myself.get_cell();
        let (registry, _) = Actor::spawn_linked(
            Some("registry".into()),
            RegistryActor,
            args.spawn.stats.clone(),
            cell.clone(),
        )
        .await?;
        let (bus, _) = Actor::spawn_linked(
            Some("bus".into()),
            BusActor,
            (args.bus_capacity, args.spawn.stats.clone()),
            cell.clone(),
        )
        .await?;
        let (sessions, _) = Actor::spawn_linked(
            Some("sessions".into()),
            SessionSupervisor,
            registry.clone(),
            cell.clone(),
        )
        .await?;
        let ctx = Arc::new(DaemonContext {
            token: args.token,
            registry,
            bus,
            bus_capacity: args.bus_capacity,
            session_supervisor: sessions.get_cell(),
            spawn: args.spawn,
            default_cwd: args.default_cwd,
        });
        Actor::spawn_linked(
            Some("listener".into()),
            Listener,
            ListenerArgs {
                listener: args.listener,
                ctx,
            },
            cell,
        )
        .await?;
        Ok(RootState)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RootMsg>,
        event: SupervisionEvent,
        _state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, reason) => {
                tracing::error!(actor = ?cell.get_name(), %reason, "core actor failed; stopping the daemon");
                myself.stop(Some(format!("core actor failed: {reason}")));
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                tracing::error!(actor = ?cell.get_name(), ?reason, "core actor stopped; stopping the daemon");
                myself.stop(Some("core actor stopped".into()));
            }
            _ => {}
        }
        Ok(())
    }
}
