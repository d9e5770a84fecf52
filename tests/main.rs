//! The one integration test binary: a module per capability, each driving a real daemon
//! on a temp control dir through the real CLI and the real socket.

mod common;
mod declarations;
mod hostile_audit;
mod hostile_daemon;
mod hostile_gates;
mod hostile_persist;
mod hostile_streams;
mod hostile_waits;
mod human;
mod keeper;
mod keys;
mod lifecycle;
mod policy;
mod reliability;
mod screen;
mod spine;
mod stream;
mod supervision;
mod terminal;
