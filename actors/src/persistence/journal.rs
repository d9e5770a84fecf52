//! `registry.journal`: the write-ahead lines (one `write(2)` per operation, before the
//! request is answered), what happens when a write fails (cut back, backlog, catch-up), the
//! cap that keeps it readable, and its replay at load.

use super::snapshot::{parse_registry_json, read_bounded, Record};
use super::{
    PersistMsg, PersistState, BACKLOG_MAX_BYTES, BATCH_MAX_BYTES, JOURNAL_FILE, JOURNAL_MAX_BYTES,
};
use crate::audit_log::EncodedEntry;
use crate::retention::last_activity;
use crate::stats::Stats;
use maxx_protocol::audit::AuditEntry;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::session::{Lifecycle, SessionView};
use ractor::ActorRef;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::SystemTime;

/// One journal line as it is read back.
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Op {
    Session {
        session: Box<SessionView>,
    },
    Audit {
        entry: Box<AuditEntry>,
    },
    /// Retention dropped the record from the live registry: it is gone for good.
    Drop {
        session_id: String,
    },
}

/// One journal line, encoded once: the line is written and its payload kept as stored.
pub(super) enum Encoded {
    Session {
        view: Box<RawValue>,
        id: String,
        lifecycle: Lifecycle,
        activity: SystemTime,
    },
    Audit {
        entry: EncodedEntry,
        session_id: String,
        seq: u64,
    },
    Drop {
        line: Vec<u8>,
        session_id: String,
    },
}

impl Encoded {
    pub(super) fn session(view: &SessionView) -> Option<Encoded> {
        Some(Encoded::Session {
            view: serde_json::value::to_raw_value(view).ok()?,
            id: view.session_id.clone(),
            lifecycle: view.lifecycle,
            activity: last_activity(view),
        })
    }

    pub(super) fn drop(session_id: String) -> Option<Encoded> {
        let mut line = serde_json::to_vec(&Op::Drop {
            session_id: session_id.clone(),
        })
        .ok()?;
        line.push(b'\n');
        Some(Encoded::Drop { line, session_id })
    }

    /// The journal line (the same shape `Op` reads back).
    pub(super) fn line(&self) -> Vec<u8> {
        let (head, raw): (&str, &RawValue) = match self {
            Encoded::Session { view, .. } => (r#"{"op":"session","session":"#, view),
            Encoded::Audit { entry, .. } => (r#"{"op":"audit","entry":"#, entry),
            Encoded::Drop { line, .. } => return line.clone(),
        };
        let mut line = Vec::with_capacity(head.len() + raw.get().len() + 2);
        line.extend_from_slice(head.as_bytes());
        line.extend_from_slice(raw.get().as_bytes());
        line.extend_from_slice(b"}\n");
        line
    }
}

/// Apply an operation to records in their struct form (loading).
pub(super) fn apply_to(records: &mut HashMap<String, Record>, op: Op) {
    match op {
        Op::Session { session } => match records.get_mut(&session.session_id) {
            Some(r) => r.session = *session,
            None => {
                records.insert(
                    session.session_id.clone(),
                    Record {
                        session: *session,
                        audit: Vec::new(),
                    },
                );
            }
        },
        Op::Audit { entry } => {
            if let Some(r) = records.get_mut(&entry.session_id) {
                if r.audit.last().is_none_or(|last| last.seq < entry.seq) {
                    r.audit.push(*entry);
                }
            }
        }
        Op::Drop { session_id } => {
            records.remove(&session_id);
        }
    }
}

/// Open `registry.journal` for writing through [`open_regular`]: `O_NOFOLLOW`, `O_NONBLOCK`
/// (cleared once it is known to be a regular file), `O_CLOEXEC`, mode 0600, and `fstat` must
/// show a regular file. A symlink is never opened (so never truncated or appended through)
/// and a FIFO never blocks the actor.
pub(super) fn open_journal(path: &Path, opts: &mut OpenOptions) -> io::Result<File> {
    crate::control_dir::open_regular(path, opts.mode(0o600), false)
}

impl PersistState {
    /// Replay `registry.journal` over `records` (unreadable: preserved, this run read-only).
    pub(super) fn replay_journal(&mut self, records: &mut HashMap<String, Record>) {
        let journal_path = self.dir.path().join(JOURNAL_FILE);
        match read_bounded(&journal_path, JOURNAL_MAX_BYTES) {
            Ok(None) => {}
            Ok(Some(bytes)) => {
                let mut applied = 0usize;
                for line in BufReader::new(&bytes[..]).split(b'\n') {
                    let Ok(line) = line else { break };
                    // A torn last line from a crash mid-write is skipped.
                    if let Ok(op) = parse_registry_json::<Op>(&line) {
                        apply_to(records, op);
                        applied += 1;
                    }
                }
                tracing::info!(applied, "journal replayed");
            }
            // Ignoring it would lose what it holds at the next fold: preserve it instead.
            Err(e) => self.unreadable(JOURNAL_FILE, e),
        }
    }

    /// Hold `f` (just opened) as the journal: its length, and the device and inode each
    /// write checks the journal's name against.
    pub(super) fn hold_journal(&mut self, f: File) -> io::Result<()> {
        let meta = f.metadata()?;
        self.journal_bytes = meta.len();
        self.journal_id = (meta.dev(), meta.ino());
        self.journal = Some(f);
        Ok(())
    }

    /// Append `bytes` (whole lines) to the journal, opening it first if none is held; a
    /// write that fails is cut back to the last complete line. A write that would take the
    /// journal past [`JOURNAL_MAX_BYTES`] (only possible while snapshots fail) is refused:
    /// the next start would not read such a journal.
    pub(super) fn write_journal(&mut self, bytes: &[u8]) -> io::Result<()> {
        let path = self.dir.path().join(JOURNAL_FILE);
        if self.journal.is_none() {
            let f = open_journal(&path, OpenOptions::new().create(true).append(true))?;
            self.hold_journal(f)?;
        }
        if self.journal_bytes + 1 + bytes.len() as u64 > JOURNAL_MAX_BYTES {
            return Err(io::Error::other(format!(
                "registry.journal would pass its {JOURNAL_MAX_BYTES}-byte limit and registry.json \
                 cannot be written to fold it"
            )));
        }
        let Some(f) = self.journal.as_mut() else {
            return Err(io::Error::other("registry.journal is not open"));
        };
        // Removed, renamed away or replaced under us (by a symlink, a FIFO, another file):
        // lines written to the file we hold would not be at the journal's name at the next
        // start. The caller writes a snapshot instead, and the reopen refuses anything but a
        // regular file. (The name leading to the held inode means it is linked: one `stat`.)
        let at_path = std::fs::symlink_metadata(&path);
        if !at_path.is_ok_and(|m| (m.dev(), m.ino()) == self.journal_id) {
            self.journal = None;
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "registry.journal was removed or replaced",
            ));
        }
        let lead: &[u8] = if self.torn { b"\n" } else { b"" };
        let result = (|| {
            if !lead.is_empty() {
                f.write_all(lead)?;
            }
            f.write_all(bytes)?;
            Ok(())
        })();
        match result {
            Ok(()) => {
                Stats::add(&self.stats.journal_writes, 1);
                self.journal_bytes += (lead.len() + bytes.len()) as u64;
                self.torn = false;
                // With --fsync, one fdatasync covers every line written since the last
                // (group commit: `start_sync`); acknowledgements wait for it.
                self.unsynced |= self.fsync;
                Ok(())
            }
            Err(e) => {
                // ENOSPC can land part of a line. Cut it off (truncating needs no space);
                // if even that fails, the next write starts on a new line.
                if f.set_len(self.journal_bytes).is_err() {
                    self.torn = true;
                    self.journal = None;
                }
                Err(e)
            }
        }
    }

