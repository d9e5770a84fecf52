//! `registry.json`: the snapshot format, the encoded records the persistence actor keeps,
//! the fold that writes them (trimming audit history, never a record, to fit
//! [`REGISTRY_MAX_BYTES`]), and the depth-safe parse every load uses.

use super::journal::open_journal;
use super::{
    PersistState, FOLD_RETRY_BYTES, JOURNAL_FILE, REGISTRY_FILE, REGISTRY_MAX_BYTES,
    REGISTRY_VERSION,
};
use crate::audit_log::EncodedEntry;
use crate::retention::{self, last_activity};
use crate::stats::Stats;
use maxx_protocol::audit::AuditEntry;
use maxx_protocol::session::{Lifecycle, SessionView};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::time::SystemTime;

/// Deepest nesting a load reads. What this build writes nests at most
/// `JSON_MAX_DEPTH + PERSIST_WRAP_DEPTH` (69) levels; older builds accepted values up to
/// serde_json's request limit, which a snapshot wrapped to ~132. Anything deeper is not a file
/// any build wrote: it is unreadable (preserved, mutations refused), never a stack overflow.
pub const LOAD_MAX_DEPTH: usize = 256;
/// Stack of the thread that parses a file nesting deeper than serde_json's default limit
/// (virtual: only what the parse touches is used; [`LOAD_MAX_DEPTH`] levels need far less).
const DEEP_PARSE_STACK: usize = 64 * 1024 * 1024;

/// One persisted session: its record and its audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The record as `sessions.get` shows it.
    pub session: SessionView,
    /// Its audit log (newest [`crate::retention::AUDIT_ON_DISK`] on disk).
    #[serde(default)]
    pub audit: Vec<AuditEntry>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct Snapshot {
    pub(super) sessions: Vec<Record>,
    pub(super) version: u32,
}

/// Apply the retention policy ([`crate::retention`]): drop terminal records older than
/// [`retention::RETENTION_AGE`] (never one that may still be live), keep the newest `count`
/// ([`retention::RETENTION_COUNT`] by default), bound each audit log to
/// [`retention::AUDIT_ON_DISK`]. Records come back newest first.
pub fn apply_retention(records: Vec<Record>, now: SystemTime, count: usize) -> Vec<Record> {
    let (mut kept, _) = retention::keep_newest(records, now, count, |r| {
        (r.session.lifecycle, last_activity(&r.session))
    });
    for r in &mut kept {
        retention::trim_audit(&mut r.audit);
    }
    kept
}

/// Apply the retention policy of [`apply_retention`] to the stored records; returns the
/// ids of those kept, newest first.
pub(super) fn retain_stored(
    records: &mut HashMap<String, Stored>,
    now: SystemTime,
    count: usize,
) -> Vec<String> {
    let described: Vec<(String, Lifecycle, SystemTime)> = records
        .iter()
        .map(|(id, r)| (id.clone(), r.lifecycle, r.activity))
        .collect();
    let (kept, dropped) = retention::keep_newest(described, now, count, |(_, l, t)| (*l, *t));
    for (id, _, _) in dropped {
        records.remove(&id);
    }
    for r in records.values_mut() {
        if retention::trim_audit(&mut r.audit) {
            r.audit.shrink_to_fit();
        }
    }
    kept.into_iter().map(|(id, _, _)| id).collect()
}

/// A record as the persistence actor keeps it between snapshots: already JSON. A record then
/// costs about its encoded size (a view ~1 KiB, an audit entry ~250 B) instead of a struct
/// with a heap allocation per field (an audit entry ~750 B), and a fold concatenates
/// instead of encoding. Parsed back only to restore or recover a session.
pub(super) struct Stored {
    /// The `SessionView`.
    pub(super) view: Box<RawValue>,
    /// For retention: the view's lifecycle and `max(updated_at, last_seen_at)`.
    pub(super) lifecycle: Lifecycle,
    pub(super) activity: SystemTime,
    /// Audit entries, oldest first (shared with the session's own log).
    pub(super) audit: Vec<EncodedEntry>,
    /// Seq of the newest entry (replayed duplicates are skipped).
    pub(super) last_seq: u64,
}

impl Stored {
    pub(super) fn new(view: &SessionView) -> Option<Stored> {
        Some(Stored {
            view: serde_json::value::to_raw_value(view).ok()?,
            lifecycle: view.lifecycle,
            activity: last_activity(view),
            audit: Vec::new(),
            last_seq: 0,
        })
    }

    pub(super) fn from_record(r: &Record) -> Option<Stored> {
        let mut stored = Stored::new(&r.session)?;
        stored.audit = r
            .audit
            .iter()
            .filter_map(crate::audit_log::encode)
            .collect();
        stored.last_seq = r.audit.last().map_or(0, |e| e.seq);
        Some(stored)
    }

