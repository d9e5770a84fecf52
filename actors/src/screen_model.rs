//! A session's screen model, and its parsing kept off the PTY drain path.
//!
//! A session's output goes into its [`ScreenModel`] straight from the PTY pump
//! ([`ScreenModel::drain`]): the light vte pass (title, modes, OSC 133 D, `screen.rs`) and an
//! append to the raw ring, under one short lock — no actor message, no allocation. The
//! session actor hears about a chunk only when it must: the program announced something
//! (a title, a finished command), or a person is attached and needs the bytes. The grid (alacritty_terminal)
//! is parsed either by a reader that needs it now (`snapshot`, `dump`, the first check of a
//! text wait: they catch up synchronously, bounded by the ring) or, while text waits or runs
//! are pending, by the [`pool`] of grid workers: a few threads at a lower scheduling priority
//! that catch the grid up in slices, match the pending patterns against the lines that
//! changed, and tell the session actor which ones matched.
//!
//! So a child writing as fast as it can is never slowed by parsing: the workers only get the
//! CPU the child and the drain leave, the grid lags behind while it must, and when it falls
//! further behind than the ring holds it is rebuilt from the ring (`replayed`) instead of
//! parsing an unbounded backlog. When the output pauses, the workers catch up within one
//! ring's worth of parsing (~1 MiB, ~15 ms here) and the waits are settled.

use crate::grid::{logical, output_lines, Grid, RawRing, Row};
use crate::screen::{LightScreen, ScreenEvent, ScreenFlags};
use maxx_protocol::limits::RAW_RING_BYTES;
use maxx_protocol::request::TextWait;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Bytes a worker parses per hold of the grid lock (a reader waits at most this long).
const SLICE_BYTES: usize = 64 * 1024;
/// Niceness of the worker threads: below the drain and the children it serves.
const WORKER_NICE: libc::c_int = 19;

/// What a pending wait or run looks for on the screen.
#[derive(Clone)]
pub enum Watch {
    /// `sessions.wait --until/--regex [--output-only]`.
    Text(TextWait),
    /// A `run`'s end marker.
    Run(regex::Regex),
}

impl Watch {
    /// Whether the pattern is on `lines` (all logical lines) or, for an output-only wait,
    /// on `output` (those holding no OSC 133 input).
    fn matches(&self, lines: &[String], output: &[String]) -> bool {
        match self {
            Watch::Text(t) if t.output_only => output.iter().any(|l| t.pattern.matches(l)),
            Watch::Text(t) => lines.iter().any(|l| t.pattern.matches(l)),
            Watch::Run(re) => lines.iter().any(|l| re.is_match(l)),
        }
    }

    fn output_only(&self) -> bool {
        matches!(self, Watch::Text(t) if t.output_only)
    }
}

/// Told which watches matched (by id); called from a worker thread.
pub type Notify = Box<dyn Fn(Vec<u64>) + Send + Sync>;

/// What the drain path maintains, under one lock.
struct Drain {
    ring: RawRing,
    light: LightScreen,
    /// Someone is attached: chunks go to the session actor too.
    forward: bool,
    /// Bumped by [`ScreenModel::reset`]: a pump of an earlier surface changes nothing.
    generation: u64,
}

/// What the session actor must hear about a drained chunk.
#[derive(Default)]
pub struct Drained {
    /// Announcements the chunk carried, in order.
    pub events: Vec<ScreenEvent>,
    /// Forward the bytes (someone is attached); the stream offset just past them.
    pub forward_end: Option<u64>,
}

/// One session's raw output and (once read) its grid, shared with the pump and the grid
/// workers.
pub struct ScreenModel {
    drain: Mutex<Drain>,
    grid: Mutex<Option<Box<Grid>>>,
    /// Pending patterns, by the session actor's ids.
    watches: Mutex<Vec<(u64, Watch)>>,
    /// Output posted for the grid workers while patterns are pending.
    inbox: Mutex<Inbox>,
    /// Whether `watches` is non-empty (checked on every chunk without a lock).
    watched: AtomicBool,
    /// Whether a worker job for this model is queued and not yet started.
    queued: AtomicBool,
    notify: Notify,
}

/// Output the pump hands the grid workers while patterns are pending: the workers take it
/// with an O(1) swap instead of copying from the ring under the drain lock, so a worker
/// (which runs at idle priority and may be preempted anywhere) never holds a lock the pump
/// needs for longer than that swap.
#[derive(Default)]
struct Inbox {
    bytes: Vec<u8>,
    /// Stream offset of `bytes[0]`.
    start: u64,
}

/// A locked, materialised grid.
pub struct GridGuard<'a>(MutexGuard<'a, Option<Box<Grid>>>);

