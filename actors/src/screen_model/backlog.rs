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

use super::store::{LogCursor, Store};
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
                let mut at = *cursor;
                store.advance(&mut at, from.saturating_sub(*start) as usize);
                let mut out = Vec::with_capacity(max.min(self.len()));
                store.read_log(at, max.min(self.len()), &mut out);
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
