//! `DaemonContext`: what every connection needs to route a request. The root supervisor
//! builds it once the daemon's actors are up; the listener hands it to each connection.

use crate::bus::BusMsg;
use crate::persistence::PersistMsg;
use crate::registry::RegistryMsg;
use crate::session::{SpawnContext, StartSession};
use ractor::{ActorRef, DerivedActorRef};
use std::path::PathBuf;
use std::sync::Arc;

/// What every connection needs to route a request.
pub struct DaemonContext {
    /// The capability token every request must carry.
    pub token: String,
    /// The session table.
    pub registry: ActorRef<RegistryMsg>,
    /// Each session's live actor, as the registry last published it (routing without a
    /// round trip to the registry).
    pub routes: crate::registry::Routes,
    /// The event bus.
    pub bus: ActorRef<BusMsg>,
    /// How many events the bus retains (sizes stream queues).
    pub bus_capacity: usize,
    /// The durable registry.
    pub persist: ActorRef<PersistMsg>,
    /// The agent profiles file, if any.
    pub profiles_path: Option<PathBuf>,
    /// The capability policy's file: `policy.check`, `policy.sources`, reload.
    pub policy: ActorRef<crate::policy::PolicyMsg>,
    /// The capability policy every request passes before any side effect, decided in the
    /// connection's own task.
    pub policy_gate: crate::policy::PolicyGate,
    /// Starts new session actors (the session supervisor, seen only as what it serves).
    pub sessions: DerivedActorRef<StartSession>,
    /// Facts for building a child's environment.
    pub spawn: Arc<SpawnContext>,
    /// Default working directory for sessions created without `cwd`.
    pub default_cwd: PathBuf,
    /// Slots for long-lived requests (see `Call::is_long_lived`).
    pub long_lived: Arc<tokio::sync::Semaphore>,
    /// Their number.
    pub max_long_lived: usize,
}
