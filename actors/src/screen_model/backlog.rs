//! The grid's backlog: output the pump read and the grid has not parsed yet.
//!
//! Every byte of it is in the screen memory's log as well (logged before it counts as read:
//! `store.rs`), so while the session has a screen memory the backlog is read from the log,
//! through a cursor, instead of being held a second time. Each session of a fleet of agent
//! TUIs held ~100 KiB of output twice that way (12 s of redraws; up to [`super::PARSE_AT`]
//! each after a minute). It is held in a [`RawRing`] instead while there is no screen memory
//! (no keeper, or none could be made), once the output outran the memory (the backlog is
//! copied out of the log before the log is given back), and after a recovery until it was
//! parsed once (the replayed bytes are already in the log, ahead of where a cursor would
//! start).

use super::store::{LogCursor, Piece, Store, Tail};
use crate::grid::RawRing;
use maxx_protocol::limits::RAW_RING_BYTES;

/// Where the backlog is.
pub(super) enum Backlog {
    /// Held here.
    Ring(RawRing),
    /// In the screen memory's active log, from `cursor` on: stream offsets `start..total`.
    Log {
        cursor: LogCursor,
        start: u64,
        total: u64,
    },
}

impl Default for Backlog {
    fn default() -> Backlog {
        Backlog::Ring(RawRing::default())
    }
}

impl Backlog {
    /// Bytes ever taken in.
    pub(super) fn total(&self) -> u64 {
        match self {
            Backlog::Ring(ring) => ring.total(),
            Backlog::Log { total, .. } => *total,
        }
    }

    /// Stream offset of the oldest byte not parsed.
    pub(super) fn start(&self) -> u64 {
        match self {
            Backlog::Ring(ring) => ring.start(),
            Backlog::Log { start, .. } => *start,
        }
    }

    /// Bytes not parsed.
    pub(super) fn len(&self) -> usize {
        (self.total() - self.start()) as usize
    }

    /// Whether the backlog is as long as it may be: the pump waits for the grid.
    pub(super) fn full(&self) -> bool {
        self.len() >= RAW_RING_BYTES
    }

    /// Output taken in (already logged, when the backlog is in the log).
    pub(super) fn push(&mut self, bytes: &[u8]) {
        match self {
            Backlog::Ring(ring) => ring.push(bytes),
            Backlog::Log { total, .. } => *total += bytes.len() as u64,
        }
    }

    /// Up to `max` bytes of the backlog from stream offset `from` on (clamped to it).
    pub(super) fn copy_from(&self, store: Option<&Store>, from: u64, max: usize) -> Vec<u8> {
        match (self, store) {
            (Backlog::Ring(ring), _) => ring.copy_from(from, max),
            (Backlog::Log { cursor, start, .. }, Some(store)) => {
                let mut out = Vec::with_capacity(max.min(self.len()));
                store.read_log(cursor_at(store, *cursor, *start, from), max, &mut out);
                out
            }
            (Backlog::Log { .. }, None) => {
                debug_assert!(false, "a backlog in a log without a store");
                Vec::new()
            }
        }
    }

    /// The bytes before stream offset `upto` were parsed. A ring left empty moves to the log
    /// when there is a usable one.
    pub(super) fn consume_to(&mut self, store: Option<&Store>, upto: u64) {
        match (&mut *self, store) {
            (Backlog::Ring(ring), _) => {
                ring.consume_to(upto);
                self.switch_to_log(store);
            }
            (
                Backlog::Log {
                    cursor,
                    start,
                    total,
                },
                Some(store),
            ) => {
                let n = upto.clamp(*start, *total) - *start;
                store.advance(cursor, n as usize);
                *start += n;
            }
            (Backlog::Log { .. }, None) => {
                debug_assert!(false, "a backlog in a log without a store")
            }
        }
    }

    /// Read from `store`'s log from now on, if the backlog is an empty ring and the store has
    /// not been outrun: every byte taken in from here on is logged there first.
    pub(super) fn switch_to_log(&mut self, store: Option<&Store>) {
        if let (Backlog::Ring(ring), Some(store)) = (&*self, store) {
            if ring.is_empty() && !store.lost() {
                let total = ring.total();
                *self = Backlog::Log {
                    cursor: store.log_end(),
                    start: total,
                    total,
                };
            }
        }
    }

