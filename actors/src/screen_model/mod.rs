//! A session's screen model: exact, and parsed off the PTY drain path.
//!
//! A session's output goes into its [`ScreenModel`] straight from the PTY pump
//! ([`ScreenModel::drain`]): the light pass (title, modes, OSC 133 D, and the queries the
//! program asks its terminal: `screen.rs`) and the grid's backlog (`backlog.rs`: a cursor
//! into the screen memory's log, which holds the bytes anyway, or a ring of its own), under
//! one short lock — no actor message, no allocation. The session actor hears about a chunk
//! only when it must: the program announced something (a title, a finished command), or a
//! person is attached and needs the bytes.
//!
//! **The screen is a function of the bytes.** The grid (alacritty_terminal) is fed every
//! byte the program ever wrote, in order, with each resize applied at the stream offset
//! where it happened: bytes leave the grid's backlog only by being parsed. When the backlog
//! reaches [`RAW_RING_BYTES`] the pump stops reading until the grid catches up (the kernel's PTY buffer then pushes back on the program: nothing is dropped),
//! so a snapshot, whenever it is taken, equals a grid fed every byte from the start. Until a
//! session has printed [`PARSE_AT`] bytes, been read, or asked a query that needs the grid, it
//! has no grid at all (an idle shell costs its few bytes of output); after that the backlog
//! is parsed lazily, in batches:
//!
//! - by a reader (`snapshot`, `dump`, `inspect`, the first check of a text wait, `attach`)
//!   that needs it now, synchronously, a slice at a time;
//! - by the [`pool`] of grid workers while text waits or runs are pending (they also match
//!   the patterns against the rows that changed, at most every `MATCH_INTERVAL` (10 ms) while
//!   output keeps coming) or once the backlog passes [`PARSE_AT`]. They run at normal
//!   priority: every byte must be parsed, and at idle priority a flood left one core idle
//!   while the pump waited for them (measured: drain 45 -> 55 MB/s, text wait 28 -> 33);
//! - for a query whose answer needs the screen (CPR, DECRQM, DECRQSS), by a blocking task
//!   at normal priority that feeds the grid exactly up to the query and answers it.
//!
//! **Answers** (`answers.rs`) go to the program through the pump's input queue, once each,
//! in the order the queries were written, whether or not anyone reads the session. Queries
//! are cut from the copy of the output forwarded to attached terminals, so an attaching
//! terminal never answers too.
//!
//! Layout: this file holds the model, its drain and its readers; `backlog.rs` where the
//! output not parsed yet is; `pool.rs` the grid workers; `forward.rs` the copy of the output
//! attached terminals see; `store.rs` and `saved.rs` the screen memory the keeper holds.

mod backlog;
mod forward;
mod pool;
#[cfg(test)]
mod recovery_tests;
mod saved;
pub mod store;

pub use pool::{pool, Pool};

use crate::answers::{self, GridQuery, Prepared};
use crate::grid::{Grid, Lines, Row};
use crate::screen::{LightScreen, ScreenEvent, ScreenFlags};
use backlog::Backlog;
use forward::Forwarder;
use maxx_protocol::limits::{MIN_COLS, RAW_RING_BYTES};
use maxx_protocol::request::{TextPattern, TextWait};
use pool::{Job, Looked};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use store::Store;

/// Bytes parsed per hold of the grid lock (a reader waits at most this long).
const SLICE_BYTES: usize = 64 * 1024;
/// Backlog at which the grid workers parse it even though nobody reads: well before the
/// backlog is full, so a program printing steadily rarely waits for the grid.
pub const PARSE_AT: usize = RAW_RING_BYTES / 2;
/// Output parsed while more keeps coming before the patterns are matched anyway.
const MATCH_EVERY: usize = 1024 * 1024;
/// Least time between two looks at a session's screen while its output keeps coming.
const MATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);
/// How long a session's small output waits for more before a worker parses and matches it
/// (while a text wait is pending): a flood is parsed in batches of [`SLICE_BYTES`] rather
/// than woken for every 4 KiB read.
const MATCH_QUIET: std::time::Duration = std::time::Duration::from_millis(2);
/// Backlog a query that needs the grid is answered over in the pump itself (~0.2 ms of
/// parsing); behind more than that it is answered from a blocking task.
const INLINE_ANSWER_BYTES: usize = 16 * 1024;
/// Resizes recorded ahead of the grid before a resize catches the grid up instead.
const RESIZES_MAX: usize = 64;
/// Log length in the screen memory past which a checkpoint is taken (at the next chunk that
/// ends in the parser's ground state), so the log starts again after it — or later, at
/// eight times the last checkpoint's size, twice while output comes slowly (`saved::due`).
/// The log's pages are memory for as long as the session lives (this was 2 MiB: a TUI that
/// redraws without scrolling kept that much). [`PARSE_AT`], the backlog at which the grid is parsed even though nobody
/// reads: a checkpoint (which needs the grid) then never builds one that would not have been
/// built.
const CHECKPOINT_AT: usize = PARSE_AT;
/// Answers waiting for the grid before further queries are ignored (a program flooding
/// queries without reading the answers).
const ANSWERS_MAX: usize = 4096;
/// What a pending wait or run looks for on the screen.
#[derive(Clone)]
pub enum Watch {
    /// `sessions.wait --until/--regex [--output-only]`.
    Text(TextWait),
    /// A `run`'s end marker.
    Run(regex::Regex),
}

