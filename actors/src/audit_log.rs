//! `AuditLog`: a session's audit log, kept encoded and bounded.
//!
//! Each entry is stored once as its JSON (`Arc<RawValue>`, ~250 B for a typical event) and
//! shared with the persistence actor's durable copy and journal line, instead of an
//! `AuditEntry` struct per holder (~750 B each: a heap allocation per string field and an
//! index map per payload object). Entries are decoded only when someone reads them
//! (`sessions.events`, an event wait), which is rare next to how long they are kept.
//!
//! Bounded (issue 18 item 8): each entry is charged its JSON plus [`AUDIT_ENTRY_OVERHEAD`];
//! a log keeps at most [`AuditLimits::session_max`] bytes, and all logs together
//! [`AuditLimits::total_max`] (`Stats::audit_bytes`, shared). Past either, the recording
//! session evicts its own oldest entries — never the newest one — and remembers the highest
//! evicted seq (`dropped_through`), so a reader asking from before it is told the range is
//! gone, as the bus tells a `since` that predates its ring. A restored log starts with
//! whatever the disk kept (the newest 1000), its missing prefix reported the same way.
//!
//! [`AUDIT_ENTRY_OVERHEAD`]: maxx_protocol::limits::AUDIT_ENTRY_OVERHEAD

use crate::stats::Stats;
use maxx_protocol::audit::{AuditEntry, AuditKind};
use maxx_protocol::limits::{AUDIT_ENTRY_OVERHEAD, AUDIT_SESSION_MAX_BYTES, AUDIT_TOTAL_MAX_BYTES};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One encoded entry, shared between a session's log and the durable copy.
pub type EncodedEntry = Arc<RawValue>;

/// The audit logs' bounds (`maxx daemon --audit-session-bytes / --audit-total-bytes`).
#[derive(Debug, Clone, Copy)]
pub struct AuditLimits {
    /// Bytes one session's log may hold.
    pub session_max: usize,
    /// Bytes all logs may hold together.
    pub total_max: usize,
}

impl Default for AuditLimits {
    fn default() -> Self {
        AuditLimits {
            session_max: AUDIT_SESSION_MAX_BYTES,
            total_max: AUDIT_TOTAL_MAX_BYTES,
        }
    }
}

/// The log: the retained entries in seq order, the oldest evicted first.
#[derive(Default)]
pub struct AuditLog {
    entries: VecDeque<(u64, EncodedEntry)>,
    /// Bytes charged for `entries`.
    bytes: usize,
    /// Every entry with a seq up to this is gone (evicted, or not kept on disk); 0 if none.
    dropped_through: u64,
    /// Seq of the newest entry ever recorded (kept even if it were evicted).
    last_seq: u64,
    /// The daemon's counters, once this log has charged the shared total.
    stats: Option<Arc<Stats>>,
}

/// One `sessions.events` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct EventsPage {
    /// Entries after the cursor, oldest first.
    pub events: Vec<AuditEntry>,
    /// The cursor to pass as `since` for the next page.
    pub next_since: u64,
    /// Retained entries remain after `next_since`.
    pub more: bool,
    /// Set when `since` predates what is retained: every entry up to this seq is gone.
    pub dropped_through: Option<u64>,
}

/// The fields an event wait looks at, decoded without the rest.
#[derive(Deserialize)]
struct Head<'a> {
    kind: AuditKind,
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
}

/// Encode an entry for the log and the journal.
pub fn encode(entry: &AuditEntry) -> Option<EncodedEntry> {
    serde_json::value::to_raw_value(entry).ok().map(Arc::from)
}

fn charge(e: &EncodedEntry) -> usize {
    e.get().len() + AUDIT_ENTRY_OVERHEAD
}

impl AuditLog {
    /// A log holding `entries` (a restored or recovered record). Entries before the first
    /// one (the disk keeps the newest 1000) are reported as dropped. It charges the shared
    /// total from its first new entry on.
    pub fn from_entries(entries: &[AuditEntry]) -> AuditLog {
        let entries: VecDeque<_> = entries
            .iter()
            .filter_map(|e| Some((e.seq, encode(e)?)))
            .collect();
        AuditLog {
            bytes: entries.iter().map(|(_, e)| charge(e)).sum(),
            dropped_through: entries.front().map_or(0, |(seq, _)| seq.saturating_sub(1)),
            last_seq: entries.back().map_or(0, |(seq, _)| *seq),
            entries,
            stats: None,
        }
    }