impl std::ops::Deref for GridGuard<'_> {
    type Target = Grid;
    fn deref(&self) -> &Grid {
        self.0
            .as_deref()
            .expect("a GridGuard is only made over a materialised grid")
    }
}

impl std::ops::DerefMut for GridGuard<'_> {
    fn deref_mut(&mut self) -> &mut Grid {
        self.0
            .as_deref_mut()
            .expect("a GridGuard is only made over a materialised grid")
    }
}

/// Lock a mutex, recovering from a panicked holder (the data is plain bytes and a grid;
/// a half-parsed grid is still a grid).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ScreenModel {
    /// An empty model; `notify` is told the ids of watches a worker matched.
    pub fn new(notify: Notify) -> Arc<ScreenModel> {
        Arc::new(ScreenModel {
            drain: Mutex::new(Drain {
                ring: RawRing::default(),
                light: LightScreen::default(),
                forward: false,
                generation: 0,
            }),
            grid: Mutex::new(None),
            watches: Mutex::new(Vec::new()),
            inbox: Mutex::new(Inbox::default()),
            watched: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            notify,
        })
    }

    /// New output from the pump of surface `generation`: the light pass and the ring; wakes
    /// a grid worker if a wait is pending on the screen.
    pub fn drain(self: &Arc<Self>, generation: u64, bytes: &[u8]) -> Drained {
        let mut d = lock(&self.drain);
        if d.generation != generation {
            return Drained::default();
        }
        let events = d.light.advance(bytes);
        d.ring.push(bytes);
        let end = d.ring.total();
        let forward_end = d.forward.then_some(end);
        drop(d);
        if self.watched.load(Ordering::Acquire) {
            self.post(end - bytes.len() as u64, bytes);
            self.schedule();
        }
        Drained {
            events,
            forward_end,
        }
    }

    /// Hand `bytes` (at stream offset `at`) to the grid workers, keeping at most a ring's
    /// worth: a worker further behind than that catches up from the ring instead.
    fn post(&self, at: u64, bytes: &[u8]) {
        let mut inbox = lock(&self.inbox);
        if inbox.start + inbox.bytes.len() as u64 != at {
            // Output arrived while nothing was pending: start over here.
            inbox.bytes.clear();
            inbox.start = at;
        }
        inbox.bytes.extend_from_slice(bytes);
        let excess = inbox.bytes.len().saturating_sub(RAW_RING_BYTES);
        if excess > 0 {
            inbox.bytes.drain(..excess);
            inbox.start += excess as u64;
        }
    }

    /// Forget all output, modes and the grid (a new surface starts a fresh terminal);
    /// returns the generation the new surface's pump must drain with.
    pub fn reset(&self) -> u64 {
        let mut grid = lock(&self.grid);
        let mut d = lock(&self.drain);
        d.ring = RawRing::default();
        d.light = LightScreen::default();
        d.forward = false;
        d.generation += 1;
        *grid = None;
        *lock(&self.inbox) = Inbox::default();
        d.generation
    }

    /// Title and modes from the light pass.
    pub fn flags(&self) -> ScreenFlags {
        lock(&self.drain).light.flags().clone()
    }

    /// Retained raw output, in bytes.
    pub fn ring_len(&self) -> usize {
        lock(&self.drain).ring.len()
    }

    /// Start (or keep) forwarding output for an attachment: bytes that repaint the current
    /// screen on a fresh terminal, and the stream offset they cover — every later chunk is
    /// forwarded. The raw output itself while the ring holds all of it (exact, colours and
    /// modes included), else the grid's text and cursor.
    pub fn attach(&self, cols: u16, rows: u16, scrollback: usize) -> (Vec<u8>, u64) {
        let mut out = b"\x1b[H\x1b[2J".to_vec();
        let mut guard = lock(&self.grid);
        let mut d = lock(&self.drain);
        d.forward = true;
        let upto = d.ring.total();
        if d.ring.start() == 0 {
            let (a, b) = d.ring.since(0);
            out.extend_from_slice(a);
            out.extend_from_slice(b);
            return (out, upto);
        }
        drop(d);
        let grid = self.caught_up(&mut guard, cols, rows, scrollback);
        let lines: Vec<String> = (0..grid.rows() as i32).map(|l| grid.row(l).text).collect();
        out.extend(lines.join("\r\n").into_bytes());
        let (x, y, _) = grid.cursor();
        out.extend(format!("\x1b[{};{}H", y + 1, x + 1).into_bytes());
        (out, upto)
    }

    /// Nobody is attached any more: stop forwarding chunks.
    pub fn detach_all(&self) {
        lock(&self.drain).forward = false;
    }

    /// The grid, materialised from the ring on first use and caught up with all output.
    pub fn grid(&self, cols: u16, rows: u16, scrollback: usize) -> GridGuard<'_> {
        let mut guard = lock(&self.grid);
        self.caught_up(&mut guard, cols, rows, scrollback);
        GridGuard(guard)
    }

    /// The grid, caught up, if someone materialised it already.
    pub fn materialised_grid(&self) -> Option<GridGuard<'_>> {
        let mut guard = lock(&self.grid);
        self.catch_up(guard.as_mut()?);
        Some(GridGuard(guard))
    }

    /// Materialise the grid in `slot` if needed and catch it up.
    fn caught_up<'g>(
        &self,
        slot: &'g mut Option<Box<Grid>>,
        cols: u16,
        rows: u16,
        scrollback: usize,
    ) -> &'g mut Grid {
        let fresh = slot.is_none();
        let grid = slot.get_or_insert_with(|| {
            let start = lock(&self.drain).ring.start();
            Box::new(Grid::empty(cols, rows, scrollback, start))
        });
        self.catch_up(grid);
        if fresh {
            // Pending patterns are matched against what changes from now on.
            grid.take_unscanned();
        }
        grid
    }

    /// Parse the output that arrived up to now, a slice at a time: the drain lock is held
    /// only to copy each slice out, so the pump never waits on parsing.
    fn catch_up(&self, grid: &mut Grid) {
        let target = lock(&self.drain).ring.total();
        while self.feed_slice(grid, target) {}
        grid.finish_feed();
    }

    /// Parse the next slice of output before stream offset `target`; false once there is
    /// none.
    fn feed_slice(&self, grid: &mut Grid, target: u64) -> bool {
        if grid.fed() >= target {
            return false;
        }
        let max = (target - grid.fed()).min(SLICE_BYTES as u64) as usize;
        let slice = grid.take_slice(&lock(&self.drain).ring, max);
        if slice.is_empty() {
            return false;
        }
        grid.feed(&slice);
        true
    }

    /// Replace the pending patterns (the session actor's waits and runs).
    pub fn set_watches(self: &Arc<Self>, watches: Vec<(u64, Watch)>) {
        let any = !watches.is_empty();
        *lock(&self.watches) = watches;
        self.watched.store(any, Ordering::Release);
        if !any {
            // Nothing pending: the posted bytes would only hold memory.
            *lock(&self.inbox) = Inbox::default();
        }
        if any {
            // Output may have arrived between the caller's own check and now.
            self.schedule();
        }
    }

    fn schedule(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            pool().submit(self.clone());
        }
    }

    /// A worker's job: catch the grid up in slices, then match the pending patterns against
    /// the rows that changed since the last look.
    fn work(&self) {
        // Cleared first: output pushed from here on queues another job.
        self.queued.store(false, Ordering::Release);
        if !self.watched.load(Ordering::Acquire) {
            return;
        }
        let (start, bytes) = {
            let mut inbox = lock(&self.inbox);
            let start = inbox.start;
            let bytes = std::mem::take(&mut inbox.bytes);
            inbox.start = start + bytes.len() as u64;
            (start, bytes)
        };
        let end = start + bytes.len() as u64;
        // Nothing posted (the patterns were just set): whatever the ring holds now.
        let target = if bytes.is_empty() {
            lock(&self.drain).ring.total()
        } else {
            end
        };
        // A slice per hold of the grid lock, so a reader waits at most one slice's parse.
        let mut guard = loop {
            let mut guard = lock(&self.grid);
            let Some(grid) = guard.as_mut() else { return };
            let fed = grid.fed();
            if fed >= start && fed < end {
                // The steady state: the posted bytes continue the grid.
                let from = (fed - start) as usize;
                let to = (from + SLICE_BYTES).min(bytes.len());
                grid.feed(&bytes[from..to]);
                continue;
            }
            // Behind what was posted (it overflowed, or output came while nothing was
            // pending): the ring has it, or the grid is rebuilt from the ring.
            if fed < target && self.feed_slice(grid, target) {
                continue;
            }
            break guard;
        };
        let Some(grid) = guard.as_mut() else { return };
        grid.finish_feed();
        let back = grid.take_unscanned();
        let rows = recent_rows(grid, back);
        drop(guard);
        // Match without holding the watches' lock (the session actor sets them).
        let watches = lock(&self.watches).clone();
        let lines = logical(&rows);
        let output = if watches.iter().any(|(_, w)| w.output_only()) {
            output_lines(&rows)
        } else {
            Vec::new()
        };
        let matched: Vec<u64> = watches
            .iter()
            .filter(|(_, w)| w.matches(&lines, &output))
            .map(|(id, _)| *id)
            .collect();
        if matched.is_empty() {
            return;
        }
        {
            let mut watches = lock(&self.watches);
            watches.retain(|(id, _)| !matched.contains(id));
            self.watched.store(!watches.is_empty(), Ordering::Release);
            if watches.is_empty() {
                *lock(&self.inbox) = Inbox::default();
            }
        }
        (self.notify)(matched);
    }
}