    pub(super) fn to_record(&self) -> Option<Record> {
        Some(Record {
            session: serde_json::from_str(self.view.get()).ok()?,
            audit: self
                .audit
                .iter()
                .filter_map(|e| serde_json::from_str(e.get()).ok())
                .collect(),
        })
    }

    /// Bytes this record takes in a snapshot when its `skip` oldest entries are left out.
    pub(super) fn encoded_len(&self, skip: usize) -> usize {
        let audit: usize = self.audit[skip..].iter().map(|e| e.get().len() + 1).sum();
        r#"{"session":,"audit":[]},"#.len() + self.view.get().len() + audit
    }
}

/// Encode a snapshot of `order` that fits in `max` bytes, leaving out the oldest audit
/// entries of the busiest records (halving the busiest each round) until it does. `None` if
/// even with no audit at all it does not fit.
pub(super) fn encode_fitting(
    records: &HashMap<String, Stored>,
    order: &[String],
    max: usize,
) -> Option<Vec<u8>> {
    const OPEN: &str = r#"{"sessions":["#;
    let close = format!(r#"],"version":{REGISTRY_VERSION}}}"#);
    let list: Vec<&Stored> = order.iter().filter_map(|id| records.get(id)).collect();
    let mut skip = vec![0usize; list.len()];
    let mut total = OPEN.len() + close.len() + list.iter().map(|r| r.encoded_len(0)).sum::<usize>();
    while total > max {
        let (i, left) = list
            .iter()
            .zip(&skip)
            .map(|(r, s)| r.audit.len() - s)
            .enumerate()
            .filter(|(_, left)| *left > 0)
            .max_by_key(|(_, left)| *left)?;
        let drop = left.div_ceil(2);
        let r = list[i];
        total -= r.audit[skip[i]..skip[i] + drop]
            .iter()
            .map(|e| e.get().len() + 1)
            .sum::<usize>();
        skip[i] += drop;
    }
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(OPEN.as_bytes());
    for (n, (r, s)) in list.iter().zip(&skip).enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"session":"#);
        out.extend_from_slice(r.view.get().as_bytes());
        out.extend_from_slice(br#","audit":["#);
        for (k, e) in r.audit[*s..].iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            out.extend_from_slice(e.get().as_bytes());
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(close.as_bytes());
    Some(out)
}

/// What a restored record looks like: detached from any surface; nothing guessed. Whether
/// that changed it (a record a past run already detached stays as it is).
pub(super) fn detach(v: &mut SessionView) -> bool {
    let lifecycle = match v.lifecycle {
        Lifecycle::Archived => Lifecycle::Archived,
        _ => Lifecycle::Closed,
    };
    let changed = v.lifecycle != lifecycle
        || v.pid.is_some()
        || v.focused
        || !v.restored
        || v.next_restart_at.is_some();
    v.lifecycle = lifecycle;
    v.pid = None;
    v.focused = false;
    v.restored = true;
    // A daemon restart never resurrects processes by policy on its own.
    v.next_restart_at = None;
    changed
}

/// Read a registry file: a regular file of at most `max` bytes, never through a symlink and
/// never blocking on a FIFO. `Ok(None)` when there is no file; the error says what the file
/// is or its size (shown in `registry_unreadable.reason`).
pub(super) fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    use crate::control_dir::{read_regular_bounded, ReadBoundedError};
    read_regular_bounded(path, max, false).map_err(|e| match e {
        ReadBoundedError::NotRegular(_) => match e.what() {
            Some("a symlink") => "it is a symlink (never followed)".to_string(),
            Some(what @ ("a directory" | "a FIFO" | "a socket")) => {
                format!("it is {what}, not a regular file")
            }
            _ => "it is a device, not a regular file".to_string(),
        },
        ReadBoundedError::TooLarge(len) => format!("it is {len} bytes; the limit is {max}"),
        ReadBoundedError::Grew => "it grew while read".to_string(),
        ReadBoundedError::Io(e) => e.to_string(),
    })
}

/// How deep the JSON in `bytes` nests, scanned without recursion (strings and escapes
/// skipped). Malformed input gives some number; the parse reports the malformation.
pub(super) fn nesting_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parse what a load reads: never limited by serde_json's default recursion limit (127
/// nested containers) for a file up to [`LOAD_MAX_DEPTH`] deep, never a stack overflow for
/// a deeper one (refused before parsing). A deep file is parsed with the recursion limit off
/// on a thread whose stack is sized for it. The error names the position, never the content
/// (a value could be anything a caller stored).
pub(super) fn parse_registry_json<T: serde::de::DeserializeOwned + Send>(
    bytes: &[u8],
) -> Result<T, String> {
    let depth = nesting_depth(bytes);
    if depth > LOAD_MAX_DEPTH {
        return Err(format!(
            "it nests {depth} levels deep, over the limit of {LOAD_MAX_DEPTH}"
        ));
    }
    let describe = |e: serde_json::Error| {
        format!(
            "{:?} error at line {} column {}",
            e.classify(),
            e.line(),
            e.column()
        )
        .to_lowercase()
    };
    if depth < maxx_protocol::limits::SERDE_JSON_MAX_NESTING {
        return serde_json::from_slice(bytes).map_err(describe);
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("maxx-load".into())
            .stack_size(DEEP_PARSE_STACK)
            .spawn_scoped(scope, || {
                let mut de = serde_json::Deserializer::from_slice(bytes);
                de.disable_recursion_limit();
                let value = T::deserialize(&mut de).map_err(describe)?;
                de.end().map_err(describe)?;
                Ok(value)
            })
            .map_err(|e| format!("could not start the load thread: {e}"))?
            .join()
            .unwrap_or_else(|_| Err("the parse panicked".into()))
    })
}