    /// Append an entry, evicting the oldest ones past the bounds in `stats`; returns its
    /// encoding (to hand to the persistence actor).
    pub fn push(&mut self, entry: &AuditEntry, stats: &Arc<Stats>) -> Option<EncodedEntry> {
        let encoded = encode(entry)?;
        if self.stats.is_none() {
            Stats::add(&stats.audit_bytes, self.bytes as i64);
            self.stats = Some(stats.clone());
        }
        let cost = charge(&encoded);
        self.entries.push_back((entry.seq, encoded.clone()));
        self.bytes += cost;
        self.last_seq = self.last_seq.max(entry.seq);
        Stats::add(&stats.audit_bytes, cost as i64);
        let limits = stats.audit_limits;
        while self.entries.len() > 1
            && (self.bytes > limits.session_max
                || stats.audit_bytes.load(Ordering::Relaxed) > limits.total_max as i64)
        {
            let Some((seq, old)) = self.entries.pop_front() else {
                break;
            };
            let cost = charge(&old);
            self.bytes -= cost;
            self.dropped_through = seq;
            Stats::add(&stats.audit_bytes, -(cost as i64));
            Stats::add(&stats.audit_evicted, 1);
        }
        Some(encoded)
    }

    /// Seq of the newest entry, 0 if none.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Every entry up to this seq is gone (0: nothing is).
    pub fn dropped_through(&self) -> u64 {
        self.dropped_through
    }

