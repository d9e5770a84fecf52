//! `RootSupervisor`: starts the daemon's long-lived actors and owns the failure policy
//! for them. The registry, the session supervisor and the listener are the daemon's
//! spine: if one of them fails, the daemon cannot vouch for its state any more, so the
//! root stops, `maxx daemon` exits non-zero and its sessions are hung up.

use crate::bus::BusActor;
use crate::connection::DaemonContext;
use crate::control_dir::ControlDir;
use crate::listener::{Listener, ListenerArgs};
use crate::persistence::{PersistArgs, PersistMsg, PersistenceActor};
use crate::registry::{RegistryActor, RegistryMsg};
use crate::session::{SessionStart, SpawnContext, StartSession};
use crate::session_supervisor::SessionSupervisor;
use crate::session_supervisor::SupervisorArgs;
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
    /// The validated control dir (for the durable registry).
    pub dir: ControlDir,
    /// fdatasync every journal write.
    pub fsync: bool,
    /// Closed/archived records retention keeps (memory and disk).
    pub retain_records: usize,
    /// Long-lived connections served at once.
    pub max_long_lived: usize,
    /// The agent profiles file.
    pub profiles_path: Option<PathBuf>,
    /// The capability policy file.
    pub policy_path: Option<PathBuf>,
    /// What the keeper handed over at start (`None`: no keeper).
    pub handoff: Option<crate::keeper_link::Handoff>,
}

/// The survivors the keeper handed over, by session, until a record proves one its own.
struct Survivors(std::collections::HashMap<String, Vec<crate::keeper_link::Survivor>>);

impl Survivors {
    fn new(handoff: Option<crate::keeper_link::Handoff>) -> Survivors {
        let mut by_session = std::collections::HashMap::<String, Vec<_>>::new();
        for s in handoff.map(|h| h.survivors).unwrap_or_default() {
            by_session.entry(s.session_id.clone()).or_default().push(s);
        }
        Survivors(by_session)
    }

    /// The survivor that is `record`'s own program ([`crate::keeper_link::proof::check`]),
    /// if one is. Refused ones stay behind to be released.
    fn prove(
        &mut self,
        record: &crate::persistence::Record,
        last: crate::keeper_link::proof::LastSeen,
    ) -> Option<crate::keeper_link::Survivor> {
        let candidates = self.0.get_mut(&record.session.session_id)?;
        let mut found = None;
        for (i, s) in candidates.iter().enumerate() {
            match crate::keeper_link::proof::check(&record.session, last, s) {
                Ok(()) => {
                    found = Some(i);
                    break;
                }
                Err(why) => tracing::warn!(
                    session_id = %record.session.session_id,
                    surface_id = %s.surface_id,
                    %why,
                    "a survivor was not re-adopted"
                ),
            }
        }
        found.map(|i| candidates.swap_remove(i))
    }

    /// Tell the keeper to drop (and end) every survivor left; how many.
    fn release(self, keeper: Option<&crate::keeper_link::Keeper>) -> usize {
        let mut n = 0;
        for s in self.0.into_values().flatten() {
            tracing::warn!(session_id = %s.session_id, surface_id = %s.surface_id, pid = s.pid, "a survivor with no record of its own is released");
            if let Some(k) = keeper {
                k.close(&s.surface_id);
            }
            n += 1;
        }
        n
    }
}

/// What a recovery did, for the `daemon.recovered` event.
#[derive(Default)]
struct Recovered {
    readopted: usize,
    exited_while_down: usize,
    detached: usize,
    released: usize,
}

impl Recovered {
    /// `daemon.recovered`: a mechanical event about the daemon itself (`resource_kind`
    /// `daemon`, no session).
    fn event(&self, daemons_before: u32) -> maxx_protocol::stream::StreamEvent {
        maxx_protocol::stream::StreamEvent {
            schema: maxx_protocol::stream::STREAM_SCHEMA,
            cursor: 0,
            seq: None,
            source_kind: maxx_protocol::stream::SourceKind::Maxx,
            kind: maxx_protocol::audit::AuditKind::Lifecycle
                .as_str()
                .to_string(),
            name: Some("daemon.recovered".into()),
            source: "maxx".into(),
            message: None,
            payload: Some(serde_json::json!({
                "readopted": self.readopted,
                "exited_while_down": self.exited_while_down,
                "detached": self.detached,
                "released": self.released,
                "daemons_before": daemons_before,
            })),
            created_at: maxx_protocol::time::now_rfc3339(),
            resource_kind: "daemon".into(),
            session_id: String::new(),
            surface_id: String::new(),
            group: None,
            pid: None,
        }
    }
}

/// No messages besides supervision events.
pub enum RootMsg {}

