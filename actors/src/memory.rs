//! Handing freed memory back to the system after a burst.
//!
//! glibc's malloc keeps freed memory in its arenas (one per thread that allocates, up to 8
//! per core) and returns pages on its own only from the top of a heap. After a burst —
//! thousands of connections, sessions created and closed — most of the daemon's arena space
//! is free but stays resident: measured with the full mixed load (docs/reliability.md), RSS
//! stayed at 87 MiB with 56 MiB in use. `malloc_trim(0)` gives every free page of every
//! arena back (`madvise`), and nothing else does.
//!
//! It is driven by messages, not a timer: finished requests, released surfaces and retired
//! session actors add *churn*; when the daemon is idle (no connection: its last one ended,
//! or an actor retired while none was open) with at least
//! [`TRIM_CHURN`] since the last trim, one trim runs on a blocking thread. A busy daemon
//! therefore trims at most once per [`TRIM_CHURN`] units, and a daemon that just went quiet
//! trims once; what a trim leaves is at most [`TRIM_CHURN`] units of churn.

use crate::stats::Stats;
use std::sync::atomic::Ordering;

/// Churn since the last trim that makes going idle trigger one.
pub const TRIM_CHURN: i64 = 1024;
/// Churn of one finished request (its buffers and decoded JSON).
pub const REQUEST_CHURN: i64 = 1;
/// Churn of a released surface (its PTY read buffers, output ring and screen model).
pub const SURFACE_CHURN: i64 = 32;
/// Churn of a retired session actor (its mailboxes and task).
pub const RETIRE_CHURN: i64 = 32;

/// Record churn.
pub fn churn(stats: &Stats, units: i64) {
    stats.churn.fetch_add(units, Ordering::Relaxed);
}

/// The daemon has no connection left: trim if enough churn accumulated.
pub fn idle(stats: &std::sync::Arc<Stats>) {
    if stats.connections.load(Ordering::Relaxed) > 0
        || stats.churn.load(Ordering::Relaxed) < TRIM_CHURN
        || stats.trimming.swap(true, Ordering::AcqRel)
    {
        return;
    }
    stats.churn.store(0, Ordering::Relaxed);
    let stats = stats.clone();
    tokio::task::spawn_blocking(move || {
        trim();
        Stats::add(&stats.memory_trims, 1);
        stats.trimming.store(false, Ordering::Release);
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks and madvises the allocator's own free lists.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
