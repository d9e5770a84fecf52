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
            d.log_since = std::time::Instant::now();
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
        d.log_since = std::time::Instant::now();
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
        let since = d.log_since;
        let due = d.pending.is_none()
            && d.store.as_ref().is_some_and(|s| {
                !s.lost()
                    && due(
                        self.checkpoint_at.load(Ordering::Relaxed),
                        s.log_len(),
                        s.checkpoint_len(),
                        || since.elapsed(),
                    )
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
            d.log_since = std::time::Instant::now();
        }
    }
}

/// Output that came no faster than this since the log started (bytes a second) is slow: the
/// next checkpoint is then due at twice the last one's size rather than eight times.
const SLOW_OUTPUT: f64 = 1024.0 * 1024.0;

/// Whether a log of `log` bytes, started `since()` ago after a checkpoint of `last` bytes,
/// is due for the next checkpoint: past [`CHECKPOINT_AT`], and past eight times the last
/// checkpoint's size — or twice that size if the output came slowly ([`SLOW_OUTPUT`]) — at
/// most half of [`store::LOG_MAX`] (so the log never outruns its slot waiting for a ground
/// point). A checkpoint holds the whole history: the eight times bound what a flood with a
/// long history spends on them (a 10,000-row 200-column history is a 1.6 MB checkpoint,
/// ~1 ms to encode and as long again to write into the memory, against the ~50 ms its 3.2 MB
/// of output takes to parse, `grid::feed_speed` with `MAXX_FEED_CKPT`: at twice, the flood
/// lost 5–8%), and twice bounds the memory of a session that prints slowly for hours (the
/// log is memory: a fleet agent's grew to eight checkpoints, ~1.9 MB, over five minutes),
/// whose checkpoints then cost nothing that shows. `since` is asked only between the two.
/// A cadence set by a test is taken as it is.
fn due(at: usize, log: usize, last: usize, since: impl FnOnce() -> std::time::Duration) -> bool {
    if at != CHECKPOINT_AT {
        return log > at;
    }
    let times = |n: usize| at.max((n * last).min(store::LOG_MAX / 2));
    log > times(8) || (log > times(2) && since().as_secs_f64() * SLOW_OUTPUT >= log as f64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The cadence: past 512 KiB at least; past eight checkpoints whatever the pace; past two
    /// only when the log came slowly; a test's cadence as it is. The pace is asked only
    /// between two and eight checkpoints.
    #[test]
    fn a_checkpoint_is_due_at_eight_checkpoints_or_at_two_when_output_is_slow() {
        const MB: usize = 1_000_000;
        let never = || -> Duration { panic!("the pace asked outside two to eight checkpoints") };
        let secs = |s: u64| move || Duration::from_secs(s);
        // A small checkpoint: the 512 KiB floor decides either way.
        assert!(!due(CHECKPOINT_AT, CHECKPOINT_AT, 10_000, never));
        assert!(due(CHECKPOINT_AT, CHECKPOINT_AT + 1, 10_000, never));
        // A 1.6 MB checkpoint (a long history): below twice it, never due.
        assert!(!due(CHECKPOINT_AT, 3 * MB, 1_600_000, never));
        // Between two and eight times: a flood (4 MB in 40 ms) waits, a slow session (4 MB
        // over ten seconds) does not.
        assert!(!due(CHECKPOINT_AT, 4 * MB, 1_600_000, || {
            Duration::from_millis(40)
        }));
        assert!(due(CHECKPOINT_AT, 4 * MB, 1_600_000, secs(10)));
        // Past eight times, at any pace.
        assert!(due(CHECKPOINT_AT, 13 * MB, 1_600_000, never));
        // Eight checkpoints past half the log's room: half of it.
        assert!(due(CHECKPOINT_AT, store::LOG_MAX / 2 + 1, 3 * MB, never));
        // A fleet agent: 150 KB checkpoints, 512 KiB of log over seventy seconds.
        assert!(due(CHECKPOINT_AT, CHECKPOINT_AT + 1, 150_000, secs(70)));
        // A cadence set by a test.
        assert!(!due(1000, 1000, 1_600_000, never));
        assert!(due(1000, 1001, 1_600_000, never));
    }
}