/// Rows of the viewport plus the `back` newest history rows.
pub fn recent_rows(grid: &Grid, back: usize) -> Vec<Row> {
    let back = back.min(grid.history()) as i32;
    (-back..grid.rows() as i32).map(|l| grid.row(l)).collect()
}

/// The grid workers: threads that parse and match for sessions with pending screen waits.
pub struct Pool {
    jobs: mpsc::Sender<Arc<ScreenModel>>,
}

impl Pool {
    fn submit(&self, model: Arc<ScreenModel>) {
        let _ = self.jobs.send(model);
    }
}

/// The process's grid workers, started on first use.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Arc<ScreenModel>>();
        let rx = Arc::new(Mutex::new(rx));
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 4);
        for i in 0..workers {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("maxx-grid-{i}"))
                .spawn(move || {
                    // SAFETY: lowering this thread's own priority (SCHED_IDLE: it runs on CPU
                    // nothing else wants, and any other wakeup preempts it at once; CFS still
                    // gives it a small share on a saturated machine, so it is never starved);
                    // failure is harmless.
                    unsafe {
                        let param = libc::sched_param { sched_priority: 0 };
                        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
                            libc::setpriority(
                                libc::PRIO_PROCESS,
                                libc::gettid() as libc::id_t,
                                WORKER_NICE,
                            );
                        }
                    }
                    loop {
                        let job = lock(&rx).recv();
                        match job {
                            Ok(model) => model.work(),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start a grid worker");
            }
        }
        Pool { jobs: tx }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn literal(text: &str) -> TextWait {
        TextWait {
            pattern: maxx_protocol::request::TextPattern::Literal(text.into()),
            output_only: false,
        }
    }

    fn model() -> (Arc<ScreenModel>, mpsc::Receiver<Vec<u64>>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let m = ScreenModel::new(Box::new(move |ids| {
            let _ = lock(&tx).send(ids);
        }));
        (m, rx)
    }

    #[test]
    fn a_stale_pump_changes_nothing() {
        let (m, _) = model();
        let generation = m.reset();
        m.drain(generation - 1, b"old\x1b]2;stale\x07");
        assert_eq!(m.ring_len(), 0);
        assert_eq!(m.flags().title, None);
        let d = m.drain(generation, b"new\x1b]2;fresh\x07");
        assert_eq!(d.events, [ScreenEvent::Title("fresh".into())]);
        assert_eq!(m.ring_len(), b"new\x1b]2;fresh\x07".len());
    }

    #[test]
    fn attached_output_is_forwarded_after_the_repaint_only() {
        let (m, _) = model();
        let g = m.reset();
        assert_eq!(m.drain(g, b"before").forward_end, None);
        let (repaint, upto) = m.attach(80, 24, 100);
        assert!(repaint.ends_with(b"before"));
        assert_eq!(upto, 6);
        assert_eq!(m.drain(g, b"after").forward_end, Some(11));
        m.detach_all();
        assert_eq!(m.drain(g, b"gone").forward_end, None);
    }

    #[test]
    fn a_worker_matches_pending_patterns_on_new_output() {
        let (m, rx) = model();
        let g = m.reset();
        m.drain(g, b"prompt$ ");
        // A reader materialises the grid (as the session actor does before it watches).
        drop(m.grid(40, 5, 100));
        m.set_watches(vec![
            (1, Watch::Text(literal("DONE"))),
            (2, Watch::Text(literal("never"))),
        ]);
        // Scrolls far past the viewport in one burst: still seen.
        let mut out = b"DONE\r\n".to_vec();
        for i in 0..50 {
            out.extend(format!("line {i}\r\n").into_bytes());
        }
        m.drain(g, &out);
        let ids = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the worker reports a match");
        assert_eq!(ids, [1]);
        // The match is consumed; the other pattern stays pending.
        assert_eq!(lock(&m.watches).len(), 1);
        assert!(m.watched.load(Ordering::Acquire));
    }

    #[test]
    fn a_grid_far_behind_is_rebuilt_from_the_ring() {
        let (m, _) = model();
        let g = m.reset();
        drop(m.grid(40, 5, 100));
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..(maxx_protocol::limits::RAW_RING_BYTES / chunk.len() + 2) {
            m.drain(g, &chunk);
        }
        let grid = m.grid(40, 5, 100);
        assert!(
            grid.replayed,
            "more than the ring behind: rebuilt, not parsed"
        );
    }
}