impl PersistState {
    /// Read `registry.json` into `records` (unreadable: preserved, this run read-only).
    pub(super) fn load_snapshot(&mut self, records: &mut HashMap<String, Record>) {
        let snapshot_path = self.dir.path().join(REGISTRY_FILE);
        match read_bounded(&snapshot_path, REGISTRY_MAX_BYTES as u64) {
            Ok(None) => {}
            Ok(Some(bytes)) => match parse_registry_json::<Snapshot>(&bytes) {
                Ok(s) if s.version == REGISTRY_VERSION => {
                    for r in s.sessions {
                        records.insert(r.session.session_id.clone(), r);
                    }
                }
                Ok(s) => self.unreadable(
                    REGISTRY_FILE,
                    format!(
                        "it has version {}; this build reads {REGISTRY_VERSION}",
                        s.version
                    ),
                ),
                Err(e) => self.unreadable(REGISTRY_FILE, format!("it does not parse ({e})")),
            },
            Err(e) => self.unreadable(REGISTRY_FILE, e),
        }
    }

    /// the last readable `registry.json` and the journal stay as they were.
    pub(super) fn fold(&mut self) -> io::Result<()> {
        if self.read_only {
            return Ok(());
        }
        let order = retain_stored(&mut self.records, SystemTime::now(), self.retain);
        // Cannot happen with at most RETAINED_RECORDS_MAX records (REGISTRY_MAX_BYTES holds
        // that many of RECORD_MAX_BYTES); more live records than that, near their largest,
        // can: then the journal keeps every operation and stops at JOURNAL_MAX_BYTES
        // (refusing), so nothing acknowledged is lost (docs/persistence.md, "Sizing").
        let Some(bytes) = encode_fitting(&self.records, &order, REGISTRY_MAX_BYTES) else {
            let e = io::Error::other(format!(
                "the registry does not fit in {REGISTRY_MAX_BYTES} bytes even without audit history"
            ));
            self.fold_failed(&e);
            return Err(e);
        };
        // Temp file + rename: a full disk fails the temp file, never registry.json.
        if let Err(e) = self.dir.write_private(REGISTRY_FILE, &bytes) {
            Stats::add(&self.stats.journal_write_errors, 1);
            self.fold_failed(&e);
            return Err(e);
        }
        if std::mem::take(&mut self.fold_failing) {
            tracing::warn!(bytes = bytes.len(), "registry.json written again");
        }
        self.next_fold_at = 0;
        // The snapshot now holds everything the journal (and the backlog, and the lines
        // gathered for the next write) did.
        self.backlog.clear();
        self.batch.clear();
        self.backlog_lost = false;
        self.torn = false;
        // The snapshot was synced (file and directory): it holds every line not yet synced.
        self.unsynced = false;
        // Never through a link, never blocking on a FIFO: a symlink or FIFO planted at the
        // journal's name is refused here (its target untouched), and the next mutation's
        // journal write is refused the same way (`persistence_failed`).
        match open_journal(
            &self.dir.path().join(JOURNAL_FILE),
            OpenOptions::new().create(true).write(true).truncate(true),
        )
        .and_then(|f| self.hold_journal(f))
        {
            Ok(()) => {}
            Err(e) => {
                // The snapshot is complete; stale journal lines replay harmlessly over it.
                tracing::error!(error = %e, "could not reset registry.journal");
                self.journal = None;
            }
        }
        self.caught_up();
        Ok(())
    }

    /// A snapshot could not be written: say so once per failing streak (not once per
    /// operation), and try again only once the journal has grown [`FOLD_RETRY_BYTES`] more.
    pub(super) fn fold_failed(&mut self, e: &io::Error) {
        if self.fold_failing {
            tracing::debug!(error = %e, "registry.json still cannot be written");
        } else {
            tracing::error!(error = %e, "could not write registry.json; keeping the last readable file and the journal (retried as the journal grows)");
            self.fold_failing = true;
        }
        self.next_fold_at = self.journal_bytes + FOLD_RETRY_BYTES;
    }
}