    /// Start `store`'s log again at stream offset `at`, where the grid has just been
    /// checkpointed: `write` writes the checkpoint with the log it starts (false: it did
    /// not fit, nothing changed). That log is the backlog after `at` with the resizes not
    /// applied yet (`resizes`: stream offset, size) at their places — read from the ring, or,
    /// for a backlog in the log, the log itself from `at` on, which then goes on from the
    /// new log's start.
    pub(super) fn checkpoint(
        &mut self,
        store: &mut Store,
        at: u64,
        resizes: impl Iterator<Item = (u64, u16, u16)>,
        write: impl FnOnce(&mut Store, Tail) -> bool,
    ) {
        match self {
            // The pieces borrow the ring while the store writes them.
            Backlog::Ring(ring) => {
                let (a, b) = ring.since(at);
                let tail = log_pieces([a, b], at, resizes);
                write(store, Tail::Pieces(&tail));
            }
            Backlog::Log { cursor, start, .. } => {
                let mut from = cursor_at(store, *cursor, *start, at);
                if write(store, Tail::Log(&mut from)) {
                    *cursor = from;
                    *start = at;
                }
            }
        }
    }

    /// Hold the backlog here from now on (`store`'s log is about to be given back).
    pub(super) fn switch_to_ring(&mut self, store: &Store) {
        if let Backlog::Log { start, .. } = *self {
            let bytes = self.copy_from(Some(store), start, self.len());
            let mut ring = RawRing::starting_at(start);
            ring.push(&bytes);
            *self = Backlog::Ring(ring);
        }
    }
}

/// A cursor at stream offset `at` of a backlog whose oldest byte, at stream offset `start`, is
/// where `cursor` is.
fn cursor_at(store: &Store, cursor: LogCursor, start: u64, at: u64) -> LogCursor {
    let mut moved = cursor;
    store.advance(&mut moved, at.saturating_sub(start) as usize);
    moved
}

/// The log a checkpoint at stream offset `at` starts: the backlog after it (`ring`: its two
/// halves, as the ring holds it) cut at each resize not applied yet (`resizes`: stream
/// offset, size), in order.
fn log_pieces(
    ring: [&[u8]; 2],
    at: u64,
    resizes: impl Iterator<Item = (u64, u16, u16)>,
) -> Vec<Piece<'_>> {
    let [a, b] = ring;
    // Bytes `from..to` of the backlog, in the halves they lie in.
    let part = |from: usize, to: usize| {
        let first = |x: usize| x.min(a.len());
        let second = |x: usize| x.saturating_sub(a.len());
        Piece::Output([&a[first(from)..first(to)], &b[second(from)..second(to)]])
    };
    let backlog = a.len() + b.len();
    let mut pieces = Vec::new();
    let mut from = 0;
    for (r_at, cols, rows) in resizes {
        let r_at = (r_at - at) as usize;
        if r_at > from {
            pieces.push(part(from, r_at));
            from = r_at;
        }
        pieces.push(Piece::Resize(cols, rows));
    }
    if from < backlog {
        pieces.push(part(from, backlog));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log a checkpoint starts is the backlog exactly, cut at each resize, wherever the
    /// ring wraps: every cut against a wrap between them.
    #[test]
    fn the_log_after_a_checkpoint_is_the_backlog_cut_at_its_resizes() {
        let backlog: Vec<u8> = (0..40u8).collect();
        for wrap in 0..=backlog.len() {
            let (a, b) = backlog.split_at(wrap);
            for r1 in 0..=backlog.len() {
                for r2 in r1..=backlog.len() {
                    let at = 1000;
                    let resizes = [(at + r1 as u64, 50, 10), (at + r2 as u64, 60, 20)];
                    let pieces = log_pieces([a, b], at, resizes.into_iter());
                    let mut bytes = Vec::new();
                    let mut seen = Vec::new();
                    for p in &pieces {
                        match p {
                            Piece::Output([x, y]) => {
                                assert!(!x.is_empty() || !y.is_empty(), "an empty record");
                                bytes.extend_from_slice(x);
                                bytes.extend_from_slice(y);
                            }
                            Piece::Resize(c, _) => seen.push((bytes.len(), *c)),
                        }
                    }
                    assert_eq!(bytes, backlog, "wrap {wrap}, resizes at {r1}, {r2}");
                    assert_eq!(seen, [(r1, 50), (r2, 60)], "wrap {wrap}");
                }
            }
        }
    }
}