/// The root keeps no state of its own: its children hold everything, and why it stopped
/// travels as the actor's stop reason.
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
        let routes = crate::registry::Routes::default();
        let (registry, _) = Actor::spawn_linked(
            Some("registry".into()),
            RegistryActor,
            crate::registry::RegistryArgs {
                stats: args.spawn.stats.clone(),
                retain: args.retain_records,
                routes: routes.clone(),
            },
            cell.clone(),
        )
        .await?;
        let (persist, _) = Actor::spawn_linked(
            Some("persistence".into()),
            PersistenceActor,
            PersistArgs {
                dir: args.dir.clone(),
                fsync: args.fsync,
                stats: args.spawn.stats.clone(),
                retain: args.retain_records,
            },
            cell.clone(),
        )
        .await?;
        let policy_gate = crate::policy::PolicyGate::default();
        let (policy, _) = Actor::spawn_linked(
            Some("policy".into()),
            crate::policy::PolicyActor,
            crate::policy::PolicyArgs {
                path: args.policy_path,
                gate: policy_gate.clone(),
            },
            cell.clone(),
        )
        .await?;
        let (bus, _) = Actor::spawn_linked(
            Some("bus".into()),
            BusActor,
            crate::bus::BusArgs {
                capacity: args.bus_capacity,
                stats: args.spawn.stats.clone(),
                dir: Some(args.dir.clone()),
            },
            cell.clone(),
        )
        .await?;
        let (sessions, _) = Actor::spawn_linked(
            Some("sessions".into()),
            SessionSupervisor,
            SupervisorArgs {
                registry: registry.clone(),
                persist: persist.clone(),
                bus: bus.clone(),
                spawn: args.spawn.clone(),
            },
            cell.clone(),
        )
        .await?;
        registry.cast(RegistryMsg::Wire(Box::new(crate::registry::Waker {
            starter: sessions.get_derived(),
            bus: bus.clone(),
            persist: persist.clone(),
        })))?;
        // Records from the last run come back detached, each with its own actor so reads,
        // declarations, archive and restart take the same path as for live sessions.
        let restored = match persist
            .call(
                PersistMsg::TakeRestored,
                Some(std::time::Duration::from_secs(60)),
            )
            .await?
        {
            ractor::rpc::CallResult::Success(r) => r,
            _ => Vec::new(),
        };
        let restored_count = restored.len();
        let starter = sessions.get_derived();
        let recovery = args.handoff.as_ref().map(|h| h.daemons_before);
        let mut survivors = Survivors::new(args.handoff);
        let mut counts = Recovered::default();
        for (record, last) in restored {
            let session_id = record.session.session_id.clone();
            let start = match survivors.prove(&record, last) {
                Some(survivor) => {
                    counts.readopted += 1;
                    counts.exited_while_down += usize::from(survivor.status.is_some());
                    SessionStart::Readopted(Box::new(record), Box::new(survivor))
                }
                None => {
                    counts.detached += 1;
                    SessionStart::Restored(Box::new(record))
                }
            };
            let timeout = std::time::Duration::from_secs(60);
            if let Err(e) = StartSession::ask(&starter, session_id.clone(), start, timeout).await {
                tracing::error!(session_id, error = %e, "could not restore a session record");
            }
        }
        // Every restored record is decided (the re-adopted ones upserted theirs before their
        // start was answered): the rest are journaled detached from here on.
        let _ = persist.cast(PersistMsg::RestoredDecided);
        // Survivors no record claims are not guessed at: the keeper drops their masters and
        // ends them.
        counts.released = survivors.release(args.spawn.keeper.as_ref());
        if restored_count > 0 {
            tracing::info!(
                restored = restored_count,
                readopted = counts.readopted,
                "session records restored"
            );
        }
        if let Some(daemons_before) = recovery.filter(|n| *n > 0) {
            tracing::warn!(
                readopted = counts.readopted,
                exited_while_down = counts.exited_while_down,
                detached = counts.detached,
                released = counts.released,
                "took the sessions over from the previous daemon (it died, or handed them over for an upgrade)"
            );
            let _ = bus.cast(crate::bus::BusMsg::Publish(Box::new(
                counts.event(daemons_before),
            )));
        }
        // Everything that can fail a start (the control dir, the registry load, the policy,
        // the survivors) is behind us: tell the keeper before the first request is served,
        // so a kill -9 from here on is a crash it recovers, never a failed start it gives
        // up on (the CLI sees the daemon as soon as the listener accepts).
        if let Some(keeper) = args.spawn.keeper.as_ref() {
            keeper.ready();
        }
        let ctx = Arc::new(DaemonContext {
            token: args.token,
            registry,
            routes,
            bus,
            bus_capacity: args.bus_capacity,
            persist,
            profiles_path: args.profiles_path,
            policy,
            policy_gate,
            sessions: sessions.get_derived(),
            spawn: args.spawn,
            default_cwd: args.default_cwd,
            long_lived: Arc::new(tokio::sync::Semaphore::new(args.max_long_lived)),
            max_long_lived: args.max_long_lived,
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