impl Watch {
    /// Whether the pattern is on one of `lines` (for an output-only wait, on one holding no
    /// OSC 133 input).
    fn matches(&self, lines: &Lines) -> bool {
        match self {
            Watch::Text(t) if t.output_only => lines
                .iter()
                .any(|(l, input)| !input && t.pattern.matches(l)),
            // A literal without a line break is on a line exactly when it is in the text
            // the lines make (each ends in one): one search instead of one per line.
            Watch::Text(TextWait {
                pattern: TextPattern::Literal(s),
                ..
            }) if !s.contains('\n') => {
                memchr::memmem::find(lines.text().as_bytes(), s.as_bytes()).is_some()
            }
            Watch::Text(t) => lines.iter().any(|(l, _)| t.pattern.matches(l)),
            Watch::Run(re) => lines.iter().any(|(l, _)| re.is_match(l)),
        }
    }
}

/// Told which watches matched (by id); called from a worker thread.
pub type Notify = Box<dyn Fn(Vec<u64>) + Send + Sync>;

/// Where answers to the program's queries are written: the PTY's input queue.
pub type AnswerSink = Box<dyn Fn(Vec<u8>) + Send + Sync>;

/// What the drain path maintains, under one lock.
struct Drain {
    /// Output the grid has not parsed yet (all of it while there is no grid).
    backlog: Backlog,
    light: LightScreen,
    /// Someone is attached: chunks go to the session actor too, minus the queries.
    forward: Option<Forwarder>,
    /// Bumped by [`ScreenModel::reset`]: a pump of an earlier surface changes nothing.
    generation: u64,
    /// The size at stream offset 0 (what a grid made now starts with) and the size now.
    base: (u16, u16),
    size: (u16, u16),
    scrollback: usize,
    /// Resizes the grid has not applied yet, at the stream offsets where they happened.
    resizes: VecDeque<(u64, u16, u16)>,
    /// Answers not written yet, in order, each due once the grid has parsed up to its
    /// offset. The front is always one that needs the grid (a ready answer with nothing
    /// before it is written at once).
    answers: VecDeque<(u64, Prepared)>,
    /// Queries were ignored because `answers` was full (logged once until it drains).
    answers_ignored: bool,
    sink: Option<AnswerSink>,
    /// The screen memory the keeper holds too: every chunk and resize is logged there
    /// first, so a next daemon can rebuild this screen.
    store: Option<Store>,
    /// A checkpoint is due once the grid has parsed up to this stream offset (a chunk end
    /// where the light pass, whose state at that point is kept here, was in its ground state).
    pending: Option<(u64, Vec<u8>)>,
    /// When the screen memory's log started (its last checkpoint, or the memory itself):
    /// how fast the output came since decides when the next checkpoint is due
    /// (`saved::due`).
    log_since: std::time::Instant,
}

impl Drain {
    /// Write the ready answers at the front of the queue.
    fn flush_ready(&mut self) {
        while let Some((_, Prepared::Ready(_))) = self.answers.front() {
            if let Some((_, Prepared::Ready(bytes))) = self.answers.pop_front() {
                self.send(bytes);
            }
        }
    }

    fn send(&self, bytes: Vec<u8>) {
        if let (Some(sink), false) = (&self.sink, bytes.is_empty()) {
            sink(bytes);
        }
    }

    /// Log a record of `body` bytes in the screen memory, if there is one: `log` does it. A
    /// record that would outrun the memory loses it (a next daemon starts this screen empty),
    /// so the backlog is copied out of its log first.
    fn log(&mut self, body: usize, log: impl FnOnce(&mut Store)) {
        let Some(store) = self.store.as_mut() else {
            return;
        };
        if !store.fits(body) {
            self.backlog.switch_to_ring(store);
        }
        log(store);
    }

    /// Up to `max` bytes of the backlog from stream offset `from` on.
    fn backlog_from(&self, from: u64, max: usize) -> Vec<u8> {
        self.backlog.copy_from(self.store.as_ref(), from, max)
    }

    /// The grid has parsed up to stream offset `upto`.
    fn consume_to(&mut self, upto: u64) {
        self.backlog.consume_to(self.store.as_ref(), upto);
    }
}

/// What the session actor must hear about a drained chunk.
#[derive(Default)]
pub struct Drained {
    /// Announcements the chunk carried, in order.
    pub events: Vec<ScreenEvent>,
    /// The bytes to forward to attached terminals (queries cut out) and the stream offset
    /// just past the chunk, when someone is attached.
    pub forward: Option<(Vec<u8>, u64)>,
    /// The backlog is full: read no more until [`ScreenModel::space`] says so.
    pub full: bool,
}