    /// `--fsync` group commit: start one fdatasync covering every journal line written so
    /// far, for the acknowledgements waiting (`pending_acks`), unless one is in flight: then
    /// they wait for the next, started as soon as that one ends ([`Self::synced`]). The sync
    /// runs on a blocking thread, so lines keep being written meanwhile and the next sync
    /// covers all of them: the busier the daemon, the more each sync serves.
    pub(super) fn start_sync(&mut self, myself: &ActorRef<PersistMsg>) {
        if self.sync_in_flight || self.pending_acks.is_empty() {
            return;
        }
        if !self.unsynced {
            // Everything written is durable already (a sync or a fold covered it).
            let durable = self.not_durable();
            release(std::mem::take(&mut self.pending_acks), &durable);
            return;
        }
        let file = match self.journal.as_ref().map(File::try_clone) {
            Some(Ok(file)) => file,
            Some(Err(e)) => return self.sync_failed(&e),
            None => return self.sync_failed(&io::Error::other("registry.journal is not open")),
        };
        self.unsynced = false;
        self.syncing = std::mem::take(&mut self.pending_acks);
        self.sync_in_flight = true;
        let myself = myself.clone();
        tokio::task::spawn_blocking(move || {
            let result = file.sync_data().map_err(|e| e.to_string());
            let _ = myself.cast(PersistMsg::Synced(result));
        });
    }

    /// The sync [`Self::start_sync`] started ended: release the acknowledgements it covered
    /// (a failed sync is `persistence_failed` for each, and mutations are refused until a
    /// write works), then start the next one for those that arrived meanwhile.
    pub(super) fn synced(&mut self, result: Result<(), String>, myself: &ActorRef<PersistMsg>) {
        self.sync_in_flight = false;
        Stats::add(&self.stats.journal_syncs, 1);
        if let Err(e) = result {
            self.fell_behind(&io::Error::other(e));
        }
        let durable = self.not_durable();
        release(std::mem::take(&mut self.syncing), &durable);
        self.start_sync(myself);
    }

