//! The one integration test binary: a module per capability, each driving a real daemon
//! on a temp control dir through the real CLI and the real socket.

mod common;
mod daemon_admin;
mod declarations;
mod discovery;
mod exit_codes;
mod hooks;
mod hostile_audit;
mod hostile_daemon;
mod hostile_gates;
mod hostile_persist;
mod hostile_screen;
mod hostile_streams;
mod hostile_waits;
mod human;
mod install;
mod keeper;
mod keeper_branches;
mod keeper_load;
mod keys;
mod lifecycle;
mod mcp;
mod policy;
mod python_client;
mod record;
mod recovery_screens;
mod reliability;
mod remote;
mod screen;
mod selectors;
mod spine;
mod stream;
mod supervision;
mod terminal;