/// One session's unparsed output and (once needed) its grid, shared with the pump, the grid
/// workers and the answer tasks.
///
/// `repr(C)`, `watched` first: every chunk drained reads it right after the drain's lock,
/// and this way both share the object's first cache line (the fields' own order put it
/// ~600 bytes away: a second cache miss per redraw with 1,000 sessions, ~0.6% of the
/// daemon's CPU in the fleet).
#[repr(C)]
pub struct ScreenModel {
    /// Whether `watches` is non-empty (checked on every chunk without a lock).
    watched: AtomicBool,
    drain: Mutex<Drain>,
    grid: Mutex<Option<Box<Grid>>>,
    /// Pending patterns, by the session actor's ids.
    watches: Mutex<Vec<(u64, Watch)>>,
    /// Whether a worker job for this model is queued and not yet started (`queued`: at
    /// once; `queued_soon`: after [`MATCH_QUIET`]).
    queued: AtomicBool,
    queued_soon: AtomicBool,
    /// Whether an answer task for this model is scheduled and not yet started.
    answering: AtomicBool,
    /// When the pending patterns were last matched.
    last_match: Mutex<std::time::Instant>,
    /// Woken when the grid has consumed backlog (the pump waits on it while it is full).
    space: tokio::sync::Notify,
    notify: Notify,
    /// [`CHECKPOINT_AT`] (tests take checkpoints far more often).
    checkpoint_at: std::sync::atomic::AtomicUsize,
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

/// Lock a mutex, recovering from a panicked holder (the data is plain bytes and a grid;
/// a grid that panicked mid-feed is replaced, see [`ScreenModel::feed_guarded`]).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ScreenModel {
    /// An empty model; `notify` is told the ids of watches a worker matched.
    pub fn new(notify: Notify) -> Arc<ScreenModel> {
        Arc::new(ScreenModel {
            drain: Mutex::new(Drain {
                backlog: Backlog::default(),
                light: LightScreen::default(),
                forward: None,
                generation: 0,
                base: (80, 24),
                size: (80, 24),
                scrollback: 0,
                resizes: VecDeque::new(),
                answers: VecDeque::new(),
                answers_ignored: false,
                sink: None,
                store: None,
                pending: None,
                log_since: std::time::Instant::now(),
            }),
            grid: Mutex::new(None),
            watches: Mutex::new(Vec::new()),
            watched: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            queued_soon: AtomicBool::new(false),
            answering: AtomicBool::new(false),
            last_match: Mutex::new(std::time::Instant::now()),
            space: tokio::sync::Notify::new(),
            notify,
            checkpoint_at: std::sync::atomic::AtomicUsize::new(CHECKPOINT_AT),
        })
    }

    /// New output from the pump of surface `generation`: the light pass and the backlog;
    /// answers the queries it can at once, and wakes whoever must parse.
    pub fn drain(self: &Arc<Self>, generation: u64, bytes: &[u8]) -> Drained {
        self.take_in(generation, bytes, false)
    }

    /// [`Self::drain`], or (`replay`) output a dead daemon already read and logged: logged
    /// again never, its queries not answered again (that daemon did), nothing forwarded.
    fn take_in(self: &Arc<Self>, generation: u64, bytes: &[u8], replay: bool) -> Drained {
        let mut d = lock(&self.drain);
        if d.generation != generation {
            return Drained::default();
        }
        if !replay {
            // Logged before it counts as read: a daemon killed from here on loses nothing.
            d.log(bytes.len(), |store| store.output(bytes));
        }
        let at = d.backlog.total();
        let events = d.light.advance(bytes);
        d.backlog.push(bytes);
        let checkpoint = !replay && self.want_checkpoint(&mut d, bytes);
        let mut urgent = false;
        let mut cuts = Vec::new();
        if replay && d.light.found_any() {
            drop(d.light.take_found());
        } else if d.light.found_any() {
            let (found, extra) = d.light.take_found();
            let (cols, rows) = d.size;
            for f in found {
                cuts.push((f.start, f.end));
                let prepared = answers::prepare(f.query, cols, rows);
                match prepared {
                    Prepared::Ready(bytes) if d.answers.is_empty() => d.send(bytes),
                    _ if d.answers.len() >= ANSWERS_MAX => {
                        // Said once per flood, not once per query (the log is bounded too).
                        if !d.answers_ignored {
                            tracing::warn!(
                                "a program is flooding terminal queries faster than they can \
                                 be answered; ignoring them until it reads its answers"
                            );
                        }
                        d.answers_ignored = true;
                    }
                    prepared => {
                        urgent |= matches!(prepared, Prepared::Grid(_));
                        d.answers.push_back((f.end, prepared));
                    }
                }
            }
            cuts.extend(extra);
        }
        let dr = &mut *d;
        let forward = dr.forward.as_mut().map(|f| {
            f.cuts.extend(cuts);
            (f.filter(&mut dr.light, at, bytes), at + bytes.len() as u64)
        });
        let backlog = d.backlog.len();
        let full = d.backlog.full();
        drop(d);
        if backlog >= PARSE_AT || checkpoint {
            self.schedule();
        } else if self.watched.load(Ordering::Acquire) {
            if backlog >= SLICE_BYTES {
                self.schedule();
            } else {
                self.schedule_soon();
            }
        }
        if urgent {
            self.answer_soon(backlog);
        }
        Drained {
            events,
            forward,
            full,
        }
    }

    /// Wait until the grid has consumed backlog (the pump calls this while it is full).
    pub async fn space(&self) {
        self.space.notified().await
    }

    /// Whether the backlog is full (the pump must not read).
    pub fn full(&self) -> bool {
        lock(&self.drain).backlog.full()
    }

    /// Forget all output, modes and the grid (a new surface starts a fresh terminal of
    /// `cols` x `rows` with `scrollback` rows of history); returns the generation the new
    /// surface's pump must drain with.
    pub fn reset(&self, cols: u16, rows: u16, scrollback: usize) -> u64 {
        let mut grid = lock(&self.grid);
        let mut d = lock(&self.drain);
        d.backlog = Backlog::default();
        d.light = LightScreen::new(rows);
        d.forward = None;
        d.generation += 1;
        d.base = (cols, rows);
        d.size = (cols, rows);
        d.scrollback = scrollback;
        d.resizes = VecDeque::new();
        d.answers = VecDeque::new();
        d.answers_ignored = false;
        d.sink = None;
        d.store = None;
        d.pending = None;
        *grid = None;
        self.space.notify_one();
        d.generation
    }