    /// Bytes charged for what this log holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn start(&self, since: u64) -> usize {
        self.entries.partition_point(|(seq, _)| *seq <= since)
    }

    /// Entries with a seq above `since`, decoded, at most `limit` of them and (beyond the
    /// first) at most `max_bytes` of JSON.
    pub fn page(&self, since: u64, limit: usize, max_bytes: usize) -> EventsPage {
        let dropped_through = (since < self.dropped_through).then_some(self.dropped_through);
        let cursor = since.max(self.dropped_through);
        let start = self.start(cursor);
        let mut events = Vec::new();
        let mut bytes = 0;
        let mut next_since = cursor;
        let mut end = start;
        for (seq, e) in self.entries.range(start..) {
            let len = e.get().len() + 1;
            if events.len() >= limit || (!events.is_empty() && bytes + len > max_bytes) {
                break;
            }
            end += 1;
            next_since = *seq;
            bytes += len;
            if let Ok(decoded) = serde_json::from_str(e.get()) {
                events.push(decoded);
            }
        }
        EventsPage {
            events,
            next_since,
            more: end < self.entries.len(),
            dropped_through,
        }
    }

    /// The first `kind: event` entry named `name` with a seq above `since`.
    pub fn find_event(&self, since: u64, name: &str) -> Option<AuditEntry> {
        self.entries
            .range(self.start(since)..)
            .find(|(_, e)| {
                serde_json::from_str::<Head>(e.get())
                    .is_ok_and(|h| h.kind == AuditKind::Event && h.name.as_deref() == Some(name))
            })
            .and_then(|(_, e)| serde_json::from_str(e.get()).ok())
    }

    /// Give back spare capacity (the session's surface is gone; the log only grows again
    /// with declarations).
    pub fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if let Some(stats) = &self.stats {
            Stats::add(&stats.audit_bytes, -(self.bytes as i64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, kind: AuditKind, name: &str) -> AuditEntry {
        AuditEntry {
            seq,
            kind,
            name: Some(name.into()),
            message: None,
            payload: Some(serde_json::json!({"i": seq, "s": "a \"quoted\" \\ name"})),
            source: "t".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            session_id: "S".into(),
            surface_id: "F".into(),
            pid: Some(7),
        }
    }

    fn stats(session_max: usize, total_max: usize) -> Arc<Stats> {
        Arc::new(Stats {
            audit_limits: AuditLimits {
                session_max,
                total_max,
            },
            ..Default::default()
        })
    }

    #[test]
    fn entries_round_trip_and_are_found_by_seq_and_name() {
        let stats = stats(1 << 20, 1 << 20);
        let all = [
            entry(1, AuditKind::Event, "a"),
            entry(2, AuditKind::Metadata, "b"),
            entry(3, AuditKind::Event, "b"),
        ];
        let mut log = AuditLog::from_entries(&all[..1]);
        for e in &all[1..] {
            log.push(e, &stats).unwrap();
        }
        assert_eq!(log.last_seq(), 3);
        let page = log.page(0, 1000, 1 << 20);
        assert_eq!(page.events, all);
        assert_eq!(
            (page.next_since, page.more, page.dropped_through),
            (3, false, None)
        );
        assert_eq!(log.page(2, 1000, 1 << 20).events, all[2..]);
        assert_eq!(log.find_event(0, "b"), Some(all[2].clone()));
        assert_eq!(log.find_event(3, "b"), None);
        assert_eq!(log.find_event(0, "zz"), None);
        assert_eq!(
            stats.audit_bytes.load(Ordering::Relaxed),
            log.bytes() as i64
        );
        drop(log);
        assert_eq!(stats.audit_bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn pages_follow_the_cursor_and_stop_at_the_limit_and_the_byte_cap() {
        let stats = stats(1 << 20, 1 << 20);
        let mut log = AuditLog::default();
        for seq in 1..=10 {
            log.push(&entry(seq, AuditKind::Event, "e"), &stats)
                .unwrap();
        }
        let p = log.page(0, 4, 1 << 20);
        assert_eq!(p.events.len(), 4);
        assert_eq!((p.next_since, p.more), (4, true));
        let p = log.page(p.next_since, 4, 1 << 20);
        assert_eq!((p.events[0].seq, p.next_since, p.more), (5, 8, true));
        let p = log.page(p.next_since, 4, 1 << 20);
        assert_eq!((p.events.len(), p.next_since, p.more), (2, 10, false));
        let p = log.page(10, 4, 1 << 20);
        assert_eq!((p.events.len(), p.next_since, p.more), (0, 10, false));
        // The byte cap: one entry at least, then only what fits.
        let p = log.page(0, 1000, 1);
        assert_eq!((p.events.len(), p.next_since, p.more), (1, 1, true));
    }

    #[test]
    fn evictions_keep_the_bounds_and_report_the_dropped_range() {
        let one = charge(&encode(&entry(1, AuditKind::Event, "e")).unwrap());
        // Room for 3 entries per session, 5 in all.
        let stats = stats(3 * one + one / 2, 5 * one + one / 2);
        let mut a = AuditLog::default();
        // Two-digit seqs: each entry is 2 bytes more than `one`.
        for seq in 11..=20 {
            a.push(&entry(seq, AuditKind::Event, "e"), &stats).unwrap();
        }
        assert_eq!(a.bytes(), 3 * (one + 2));
        assert_eq!((a.dropped_through(), a.last_seq()), (17, 20));
        let p = a.page(2, 1000, 1 << 20);
        assert_eq!(p.dropped_through, Some(17));
        assert_eq!(
            p.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [18, 19, 20]
        );
        assert_eq!(a.page(17, 1000, 1 << 20).dropped_through, None);
        // The shared total: a second log evicts its own oldest once all logs hold 5.
        let mut b = AuditLog::default();
        for seq in 1..=3 {
            b.push(&entry(seq, AuditKind::Event, "e"), &stats).unwrap();
        }
        assert_eq!(b.bytes(), 2 * one);
        assert_eq!(b.dropped_through(), 1);
        assert_eq!(
            stats.audit_bytes.load(Ordering::Relaxed),
            (5 * one + 6) as i64
        );
        assert_eq!(stats.audit_evicted.load(Ordering::Relaxed), 8);
        // The newest entry is always kept, even past the total.
        let tiny = stats_tiny();
        let mut c = AuditLog::default();
        c.push(&entry(1, AuditKind::Event, "e"), &tiny).unwrap();
        c.push(&entry(2, AuditKind::Event, "e"), &tiny).unwrap();
        assert_eq!(
            (c.dropped_through(), c.page(0, 10, 1 << 20).events.len()),
            (1, 1)
        );
        drop((a, b));
        assert_eq!(stats.audit_bytes.load(Ordering::Relaxed), 0);
    }

    fn stats_tiny() -> Arc<Stats> {
        stats(1, 1)
    }

    #[test]
    fn a_restored_log_reports_what_the_disk_did_not_keep() {
        let log = AuditLog::from_entries(&[
            entry(501, AuditKind::Event, "a"),
            entry(502, AuditKind::Event, "b"),
        ]);
        let p = log.page(0, 1000, 1 << 20);
        assert_eq!(p.dropped_through, Some(500));
        assert_eq!(p.events.len(), 2);
        assert_eq!(log.last_seq(), 502);
    }
}
