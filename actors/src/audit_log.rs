//! `AuditLog`: a session's append-only audit log, kept encoded.
//!
//! Each entry is stored once as its JSON (`Arc<RawValue>`, ~250 B for a typical event) and
//! shared with the persistence actor's durable copy and journal line, instead of an
//! `AuditEntry` struct per holder (~750 B each: a heap allocation per string field and an
//! index map per payload object). Entries are decoded only when someone reads them
//! (`sessions.events`, an event wait), which is rare next to how long they are kept.

use maxx_protocol::audit::{AuditEntry, AuditKind};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::Arc;

/// One encoded entry, shared between a session's log and the durable copy.
pub type EncodedEntry = Arc<RawValue>;

/// The log: entries in seq order (never trimmed in memory).
#[derive(Default)]
pub struct AuditLog {
    entries: Vec<(u64, EncodedEntry)>,
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

impl AuditLog {
    /// A log holding `entries` (a restored or recovered record).
    pub fn from_entries(entries: &[AuditEntry]) -> AuditLog {
        AuditLog {
            entries: entries
                .iter()
                .filter_map(|e| Some((e.seq, encode(e)?)))
                .collect(),
        }
    }

    /// Append an entry; returns its encoding (to hand to the persistence actor).
    pub fn push(&mut self, entry: &AuditEntry) -> Option<EncodedEntry> {
        let encoded = encode(entry)?;
        self.entries.push((entry.seq, encoded.clone()));
        Some(encoded)
    }

    /// Seq of the newest entry, 0 if none.
    pub fn last_seq(&self) -> u64 {
        self.entries.last().map_or(0, |(seq, _)| *seq)
    }

    /// Entries with a seq above `since`, decoded.
    pub fn since(&self, since: u64) -> Vec<AuditEntry> {
        let start = self.entries.partition_point(|(seq, _)| *seq <= since);
        self.entries[start..]
            .iter()
            .filter_map(|(_, e)| serde_json::from_str(e.get()).ok())
            .collect()
    }

    /// The first `kind: event` entry named `name` with a seq above `since`.
    pub fn find_event(&self, since: u64, name: &str) -> Option<AuditEntry> {
        let start = self.entries.partition_point(|(seq, _)| *seq <= since);
        self.entries[start..]
            .iter()
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

    #[test]
    fn entries_round_trip_and_are_found_by_seq_and_name() {
        let all = [
            entry(1, AuditKind::Event, "a"),
            entry(2, AuditKind::Metadata, "b"),
            entry(3, AuditKind::Event, "b"),
        ];
        let mut log = AuditLog::from_entries(&all[..1]);
        for e in &all[1..] {
            log.push(e).unwrap();
        }
        assert_eq!(log.last_seq(), 3);
        assert_eq!(log.since(0), all);
        assert_eq!(log.since(2), all[2..]);
        assert_eq!(log.find_event(0, "b"), Some(all[2].clone()));
        assert_eq!(log.find_event(3, "b"), None);
        assert_eq!(log.find_event(0, "zz"), None);
    }
}