    /// Where surface `generation`'s answers go.
    pub fn set_answer_sink(&self, generation: u64, sink: AnswerSink) {
        let mut d = lock(&self.drain);
        if d.generation == generation {
            d.sink = Some(sink);
        }
    }

    /// The PTY was resized: the grid applies it at this point of the output stream.
    pub fn resize(&self, cols: u16, rows: u16) {
        self.resize_as(cols, rows, false)
    }

    fn resize_as(&self, cols: u16, rows: u16, replay: bool) {
        let mut slot = lock(&self.grid);
        let mut d = lock(&self.drain);
        if !replay {
            d.log(4, |store| store.resize(cols, rows));
        }
        d.light.resized(rows);
        d.size = (cols, rows);
        let at = d.backlog.total();
        // A checkpoint pending at this very offset holds the light pass as it was before the
        // resize (its scroll region, which a restored grid takes, included), while the grid
        // will have applied the resize when it is written: it is taken at a later chunk end
        // instead.
        if d.pending.as_ref().is_some_and(|(p, _)| *p == at) {
            d.pending = None;
        }
        match slot.as_mut() {
            Some(grid) if grid.fed() == at && d.answers.is_empty() => {
                drop(d);
                resize_guarded(grid, cols, rows);
                return;
            }
            None if at == 0 => {
                d.base = (cols, rows);
                return;
            }
            _ => d.resizes.push_back((at, cols, rows)),
        }
        if d.resizes.len() > RESIZES_MAX {
            drop(d);
            self.caught_up(&mut slot);
        }
    }

    /// Title and modes from the light pass.
    pub fn flags(&self) -> ScreenFlags {
        lock(&self.drain).light.flags().clone()
    }

    /// Output not parsed yet, in bytes.
    pub fn backlog(&self) -> usize {
        lock(&self.drain).backlog.len()
    }

    /// Start (or keep) forwarding output for an attachment: bytes that repaint the current
    /// screen on a fresh terminal (drawn from the grid, never a replay of old output, so no
    /// old query reaches the attaching terminal), and the stream offset they cover — every
    /// later chunk is forwarded.
    pub fn attach(&self) -> (Vec<u8>, u64) {
        let mut slot = lock(&self.grid);
        let grid = self.caught_up(&mut slot);
        let mut d = lock(&self.drain);
        let region = d.light.region();
        let kitty = d.light.flags().kitty_flags;
        let title = d.light.flags().title.clone();
        if d.forward.is_none() {
            let mut f = Forwarder::default();
            if d.light.in_sequence().is_some() {
                d.light.watch_sequence_end();
                f.skipping = true;
            }
            d.forward = Some(f);
        }
        let upto = d.backlog.total();
        drop(d);
        (grid.repaint(region, kitty, title.as_deref()), upto)
    }

    /// Nobody is attached any more: stop forwarding chunks.
    pub fn detach_all(&self) {
        lock(&self.drain).forward = None;
    }

