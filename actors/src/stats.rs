//! Live-object counters for `daemon.stats`: how many sessions, connections, watchers and
//! waiters exist right now. Tests use them to prove a disconnecting caller leaves nothing
//! behind; operators use them to spot leaks.

use maxx_protocol::error::{ErrorBody, ErrorCode};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::OnceLock;

/// A registry file the daemon could not read at start (it preserves it as it is).
#[derive(Debug, Clone, Serialize)]
pub struct RegistryUnreadable {
    /// Its path.
    pub file: String,
    /// Why, without quoting its content: what it is, its size, or where it fails to parse.
    pub reason: String,
}

impl RegistryUnreadable {
    /// The refusal every mutation gets while the registry cannot be read.
    pub fn error(&self) -> ErrorBody {
        ErrorBody::new(
            ErrorCode::RegistryUnreadable,
            format!(
                "refused, nothing was changed: the registry file {} cannot be read ({}); the \
                 daemon preserves it and changes nothing it could not save",
                self.file, self.reason
            ),
        )
        .with_remedy(format!(
            "move {} aside (keep it: it may hold session records) or repair it, then restart \
             the daemon; until then reads work and every change is refused",
            self.file
        ))
    }
}

/// Shared counters (one per daemon).
#[derive(Debug, Default)]
pub struct Stats {
    /// Session actors alive.
    pub sessions: AtomicI64,
    /// Records in the registry: live sessions and the closed/archived records retention keeps.
    pub records: AtomicI64,
    /// Records retention dropped since start (closed/archived, oldest or past 14 days).
    pub records_dropped: AtomicI64,
    /// Connections being served.
    pub connections: AtomicI64,
    /// Bytes of request lines not yet authenticated charged to the shared budget
    /// (`UNAUTH_BUDGET_BYTES`; each connection's first `UNAUTH_FREE_BYTES` are not charged).
    pub unauthenticated_bytes: AtomicI64,
    /// Request lines refused (`too_large`) because the shared budget was spent.
    pub unauthenticated_refused: AtomicI64,
    /// `sessions.watch` subscriptions registered with session actors.
    pub watchers: AtomicI64,
    /// `sessions.wait` and `stream.wait --all` waiters pending.
    pub waiters: AtomicI64,
    /// `stream.watch` / `stream.wait --event` subscriptions on the bus.
    pub streams: AtomicI64,
    /// Connections holding a long-lived slot (watch, attach, wait, run).
    pub long_lived: AtomicI64,
    /// 1 while the registry journal cannot be written (disk full, I/O error): mutations
    /// are refused with `persistence_failed` until a write succeeds again.
    pub journal_behind: AtomicI64,
    /// Journal or snapshot writes that failed since the daemon started.
    pub journal_write_errors: AtomicI64,
    /// Set (once, at load) when `registry.json` or `registry.journal` cannot be read: the
    /// file is preserved and every mutation is refused with `registry_unreadable`.
    pub registry_unreadable: OnceLock<RegistryUnreadable>,
    /// Freed-memory churn since the last purge (see `memory.rs`).
    pub churn: AtomicI64,
    /// A trim is running.
    pub trimming: AtomicBool,
    /// Trims run since start.
    pub memory_trims: AtomicI64,
    /// Bytes all sessions' in-memory audit logs hold (see `audit_log.rs`).
    pub audit_bytes: AtomicI64,
    /// Audit entries evicted from memory since start (per-session or total bound).
    pub audit_evicted: AtomicI64,
    /// The audit logs' bounds.
    pub audit_limits: crate::audit_log::AuditLimits,
}

/// A point-in-time copy, as `daemon.stats` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct StatsSnapshot {
    /// Session actors alive.
    pub sessions: i64,
    /// Records in the registry (live and retained closed/archived).
    pub records: i64,
    /// Records retention dropped since start.
    pub records_dropped: i64,
    /// Connections being served (including the one asking).
    pub connections: i64,
    /// Bytes of not-yet-authenticated request lines charged to the shared 64 MiB budget.
    pub unauthenticated_bytes: i64,
    /// Request lines refused because that budget was spent.
    pub unauthenticated_refused: i64,
    /// Live `sessions.watch` subscriptions.
    pub watchers: i64,
    /// Pending `sessions.wait` and `stream.wait --all` waiters.
    pub waiters: i64,
    /// Live bus subscriptions.
    pub streams: i64,
    /// Connections holding a long-lived slot (watch, attach, wait, run).
    pub long_lived: i64,
    /// 1 while the registry journal cannot be written.
    pub journal_behind: i64,
    /// Failed journal writes since start.
    pub journal_write_errors: i64,
    /// `{file, reason}` while the registry cannot be read (mutations refused), else null.
    pub registry_unreadable: Option<RegistryUnreadable>,
    /// Times freed memory was handed back to the system (a jemalloc purge) after a burst.
    pub memory_trims: i64,
    /// Bytes all sessions' in-memory audit logs hold.
    pub audit_bytes: i64,
    /// Audit entries evicted from memory since start.
    pub audit_evicted: i64,
    /// The per-session audit bound in force.
    pub audit_session_max_bytes: usize,
    /// The total audit bound in force.
    pub audit_total_max_bytes: usize,
    /// Bytes in live heap allocations, as the allocator counts them (0 if unavailable).
    pub heap_allocated: u64,
    /// Bytes of memory the allocator holds resident (0 if unavailable).
    pub heap_resident: u64,
}

impl Stats {
    /// Read every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let heap = crate::memory::heap().unwrap_or_default();
        StatsSnapshot {
            sessions: self.sessions.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            records_dropped: self.records_dropped.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            unauthenticated_bytes: self.unauthenticated_bytes.load(Ordering::Relaxed),
            unauthenticated_refused: self.unauthenticated_refused.load(Ordering::Relaxed),
            watchers: self.watchers.load(Ordering::Relaxed),
            waiters: self.waiters.load(Ordering::Relaxed),
            streams: self.streams.load(Ordering::Relaxed),
            long_lived: self.long_lived.load(Ordering::Relaxed),
            journal_behind: self.journal_behind.load(Ordering::Relaxed),
            journal_write_errors: self.journal_write_errors.load(Ordering::Relaxed),
            registry_unreadable: self.registry_unreadable.get().cloned(),
            memory_trims: self.memory_trims.load(Ordering::Relaxed),
            audit_bytes: self.audit_bytes.load(Ordering::Relaxed),
            audit_evicted: self.audit_evicted.load(Ordering::Relaxed),
            audit_session_max_bytes: self.audit_limits.session_max,
            audit_total_max_bytes: self.audit_limits.total_max,
            heap_allocated: heap.allocated,
            heap_resident: heap.resident,
        }
    }

    /// Add `n` (may be negative) to a counter.
    pub fn add(counter: &AtomicI64, n: i64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
