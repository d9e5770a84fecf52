//! Live-object counters for `daemon.stats`: how many sessions, connections, watchers and
//! waiters exist right now. Tests use them to prove a disconnecting caller leaves nothing
//! behind; operators use them to spot leaks.

use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::{
    SCREEN_READ_TOTAL_MAX_BYTES, STREAM_CLIENT_MAX_BYTES, STREAM_TOTAL_MAX_BYTES,
};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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
    /// Woken when a connection ends or takes a long-lived slot (an upgrade waits on it for
    /// the short requests in flight).
    pub connection_changed: tokio::sync::Notify,
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
    /// `--fsync`: fdatasyncs of the journal since start (each covers every line written
    /// before it: fewer than the acknowledgements they released when clients overlap).
    pub journal_syncs: AtomicI64,
    /// Writes to the journal since start (each writes every line gathered since the last:
    /// fewer than the operations when they come in bursts).
    pub journal_writes: AtomicI64,
    /// Set (once, at load) when `registry.json` or `registry.journal` cannot be read: the
    /// file is preserved and every mutation is refused with `registry_unreadable`.
    pub registry_unreadable: OnceLock<RegistryUnreadable>,
    /// Freed-memory churn since the last purge (see `memory.rs`).
    pub churn: AtomicI64,
    /// A trim is running.
    pub trimming: AtomicBool,
    /// Trims run since start.
    pub memory_trims: AtomicI64,
    /// Bytes stream clients have queued (mirrors the budget's total, for `daemon.stats`).
    pub stream_queued_bytes: AtomicI64,
    /// Stream clients dropped as slow consumers since start (their queue passed
    /// `STREAM_CLIENT_MAX_BYTES`, or they held the most when the total passed
    /// `STREAM_TOTAL_MAX_BYTES`).
    pub slow_consumers_dropped: AtomicI64,
    /// The byte budget of stream clients' queues.
    pub stream_budget: StreamBudget,
    /// Bytes all sessions' in-memory audit logs hold (see `audit_log.rs`).
    pub audit_bytes: AtomicI64,
    /// Audit entries evicted from memory since start (per-session or total bound).
    pub audit_evicted: AtomicI64,
    /// The audit logs' bounds.
    pub audit_limits: crate::audit_log::AuditLimits,
    /// Bytes the answers of screen reads in flight hold, from their encoding until their
    /// write ends (at most `screen_read_limit`; see [`ReadCharge`]).
    pub screen_read_bytes: AtomicI64,
    /// Screen reads refused `busy` since start because their answer did not fit that budget.
    pub screen_reads_refused: AtomicI64,
    /// The bound on `screen_read_bytes` (`maxx daemon --screen-read-bytes`).
    pub screen_read_limit: ScreenReadLimit,
    /// The open-files limit the daemon runs with and how many live sessions it leaves room
    /// for (0 = not known: no limit is applied).
    pub fd_budget: crate::daemon::FdBudget,
}

/// The bytes the answers of all screen reads in flight may hold together:
/// `SCREEN_READ_TOTAL_MAX_BYTES` unless `maxx daemon --screen-read-bytes` says otherwise.
#[derive(Debug, Clone, Copy)]
pub struct ScreenReadLimit(pub usize);