    /// The grid, materialised on first use and caught up with all output.
    pub fn grid(&self) -> GridGuard<'_> {
        let mut guard = lock(&self.grid);
        self.caught_up(&mut guard);
        GridGuard(guard)
    }

    /// Materialise the grid in `slot` if needed and catch it up with all output so far.
    fn caught_up<'g>(&self, slot: &'g mut Option<Box<Grid>>) -> &'g mut Grid {
        let grid = self.materialised(slot);
        let target = lock(&self.drain).backlog.total();
        while self.feed_slice(grid, target) {}
        grid.finish_feed();
        grid
    }

    /// The grid in `slot`, made if there is none yet: the output stream from its first
    /// byte is still all in the backlog then.
    fn materialised<'g>(&self, slot: &'g mut Option<Box<Grid>>) -> &'g mut Grid {
        slot.get_or_insert_with(|| {
            let d = lock(&self.drain);
            debug_assert_eq!(
                d.backlog.start(),
                0,
                "without a grid, no output was consumed"
            );
            let (cols, rows) = d.base;
            let mut g = Box::new(Grid::new(cols, rows, d.scrollback));
            // Pending patterns are matched against what changes from now on.
            g.take_unscanned();
            g
        })
    }

    /// Parse the next slice of output before stream offset `target` — stopping at the
    /// next answer or resize due, and settling those — then let the pump read again. False
    /// once there is nothing before `target` to parse.
    fn feed_slice(&self, grid: &mut Grid, target: u64) -> bool {
        let slice = {
            let mut d = lock(&self.drain);
            self.settle(&mut d, grid);
            if let Some((_, light)) = d.pending.as_ref().filter(|(at, _)| *at == grid.fed()) {
                let light = light.clone();
                let last_len = d.store.as_ref().map_or(0, Store::checkpoint_len);
                drop(d);
                self.write_checkpoint(grid, light, last_len);
                d = lock(&self.drain);
            }
            let fed = grid.fed();
            let target = target.min(d.backlog.total());
            if fed >= target {
                return false;
            }
            let mut stop = target.min(fed + SLICE_BYTES as u64);
            if let Some((at, _)) = d.answers.front() {
                stop = stop.min(*at);
            }
            if let Some((at, _, _)) = d.resizes.front() {
                stop = stop.min(*at);
            }
            if let Some((at, _)) = d.pending.as_ref().filter(|(at, _)| *at > fed) {
                stop = stop.min(*at);
            }
            d.backlog_from(fed, (stop - fed) as usize)
        };
        if slice.is_empty() {
            return false;
        }
        feed_guarded(grid, &slice, self.watched.load(Ordering::Acquire));
        let mut d = lock(&self.drain);
        let was_full = d.backlog.full();
        d.consume_to(grid.fed());
        self.settle(&mut d, grid);
        if was_full && !d.backlog.full() {
            self.space.notify_one();
        }
        true
    }

    /// Answer the queries and apply the resizes that are due now the grid has parsed up to
    /// where it is (answers first: a query written before a resize was read before it).
    fn settle(&self, d: &mut Drain, grid: &mut Grid) {
        let fed = grid.fed();
        while let Some((at, _)) = d.answers.front() {
            if *at > fed {
                break;
            }
            let Some((_, prepared)) = d.answers.pop_front() else {
                break;
            };
            match prepared {
                Prepared::Ready(bytes) => d.send(bytes),
                Prepared::Grid(q) => {
                    // A synchronized update holds bytes back; the answer reflects them.
                    grid.finish_feed();
                    let bytes = answer_guarded(&q, grid);
                    d.send(bytes);
                }
            }
            d.flush_ready();
        }
        if d.answers.is_empty() {
            d.answers_ignored = false;
        }
        while let Some(&(at, cols, rows)) = d.resizes.front() {
            if at > fed {
                break;
            }
            d.resizes.pop_front();
            resize_guarded(grid, cols, rows);
        }
    }

    /// Answer the queries that wait for the grid: right here in the pump when that is
    /// cheap (nobody holds the grid and at most [`INLINE_ANSWER_BYTES`] wait to be parsed:
    /// a program asking CPR of an idle screen gets its answer with no thread hop), else from
    /// a blocking task at normal priority (a program waiting for a CPR is blocked until it
    /// comes).
    fn answer_soon(self: &Arc<Self>, backlog: usize) {
        if backlog <= INLINE_ANSWER_BYTES {
            if let Ok(mut slot) = self.grid.try_lock() {
                self.answer_due(&mut slot);
                return;
            }
        }
        if self.answering.swap(true, Ordering::AcqRel) {
            return;
        }
        let model = self.clone();
        let job = move || {
            model.answering.store(false, Ordering::Release);
            let mut slot = lock(&model.grid);
            model.answer_due(&mut slot);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(job);
            }
            Err(_) => {
                std::thread::spawn(job);
            }
        }
    }

    /// Feed the grid in `slot` up to the last answer that waits for it.
    fn answer_due(&self, slot: &mut Option<Box<Grid>>) {
        let target = match lock(&self.drain).answers.back() {
            Some((at, _)) => *at,
            None => return,
        };
        let grid = self.materialised(slot);
        while self.feed_slice(grid, target) {}
        let mut d = lock(&self.drain);
        self.settle(&mut d, grid);
    }

    /// Replace the pending patterns (the session actor's waits and runs).
    pub fn set_watches(self: &Arc<Self>, watches: Vec<(u64, Watch)>) {
        let any = !watches.is_empty();
        *lock(&self.watches) = watches;
        self.watched.store(any, Ordering::Release);
        if any {
            // Output may have arrived between the caller's own check and now.
            self.schedule();
        }
    }

    fn schedule(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            pool().submit(Job::Now(self.clone()));
        }
    }

    fn schedule_soon(self: &Arc<Self>) {
        if !self.queued_soon.swap(true, Ordering::AcqRel) {
            pool().submit(Job::Soon(self.clone()));
        }
    }

    /// A worker's job: catch the grid up in slices (releasing it between slices, so a
    /// reader waits at most one slice's parse), then match the pending patterns against
    /// the rows that changed since the last look — or, while output keeps coming, leave
    /// that to a later look ([`Looked::Deferred`]).
    fn work(&self) -> Looked {
        // Cleared first: output pushed from here on queues another job.
        self.queued.store(false, Ordering::Release);
        self.queued_soon.store(false, Ordering::Release);
        let watched = self.watched.load(Ordering::Acquire);
        {
            let d = lock(&self.drain);
            if !watched && d.backlog.len() < PARSE_AT && d.pending.is_none() {
                return Looked::Done;
            }
        }
        let target = lock(&self.drain).backlog.total();
        loop {
            let mut guard = lock(&self.grid);
            let grid = self.materialised(&mut guard);
            if !self.feed_slice(grid, target) {
                break;
            }
        }
        if !self.watched.load(Ordering::Acquire) {
            return Looked::Done;
        }
        let now = std::time::Instant::now();
        let due = {
            let last = lock(&self.last_match);
            now.duration_since(*last) >= MATCH_INTERVAL
        };
        let unscanned = lock(&self.grid).as_ref().map_or(0, |g| g.unscanned_bytes());
        if !due && unscanned < MATCH_EVERY {
            // A flood: matching rebuilds the viewport's text, so it is done at most every
            // MATCH_INTERVAL while output keeps coming (every row that scrolled off in
            // between is still counted), and once more when it stops.
            return Looked::Deferred;
        }
        self.match_now();
        Looked::Done
    }

    /// Match the pending patterns against the rows that changed since the last look.
    fn match_now(&self) {
        *lock(&self.last_match) = std::time::Instant::now();
        let mut guard = lock(&self.grid);
        let Some(grid) = guard.as_mut() else { return };
        grid.finish_feed();
        let mut lines = grid.take_scrolled();
        for line in 0..grid.rows() as i32 {
            lines.push_row(grid, line);
        }
        lines.finish();
        drop(guard);
        // Match without holding the watches' lock (the session actor sets them).
        let watches = lock(&self.watches).clone();
        let matched: Vec<u64> = watches
            .iter()
            .filter(|(_, w)| w.matches(&lines))
            .map(|(id, _)| *id)
            .collect();
        if matched.is_empty() {
            return;
        }
        {
            let mut watches = lock(&self.watches);
            watches.retain(|(id, _)| !matched.contains(id));
            self.watched.store(!watches.is_empty(), Ordering::Release);
        }
        (self.notify)(matched);
    }
}

