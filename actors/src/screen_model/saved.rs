//! A session's screen kept outside the daemon (issue 20, `docs/recovery.md` "Screens"): the
//! model's side of the screen memory in `store.rs` — logging into it, taking checkpoints
//! of the light pass and the grid at ground points of the stream, and rebuilding a screen
//! from what a dead daemon left.

use super::backlog::Backlog;
use super::store::{self, Record, Store};
use super::{lock, Drain, ScreenModel, CHECKPOINT_AT};
use crate::grid::{Grid, RawRing};
use crate::screen::LightScreen;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl ScreenModel {
    /// Surface `generation`'s output is logged into `store` from now on (the keeper holds
    /// it too: see [`Self::screen_fd`]).
    pub fn keep_screen(&self, generation: u64, store: Store) {
        let mut d = lock(&self.drain);
        if d.generation == generation {
            let d = &mut *d;
            // A backlog read from a memory this one replaces is copied out of it first.
            if let Some(old) = d.store.as_ref() {
                d.backlog.switch_to_ring(old);
            }
            d.backlog.switch_to_log(Some(&store));
            d.store = Some(store);
        }
    }

    /// Make surface `generation`'s screen memory now, at its first output (a spawn makes
    /// none: a session that never prints costs no memory and no descriptor for it): a fresh
    /// store for the terminal as it is now, its size after any resize so far, which is
    /// exact because nothing was read yet. The pump's read buffer in it and a descriptor
    /// for the keeper. `Ok(None)`: not this surface any more, or it already has one, or
    /// output was already taken in without one (a store made now would miss it).
    pub fn open_screen(
        &self,
        generation: u64,
    ) -> std::io::Result<Option<(store::Staging, std::os::fd::OwnedFd)>> {
        let mut d = lock(&self.drain);
        if d.generation != generation || d.store.is_some() || d.backlog.total() != 0 {
            return Ok(None);
        }
        let (cols, rows) = d.size;
        let store = Store::create(cols, rows, d.scrollback)?;
        let fd = store.fd().try_clone_to_owned()?;
        let staging = store.staging();
        d.backlog.switch_to_log(Some(&store));
        d.store = Some(store);
        Ok(Some((staging, fd)))
    }

    /// A descriptor of the screen memory, for the keeper.
    pub fn screen_fd(&self) -> Option<std::os::fd::OwnedFd> {
        let d = lock(&self.drain);
        d.store.as_ref()?.fd().try_clone_to_owned().ok()
    }

    /// The pump's read buffer in the screen memory, if surface `generation` has one.
    pub fn staging(&self, generation: u64) -> Option<store::Staging> {
        let d = lock(&self.drain);
        (d.generation == generation)
            .then(|| d.store.as_ref().map(Store::staging))
            .flatten()
    }

    /// Take a checkpoint once the log passes `bytes` (tests).
    #[cfg(test)]
    pub fn checkpoint_at(&self, bytes: usize) {
        self.checkpoint_at.store(bytes, Ordering::Relaxed);
    }

    /// Whether the screen memory holds a checkpoint (tests).
    #[cfg(test)]
    pub fn checkpointed(&self) -> bool {
        lock(&self.drain)
            .store
            .as_ref()
            .is_some_and(Store::has_checkpoint)
    }

    /// Whether the output outran the screen memory (a next daemon could not rebuild it).
    pub fn screen_lost(&self) -> bool {
        lock(&self.drain).store.as_ref().is_some_and(Store::lost)
    }

    /// Rebuild surface `generation`'s screen from the memory a dead daemon left (`fd`, as
    /// the keeper handed it over), before the pump reads anything new: the terminal's size
    /// and scrollback, then every logged chunk and resize in order, exactly once — its
    /// queries were answered by that daemon. The store is kept and logged into from here.
    /// Refused whole (the screen stays empty) if anything in it is out of bounds; the
    /// scrollback in rows on success.
    pub fn recover(
        self: &Arc<Self>,
        generation: u64,
        fd: std::os::fd::OwnedFd,
    ) -> Result<usize, &'static str> {
        let (store, saved) = Store::open(fd)?;
        let restored = if saved.checkpoint.is_empty() {
            None
        } else {
            Some(restore_checkpoint(&saved.checkpoint, saved.scrollback)?)
        };
        {
            let mut grid = lock(&self.grid);
            let mut d = lock(&self.drain);
            if d.generation != generation || d.backlog.total() != 0 {
                return Err("the surface already started");
            }
            // The replayed output is held here until it is parsed: it lies in the log
            // ahead of where a cursor would start.
            d.backlog = Backlog::default();
            d.base = (saved.cols, saved.rows);
            d.size = (saved.cols, saved.rows);
            d.scrollback = saved.scrollback;
            match restored {
                None => {
                    d.light = LightScreen::new(saved.rows);
                    *grid = None;
                }
                Some((light, g)) => {
                    d.size = (g.cols(), g.rows());
                    d.backlog = Backlog::Ring(RawRing::starting_at(g.fed()));
                    d.light = light;
                    *grid = Some(Box::new(g));
                }
            }
        }
        for record in &saved.log {
            match record {
                Record::Output(bytes) => {
                    self.take_in(generation, bytes, true);
                }
                Record::Resize(cols, rows) => self.resize_as(*cols, *rows, true),
            }
        }
        self.keep_screen(generation, store);
        Ok(saved.scrollback)
    }

    /// Whether a chunk just drained makes a checkpoint due: the log passed
    /// [`CHECKPOINT_AT`], none is pending, and the chunk ended in the ground state (no escape
    /// sequence or UTF-8 character half read). Records the point and the light pass there.
    pub(super) fn want_checkpoint(&self, d: &mut Drain, bytes: &[u8]) -> bool {
        let due = d.pending.is_none()
            && d.store.as_ref().is_some_and(|s| {
                !s.lost() && s.log_len() > due_at(self.checkpoint_at.load(Ordering::Relaxed), s)
            })
            && utf8_complete(bytes);
        if !due {
            return false;
        }
        match d.light.checkpoint() {
            Some(light) => {
                d.pending = Some((d.backlog.total(), light));
                true
            }
            None => false,
        }
    }

    /// The grid has parsed exactly up to the pending checkpoint's offset: write the
    /// checkpoint (`light`, the light pass there, then the grid) and start the log again
    /// after it, from the backlog and the resizes not applied yet ([`Backlog::checkpoint`]).
    /// Encoded into one buffer sized for the last checkpoint, and the backlog copied as it
    /// lies (from the old log, or the ring's halves): the only temporary is the checkpoint itself (each one was copied three times, and jemalloc
    /// keeps freed pages for seconds: checkpoints of a fleet come in bursts).
    pub(super) fn write_checkpoint(&self, grid: &mut Grid, light: Vec<u8>, last_len: usize) {
        let mut blob = crate::grid::Writer(Vec::with_capacity(
            light.len() + 16 + last_len + last_len / 8,
        ));
        blob.bytes(&light);
        let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            grid.checkpoint_into(&mut blob)
        }))
        .is_ok();
        let mut d = lock(&self.drain);
        let Some((at, _)) = d.pending.take() else {
            return;
        };
        if !encoded || at != grid.fed() {
            return;
        }
        let Drain {
            backlog,
            store,
            resizes,
            scrollback,
            ..
        } = &mut *d;
        if let Some(store) = store.as_mut() {
            let (cols, rows) = (grid.cols(), grid.rows());
            backlog.checkpoint(store, at, resizes.iter().copied(), |store, tail| {
                store.checkpoint(cols, rows, *scrollback, &blob.0, tail)
            });
        }
    }
}

