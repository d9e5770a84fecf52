//! `PersistenceActor`: the durable registry.
//!
//! Two files in the validated control dir, both 0600:
//! - `registry.json`: a versioned snapshot `{"sessions":[...],"version":1}` (the version sorts
//!   after the sessions on purpose: an oversized file cannot be read cheaply, so it is
//!   preserved rather than guessed at). Written atomically (temp file + rename).
//! - `registry.journal`: NDJSON operations appended since that snapshot. Every record change
//!   and audit entry is written here *before* the request that caused it is answered, so an
//!   acknowledged mutation survives `kill -9` of the daemon. The journal is folded into a
//!   new snapshot at start, when it grows past [`FOLD_BYTES`], and on clean shutdown.
//!
//! Replaying the journal is idempotent (records are upserts, audit entries are deduplicated
//! by seq), so a crash between writing a snapshot and truncating the journal is harmless. A
//! torn last line (a crash mid-write) is ignored.
//!
//! Never persisted: the create-time `env` (it may hold secrets) and the token.
//! See `docs/persistence.md`.
//!
//! Layout: this file holds the actor, its messages and the order of operations;
//! `snapshot.rs` the snapshot format and the fold; `journal.rs` the write-ahead lines, failed
//! writes and replay. Retention (which records are kept) is [`crate::retention`], shared
//! with the registry.

mod journal;
mod snapshot;

pub use crate::retention::{last_activity, AUDIT_ON_DISK, RETENTION_AGE, RETENTION_COUNT};
pub use snapshot::{apply_retention, Record, LOAD_MAX_DEPTH};

use crate::audit_log::EncodedEntry;
use crate::control_dir::ControlDir;
use crate::stats::Stats;
use journal::Encoded;
use maxx_protocol::error::ErrorBody;
use maxx_protocol::limits::{RECORD_MAX_BYTES, RETAINED_RECORDS_MAX};
use maxx_protocol::session::SessionView;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use snapshot::{detach, Stored};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::Arc;
use std::time::SystemTime;

/// Snapshot file name.
pub const REGISTRY_FILE: &str = "registry.json";
/// Journal file name.
pub const JOURNAL_FILE: &str = "registry.journal";
/// Snapshot format version.
pub const REGISTRY_VERSION: u32 = 1;
/// Largest snapshot read (and written: saves trim audit history to fit). Sized so the
/// most records a snapshot holds ([`RETAINED_RECORDS_MAX`]), each at its largest
/// ([`RECORD_MAX_BYTES`]), always fit with no audit history at all, leaving the rest
/// (≥ 27 MiB) to audit history: a fold can never fail for size (docs/persistence.md,
/// "Sizing"). Before issue 18 item 3 it was 16 MiB, which 120 large records exceeded.
pub const REGISTRY_MAX_BYTES: usize = 128 * 1024 * 1024;
/// Largest journal replayed at start, and the most the daemon ever writes to it: a write
/// that would pass it is refused (`persistence_failed`), so nothing acknowledged is ever in
/// a journal the next start will not read.
pub const JOURNAL_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Journal size that triggers a fold into a new snapshot.
pub const FOLD_BYTES: u64 = 32 * 1024 * 1024;
/// After a failed fold (the snapshot could not be written: disk full, I/O error), the next
/// attempt waits until the journal has grown this much more, instead of rewriting the whole
/// snapshot with every operation.
pub const FOLD_RETRY_BYTES: u64 = 4 * 1024 * 1024;
/// What a record adds around its view in a snapshot: `{"session":…,"audit":[]},`.
pub const SNAPSHOT_RECORD_OVERHEAD: usize = r#"{"session":,"audit":[]},"#.len();
/// The snapshot's framing: `{"sessions":[` … `],"version":N}`.
pub const SNAPSHOT_FRAMING_BYTES: usize = 64;
/// The most a snapshot of records alone (no audit history) can take.
pub const SNAPSHOT_RECORDS_MAX_BYTES: usize =
    RETAINED_RECORDS_MAX * (RECORD_MAX_BYTES + SNAPSHOT_RECORD_OVERHEAD) + SNAPSHOT_FRAMING_BYTES;
const _: () = assert!(SNAPSHOT_RECORDS_MAX_BYTES + 16 * 1024 * 1024 <= REGISTRY_MAX_BYTES);
// One journal line is a record (or an audit entry, or a drop) plus its `{"op":…}` wrapper;
// a fold runs once the journal passes FOLD_BYTES, and a failing disk's backlog is written in
// one go: the journal stays far inside what a load reads while folds succeed.
const _: () = assert!(
    FOLD_BYTES as usize + BACKLOG_MAX_BYTES + BATCH_MAX_BYTES + RECORD_MAX_BYTES + 64
        < JOURNAL_MAX_BYTES as usize
);
/// Journal lines gathered into one write: the operations already queued when the first of
/// them is handled (see [`PersistMsg::WriteBatch`]), written at once when they reach this.
pub const BATCH_MAX_BYTES: usize = 256 * 1024;
/// Journal lines kept in memory while the journal cannot be written (disk full). Past this,
/// they are dropped and the next successful write is a whole snapshot instead.
pub const BACKLOG_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Messages the persistence actor handles.
pub enum PersistMsg {
    /// A record changed.
    Upsert(Arc<SessionView>),
    /// An audit entry was appended (encoded once, shared with the session's log).
    Audit {
        /// Its session.
        session_id: String,
        /// Its seq.
        seq: u64,
        /// The entry as JSON.
        entry: EncodedEntry,
    },
    /// Everything sent before this has been handled: run the closure with whether the
    /// journal is caught up (`Err(persistence_failed)` while writes fail). It answers the
    /// caller.
    Ack(AckFn),
    /// Try to catch up now if writes were failing; answer whether the journal is writable.
    /// Asked before a mutation while `daemon.stats` `journal_behind` is set.
    Writable(RpcReplyPort<Result<(), ErrorBody>>),
    /// The registry dropped these records by retention (closed/archived, dormant, oldest):
    /// forget them, so a restart does not bring back what the live daemon no longer shows.
    Drop(Vec<String>),
    /// Hand over the records restored at start (once), detached, each with what it said
    /// before (for re-adoption by proof).
    TakeRestored(RpcReplyPort<Vec<(Record, crate::keeper_link::proof::LastSeen)>>),
    /// Every restored record has been decided (re-adopted, which upserts it, or not): the
    /// ones no upsert replaced are journaled as they were handed over, detached. Until
    /// then the registry on disk keeps them as the last run left them, so a daemon killed
    /// before it decided leaves the next one the same proof to decide by.
    RestoredDecided,
    /// The durable copy of one record (to recover a failed session actor).
    Get(String, RpcReplyPort<Option<Record>>),
    /// Fold the journal into a snapshot now (clean shutdown).
    Flush(RpcReplyPort<()>),
    /// `--fsync` group commit: the journal sync the actor started on a blocking thread ended
    /// (sent by that thread).
    Synced(Result<(), String>),
    /// Write the journal lines gathered since the last write, in one write (sent by the
    /// actor to itself with the first of them, so it comes after every operation queued
    /// by then: a burst of 1,000 exits is a few writes, not 1,000). Every other message
    /// writes them first, so an [`PersistMsg::Ack`] still runs only after its operations
    /// are in the journal.
    WriteBatch,
}