impl Default for ScreenReadLimit {
    fn default() -> Self {
        ScreenReadLimit(SCREEN_READ_TOTAL_MAX_BYTES)
    }
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
    /// `--fsync`: fdatasyncs of the journal since start.
    pub journal_syncs: i64,
    /// Writes to the journal since start.
    pub journal_writes: i64,
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
    /// Bytes stream clients (watches, attaches, bus subscriptions) have queued right now.
    pub stream_queued_bytes: i64,
    /// Stream clients dropped as slow consumers since start.
    pub slow_consumers_dropped: i64,
    /// Bytes the answers of screen reads in flight hold right now.
    pub screen_read_bytes: i64,
    /// The bound on them (`SCREEN_READ_TOTAL_MAX_BYTES`, or `--screen-read-bytes`).
    pub screen_read_max_bytes: usize,
    /// Screen reads refused `busy` since start because that bound was reached.
    pub screen_reads_refused: i64,
    /// The daemon's open-files limit (`RLIMIT_NOFILE`, soft raised to hard at start).
    pub fd_limit: u64,
    /// Live sessions that limit leaves room for (`fd_limit` less a reserve for connections
    /// and files, over `FDS_PER_SESSION`); a create past it is refused `fd_limit`.
    pub session_capacity: u64,
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
            journal_syncs: self.journal_syncs.load(Ordering::Relaxed),
            journal_writes: self.journal_writes.load(Ordering::Relaxed),
            registry_unreadable: self.registry_unreadable.get().cloned(),
            memory_trims: self.memory_trims.load(Ordering::Relaxed),
            audit_bytes: self.audit_bytes.load(Ordering::Relaxed),
            audit_evicted: self.audit_evicted.load(Ordering::Relaxed),
            audit_session_max_bytes: self.audit_limits.session_max,
            audit_total_max_bytes: self.audit_limits.total_max,
            heap_allocated: heap.allocated,
            heap_resident: heap.resident,
            stream_queued_bytes: self.stream_queued_bytes.load(Ordering::Relaxed),
            slow_consumers_dropped: self.slow_consumers_dropped.load(Ordering::Relaxed),
            screen_read_bytes: self.screen_read_bytes.load(Ordering::Relaxed),
            screen_read_max_bytes: self.screen_read_limit.0,
            screen_reads_refused: self.screen_reads_refused.load(Ordering::Relaxed),
            fd_limit: self.fd_budget.limit,
            session_capacity: self.fd_budget.sessions,
        }
    }

    /// Add `n` (may be negative) to a counter.
    pub fn add(counter: &AtomicI64, n: i64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What one screen read's answer holds of the daemon-wide budget for answers in flight
/// ([`ScreenReadLimit`]), taken before the answer is written into its buffer and
/// given back when it is dropped: after its bytes were written to the client (or the write
/// failed or timed out).
#[derive(Debug)]
pub struct ReadCharge {
    stats: Arc<Stats>,
    bytes: i64,
}

impl ReadCharge {
    /// Charge `bytes`, or refuse (`busy`, counted in `screen_reads_refused`) when the
    /// answers in flight would then hold more than the budget. `method` names the read.
    pub fn take(stats: &Arc<Stats>, bytes: usize, method: &str) -> Result<ReadCharge, ErrorBody> {
        let n = bytes as i64;
        let limit = stats.screen_read_limit.0;
        let before = stats.screen_read_bytes.fetch_add(n, Ordering::Relaxed);
        if before + n > limit as i64 {
            stats.screen_read_bytes.fetch_sub(n, Ordering::Relaxed);
            Stats::add(&stats.screen_reads_refused, 1);
            return Err(ErrorBody::new(
                ErrorCode::Busy,
                format!(
                    "refused {method}: its answer takes {:.1} MiB and the screen reads in \
                     flight already hold {:.1} of the {} MiB the daemon allows them",
                    n as f64 / 1048576.0,
                    before as f64 / 1048576.0,
                    limit >> 20
                ),
            )
            .with_remedy(
                "retry shortly (an answer's share returns once it is written), or ask for \
                 less: no cells, a smaller scrollback, or a start_row; see `maxx daemon stats`",
            ));
        }
        Ok(ReadCharge {
            stats: stats.clone(),
            bytes: n,
        })
    }
}

impl Drop for ReadCharge {
    fn drop(&mut self) {
        self.stats
            .screen_read_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// The byte budget of stream clients' queues: each client's share
/// ([`STREAM_CLIENT_MAX_BYTES`]) and the total ([`STREAM_TOTAL_MAX_BYTES`]). Whoever queues
/// an item for a client charges it here, and whoever writes (or discards) it releases it. A
/// client over its share, or holding the most when the total would pass, is evicted on the
/// spot: its bytes are written off at once and its connection, woken by [`Charge::evicted`],
/// throws its queue away without waiting for the reader.
#[derive(Debug, Default)]
pub struct StreamBudget {
    inner: Mutex<BudgetInner>,
}

#[derive(Debug, Default)]
struct BudgetInner {
    total: usize,
    next_id: u64,
    clients: HashMap<u64, (usize, Arc<Eviction>)>,
}

#[derive(Debug, Default)]
struct Eviction {
    flag: AtomicBool,
    notify: tokio::sync::Notify,
}

/// One stream client's account in the [`StreamBudget`].
#[derive(Debug)]
pub struct Charge {
    stats: Arc<Stats>,
    id: u64,
    eviction: Arc<Eviction>,
}

impl Charge {
    /// Open an account for a new stream client.
    pub fn open(stats: &Arc<Stats>) -> Arc<Charge> {
        let eviction = Arc::new(Eviction::default());
        let mut inner = stats.stream_budget.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        inner.clients.insert(id, (0, eviction.clone()));
        drop(inner);
        Arc::new(Charge {
            stats: stats.clone(),
            id,
            eviction,
        })
    }

    /// Charge `n` bytes about to be queued. `false`: this client is (now) evicted and the
    /// item must not be queued.
    pub fn add(&self, n: usize) -> bool {
        let mut inner = self.stats.stream_budget.lock();
        let Some(entry) = inner.clients.get_mut(&self.id) else {
            return false;
        };
        if entry.0 + n > STREAM_CLIENT_MAX_BYTES {
            self.stats.evict(&mut inner, self.id);
            return false;
        }
        entry.0 += n;
        inner.total += n;
        while inner.total > STREAM_TOTAL_MAX_BYTES {
            let largest = inner
                .clients
                .iter()
                .max_by_key(|(_, (bytes, _))| *bytes)
                .map(|(id, _)| *id);
            match largest {
                Some(id) => self.stats.evict(&mut inner, id),
                None => break,
            }
        }
        self.stats.publish_total(&inner);
        inner.clients.contains_key(&self.id)
    }

    /// Release `n` bytes written or discarded (nothing once evicted: those were written off).
    pub fn sub(&self, n: usize) {
        let mut inner = self.stats.stream_budget.lock();
        if let Some(entry) = inner.clients.get_mut(&self.id) {
            let n = n.min(entry.0);
            entry.0 -= n;
            inner.total -= n;
            self.stats.publish_total(&inner);
        }
    }

    /// Evict this client now (its queue is full by count), counted as a slow consumer.
    pub fn evict(&self) {
        let mut inner = self.stats.stream_budget.lock();
        self.stats.evict(&mut inner, self.id);
    }

    /// Whether this client was evicted.
    pub fn is_evicted(&self) -> bool {
        self.eviction.flag.load(Ordering::Acquire)
    }

    /// Resolves once this client is evicted.
    pub async fn evicted(&self) {
        while !self.is_evicted() {
            self.eviction.notify.notified().await;
        }
    }

    /// The client is done: release whatever it still holds (not counted as slow).
    pub fn close(&self) {
        let mut inner = self.stats.stream_budget.lock();
        if let Some((bytes, _)) = inner.clients.remove(&self.id) {
            inner.total -= bytes;
            self.stats.publish_total(&inner);
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.close();
    }
}

impl StreamBudget {
    fn lock(&self) -> std::sync::MutexGuard<'_, BudgetInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Stats {
    fn evict(&self, inner: &mut BudgetInner, id: u64) {
        if let Some((bytes, eviction)) = inner.clients.remove(&id) {
            inner.total -= bytes;
            eviction.flag.store(true, Ordering::Release);
            eviction.notify.notify_one();
            Stats::add(&self.slow_consumers_dropped, 1);
            self.publish_total(inner);
            tracing::info!(queued = bytes, "slow stream client dropped");
        }
    }

    fn publish_total(&self, inner: &BudgetInner) {
        self.stream_queued_bytes
            .store(inner.total as i64, Ordering::Relaxed);
    }
}
