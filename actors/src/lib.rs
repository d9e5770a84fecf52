//! The maxx daemon's actor tree.
//!
//! ```text
//! RootSupervisor                      root_supervisor.rs   spawns the tree, stops the daemon
//! │                                                        if a core actor fails
//! ├── RegistryActor                   registry.rs          session table, ids, focus, group
//! │                                                        counters, parent graph, record copies
//! ├── PersistenceActor                persistence/         registry.json + journal (retention.rs)
//! ├── PolicyActor                     policy/              the policy file -> PolicyGate, which
//! │                                                        decides (source, capability, target)
//! ├── BusActor                        bus.rs               process-wide cursor, ring, subscribers
//! ├── SessionSupervisor               session_supervisor.rs  spawns every session actor, stops
//! │                                                        them on daemon stop, recovers a
//! │                                                        failed session's record
//! │   └── SessionActor (one/session)  session/             PTY + child (pty/), record, audit
//! │                                                        log, waits, watchers, runs; its
//! │                                                        screen model (screen_model/:
//! │                                                        light pass screen.rs + backlog, fed
//! │                                                        by the pump; grid/ parsed lazily
//! │                                                        off the drain path; the program's
//! │                                                        terminal queries answered by
//! │                                                        answers.rs)
//! └── Listener                        listener.rs          control.sock accept loop
//!     └── ConnectionActor (one/conn)  connection/          read -> authenticate -> decode ->
//!                                                          authorize (mod.rs) -> route
//!                                                          (route.rs; streams.rs) -> reply
//! ```
//!
//! A request travels: socket → `Listener` → `ConnectionActor` (the JSON edge: bounded
//! read, token check, decode into a typed `Call`) → the policy (`PolicyGate`, decided in
//! the connection's task: allow / deny / confirm, before any lookup or side effect) →
//! `RegistryActor` (reads, routing) → `SessionActor`
//! (mutations, actions, waits) → `BusActor` (events) and `PersistenceActor` (the journal)
//! → back to the connection, which writes one response line. Session actors publish every
//! record change to the registry and the journal before they answer, so reads see the
//! caller's own writes and an acknowledged change survives a crash.
//!
//! Where each method is decoded, authorized and applied, and how to add one:
//! `docs/architecture.md`. Entry point: [`daemon::run`]. Control dir checks: [`control_dir`]. A session's audit log,
//! kept encoded and shared with the durable copy: [`audit_log`]. Handing freed memory back
//! after a burst: [`memory`]. Outside the tree: the daemon's link to the keeper process that
//! runs it, and re-adoption of the programs that outlived a dead daemon: [`keeper_link`].

pub mod answers;
pub mod audit_log;
pub mod bus;
pub mod connection;
pub mod context;
pub mod control_dir;
pub mod daemon;
pub mod grid;
pub mod keeper_link;
pub mod listener;
pub mod memory;
pub mod persistence;
pub mod policy;
pub mod profiles;
pub mod pty;
pub mod registry;
pub mod retention;
pub mod root_supervisor;
pub mod screen;
pub mod screen_model;
pub mod session;
pub mod session_supervisor;
pub mod stats;
#[cfg(test)]
mod test_actors;

pub use daemon::{run, DaemonConfig, DaemonError};