/// Feed `bytes` to `grid`; a panic inside the terminal emulator (a bug there, never the
/// program's fault) replaces the grid with a blank one at the same point of the stream
/// instead of taking the session down with it.
fn feed_guarded(grid: &mut Grid, bytes: &[u8], watched: bool) {
    let fed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if watched {
            grid.feed_scanning(bytes)
        } else {
            grid.feed(bytes)
        }
    }));
    if fed.is_err() {
        tracing::error!("the terminal emulator panicked on output; the screen starts blank");
        let mut blank = grid.blank_like();
        blank.skip(bytes.len());
        *grid = blank;
    }
}

fn resize_guarded(grid: &mut Grid, cols: u16, rows: u16) {
    let cols = cols.max(MIN_COLS);
    let rows = rows.max(1);
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| grid.resize(cols, rows)));
    if done.is_err() {
        tracing::error!("the terminal emulator panicked on a resize; the screen starts blank");
        let mut blank = grid.blank_like();
        blank.resize(cols, rows);
        *grid = blank;
    }
}

fn answer_guarded(q: &GridQuery, grid: &Grid) -> Vec<u8> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        answers::grid_answer(q, grid)
    }))
    .unwrap_or_default()
}

/// Rows of the viewport plus the `back` newest history rows.
pub fn recent_rows(grid: &Grid, back: usize) -> Vec<Row> {
    let back = back.min(grid.history()) as i32;
    (-back..grid.rows() as i32).map(|l| grid.row(l)).collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn literal(text: &str) -> TextWait {
        TextWait {
            pattern: maxx_protocol::request::TextPattern::Literal(text.into()),
            output_only: false,
        }
    }

    #[test]
    fn a_pattern_matches_within_one_line_never_across_two() {
        let g = Grid::materialise(10, 3, 10, b"abc\r\ndef\r\n\x1b]133;B\x07typed");
        let mut lines = Lines::default();
        for line in 0..g.rows() as i32 {
            lines.push_row(&g, line);
        }
        lines.finish();
        let regex = |r: &str| TextWait {
            pattern: TextPattern::Regex(regex::Regex::new(r).unwrap()),
            output_only: false,
        };
        let yes = |w: TextWait| Watch::Text(w).matches(&lines);
        assert!(yes(literal("bc")) && yes(literal("def")) && yes(literal("")));
        // The buffer holds "abc\ndef\n…": the literal search must not see across the break.
        assert!(!yes(literal("cd")) && !yes(literal("c\nd")) && !yes(literal("abcdef")));
        assert!(yes(regex("^def$")) && !yes(regex("c.d")) && !yes(regex(r"c\sd")));
        assert!(yes(literal("typed")));
        let output_only = TextWait {
            output_only: true,
            ..literal("typed")
        };
        assert!(!yes(output_only));
        assert!(yes(TextWait {
            output_only: true,
            ..literal("abc")
        }));
    }

    /// A model, the matches it reports, the answers it writes, and its generation.
    type Harness = (
        Arc<ScreenModel>,
        mpsc::Receiver<Vec<u64>>,
        Arc<Mutex<Vec<u8>>>,
        u64,
    );

    /// A model whose matches and answers are collected.
    pub(super) fn model() -> Harness {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let m = ScreenModel::new(Box::new(move |ids| {
            let _ = lock(&tx).send(ids);
        }));
        let g = m.reset(40, 5, 100);
        let answers = Arc::new(Mutex::new(Vec::new()));
        let sink = answers.clone();
        m.set_answer_sink(g, Box::new(move |b| lock(&sink).extend(b)));
        (m, rx, answers, g)
    }

    /// Wait (with a deadline) until the answers collected so far equal `want`.
    fn answered(answers: &Mutex<Vec<u8>>, want: &[u8]) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lock(answers).as_slice() != want {
            assert!(
                std::time::Instant::now() < deadline,
                "answers {:?}, want {:?}",
                String::from_utf8_lossy(&lock(answers)),
                String::from_utf8_lossy(want)
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_stale_pump_changes_nothing() {
        let (m, _, _, generation) = model();
        m.drain(generation - 1, b"old\x1b]2;stale\x07");
        assert_eq!(m.backlog(), 0);
        assert_eq!(m.flags().title, None);
        let d = m.drain(generation, b"new\x1b]2;fresh\x07");
        assert_eq!(d.events, [ScreenEvent::Title("fresh".into())]);
        assert_eq!(m.backlog(), b"new\x1b]2;fresh\x07".len());
    }

    #[test]
    fn queries_are_answered_in_order_at_the_byte_they_were_asked() {
        let (m, _, answers, g) = model();
        // CPR needs the cursor as it was at the query, not after the text that follows it
        // in the same chunk; DA1 after it waits its turn.
        m.drain(g, b"abc\x1b[6n\x1b[cdefgh\r\n\x1b[5n");
        answered(&answers, b"\x1b[1;4R\x1b[?62;22c\x1b[0n");
        // Nobody has read the screen: answering parsed only up to the last query.
        lock(&answers).clear();
        m.drain(g, b"\x1b[>c\x1b[18t");
        answered(&answers, b"\x1b[>0;10;1c\x1b[8;5;40t");
    }

    #[test]
    fn a_flood_of_queries_is_bounded() {
        let (m, _, answers, g) = model();
        // Far more grid queries than may wait at once, in one chunk, before any grid exists.
        let flood = b"\x1b[6n".repeat(3 * ANSWERS_MAX);
        m.drain(g, &flood);
        let want = b"\x1b[1;1R".repeat(ANSWERS_MAX);
        answered(&answers, &want);
        assert!(lock(&m.drain).answers.is_empty());
        // Once the queue drained, queries are answered again.
        lock(&answers).clear();
        m.drain(g, b"\x1b[5n");
        answered(&answers, b"\x1b[0n");
    }

    #[test]
    fn a_query_after_a_resize_sees_the_new_size_and_cursor() {
        let (m, _, answers, g) = model();
        m.drain(g, b"\x1b[2;3H");
        m.resize(20, 3);
        m.drain(g, b"\x1b[6n\x1b[18t");
        answered(&answers, b"\x1b[2;3R\x1b[8;3;20t");
        // Where a resize moves the cursor is the emulator's (alacritty reflows): the
        // answer is what a grid fed the same bytes and resizes says.
        lock(&answers).clear();
        m.drain(g, b"\x1b[3;18H");
        m.resize(10, 3);
        m.drain(g, b"\x1b[6n");
        let mut reference = Grid::new(40, 5, 100);
        reference.feed(b"\x1b[2;3H");
        reference.resize(20, 3);
        reference.feed(b"\x1b[6n\x1b[18t\x1b[3;18H");
        reference.resize(10, 3);
        let want = crate::answers::grid_answer(
            &GridQuery::CursorPosition {
                private: false,
                origin_top: None,
            },
            &reference,
        );
        answered(&answers, &want);
    }

    #[test]
    fn attach_repaints_from_the_grid_and_never_forwards_queries() {
        let (m, _, answers, g) = model();
        assert!(m.drain(g, b"before\x1b[c").forward.is_none());
        answered(&answers, b"\x1b[?62;22c");
        let (repaint, upto) = m.attach();
        assert!(
            !repaint.windows(3).any(|w| w == b"\x1b[c"),
            "no replayed query"
        );
        assert!(repaint.windows(6).any(|w| w == b"before"));
        assert_eq!(upto, 9);
        // A query split across chunks is cut whole; the text around it is forwarded.
        let a = m.drain(g, b"x\x1b[").forward.unwrap();
        let b = m.drain(g, b"6ny\x1b]11;?\x1b").forward.unwrap();
        let c = m.drain(g, b"\\z\x1b[31mred").forward.unwrap();
        let all = [a.0, b.0, c.0].concat();
        assert_eq!(all, b"xyz\x1b[31mred");
        assert_eq!(c.1, 9 + 3 + 10 + 10);
        m.detach_all();
        assert!(m.drain(g, b"gone").forward.is_none());
    }

    #[test]
    fn a_worker_matches_pending_patterns_on_new_output() {
        let (m, rx, _, g) = model();
        m.drain(g, b"prompt$ ");
        // A reader materialises the grid (as the session actor does before it watches).
        drop(m.grid());
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
    fn a_full_backlog_says_so_and_is_parsed_not_dropped() {
        let (m, _, _, g) = model();
        let chunk = b"0123456789012345678\r\n".repeat(3000);
        let mut full = false;
        let mut lines = 0;
        while !full {
            full = m.drain(g, &chunk).full;
            lines += 3000;
        }
        let grid = m.grid();
        assert_eq!(grid.history(), 100, "whole scrollback");
        assert_eq!(grid.row(-100).text, "0123456789012345678");
        assert!(lines > 100);
        drop(grid);
        assert_eq!(m.backlog(), 0);
        assert!(!m.full());
    }

    /// Everything a reader can see of a grid: rows (history included), wraps, styles,
    /// cursor and modes.
    pub(super) fn fingerprint(g: &Grid) -> String {
        let mut out = format!(
            "{}x{} cursor {:?} {:?} alt {} history {} mode {:?}\n",
            g.cols(),
            g.rows(),
            g.cursor(),
            g.state().cursor_style(),
            g.alt_screen(),
            g.history(),
            g.state().mode()
        );
        for line in -(g.history() as i32)..g.rows() as i32 {
            let row = g.row(line);
            let mut cells = Vec::new();
            g.styled_cells(line, 0, &mut cells);
            let styles: Vec<String> = cells
                .iter()
                .map(|c| format!("{}:{:?}", c.col, c.style))
                .collect();
            out.push_str(&format!(
                "{line:>5} {:?} {} {}\n",
                row.text,
                row.wrapped,
                styles.join(",")
            ));
        }
        out
    }

    /// One step of a differential run.
    #[derive(Debug, Clone)]
    pub(super) enum Step {
        Out(Vec<u8>),
        Resize(u16, u16),
        Read,
    }

    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"\x1b[?1049h".to_vec()),
            Just(b"\x1b[?1049l".to_vec()),
            Just(b"\x1b[?1047h".to_vec()),
            Just(b"\x1b[?47l".to_vec()),
            Just(b"\x1b[2;5r".to_vec()),
            Just(b"\x1b[r".to_vec()),
            Just(b"\x1b[1;31m".to_vec()),
            Just(b"\x1b[0m".to_vec()),
            Just(b"\x1b[7;42m".to_vec()),
            Just(b"\x1b[38;5;123m".to_vec()),
            Just(b"\x1b[H".to_vec()),
            Just(b"\x1b[3;7H".to_vec()),
            Just(b"\x1b[2J".to_vec()),
            Just(b"\x1b[K".to_vec()),
            Just(b"\x1b[2L".to_vec()),
            Just(b"\x1b[M".to_vec()),
            Just(b"\x1b7".to_vec()),
            Just(b"\x1b8".to_vec()),
            Just(b"\x1b(0lqk\x1b(B".to_vec()),
            Just(b"\x1b[?6h".to_vec()),
            Just(b"\x1b[?6l".to_vec()),
            Just(b"\x1b[?7l".to_vec()),
            Just(b"\x1b[?7h".to_vec()),
            Just(b"\x1b]2;title\x07".to_vec()),
            Just(b"\x1b[6n".to_vec()),
            Just(b"\t".to_vec()),
            Just(b"\x1bH".to_vec()),
            Just(b"\x1b[3g".to_vec()),
            Just(b"\x0e".to_vec()),
            Just(b"\x0f".to_vec()),
            Just(b"x\x1b[3b".to_vec()),
            Just(b"\x1b[2b".to_vec()),
            Just(b"\x1b[4 q".to_vec()),
            Just(b"\x1b[5 q".to_vec()),
            Just(b"\x1b[0 q".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n".to_vec()),
            Just("日本語".as_bytes().to_vec()),
            Just("e\u{301}".as_bytes().to_vec()),
            "[a-z ]{1,30}".prop_map(String::into_bytes),
        ]
    }

    pub(super) fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => prop::collection::vec(piece(), 1..8).prop_map(|p| Step::Out(p.concat())),
            1 => (2u16..30, 1u16..12).prop_map(|(c, r)| Step::Resize(c, r)),
            1 => Just(Step::Read),
        ]
    }

    /// Run `steps` through a model (reads and resizes at their points, output in the
    /// chunks given) and through a reference grid fed every byte from the start with the
    /// same resizes at the same offsets; the two must read the same.
    fn differential(steps: &[Step]) -> Result<(), TestCaseError> {
        let (m, _, reference) = run_both(steps);
        let ours = fingerprint(&m.grid());
        let theirs = fingerprint(&reference);
        prop_assert_eq!(ours, theirs);
        Ok(())
    }

    /// `steps` through a fresh model and through a reference grid fed every byte from the
    /// start; the model, its generation and the reference.
    fn run_both(steps: &[Step]) -> (Arc<ScreenModel>, u64, Grid) {
        let (m, _, _, g) = model();
        let mut reference = Grid::new(40, 5, 100);
        for s in steps {
            match s {
                Step::Out(bytes) => {
                    m.drain(g, bytes);
                    reference.feed(bytes);
                }
                Step::Resize(c, r) => {
                    m.resize(*c, *r);
                    reference.finish_feed();
                    reference.resize(*c, *r);
                }
                Step::Read => drop(m.grid()),
            }
        }
        reference.finish_feed();
        (m, g, reference)
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
            rng_seed: proptest::test_runner::RngSeed::Fixed(17),
            ..ProptestConfig::default()
        })]

        /// The screen is a function of the bytes and the resizes, never of when (or
        /// whether) anyone read it.
        #[test]
        fn the_screen_equals_a_grid_fed_from_the_start(steps in prop::collection::vec(step(), 1..40)) {
            differential(&steps)?;
        }
    }

    /// Output past the backlog's size between a mode change and the read, with resizes
    /// before anything read the screen: the alternate screen, its hidden main screen, the
    /// scroll region and the history are still exact. (`MAXX_DIFF_MIB` makes it longer.)
    #[test]
    fn megabytes_between_a_mode_change_and_the_read_are_exact() {
        let mib: usize = std::env::var("MAXX_DIFF_MIB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        let mut steps = vec![
            Step::Out(b"main screen line\r\n\x1b[1;32mgreen\x1b[0m\r\n".to_vec()),
            Step::Out(b"\x1b[?1049h\x1b[2;4r\x1b[H".to_vec()),
            Step::Resize(30, 8),
        ];
        let filler: Vec<u8> = (0..2000)
            .flat_map(|i| format!("\x1b[{}mrow {i} \t日本\r\n", 31 + i % 7).into_bytes())
            .collect();
        let mut sent = 0;
        while sent < mib * 1024 * 1024 {
            steps.push(Step::Out(filler.clone()));
            sent += filler.len();
        }
        steps.push(Step::Out(b"\x1b[6n".to_vec()));
        let (m, g, reference) = run_both(&steps);
        assert!(m.grid().alt_screen());
        assert_eq!(fingerprint(&m.grid()), fingerprint(&reference));
        // Leaving the alternate screen restores the main screen it hid.
        m.drain(g, b"\x1b[?1049l");
        assert_eq!(m.grid().row(0).text, "main screen line");
        assert_eq!(m.grid().row(1).text, "green");
    }

    /// The long variant (`scripts/long-tests.sh`): many more random runs, and 16 MiB
    /// between the mode change and the read.
    #[test]
    #[ignore = "long: run by scripts/long-tests.sh"]
    fn the_screen_equals_a_grid_fed_from_the_start_long() {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 2000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(1717),
            ..ProptestConfig::default()
        });
        runner
            .run(&prop::collection::vec(step(), 1..120), |steps| {
                differential(&steps)
            })
            .unwrap();
        std::env::set_var("MAXX_DIFF_MIB", "16");
        megabytes_between_a_mode_change_and_the_read_are_exact();
    }
}
