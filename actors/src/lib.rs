//! The maxx daemon's actor tree.
//!
//! ```text
//! RootSupervisor                      root_supervisor.rs
//! ├── RegistryActor                   registry.rs      session table, ids, focus, record copies
//! ├── SessionSupervisor               session_supervisor.rs
//! │   └── SessionActor (one/session)  session.rs       PTY + child (pty.rs), light screen
//! │                                                    (screen.rs), record, lifecycle, waits
//! └── Listener                        listener.rs      control.sock accept loop
//!     └── ConnectionActor (one/conn)  connection.rs    read → authenticate → decode → route → reply
//! ```
//!
//! A request travels: socket → `Listener` → `ConnectionActor` (the JSON edge: bounded
//! read, token check, decode into a typed `Call`) → `RegistryActor` (reads, routing) →
//! `SessionActor` (mutations, actions, waits) → back to the connection, which writes one
//! response line. Session actors publish every record change to the registry before they
//! answer, so reads always see the caller's own writes.
//!
//! Entry point: [`daemon::run`]. Control dir checks: [`control_dir`].

pub mod bus;
pub mod connection;
pub mod control_dir;
pub mod daemon;
pub mod grid;
pub mod listener;
pub mod persistence;
pub mod policy;
pub mod profiles;
pub mod pty;
pub mod registry;
pub mod root_supervisor;
pub mod screen;
pub mod session;
pub mod session_supervisor;
pub mod stats;

pub use daemon::{run, DaemonConfig, DaemonError};