/// How the actor was configured.
pub struct PersistArgs {
    /// The validated control dir.
    pub dir: ControlDir,
    /// fdatasync the journal after every write (power-loss durability, slower).
    pub fsync: bool,
    /// `journal_behind` / `journal_write_errors` live here, for operators and the
    /// connection's pre-mutation check.
    pub stats: Arc<Stats>,
    /// Retention's count cap (`--retain-records`, default [`RETENTION_COUNT`]).
    pub retain: usize,
}

/// State.
pub struct PersistState {
    dir: ControlDir,
    fsync: bool,
    /// Writes are off: the snapshot or the journal on disk could not be read (oversized,
    /// corrupt, not a regular file) and is preserved as it is. Every mutation is refused with
    /// `registry_unreadable` (see [`crate::stats::RegistryUnreadable`]).
    read_only: bool,
    /// The durable copy of every record, encoded (what a fold writes, and what recovers a
    /// failed session actor).
    records: HashMap<String, Stored>,
    restored: Option<Vec<(Record, crate::keeper_link::proof::LastSeen)>>,
    /// Restored records whose detached form differs from what is on disk (they were running,
    /// focused or due a restart), until an upsert of theirs or [`PersistMsg::RestoredDecided`]
    /// (which detaches the durable copy in `records` again: no second copy is kept).
    undecided: HashSet<String>,
    journal: Option<File>,
    /// The device and inode of `journal`, taken when it was opened: each write checks the
    /// journal's name still leads to them with one `stat` of the path.
    journal_id: (u64, u64),
    /// Length of the journal file up to its last complete line: a failed write is cut back
    /// to here, so a torn line never sits in front of later ones.
    journal_bytes: u64,
    /// The last failed write left bytes that could not be cut off: start the next write on
    /// a fresh line so only the torn one is lost on replay.
    torn: bool,
    /// Journal lines not yet on disk, in order (the disk was full or failing). Every
    /// operation is applied to `records` regardless, so a snapshot also covers them.
    backlog: Vec<u8>,
    /// The backlog outgrew [`BACKLOG_MAX_BYTES`] and was dropped: only a snapshot catches up.
    backlog_lost: bool,
    /// Journal lines gathered for the next write (the journal is not behind), in order;
    /// applied to `records` already, like the backlog.
    batch: Vec<u8>,
    /// A [`PersistMsg::WriteBatch`] is queued.
    batch_queued: bool,
    /// Why the journal is behind, while it is.
    failure: Option<String>,
    /// The failure is a symlink, FIFO or other non-regular file at the journal's name.
    failure_unsafe: bool,
    stats: Arc<Stats>,
    /// Retention's count cap.
    retain: usize,
    /// The last fold failed (logged once, not once per operation, until one succeeds).
    fold_failing: bool,
    /// After a failed fold, the journal size at which the next one is tried.
    next_fold_at: u64,
    /// `--fsync`: journal lines were written since the last fdatasync.
    unsynced: bool,
    /// `--fsync`: acknowledgements waiting for the next fdatasync, in arrival order.
    pending_acks: Vec<AckFn>,
    /// `--fsync`: acknowledgements the sync in flight covers.
    syncing: Vec<AckFn>,
    /// An fdatasync runs on a blocking thread.
    sync_in_flight: bool,
}

/// What a [`PersistMsg::Ack`] runs once the operations before it are durable.
pub type AckFn = Box<dyn FnOnce(Result<(), ErrorBody>) + Send>;

/// The actor.
pub struct PersistenceActor;

impl PersistState {
    fn new(dir: ControlDir, fsync: bool, stats: Arc<Stats>, retain: usize) -> Self {
        PersistState {
            dir,
            fsync,
            read_only: false,
            records: HashMap::new(),
            restored: None,
            undecided: HashSet::new(),
            journal: None,
            journal_id: (0, 0),
            journal_bytes: 0,
            torn: false,
            backlog: Vec::new(),
            backlog_lost: false,
            batch: Vec::new(),
            batch_queued: false,
            failure: None,
            failure_unsafe: false,
            stats,
            // The snapshot is sized for at most this many records (the CLI refuses more).
            retain: retain.min(RETAINED_RECORDS_MAX),
            fold_failing: false,
            next_fold_at: 0,
            unsynced: false,
            pending_acks: Vec::new(),
            syncing: Vec::new(),
            sync_in_flight: false,
        }
    }

    fn apply(&mut self, op: Encoded) {
        match op {
            Encoded::Session {
                view,
                id,
                lifecycle,
                activity,
            } => match self.records.get_mut(&id) {
                Some(r) => {
                    r.view = view;
                    r.lifecycle = lifecycle;
                    r.activity = activity;
                }
                None => {
                    self.records.insert(
                        id,
                        Stored {
                            view,
                            lifecycle,
                            activity,
                            audit: Vec::new(),
                            last_seq: 0,
                        },
                    );
                }
            },
            Encoded::Audit {
                entry,
                session_id,
                seq,
            } => {
                if let Some(r) = self.records.get_mut(&session_id) {
                    if r.last_seq < seq {
                        r.last_seq = seq;
                        r.audit.push(entry);
                        if r.audit.len() > AUDIT_ON_DISK * 2 {
                            r.audit.drain(..r.audit.len() - AUDIT_ON_DISK);
                        }
                    }
                }
            }
            Encoded::Drop { session_id, .. } => {
                self.records.remove(&session_id);
            }
        }
    }

    /// Load the snapshot and replay the journal. Never writes.
    fn load(&mut self) -> HashMap<String, Record> {
        let mut records = HashMap::new();
        self.load_snapshot(&mut records);
        if !self.read_only {
            self.replay_journal(&mut records);
        }
        records
    }

    /// A registry file cannot be read: preserve it (this run writes nothing) and refuse every
    /// mutation with `registry_unreadable`, shown in `daemon.stats` and `daemon.status`.
    fn unreadable(&mut self, file: &str, reason: String) {
        let path = self.dir.path().join(file).display().to_string();
        tracing::error!(file = %path, reason = %reason, "the registry cannot be read; preserving it, refusing every mutation this run");
        self.read_only = true;
        let _ = self
            .stats
            .registry_unreadable
            .set(crate::stats::RegistryUnreadable { file: path, reason });
    }