    fn sync_failed(&mut self, e: &io::Error) {
        self.fell_behind(e);
        let durable = self.not_durable();
        release(std::mem::take(&mut self.pending_acks), &durable);
    }

    /// A fold synced the snapshot, which holds every line: release every acknowledgement
    /// waiting for a sync (one still in flight finds none left).
    pub(super) fn folded_synced(&mut self) {
        let durable = self.not_durable();
        release(std::mem::take(&mut self.syncing), &durable);
        release(std::mem::take(&mut self.pending_acks), &durable);
    }

    pub(super) fn behind(&self) -> bool {
        self.failure.is_some()
    }

    pub(super) fn fell_behind(&mut self, e: &io::Error) {
        use std::sync::atomic::Ordering;
        // Every message but an operation writes the gathered lines before it is handled,
        // and a failed batch write becomes the backlog: nothing is gathered when the
        // journal falls behind, so the backlog keeps the operations' order.
        debug_assert!(self.batch.is_empty(), "lines gathered while falling behind");
        if self.failure.is_none() {
            tracing::error!(error = %e, "journal write failed; mutations are refused until it can be written");
            self.stats.journal_behind.store(1, Ordering::Relaxed);
        }
        Stats::add(&self.stats.journal_write_errors, 1);
        self.failure_unsafe = crate::control_dir::unsafe_file(e).is_some();
        self.failure = Some(e.to_string());
    }

    pub(super) fn caught_up(&mut self) {
        use std::sync::atomic::Ordering;
        if self.failure.take().is_some() {
            tracing::warn!("journal writable again; the operations held in memory are written");
            self.stats.journal_behind.store(0, Ordering::Relaxed);
        }
    }

    /// Write what the journal is missing: the backlog, or (if it was dropped) a snapshot.
    pub(super) fn catch_up(&mut self) {
        if self.read_only || !self.behind() {
            return;
        }
        let full = self.journal_bytes + 1 + self.backlog.len() as u64 > JOURNAL_MAX_BYTES;
        if self.backlog_lost || full {
            // fold() reports its own failure; a success clears the backlog.
            let _ = tokio::task::block_in_place(|| self.fold());
            return;
        }
        let backlog = std::mem::take(&mut self.backlog);
        match self.write_journal(&backlog) {
            Ok(()) => self.caught_up(),
            Err(e) => {
                self.backlog = backlog;
                self.fell_behind(&e);
            }
        }
    }

    /// The error an acknowledgement carries while the journal is behind.
    pub(super) fn not_durable(&self) -> Result<(), ErrorBody> {
        if let Some(u) = self.stats.registry_unreadable.get() {
            return Err(u.error());
        }
        match &self.failure {
            None => Ok(()),
            Some(why) => Err(ErrorBody::new(
                ErrorCode::PersistenceFailed,
                format!(
                    "the registry journal cannot be written ({why}); the change is not on disk"
                ),
            )
            .with_remedy(if self.failure_unsafe {
                format!(
                    "remove {} (the daemon never writes through a symlink, FIFO or anything \
                     but a regular file there); the daemon writes what it holds in memory with \
                     the next mutation",
                    self.dir.path().join(JOURNAL_FILE).display()
                )
            } else {
                "free space in the control dir (see `maxx daemon status`); the daemon writes \
                 what it holds in memory with the next mutation"
                    .to_string()
            })),
        }
    }

    pub(super) fn append(&mut self, line: Vec<u8>) {
        if self.read_only {
            return;
        }
        if self.behind() {
            // Keep the order: this line goes after what is already waiting.
            if self.backlog.len() + line.len() > BACKLOG_MAX_BYTES {
                self.backlog = Vec::new();
                self.backlog_lost = true;
            } else if !self.backlog_lost {
                self.backlog.extend_from_slice(&line);
            }
            // A snapshot must wait until this operation is applied (record() runs it).
            if !self.backlog_lost {
                self.catch_up();
            }
            return;
        }
        // Gathered for one write with the operations queued behind it (the actor's
        // `WriteBatch`), or now if the batch is full.
        self.batch.extend_from_slice(&line);
        if self.batch.len() >= BATCH_MAX_BYTES {
            self.write_batch();
        }
    }

    /// Write the lines gathered by [`Self::append`], in one write of whole lines: a crash
    /// leaves at most the last line torn, and a failed write is cut back to the last
    /// complete line before the batch, which then waits as the backlog.
    pub(super) fn write_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        match self.write_journal(&batch) {
            Ok(()) => {
                // Keep the buffer: the next burst fills it without growing it again.
                self.batch = batch;
                self.batch.clear();
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // What the journal held is gone with it: only a snapshot catches up, and
                // it holds these operations (applied already): write it now.
                self.fell_behind(&e);
                self.backlog_lost = true;
                self.catch_up();
            }
            Err(e) => {
                self.backlog = batch;
                self.fell_behind(&e);
            }
        }
    }
}

fn release(acks: Vec<super::AckFn>, durable: &Result<(), ErrorBody>) {
    for done in acks {
        done(durable.clone());
    }
}