/// The log length past which the next checkpoint is taken: [`CHECKPOINT_AT`], or twice the
/// last checkpoint's size when that is more (at most half of [`store::LOG_MAX`], so the log
/// never outruns its slot waiting for a ground point): a checkpoint holds the whole history,
/// so this writes at most one byte of checkpoint per two bytes of output, and the screen
/// memory holds at most about three checkpoints' worth. The history's rows go into a
/// checkpoint as the bytes the grid keeps them in (a copy), so a 10,000-row 200-column
/// history is a 1.6 MB checkpoint taking ~1 ms, against the ~50 ms its 3.2 MB of output takes
/// to parse (`grid::feed_speed` with `MAXX_FEED_CKPT`). It was eight times while rows were
/// encoded cell by cell (~9 ms for that history): a fleet session's log then grew to eight
/// of its checkpoints, ~2 MB, before it was cut. A cadence set by a test is taken as it is.
fn due_at(at: usize, store: &Store) -> usize {
    if at != CHECKPOINT_AT {
        return at;
    }
    at.max((2 * store.checkpoint_len()).min(store::LOG_MAX / 2))
}

/// Whether `bytes` ends on a whole UTF-8 character (the parser holds no half of one).
fn utf8_complete(bytes: &[u8]) -> bool {
    for (back, &b) in bytes.iter().rev().take(4).enumerate() {
        let need = match b {
            0x00..=0x7f => return true,
            0x80..=0xbf => continue,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        return back + 1 >= need;
    }
    bytes.is_empty()
}

/// The light pass and the grid from a checkpoint's bytes (hostile input: refused whole if
/// anything is off, or if the emulator panics on it).
fn restore_checkpoint(
    bytes: &[u8],
    scrollback: usize,
) -> Result<(LightScreen, Grid), &'static str> {
    let mut r = crate::grid::Reader(bytes);
    let light_bytes = r.bytes(64 * 1024)?;
    let light = LightScreen::restore(&mut crate::grid::Reader(light_bytes))?;
    let grid_bytes = r.0;
    let grid = std::panic::catch_unwind(|| Grid::restore(grid_bytes, light.region()))
        .map_err(|_| "the emulator panicked on it")??;
    if grid.fed() != light.pos()
        || grid.scrollback() != scrollback
        || grid.alt_screen() != light.flags().alt_screen
    {
        return Err("parts that do not agree");
    }
    Ok((light, grid))
}