    /// Journal an operation, apply it, and fold when the journal is big. The order matters:
    /// a fold snapshots the records and truncates the journal, so the operation must be in
    /// the records before any fold can run.
    fn record(&mut self, encoded: Encoded) {
        self.append(encoded.line());
        self.apply(encoded);
        if self.backlog_lost {
            // Only a snapshot catches up, and it must include this operation.
            self.catch_up();
        }
        // The lines gathered for the next write count: the fold covers them.
        let journal = self.journal_bytes + self.batch.len() as u64;
        if journal > FOLD_BYTES.max(self.next_fold_at) && !self.behind() {
            // A failed fold is logged (once) and leaves the journal as it is.
            let _ = tokio::task::block_in_place(|| self.fold());
        }
    }
}

impl Actor for PersistenceActor {
    type Msg = PersistMsg;
    type State = PersistState;
    type Arguments = PersistArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<PersistMsg>,
        args: PersistArgs,
    ) -> Result<PersistState, ActorProcessingErr> {
        let mut state = PersistState::new(args.dir, args.fsync, args.stats, args.retain);
        // The daemon validated the control dir before starting us; nothing is read
        // before that, and nothing is written before this load ran.
        tokio::task::block_in_place(|| {
            let records: Vec<Record> = state.load().into_values().collect();
            let kept = apply_retention(records, SystemTime::now(), state.retain);
            // The durable copy (and the fold below) keeps each record as the last run left
            // it: detaching is this run's decision, journaled once made (`RestoredDecided`).
            // Folding the detached records here made a daemon killed between this fold and
            // its re-adoptions leave every live session closed on disk: the next daemon's
            // proof refused their survivors ("not running that pid") and released them.
            state.records = kept
                .iter()
                .filter_map(|r| Some((r.session.session_id.clone(), Stored::from_record(r)?)))
                .collect();
            let restored: Vec<_> = kept
                .into_iter()
                .map(|mut r| {
                    let last = crate::keeper_link::proof::LastSeen {
                        lifecycle: r.session.lifecycle,
                        pid: r.session.pid,
                    };
                    if detach(&mut r.session) {
                        state.undecided.insert(r.session.session_id.clone());
                    }
                    (r, last)
                })
                .collect();
            state.restored = Some(restored);
            // A failed first fold (full disk) keeps registry.json and the journal as they
            // are: both are replayed again next time.
            let _ = state.fold();
        });
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<PersistMsg>,
        msg: PersistMsg,
        state: &mut PersistState,
    ) -> Result<(), ActorProcessingErr> {
        match &msg {
            PersistMsg::Upsert(_) | PersistMsg::Audit { .. } | PersistMsg::Drop(_) => {}
            // Whatever else comes (an acknowledgement above all) finds its operations in
            // the journal.
            _ => state.write_batch(),
        }
        match msg {
            PersistMsg::WriteBatch => state.batch_queued = false,
            PersistMsg::Upsert(view) => {
                state.undecided.remove(&view.session_id);
                if let Some(encoded) = Encoded::session(&view) {
                    state.record(encoded);
                }
            }
            PersistMsg::Audit {
                session_id,
                seq,
                entry,
            } => state.record(Encoded::Audit {
                entry,
                session_id,
                seq,
            }),
            PersistMsg::Drop(ids) => {
                for id in ids {
                    state.undecided.remove(&id);
                    if let Some(encoded) = Encoded::drop(id) {
                        state.record(encoded);
                    }
                }
            }
            // Group commit (--fsync): with lines not yet synced, or a sync in flight that may
            // be the one covering this acknowledgement's lines, it waits for the next sync.
            PersistMsg::Ack(done) if state.unsynced || state.sync_in_flight => {
                state.pending_acks.push(done);
                state.start_sync(&myself);
            }
            PersistMsg::Ack(done) => done(state.not_durable()),
            PersistMsg::Synced(result) => state.synced(result, &myself),
            PersistMsg::Writable(reply) => {
                state.catch_up();
                let _ = reply.send(state.not_durable());
            }
            PersistMsg::TakeRestored(reply) => {
                let _ = reply.send(state.restored.take().unwrap_or_default());
            }
            PersistMsg::RestoredDecided => {
                let mut undecided: Vec<_> =
                    std::mem::take(&mut state.undecided).into_iter().collect();
                undecided.sort();
                for id in undecided {
                    // The view alone: an upsert line leaves the audit log as it is.
                    let Some(mut view) = state
                        .records
                        .get(&id)
                        .and_then(|r| serde_json::from_str::<SessionView>(r.view.get()).ok())
                    else {
                        continue;
                    };
                    detach(&mut view);
                    if let Some(encoded) = Encoded::session(&view) {
                        state.record(encoded);
                    }
                }
            }
            PersistMsg::Get(id, reply) => {
                let _ = reply.send(state.records.get(&id).and_then(Stored::to_record));
            }
            PersistMsg::Flush(reply) => {
                // A failed fold (logged) leaves registry.json and the journal as they were.
                let _ = tokio::task::block_in_place(|| state.fold());
                // Acknowledgements waiting for a sync go out now (the fold synced).
                if !state.unsynced {
                    state.folded_synced();
                }
                let _ = reply.send(());
            }
        }
        if !state.batch.is_empty() && !state.batch_queued {
            state.batch_queued = myself.cast(PersistMsg::WriteBatch).is_ok();
            if !state.batch_queued {
                state.write_batch();
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<PersistMsg>,
        state: &mut PersistState,
    ) -> Result<(), ActorProcessingErr> {
        state.write_batch();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::journal::*;
    use super::snapshot::*;
    use super::*;
    use maxx_protocol::audit::AuditKind;
    use maxx_protocol::session::Location;
    use maxx_protocol::{audit::AuditEntry, error::ErrorCode, session::Lifecycle};
    use serde_json::Map;
    use std::fs;
    use std::time::Duration;

    fn view(id: usize, lifecycle: Lifecycle, updated: SystemTime) -> SessionView {
        let t = maxx_protocol::time::rfc3339(updated);
        SessionView {
            session_id: format!("{id:08}-0000-4000-8000-000000000000"),
            surface_id: "S".into(),
            title: None,
            command: Some("true".into()),
            cwd: "/".into(),
            status: None,
            lifecycle,
            metadata: Map::new(),
            created_at: t.clone(),
            updated_at: t,
            pid: None,
            exit_code: None,
            exit_signal: None,
            location: Location::Tab,
            split_target: None,
            split_direction: None,
            focused: false,
            restart_count: 0,
            terminal_title: None,
            cols: 80,
            rows: 24,
            restored: false,
            last_seen_at: None,
            archive_reason: None,
            group: None,
            parent_id: None,
            workflow_state: None,
            workflow_state_at: None,
            workflow_state_source: None,
            summary: None,
            summary_at: None,
            summary_source: None,
            result: None,
            result_at: None,
            result_source: None,
            result_schema: None,
            agent_type: None,
            agent_type_at: None,
            agent_type_source: None,
            ask: None,
            restart_policy: None,
            next_restart_at: None,
            restart_gave_up: false,
        }
    }

    fn entry(id: &str, seq: u64, pad: usize) -> AuditEntry {
        AuditEntry {
            seq,
            kind: AuditKind::Event,
            name: Some("e".into()),
            message: Some("x".repeat(pad)),
            payload: None,
            source: "t".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            session_id: id.into(),
            surface_id: "S".into(),
            pid: None,
        }
    }

    fn rec(v: SessionView, audit: usize, pad: usize) -> Record {
        let id = v.session_id.clone();
        Record {
            session: v,
            audit: (1..=audit as u64).map(|s| entry(&id, s, pad)).collect(),
        }
    }

    #[test]
    fn age_cutoff_retires_only_terminal_records() {
        let now = SystemTime::now();
        let old = now - RETENTION_AGE - Duration::from_secs(60);
        let recs = vec![
            rec(view(1, Lifecycle::Closed, old), 0, 0),
            rec(view(2, Lifecycle::Archived, old), 0, 0),
            rec(view(3, Lifecycle::Running, old), 0, 0),
            rec(view(4, Lifecycle::Exited, old), 0, 0),
            rec(view(5, Lifecycle::Closed, now), 0, 0),
        ];
        let mut kept: Vec<usize> = apply_retention(recs, now, RETENTION_COUNT)
            .iter()
            .map(|r| r.session.session_id[..8].parse().unwrap())
            .collect();
        kept.sort();
        assert_eq!(kept, [3, 4, 5]);
        // last_seen_at keeps a terminal record alive.
        let mut v = view(6, Lifecycle::Closed, old);
        v.last_seen_at = Some(maxx_protocol::time::rfc3339(now));
        assert_eq!(
            apply_retention(vec![rec(v, 0, 0)], now, RETENTION_COUNT).len(),
            1
        );
    }

    #[test]
    fn count_cap_keeps_the_newest_and_audit_is_bounded() {
        let now = SystemTime::now();
        let recs = |lifecycle| -> Vec<Record> {
            (0..RETENTION_COUNT + 20)
                .map(|i| {
                    rec(
                        view(i, lifecycle, now - Duration::from_secs(i as u64)),
                        0,
                        0,
                    )
                })
                .collect()
        };
        let kept = apply_retention(recs(Lifecycle::Closed), now, RETENTION_COUNT);
        assert_eq!(kept.len(), RETENTION_COUNT);
        assert!(kept
            .iter()
            .all(|r| r.session.session_id[..8].parse::<usize>().unwrap() < RETENTION_COUNT));
        // Never a live one: more running records than the cap all stay.
        let kept = apply_retention(recs(Lifecycle::Running), now, RETENTION_COUNT);
        assert_eq!(kept.len(), RETENTION_COUNT + 20);
        let kept = apply_retention(
            vec![rec(view(1, Lifecycle::Running, now), 1500, 0)],
            now,
            RETENTION_COUNT,
        );
        assert_eq!(kept[0].audit.len(), AUDIT_ON_DISK);
        assert_eq!(kept[0].audit[0].seq, 501, "the newest entries are kept");
    }

    #[test]
    fn oversized_snapshots_trim_the_busiest_audit_first() {
        let now = SystemTime::now();
        let busy = rec(view(1, Lifecycle::Running, now), 400, 1000);
        let quiet = rec(view(2, Lifecycle::Running, now), 10, 1000);
        let stored = |recs: Vec<Record>| -> (HashMap<String, Stored>, Vec<String>) {
            let order = recs.iter().map(|r| r.session.session_id.clone()).collect();
            let map = recs
                .iter()
                .map(|r| {
                    (
                        r.session.session_id.clone(),
                        Stored::from_record(r).unwrap(),
                    )
                })
                .collect();
            (map, order)
        };
        let (map, order) = stored(vec![busy, quiet]);
        let bytes = encode_fitting(&map, &order, 200_000).unwrap();
        assert!(bytes.len() <= 200_000);
        let s: Snapshot = serde_json::from_slice(&bytes).unwrap();
        let by_id: HashMap<_, _> = s
            .sessions
            .iter()
            .map(|r| (r.session.session_id[..8].to_string(), r.audit.len()))
            .collect();
        assert_eq!(by_id["00000002"], 10, "the quiet record keeps its history");
        assert!(by_id["00000001"] < 400);
        // Cannot fit at all: None, so the caller keeps the last file.
        let (map, order) = stored(vec![rec(view(3, Lifecycle::Running, now), 0, 0)]);
        assert!(encode_fitting(&map, &order, 100).is_none());
        // With room, the encoding is exactly what serde writes for the same records.
        let recs = vec![
            rec(view(4, Lifecycle::Closed, now), 3, 5),
            rec(view(5, Lifecycle::Running, now), 0, 0),
        ];
        let (map, order) = stored(recs.clone());
        let ours = encode_fitting(&map, &order, usize::MAX).unwrap();
        let theirs = serde_json::to_vec(&Snapshot {
            sessions: recs,
            version: REGISTRY_VERSION,
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(theirs).unwrap()
        );
    }

    /// A record with every field at its limit and every char escaped (`\u0001`): what
    /// `RECORD_MAX_BYTES` bounds. The struct literal lists every field, so a new field
    /// does not compile here until it is bounded too.
    fn largest_view(id: usize) -> SessionView {
        use maxx_protocol::limits::*;
        use maxx_protocol::session::{RestartMode, RestartPolicy, SplitDirection, WorkflowState};
        let esc = |n: usize| "\u{1}".repeat(n);
        let t = maxx_protocol::time::rfc3339(SystemTime::now());
        let uuid = "ffffffff-ffff-4fff-bfff-ffffffffffff".to_string();
        let mut metadata = Map::new();
        let mut i = 0;
        loop {
            let key = format!("{i:0>64}");
            let used = serde_json::to_vec(&metadata).unwrap().len();
            let room = METADATA_MAP_MAX_BYTES - used;
            // `,"key":"…"`: 1 + 66 + 1 + 2 around the value's chars (6 bytes each).
            let chars = (room.saturating_sub(70) / 6).min((METADATA_VALUE_MAX_BYTES - 2) / 6);
            if chars == 0 || metadata.len() == METADATA_MAX_KEYS {
                break;
            }
            metadata.insert(key, serde_json::Value::String(esc(chars)));
            i += 1;
        }
        let schema = serde_json::json!({"description": "x".repeat(RESULT_SCHEMA_MAX_BYTES - 20)});
        SessionView {
            session_id: format!("{id:08}-0000-4000-8000-000000000000"),
            surface_id: uuid.clone(),
            title: Some(esc(TITLE_MAX_CHARS)),
            command: Some(esc(COMMAND_MAX_CHARS)),
            cwd: esc(CWD_MAX_BYTES),
            status: Some(esc(STATUS_MAX_CHARS)),
            lifecycle: Lifecycle::Archived,
            metadata,
            created_at: t.clone(),
            updated_at: t.clone(),
            pid: Some(u32::MAX),
            exit_code: Some(i32::MIN),
            exit_signal: Some("SIGSTKFLT".into()),
            location: Location::Split,
            split_target: Some(uuid.clone()),
            split_direction: Some(SplitDirection::Right),
            focused: true,
            restart_count: u32::MAX,
            terminal_title: Some(esc(TERMINAL_TITLE_MAX_CHARS)),
            cols: u16::MAX,
            rows: u16::MAX,
            restored: true,
            last_seen_at: Some(t.clone()),
            restart_policy: Some(RestartPolicy {
                mode: RestartMode::OnFailure,
                exit_codes: vec![255; RESTART_EXIT_CODES_MAX],
                max_restarts: u32::MAX,
                window_secs: u64::MAX,
                backoff_min_ms: u64::MAX,
                backoff_max_ms: u64::MAX,
            }),
            next_restart_at: Some(t.clone()),
            restart_gave_up: true,
            archive_reason: Some(esc(ARCHIVE_REASON_MAX_CHARS)),
            group: Some("g".repeat(GROUP_MAX_CHARS)),
            parent_id: Some(uuid),
            workflow_state: Some(WorkflowState::Running),
            workflow_state_at: Some(t.clone()),
            workflow_state_source: Some(esc(SOURCE_MAX_CHARS)),
            summary: Some(esc(SUMMARY_MAX_CHARS)),
            summary_at: Some(t.clone()),
            summary_source: Some(esc(SOURCE_MAX_CHARS)),
            result: Some(esc(RESULT_MAX_BYTES)),
            result_at: Some(t.clone()),
            result_source: Some(esc(SOURCE_MAX_CHARS)),
            result_schema: Some(schema),
            agent_type: Some("a".repeat(AGENT_TYPE_MAX_CHARS)),
            agent_type_at: Some(t.clone()),
            agent_type_source: Some(esc(SOURCE_MAX_CHARS)),
            ask: Some(maxx_protocol::session::Ask {
                id: u64::MAX,
                question: esc(ASK_QUESTION_MAX_CHARS),
                suggestions: vec![esc(ASK_SUGGESTION_MAX_CHARS); ASK_SUGGESTIONS_MAX],
                source: esc(SOURCE_MAX_CHARS),
                asked_at: t.clone(),
            }),
        }
    }

    /// Issue 18 item 3: the bound the snapshot cap is sized from holds for the largest
    /// record a caller can make, and is not loose by more than its fixed allowance.
    #[test]
    fn the_largest_possible_record_fits_record_max_bytes() {
        use maxx_protocol::limits::{METADATA_MAP_MAX_BYTES, RECORD_FIXED_MAX_BYTES};
        let v = largest_view(1);
        let meta = serde_json::to_vec(&v.metadata).unwrap().len();
        assert!(
            meta <= METADATA_MAP_MAX_BYTES && meta > METADATA_MAP_MAX_BYTES - 128,
            "{meta}"
        );
        let len = serde_json::to_vec(&v).unwrap().len();
        assert!(len <= RECORD_MAX_BYTES, "{len} > {RECORD_MAX_BYTES}");
        assert!(
            len + RECORD_FIXED_MAX_BYTES >= RECORD_MAX_BYTES,
            "the bound is {RECORD_MAX_BYTES}, the largest record {len}"
        );
        let stored = Stored::new(&v).unwrap();
        assert!(stored.encoded_len(0) <= RECORD_MAX_BYTES + SNAPSHOT_RECORD_OVERHEAD);
        // And as a journal line.
        let line = Encoded::session(&v).unwrap().line();
        assert!(line.len() <= RECORD_MAX_BYTES + 64);
    }

    /// The boundary, scaled: a snapshot cap sized as REGISTRY_MAX_BYTES is (N records of
    /// RECORD_MAX_BYTES plus framing) always holds N of the largest records; audit history
    /// is what gives way, oldest first, and every record is written whole.
    #[test]
    fn a_snapshot_sized_for_n_largest_records_always_holds_them_and_trims_only_audit() {
        const N: usize = 6;
        let cap = N * (RECORD_MAX_BYTES + SNAPSHOT_RECORD_OVERHEAD) + SNAPSHOT_FRAMING_BYTES;
        let mut map = HashMap::new();
        let mut order = Vec::new();
        for i in 0..N {
            let v = largest_view(i + 1);
            let mut stored = Stored::new(&v).unwrap();
            for seq in 1..=200u64 {
                let e = entry(&v.session_id, seq, 1000);
                stored.audit.push(crate::audit_log::encode(&e).unwrap());
            }
            order.push(v.session_id.clone());
            map.insert(v.session_id.clone(), stored);
        }
        let bytes = encode_fitting(&map, &order, cap).expect("N largest records always fit");
        assert!(bytes.len() <= cap);
        let snap: Snapshot = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(snap.sessions.len(), N, "no record is ever skipped");
        for r in &snap.sessions {
            let want = largest_view(r.session.session_id[..8].parse().unwrap());
            assert_eq!(r.session.result, want.result);
            assert_eq!(r.session.metadata, want.metadata);
            // What audit is kept is the newest.
            if let Some(first) = r.audit.first() {
                assert_eq!(r.audit.last().unwrap().seq, 200);
                assert_eq!(first.seq as usize, 201 - r.audit.len());
            }
        }
        // The real cap holds RETAINED_RECORDS_MAX of them with ≥ 16 MiB to spare for audit.
        const { assert!(SNAPSHOT_RECORDS_MAX_BYTES + 16 * 1024 * 1024 <= REGISTRY_MAX_BYTES) };
    }

    /// Operations queued together are written together: 100 upserts waiting in the
    /// mailbox (the actor held busy by an acknowledgement until they are) take one journal
    /// write, made before the acknowledgement queued behind them runs, which finds every
    /// line in the file.
    #[test]
    fn queued_operations_take_one_write_before_the_acknowledgement_behind_them() {
        let (tmp, dir) = super::tests_support::fresh_dir("batch");
        let stats = Arc::new(Stats::default());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let journal = tmp.join(JOURNAL_FILE);
        let (lines, writes) = rt.block_on(async {
            let args = PersistArgs {
                dir,
                fsync: false,
                stats: stats.clone(),
                retain: RETENTION_COUNT,
            };
            let (actor, handle) = Actor::spawn(None, PersistenceActor, args).await.unwrap();
            let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
            actor
                .cast(PersistMsg::Ack(Box::new(move |_| {
                    let _ = hold_rx.recv();
                })))
                .unwrap();
            let now = SystemTime::now();
            for i in 0..100 {
                let v = view(i, Lifecycle::Running, now);
                actor
                    .cast(PersistMsg::Upsert(std::sync::Arc::new(v)))
                    .unwrap();
            }
            let writes_before = stats
                .journal_writes
                .load(std::sync::atomic::Ordering::Relaxed);
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (path, counter) = (journal.clone(), stats.clone());
            actor
                .cast(PersistMsg::Ack(Box::new(move |durable| {
                    durable.unwrap();
                    let text = fs::read_to_string(&path).unwrap_or_default();
                    let writes = counter
                        .journal_writes
                        .load(std::sync::atomic::Ordering::Relaxed);
                    let _ = tx.send((text.lines().count(), writes - writes_before));
                })))
                .unwrap();
            hold_tx.send(()).unwrap();
            let seen = rx.await.unwrap();
            actor.stop(None);
            handle.await.unwrap();
            seen
        });
        assert_eq!(
            lines, 100,
            "every operation is in the journal when the ack runs"
        );
        assert_eq!(writes, 1, "one write for the 100 queued operations");
        fs::remove_dir_all(&tmp).unwrap();
    }

    /// A journal write that would pass JOURNAL_MAX_BYTES (only possible while snapshots
    /// fail) is refused, never written: the next start would ignore such a journal. The
    /// operation is held in memory and reaches disk with the next successful snapshot.
    #[test]
    fn a_journal_write_past_its_cap_is_refused_and_caught_up_by_a_snapshot() {
        let (tmp, dir) = super::tests_support::fresh_dir("jcap");
        let stats = Arc::new(Stats::default());
        let mut st = PersistState::new(dir.clone(), false, stats.clone(), RETENTION_COUNT);
        st.write_journal(b"").unwrap();
        // As if folds had been failing while the journal grew to its cap.
        st.journal_bytes = JOURNAL_MAX_BYTES - 10;
        st.next_fold_at = u64::MAX;
        let v = view(9, Lifecycle::Running, SystemTime::now());
        let rt = tokio::runtime::Builder::new_multi_thread().build().unwrap();
        rt.block_on(async {
            st.append(Encoded::session(&v).unwrap().line());
            st.write_batch();
        });
        assert_eq!(fs::metadata(tmp.join(JOURNAL_FILE)).unwrap().len(), 0);
        let err = st.not_durable().unwrap_err();
        assert_eq!(err.code, ErrorCode::PersistenceFailed);
        assert!(err.message.contains("limit"), "{}", err.message);
        assert_eq!(
            stats
                .journal_behind
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        // The operation is applied in memory; the retry folds it into a snapshot.
        st.apply(Encoded::session(&v).unwrap());
        rt.block_on(async { st.catch_up() });
        assert!(st.not_durable().is_ok());
        let mut fresh = PersistState::new(dir, false, Arc::default(), RETENTION_COUNT);
        assert!(fresh.load().contains_key(&v.session_id));
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn journal_replay_is_idempotent_and_survives_a_torn_line() {
        let (tmp, dir) = super::tests_support::fresh_dir("persist");
        let now = SystemTime::now();
        let v = view(7, Lifecycle::Running, now);
        let id = v.session_id.clone();
        let mut lines = Vec::new();
        for op in [
            Op::Session {
                session: Box::new(v.clone()),
            },
            Op::Audit {
                entry: Box::new(entry(&id, 1, 1)),
            },
            Op::Audit {
                entry: Box::new(entry(&id, 2, 1)),
            },
            Op::Audit {
                entry: Box::new(entry(&id, 2, 1)),
            },
        ] {
            lines.extend(serde_json::to_vec(&op).unwrap());
            lines.push(b'\n');
        }
        lines.extend_from_slice(br#"{"op":"audit","entry":{"seq":3"#);
        fs::write(tmp.join(JOURNAL_FILE), &lines).unwrap();
        let mut st = PersistState::new(dir, false, Arc::default(), RETENTION_COUNT);
        assert_eq!(st.load()[&id].audit.len(), 2);
        // An oversized snapshot is preserved and makes this run read-only.
        // Sparse: the size is refused before anything is read.
        let huge = REGISTRY_MAX_BYTES as u64 + 1;
        fs::File::create(tmp.join(REGISTRY_FILE))
            .unwrap()
            .set_len(huge)
            .unwrap();
        st.load();
        assert!(st.read_only);
        st.fold().unwrap();
        assert_eq!(fs::metadata(tmp.join(REGISTRY_FILE)).unwrap().len(), huge);
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_dropped_record_stays_dropped_on_replay_and_in_the_next_snapshot() {
        let (tmp, dir) = super::tests_support::fresh_dir("drop");
        let now = SystemTime::now();
        let (gone, kept) = (
            view(1, Lifecycle::Closed, now),
            view(2, Lifecycle::Closed, now),
        );
        let mut st = PersistState::new(dir.clone(), false, Arc::default(), RETENTION_COUNT);
        let rt = tokio::runtime::Builder::new_multi_thread().build().unwrap();
        rt.block_on(async {
            st.record(Encoded::session(&gone).unwrap());
            st.record(Encoded::session(&kept).unwrap());
            st.record(Encoded::drop(gone.session_id.clone()).unwrap());
            // The actor's `WriteBatch`, queued with the first of them.
            st.write_batch();
        });
        assert!(!st.records.contains_key(&gone.session_id));
        // The journal alone (a crash before any fold) replays the drop.
        let mut fresh = PersistState::new(dir.clone(), false, Arc::default(), RETENTION_COUNT);
        let loaded = fresh.load();
        assert_eq!(loaded.keys().collect::<Vec<_>>(), vec![&kept.session_id]);
        // And a fold leaves it out of the snapshot.
        st.fold().unwrap();
        let snap: Snapshot =
            serde_json::from_slice(&fs::read(tmp.join(REGISTRY_FILE)).unwrap()).unwrap();
        assert_eq!(snap.sessions.len(), 1);
        assert_eq!(snap.sessions[0].session.session_id, kept.session_id);
        fs::remove_dir_all(&tmp).unwrap();
    }
}

#[cfg(test)]
mod fold_tests {
    use super::journal::*;
    use super::snapshot::*;
    use super::*;

    fn view_n(n: u32) -> SessionView {
        serde_json::from_value(serde_json::json!({
            "session_id": format!("{n:08}-0000-4000-8000-000000000000"), "surface_id": "S",
            "title": null, "command": "true", "cwd": "/", "status": null, "lifecycle": "running",
            "metadata": {}, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "pid": null, "location": "tab",
            "focused": false, "restart_count": 0, "cols": 80, "rows": 24
        }))
        .unwrap()
    }

    /// Issue 18 item 3: a fold that fails (here: a directory planted at the snapshot's temp
    /// name) is not retried, and not logged again, with every operation: only once the
    /// journal has grown FOLD_RETRY_BYTES more. Nothing is lost meanwhile (the journal keeps
    /// every line), and the first fold that goes through truncates the journal.
    #[test]
    fn a_failing_fold_is_retried_only_as_the_journal_grows() {
        let (tmp, dir) = super::tests_support::fresh_dir("foldfail");
        let mut st = PersistState::new(dir.clone(), false, Arc::default(), RETENTION_COUNT);
        st.write_journal(b"").unwrap();
        let plant = tmp.join(format!(".{REGISTRY_FILE}.tmp.{}", std::process::id()));
        std::fs::create_dir(&plant).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().build().unwrap();
        st.journal_bytes = FOLD_BYTES; // the next write folds
        rt.block_on(async { st.record(Encoded::session(&view_n(1)).unwrap()) });
        assert!(st.fold_failing);
        assert!(!tmp.join(REGISTRY_FILE).exists());
        let retry_at = st.next_fold_at;
        assert_eq!(retry_at, st.journal_bytes + FOLD_RETRY_BYTES);
        // Below the retry point: no attempt (a failed one would move the retry point).
        rt.block_on(async { st.record(Encoded::session(&view_n(2)).unwrap()) });
        assert_eq!(st.next_fold_at, retry_at);
        assert!(
            st.not_durable().is_ok(),
            "the journal still takes every line"
        );
        // The disk takes the snapshot again and the journal passed the retry point: folded.
        std::fs::remove_dir(&plant).unwrap();
        st.journal_bytes = retry_at;
        rt.block_on(async { st.record(Encoded::session(&view_n(3)).unwrap()) });
        assert!(!st.fold_failing);
        assert_eq!(st.journal_bytes, 0);
        let snap: Snapshot =
            serde_json::from_slice(&std::fs::read(tmp.join(REGISTRY_FILE)).unwrap()).unwrap();
        assert_eq!(snap.sessions.len(), 3);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    /// Regression: an operation that triggers a fold must be in the snapshot the fold
    /// writes (it used to be applied after the journal holding it was truncated).
    #[test]
    fn the_operation_that_triggers_a_fold_is_in_the_snapshot() {
        let (tmp, dir) = super::tests_support::fresh_dir("fold");
        let mut st = PersistState::new(dir, false, Arc::default(), RETENTION_COUNT);
        st.write_journal(b"").unwrap();
        st.journal_bytes = FOLD_BYTES; // the next write folds
        let json = serde_json::json!({
            "session_id": "00000001-0000-4000-8000-000000000000", "surface_id": "S",
            "title": null, "command": "true", "cwd": "/", "status": null, "lifecycle": "running",
            "metadata": {"k": "v"}, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "pid": null, "location": "tab",
            "focused": false, "restart_count": 0, "cols": 80, "rows": 24
        });
        let view: SessionView = serde_json::from_value(json).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().build().unwrap();
        rt.block_on(async { st.record(Encoded::session(&view).unwrap()) });
        let snap: Snapshot =
            serde_json::from_slice(&std::fs::read(tmp.join(REGISTRY_FILE)).unwrap()).unwrap();
        assert_eq!(snap.sessions.len(), 1);
        assert_eq!(snap.sessions[0].session.metadata["k"], "v");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}

#[cfg(test)]
mod restore_tests {
    use super::snapshot::*;
    use super::*;
    use maxx_protocol::session::Lifecycle;

    fn running(n: u32, pid: u32) -> SessionView {
        // Updated now: a closed record that old would be retired by age at the next fold.
        let now = maxx_protocol::time::rfc3339(SystemTime::now());
        serde_json::from_value(serde_json::json!({
            "session_id": format!("{n:08}-0000-4000-8000-000000000000"), "surface_id": "S",
            "title": null, "command": "sleep 600", "cwd": "/", "status": null,
            "lifecycle": "running", "metadata": {}, "created_at": now,
            "updated_at": now, "pid": pid, "location": "tab",
            "focused": false, "restart_count": 0, "cols": 80, "rows": 24
        }))
        .unwrap()
    }

    async fn start(dir: &ControlDir) -> ActorRef<PersistMsg> {
        let args = PersistArgs {
            dir: dir.clone(),
            fsync: false,
            stats: Arc::default(),
            retain: RETENTION_COUNT,
        };
        Actor::spawn(None, PersistenceActor, args).await.unwrap().0
    }

    async fn flush(p: &ActorRef<PersistMsg>) {
        p.call(PersistMsg::Flush, None).await.unwrap();
    }

    /// What `registry.json` holds for each session: (lifecycle, pid).
    fn on_disk(tmp: &std::path::Path) -> Vec<(Lifecycle, Option<u32>)> {
        let snap: Snapshot =
            serde_json::from_slice(&std::fs::read(tmp.join(REGISTRY_FILE)).unwrap()).unwrap();
        let mut v: Vec<_> = snap.sessions.into_iter().map(|r| r.session).collect();
        v.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        v.into_iter().map(|s| (s.lifecycle, s.pid)).collect()
    }

    /// A daemon killed after loading the registry and before deciding which survivors are its
    /// sessions' programs must leave the records as they were: the next daemon decides by
    /// them. (It used to fold them detached at the load: a kill in the few milliseconds
    /// before the re-adoptions were journaled left every live session closed on disk, and the
    /// next daemon released their programs — `keeper::repeated_crashes_are_recovered_each_time`
    /// caught it once in CI.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn restored_records_stay_as_they_were_on_disk_until_decided() {
        let (tmp, dir) = super::tests_support::fresh_dir("restore-undecided");
        let first = start(&dir).await;
        for (n, pid) in [(1, 4241), (2, 4242)] {
            first
                .cast(PersistMsg::Upsert(Arc::new(running(n, pid))))
                .unwrap();
        }
        flush(&first).await;
        first.stop(None);
        let expect_running = vec![
            (Lifecycle::Running, Some(4241)),
            (Lifecycle::Running, Some(4242)),
        ];
        assert_eq!(on_disk(&tmp), expect_running);

        // The next daemon loads (and folds) them, and is handed them detached with what
        // they said before; the disk still says what the last run left.
        let next = start(&dir).await;
        let restored = next.call(PersistMsg::TakeRestored, None).await.unwrap();
        let ractor::rpc::CallResult::Success(restored) = restored else {
            panic!("no answer")
        };
        assert_eq!(restored.len(), 2);
        for (r, last) in &restored {
            assert_eq!(r.session.lifecycle, Lifecycle::Closed);
            assert_eq!(r.session.pid, None);
            assert_eq!(last.lifecycle, Lifecycle::Running);
        }
        assert_eq!(on_disk(&tmp), expect_running, "the load wrote a decision");
        // A later fold before the decision keeps them too.
        flush(&next).await;
        assert_eq!(on_disk(&tmp), expect_running, "a fold wrote a decision");

        // Session 2 is re-adopted (its actor upserts it), session 1 is not: once decided,
        // 1 is journaled closed, 2 stays as its upsert said.
        next.cast(PersistMsg::Upsert(Arc::new(running(2, 4242))))
            .unwrap();
        next.cast(PersistMsg::RestoredDecided).unwrap();
        flush(&next).await;
        assert_eq!(
            on_disk(&tmp),
            vec![(Lifecycle::Closed, None), (Lifecycle::Running, Some(4242))]
        );
        next.stop(None);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}

#[cfg(test)]
mod depth_tests {
    use super::journal::*;
    use super::snapshot::*;
    use super::*;
    use maxx_protocol::error::ErrorCode;
    use maxx_protocol::limits::{JSON_MAX_DEPTH, SERDE_JSON_MAX_NESTING};
    use serde_json::{json, Value};

    fn deep(depth: usize) -> Value {
        (0..depth).fold(json!(1), |v, i| {
            if i % 2 == 0 {
                json!([v])
            } else {
                json!({ "k": v })
            }
        })
    }

    fn view_with(metadata: Value, schema: Option<Value>) -> SessionView {
        let mut v: SessionView = serde_json::from_value(json!({
            "session_id": "00000001-0000-4000-8000-000000000000", "surface_id": "S",
            "title": null, "command": "true", "cwd": "/", "status": null, "lifecycle": "running",
            "metadata": {}, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "pid": null, "location": "tab",
            "focused": false, "restart_count": 0, "cols": 80, "rows": 24
        }))
        .unwrap();
        v.metadata.insert("k".into(), metadata);
        v.result_schema = schema;
        v
    }

    #[test]
    fn the_scan_counts_nesting_and_skips_strings() {
        assert_eq!(nesting_depth(b"1"), 0);
        assert_eq!(nesting_depth(br#"{"a":[[1],{}]}"#), 3);
        assert_eq!(nesting_depth(br#"["[[[\"{{", "\\"]"#), 1);
        assert_eq!(nesting_depth(deep(100).to_string().as_bytes()), 100);
    }

    /// What this build writes at the bound reads back with serde_json's default limit,
    /// in the journal and in the snapshot; the default limit is what the constants say.
    #[test]
    fn the_deepest_storable_value_fits_every_persisted_form() {
        let limit = |d: usize| serde_json::from_str::<Value>(&deep(d).to_string()).is_ok();
        assert!(limit(SERDE_JSON_MAX_NESTING) && !limit(SERDE_JSON_MAX_NESTING + 1));
        let v = deep(JSON_MAX_DEPTH);
        let view = view_with(v.clone(), Some(v.clone()));
        let mut entry = super::tests_support::entry(&view.session_id, 1);
        entry.payload = Some(v.clone());
        let session = Encoded::session(&view).unwrap();
        let audit = Encoded::Audit {
            entry: crate::audit_log::encode(&entry).unwrap(),
            session_id: view.session_id.clone(),
            seq: 1,
        };
        for line in [session.line(), audit.line()] {
            assert!(nesting_depth(&line) < SERDE_JSON_MAX_NESTING);
            serde_json::from_slice::<Op>(&line).expect("a journal line reads back");
        }
        let mut stored = Stored::new(&view).unwrap();
        stored.audit.push(crate::audit_log::encode(&entry).unwrap());
        let records = HashMap::from([(view.session_id.clone(), stored)]);
        let bytes =
            encode_fitting(&records, std::slice::from_ref(&view.session_id), usize::MAX).unwrap();
        assert!(nesting_depth(&bytes) < SERDE_JSON_MAX_NESTING);
        let snap: Snapshot = serde_json::from_slice(&bytes).expect("the snapshot reads back");
        assert_eq!(snap.sessions[0].session.metadata["k"], v);
        assert_eq!(snap.sessions[0].audit[0].payload, Some(v));
    }

    /// A registry an older build wrote (a value past serde_json's default limit once
    /// wrapped) still loads; one deeper than any build wrote is unreadable, not a crash.
    #[test]
    fn a_registry_deeper_than_the_default_limit_loads_and_an_absurd_one_is_refused() {
        let (tmp, dir) = super::tests_support::fresh_dir("deep");
        let v = deep(125);
        let snap = Snapshot {
            sessions: vec![Record {
                session: view_with(v.clone(), None),
                audit: Vec::new(),
            }],
            version: REGISTRY_VERSION,
        };
        let bytes = serde_json::to_vec(&snap).unwrap();
        assert!(nesting_depth(&bytes) > SERDE_JSON_MAX_NESTING);
        std::fs::write(tmp.join(REGISTRY_FILE), &bytes).unwrap();
        let mut st = PersistState::new(dir.clone(), false, Arc::default(), RETENTION_COUNT);
        let loaded = st.load();
        assert!(!st.read_only);
        assert_eq!(loaded.values().next().unwrap().session.metadata["k"], v);
        let absurd = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        std::fs::write(tmp.join(REGISTRY_FILE), absurd).unwrap();
        let stats = Arc::new(Stats::default());
        let mut st = PersistState::new(dir, false, stats.clone(), RETENTION_COUNT);
        st.load();
        assert!(st.read_only);
        let why = stats.registry_unreadable.get().unwrap();
        assert!(why.reason.contains("100000 levels"), "{}", why.reason);
        assert_eq!(
            st.not_durable().unwrap_err().code,
            ErrorCode::RegistryUnreadable
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}

#[cfg(test)]
mod tests_support {
    use crate::control_dir::ControlDir;
    use maxx_protocol::audit::{AuditEntry, AuditKind};
    use std::path::PathBuf;

    /// An empty control dir of its own for one test (`tag` tells the tests apart).
    pub fn fresh_dir(tag: &str) -> (PathBuf, ControlDir) {
        let tmp = std::env::temp_dir().join(format!("maxx-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let dir = ControlDir::prepare(&tmp).unwrap();
        (tmp, dir)
    }

    pub fn entry(id: &str, seq: u64) -> AuditEntry {
        AuditEntry {
            seq,
            kind: AuditKind::Event,
            name: Some("e".into()),
            message: None,
            payload: None,
            source: "t".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            session_id: id.into(),
            surface_id: "S".into(),
            pid: None,
        }
    }
}
