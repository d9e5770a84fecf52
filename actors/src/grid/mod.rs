//! The full screen model, kept off the PTY drain path.
//!
//! The grid ([`Grid`], an `alacritty_terminal::Term`) is fed every byte a session's program
//! wrote, in order; it exists only once someone reads the screen (or the output passes half
//! of [`RAW_RING_BYTES`]), and is brought up to date lazily from the output not parsed yet —
//! by the next read, or by the grid workers while a text wait or `run` is pending
//! (`screen_model/` owns both paths, and where that backlog is: the screen memory's log, or a
//! [`RawRing`] when there is none). The drain itself only ever runs the light pass in
//! `screen.rs`, so a slow or absent reader never back-pressures the child.
//!
//! # OSC 133 semantic cells
//!
//! `alacritty_terminal` drops OSC 133 and has no per-cell tag of its own, so the grid carries
//! the marks in the one per-cell slot a cell copies from the cursor: the hyperlink in its
//! `CellExtra`. [`Grid::feed`] finds OSC 133 marks in the bytes it feeds (a SIMD search for
//! `ESC ]`, then a look at the OSC number), splits the feed right after each mark and, while the program
//! is between `A` and `B` (prompt) or `B` and `C` (input), keeps a private hyperlink on the
//! cursor's template cell. Every cell written in that region copies it (`Term::write_at_cursor`
//! clones the template's `extra`), and it moves with the cell through scrolling, history and
//! reflow, so no row numbers go stale. The private ids contain a C0 control character, which
//! vte drops from every OSC string, so no program can forge one with its own OSC 8. See
//! `docs/screen.md` for the edge cases.
//!
//! Layout: this file parses (the ring, feeding, the OSC 133 scan, reading rows); `encode.rs`
//! turns the grid into repaint bytes and styled cells.

mod answer;
mod checkpoint;
mod encode;
mod history;

pub(crate) use checkpoint::{Reader, Writer};

pub use answer::SnapshotHead;

use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::Line;
use alacritty_terminal::term::cell::{Cell, Flags, Hyperlink};
use alacritty_terminal::term::{Config, Term, TermMode};
use alacritty_terminal::vte::ansi::Processor;
use maxx_protocol::limits::RAW_RING_BYTES;
use maxx_protocol::screen::Semantic;
use std::collections::VecDeque;

/// Output the grid has not parsed yet (all of it while no grid exists), with its position in
/// the whole output stream, where there is no screen memory's log to read it from
/// (`screen_model/backlog.rs`). Bytes leave it only by being parsed ([`RawRing::consume_to`]),
/// never by eviction: the pump stops reading the PTY while it holds [`RAW_RING_BYTES`], so
/// the kernel's buffer pushes back on the program instead of the screen losing bytes.
#[derive(Default)]
pub struct RawRing {
    buf: VecDeque<u8>,
    /// Bytes ever pushed.
    total: u64,
}

impl RawRing {
    /// An empty ring whose next byte is at stream offset `total` (a screen rebuilt from a
    /// checkpoint taken there).
    pub fn starting_at(total: u64) -> RawRing {
        RawRing {
            buf: VecDeque::new(),
            total,
        }
    }

    /// Append output.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        self.buf.extend(bytes);
    }

    /// Stream offset of the oldest retained byte.
    pub fn start(&self) -> u64 {
        self.total - self.buf.len() as u64
    }

    /// Bytes ever pushed.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Retained bytes from stream offset `from` on (clamped to what is retained).
    pub fn since(&self, from: u64) -> (&[u8], &[u8]) {
        let skip = from.saturating_sub(self.start()) as usize;
        let (a, b) = self.buf.as_slices();
        if skip >= a.len() {
            (&b[(skip - a.len()).min(b.len())..], &[])
        } else {
            (&a[skip..], b)
        }
    }

    /// Copy out up to `max` retained bytes from stream offset `from` on.
    pub fn copy_from(&self, from: u64, max: usize) -> Vec<u8> {
        let (a, b) = self.since(from);
        let mut out = Vec::with_capacity((a.len() + b.len()).min(max));
        out.extend_from_slice(&a[..a.len().min(max)]);
        out.extend_from_slice(&b[..b.len().min(max - out.len())]);
        out
    }

    /// Forget the bytes before stream offset `upto` (they have been parsed); a buffer left
    /// empty gives its memory back.
    pub fn consume_to(&mut self, upto: u64) {
        let n = upto.saturating_sub(self.start()).min(self.buf.len() as u64) as usize;
        self.buf.drain(..n);
        if self.buf.is_empty() && self.buf.capacity() > 64 * 1024 {
            self.buf = VecDeque::new();
        }
    }

    /// Retained bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is retained.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Whether the ring holds as much as it may: the pump waits for the grid.
    pub fn full(&self) -> bool {
        self.buf.len() >= RAW_RING_BYTES
    }
}

struct Size {
    cols: usize,
    rows: usize,
}

impl Dimensions for Size {
    fn total_lines(&self) -> usize {
        self.rows
    }
    fn screen_lines(&self) -> usize {
        self.rows
    }
    fn columns(&self) -> usize {
        self.cols
    }
}

/// One grid row as text.
pub struct Row {
    /// The text, trailing blanks trimmed.
    pub text: String,
    /// Whether it continues onto the next row (soft wrap).
    pub wrapped: bool,
    /// Whether it holds a cell written between OSC 133 `B` and `C` (what `wait --output-only`
    /// leaves out).
    pub input: bool,
}

/// Logical lines as one text, each ended by `\n` (soft-wrapped rows joined), built row by
/// row straight from the cells: what the pending-pattern matcher reads. One buffer, no
/// string per row: with a text wait pending during a flood every row that scrolls passes
/// through here (a `String` per row and the join after it cost ~30% of the parse itself,
/// measured).
#[derive(Default)]
pub struct Lines {
    text: String,
    /// The logical lines (by index) holding a cell written between OSC 133 `B` and `C`.
    input: Vec<usize>,
    /// Logical lines ended so far.
    ended: usize,
    /// The last row pushed continues onto the next (its line is not ended yet).
    open: bool,
    /// The open line holds an input cell.
    open_input: bool,
}

impl Lines {
    /// Add `line` of `grid` (0.. the viewport, negative lines history).
    pub fn push_row(&mut self, grid: &Grid, line: i32) {
        let (wrapped, input) = grid.row_into(line, &mut self.text);
        self.open_input |= input;
        self.open = wrapped;
        if !wrapped {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        self.text.push('\n');
        if std::mem::take(&mut self.open_input) {
            self.input.push(self.ended);
        }
        self.ended += 1;
        self.open = false;
    }

    /// End the last line if its row wrapped (nothing follows it).
    pub fn finish(&mut self) {
        if self.open {
            self.end_line();
        }
    }

    /// The ended lines, in order, each with whether it holds an input cell.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        let mut input = self.input.iter().peekable();
        self.text
            .split_terminator('\n')
            .enumerate()
            .map(move |(i, line)| (line, input.next_if_eq(&&i).is_some()))
    }

    /// All ended lines, `\n` after each.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Lines ended so far.
    pub fn len(&self) -> usize {
        self.ended
    }

    pub fn is_empty(&self) -> bool {
        self.ended == 0 && !self.open
    }
}

/// Private hyperlink ids that tag cells written inside an OSC 133 region. The leading C0
/// control (U+0001) cannot come from a program: vte drops C0 bytes from OSC strings, so no
/// OSC 8 id or URI ever contains one.
const PROMPT_ID: &str = "\u{1}maxx-semantic-prompt";
const INPUT_ID: &str = "\u{1}maxx-semantic-input";

/// The OSC 133 region the program is in: what the cells it writes now are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// Outside any prompt or input (output, or no marks at all).
    Output,
    /// Between `A` (prompt start) and `B`.
    Prompt,
    /// Between `B` (input start) and `C` (or `D`/`A`).
    Input,
}

/// What a sequence the scanner found asks the grid to do, once the parser has seen it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// OSC 133 `A`/`B`/`C`/`D`: the region changes.
    Enter(Region),
    /// OSC 8: the program set (or ended) its own hyperlink, replacing the template's.
    Relinked,
    /// RIS (`ESC c`): the terminal was reset, cursors included.
    Reset,
}

/// Finds, in the byte stream fed to the grid, the sequences that bear on OSC 133 regions:
/// `ESC ] 133 ; <mark> … ST`, `ESC ] 8 ; … ST` and `ESC c`. It follows vte's own rules (C0
/// bytes inside an OSC string are dropped; BEL, CAN, SUB or ESC ends it) and keeps its state
/// across feeds. In `Ground` it is not stepped at all: [`Grid::feed`] jumps to the next
/// `ESC ]` / `ESC c`. (So an escape with a C0 control between the ESC and the `]`, which vte
/// would still read as an OSC, is only seen after an OSC terminator or at a feed boundary.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Plain text, or a sequence that is none of ours: skip to the next ESC.
    Ground,
    /// Just after an ESC.
    Esc,
    /// After `ESC ]`: the OSC number so far (at most three bytes are ever of interest).
    OscNumber { num: [u8; 3], len: u8 },
    /// In the body of an OSC 133 (`mark` = its first byte) or OSC 8, up to its terminator.
    OscBody { semantic: bool, mark: Option<u8> },
}

impl Scan {
    /// Advance over one byte (never called in `Ground`); `Some` right after the byte that
    /// makes vte dispatch one of our sequences.
    fn step(&mut self, b: u8) -> Option<Action> {
        // vte ignores these inside escape and OSC states.
        let ignored = matches!(b, 0x00..=0x06 | 0x08..=0x17 | 0x19 | 0x1c..=0x1f);
        match *self {
            Scan::Ground => None,
            Scan::Esc => match b {
                b']' => {
                    *self = Scan::OscNumber {
                        num: [0; 3],
                        len: 0,
                    };
                    None
                }
                b'c' => {
                    *self = Scan::Ground;
                    Some(Action::Reset)
                }
                // vte executes C0 controls and skips these without leaving the escape.
                0x00..=0x17 | 0x19 | 0x1b..=0x1f | 0x7f..=0xff => None,
                _ => {
                    *self = Scan::Ground;
                    None
                }
            },
            Scan::OscNumber { mut num, len } => {
                *self = match b {
                    0x1b => Scan::Esc,
                    b';' => match &num[..len as usize] {
                        b"133" => Scan::OscBody {
                            semantic: true,
                            mark: None,
                        },
                        b"8" => Scan::OscBody {
                            semantic: false,
                            mark: None,
                        },
                        _ => Scan::Ground,
                    },
                    _ if ignored => return None,
                    b'0'..=b'9' if len < 3 => {
                        num[len as usize] = b;
                        Scan::OscNumber { num, len: len + 1 }
                    }
                    // A terminator, or a number that is none of ours.
                    _ => Scan::Ground,
                };
                None
            }
            Scan::OscBody { semantic, mark } => {
                let end = matches!(b, 0x07 | 0x18 | 0x1a | 0x1b);
                if !end {
                    if !ignored && mark.is_none() {
                        *self = Scan::OscBody {
                            semantic,
                            mark: Some(b),
                        };
                    }
                    return None;
                }
                *self = if b == 0x1b { Scan::Esc } else { Scan::Ground };
                if !semantic {
                    return Some(Action::Relinked);
                }
                match mark {
                    Some(b'A') => Some(Action::Enter(Region::Prompt)),
                    Some(b'B') => Some(Action::Enter(Region::Input)),
                    Some(b'C' | b'D') => Some(Action::Enter(Region::Output)),
                    _ => None,
                }
            }
        }
    }
}

/// Searchers for `ESC ]` (an OSC starts) and `ESC c` (RIS), built once.
static OSC_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\x1b]"));
static RIS_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\x1bc"));

/// Bytes [`Grid::feed_scanning`] parses before it takes the rows they scrolled: about two
/// hundred rows of typical output.
const SCAN_PIECE: usize = 16 * 1024;

/// A materialised screen.
pub struct Grid {
    term: Term<alacritty_terminal::event::VoidListener>,
    parser: Processor,
    /// Where the mark scanner is in the byte stream (sequences can span feeds).
    scan: Scan,
    /// The OSC 133 region the program is in, as of the bytes parsed so far.
    region: Region,
    /// The template hyperlinks that tag prompt and input cells (allocated once per grid, so
    /// a tagged cell costs one reference count, not an allocation).
    prompt_link: Hyperlink,
    input_link: Hyperlink,
    /// Stream offset up to which output has been parsed.
    fed: u64,
    /// Rows of history kept.
    scrollback: usize,
    /// Output parsed since the pending-pattern matcher last looked (it looks again at most
    /// this far behind while output keeps coming).
    unscanned_bytes: usize,
    /// The rows that scrolled into history since the matcher last looked, their text taken
    /// by [`Grid::feed_scanning`] just after they scrolled (see there).
    scrolled: Lines,
    /// Rows in `scrolled`.
    scrolled_rows: usize,
    /// The history's count of rows ever pushed when the matcher last looked.
    seen_pushed: u64,
    /// More scrolled than `scrolled` may hold, or the mark was lost: the matcher's next
    /// look takes the whole history ([`Grid::take_scrolled`]).
    scrolled_all: bool,
}

impl Grid {
    /// A grid of `cols`×`rows` with `scrollback` lines of history, fed `bytes` in one go
    /// (tests; the daemon feeds through `ScreenModel`).
    #[cfg(test)]
    pub fn materialise(cols: u16, rows: u16, scrollback: usize, bytes: &[u8]) -> Grid {
        let mut g = Grid::new(cols, rows, scrollback);
        g.feed(bytes);
        g.finish_feed();
        // Pending patterns are matched against what changes from now on.
        g.take_unscanned();
        g
    }

    /// A blank terminal that will be fed the output stream from its first byte. Its
    /// history is kept in compact rows (`grid/history.rs`), not by alacritty.
    pub fn new(cols: u16, rows: u16, scrollback: usize) -> Grid {
        let mut g = Grid::with_term(Grid::term(cols, rows, 0), scrollback);
        // The alternate screen's grid exists only while a program is on it.
        g.term.set_lazy_alternate();
        if scrollback > 0 {
            g.term.grid_mut().history_sink =
                Some(Box::new(history::History::new(scrollback, cols as usize)));
        }
        g
    }

    /// A grid as alacritty alone makes it: its history kept by alacritty itself, as every
    /// terminal built on it does, and none of maxx's parsing fast paths. The reference the
    /// compact history and the fast paths are compared with.
    #[cfg(test)]
    pub fn new_reference(cols: u16, rows: u16, scrollback: usize) -> Grid {
        let mut g = Grid::with_term(Grid::term(cols, rows, scrollback), scrollback);
        // And none of maxx's fast paths in alacritty (vendor/README.md).
        g.term.set_reference();
        g
    }

    fn with_term(term: Term<alacritty_terminal::event::VoidListener>, scrollback: usize) -> Grid {
        Grid {
            term,
            parser: Processor::new(),
            scan: Scan::Ground,
            region: Region::Output,
            prompt_link: Hyperlink::new(Some(PROMPT_ID), PROMPT_ID.to_string()),
            input_link: Hyperlink::new(Some(INPUT_ID), INPUT_ID.to_string()),
            fed: 0,
            scrollback,
            unscanned_bytes: 0,
            scrolled: Lines::default(),
            scrolled_rows: 0,
            seen_pushed: 0,
            scrolled_all: false,
        }
    }

    /// The compact history, if this grid keeps one and the primary screen is on display
    /// (the alternate screen has no history).
    fn store(&self) -> Option<&history::History> {
        history::of(self.term.grid())
    }

    /// A blank terminal of the same size and history that continues at the same stream
    /// offset: what a grid that panicked is replaced with.
    pub fn blank_like(&self) -> Grid {
        let mut g = Grid::new(self.cols(), self.rows(), self.scrollback);
        g.fed = self.fed;
        g
    }

    /// The terminal state (the answers to grid queries read it).
    pub fn state(&self) -> &Term<alacritty_terminal::event::VoidListener> {
        &self.term
    }

    /// Stream offset up to which output has been parsed.
    pub fn fed(&self) -> u64 {
        self.fed
    }

    fn term(
        cols: u16,
        rows: u16,
        scrollback: usize,
    ) -> Term<alacritty_terminal::event::VoidListener> {
        let config = Config {
            scrolling_history: scrollback,
            ..Config::default()
        };
        Term::new(
            config,
            &Size {
                cols: cols as usize,
                rows: rows as usize,
            },
            alacritty_terminal::event::VoidListener,
        )
    }

    /// Count `n` bytes as parsed without parsing them (after the emulator panicked on them).
    pub fn skip(&mut self, n: usize) {
        self.fed += n as u64;
    }

    /// Parse output that follows what was parsed so far.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parse(bytes);
        self.fed += bytes.len() as u64;
        self.unscanned_bytes += bytes.len();
    }

    /// [`Grid::feed`] while patterns are pending: in pieces, taking the text of the rows each
    /// piece scrolled into history right after it, while their compact form is still in the
    /// cache and before a flood can evict them from a short history. (Measured when history
    /// rows were alacritty's 24-byte cells: reading them back at the next look instead cost
    /// a fifth of the grid worker's time with a text wait pending.)
    pub fn feed_scanning(&mut self, bytes: &[u8]) {
        for piece in bytes.chunks(SCAN_PIECE) {
            self.feed(piece);
            if self.scrolled_all {
                continue;
            }
            // Where the mark went (evicted, cleared, reflowed) all history counts as new,
            // as at the look (never more than the history holds).
            let n = self.count_scrolled();
            if self.scrolled_rows + n > self.scrollback {
                // More than the history holds: the next look reads the whole history, once,
                // rather than the buffer growing past it.
                self.scrolled_all = true;
                self.scrolled = Lines::default();
                self.scrolled_rows = 0;
                continue;
            }
            let mut lines = std::mem::take(&mut self.scrolled);
            for line in -(n as i32)..0 {
                lines.push_row(self, line);
            }
            self.scrolled = lines;
            self.scrolled_rows += n;
        }
    }

    /// The rows that scrolled into history since the last call (or [`Grid::take_unscanned`]),
    /// oldest first, as lines: those [`Grid::feed_scanning`] kept and those scrolled since.
    /// The last line stays open if its row wrapped (push the rows that follow it, then
    /// [`Lines::finish`]).
    pub fn take_scrolled(&mut self) -> Lines {
        self.unscanned_bytes = 0;
        // Counting also moves the mark, so it runs either way.
        let since = self.count_scrolled();
        let n = if std::mem::take(&mut self.scrolled_all) {
            self.history()
        } else {
            since
        };
        self.scrolled_rows = 0;
        let mut lines = std::mem::take(&mut self.scrolled);
        for line in -(n as i32)..0 {
            lines.push_row(self, line);
        }
        lines
    }

    /// Release what a synchronized-update block (DEC 2026) holds back: a read wants it all.
    pub fn finish_feed(&mut self) {
        self.parser.stop_sync(&mut self.term);
    }

    /// Bytes parsed since the pending-pattern matcher last looked.
    pub fn unscanned_bytes(&self) -> usize {
        self.unscanned_bytes
    }

    /// How many history rows scrolled off since the last call — exactly: rows `-n..0` are
    /// new — and start counting afresh: the history counts every row pushed into it. Where
    /// it holds fewer (history was cleared, or rows were evicted), all of it is new. Scrolls
    /// by any means count: line feeds, wraps, `CSI S`, index; rows a resize moves into
    /// history do not (they were on the screen). After a resize that reflowed the history,
    /// the count is of rows as they were pushed.
    pub fn take_unscanned(&mut self) -> usize {
        self.unscanned_bytes = 0;
        self.scrolled = Lines::default();
        self.scrolled_rows = 0;
        self.scrolled_all = false;
        self.count_scrolled()
    }

    /// The count of [`Grid::take_unscanned`], alone: the rows pushed into history since the
    /// last count, or all of it if it holds fewer (it was cleared or rows were evicted).
    fn count_scrolled(&mut self) -> usize {
        let Some(store) = self.store() else {
            return 0;
        };
        let pushed = store.pushed();
        let n = (pushed - self.seen_pushed.min(pushed)).min(store.len() as u64) as usize;
        self.seen_pushed = pushed;
        n
    }

    /// Parse `bytes`, splitting the feed right after each OSC 133 mark (and OSC 8 / RIS) so
    /// the cells before it and after it are written under the right region. The only work on
    /// top of the parse is a SIMD search for `ESC ]` and `ESC c` and a byte-by-byte look at
    /// an OSC's number (and, for OSC 133 and 8 only, its body).
    fn parse(&mut self, bytes: &[u8]) {
        let mut parsed = 0;
        let mut i = 0;
        // Where the next `ESC ]` and `ESC c` are (searched for lazily, at most once each per
        // position): CSI and other escapes, the bulk of a TUI's output, are never looked at.
        let mut osc = None;
        let mut ris = None;
        while i < bytes.len() {
            if self.scan == Scan::Ground {
                let next = |found: &mut Option<Option<usize>>,
                            needle: &memchr::memmem::Finder<'static>| {
                    if found.is_none_or(|f: Option<usize>| f.is_some_and(|at| at < i)) {
                        *found = Some(needle.find(&bytes[i..]).map(|at| at + i));
                    }
                    found.flatten()
                };
                let at = match (next(&mut osc, &OSC_FINDER), next(&mut ris, &RIS_FINDER)) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => match a.or(b) {
                        Some(at) => at,
                        None => {
                            // An ESC at the very end may begin one in the next feed.
                            if bytes.last() == Some(&0x1b) {
                                self.scan = Scan::Esc;
                            }
                            break;
                        }
                    },
                };
                i = at + 1;
                self.scan = Scan::Esc;
                continue;
            }
            let action = self.scan.step(bytes[i]);
            i += 1;
            if let Some(action) = action {
                self.parser.advance(&mut self.term, &bytes[parsed..i]);
                parsed = i;
                self.apply(action);
            }
        }
        self.parser.advance(&mut self.term, &bytes[parsed..]);
    }

    /// Act on a sequence the parser has just been given.
    fn apply(&mut self, action: Action) {
        // Bytes held back by a synchronized update (DEC 2026) come before the sequence: write
        // them under the region they were printed in.
        if self.parser.sync_bytes_count() > 0 {
            self.parser.stop_sync(&mut self.term);
        }
        let link = |region: Region, g: &Grid| match region {
            Region::Output => None,
            Region::Prompt => Some(g.prompt_link.clone()),
            Region::Input => Some(g.input_link.clone()),
        };
        match action {
            Action::Enter(region) => {
                self.region = region;
                let tag = link(region, self);
                // The saved cursors too, so a DECRC inside the region keeps its tag and one
                // after it does not bring an old tag back; and those of the grid not on
                // display, so the primary screen's cursor, restored when a program leaves the
                // alternate screen, writes in the region the marks say.
                let retag = |grid: &mut alacritty_terminal::grid::Grid<Cell>| {
                    grid.saved_cursor.template.set_hyperlink(tag.clone());
                    grid.cursor.template.set_hyperlink(tag.clone());
                };
                retag(self.term.grid_mut());
                retag(self.term.inactive_grid_mut());
            }
            // Inside a region the program's own link gives way to the tag (maxx reports no
            // hyperlinks); outside one it is left alone.
            Action::Relinked if self.region != Region::Output => {
                let tag = link(self.region, self);
                self.term.grid_mut().cursor.template.set_hyperlink(tag);
            }
            Action::Relinked => {}
            // A full reset cleared the cursors; the region ends with them.
            Action::Reset => self.region = Region::Output,
        }
    }

    /// Resize (alacritty reflows).
    pub fn resize(&mut self, cols: u16, rows: u16) {
        if (cols, rows) == (self.cols(), self.rows()) {
            return;
        }
        // The compact history goes back into alacritty for the resize, which reflows it
        // with the screen (and pulls rows from it onto a taller screen, or pushes rows into
        // it from a shorter one), and comes out after. At the same width only the rows a
        // taller screen pulls down are needed; a new width reflows them all.
        let needed = if cols == self.cols() {
            (rows as usize).saturating_sub(self.rows() as usize)
        } else {
            usize::MAX
        };
        let scrollback = self.scrollback;
        let main = self.primary_grid_mut();
        let mut sink = main.history_sink.take();
        if let Some(store) = sink
            .as_mut()
            .and_then(|s| s.as_any_mut().downcast_mut::<history::History>())
        {
            main.put_history(store.take_newest(needed), scrollback);
        }
        self.term.resize(Size {
            cols: cols as usize,
            rows: rows as usize,
        });
        // alacritty's reflow can leave a row's count of used cells short of the cells that
        // hold something. A row it reuses later (a spare row, or one cleared from history)
        // is cleared only up to that count, so old backgrounds showed through in new lines:
        // the screen depended on which row alacritty happened to reuse (measured: 555 of
        // 20,000 random streams with resizes). Every row now counts as used in full, and the
        // spare rows go (alacritty makes fresh ones when history grows again).
        // Both grids: the one not on display was resized too (the primary screen behind an
        // alternate one, or the alternate grid, which every entry clears, only up to the
        // same counts).
        Grid::count_rows_used(self.term.grid_mut());
        Grid::count_rows_used(self.term.inactive_grid_mut());
        if let Some(mut sink) = sink {
            let main = self.primary_grid_mut();
            let rows = main.take_history();
            if let Some(store) = sink.as_any_mut().downcast_mut::<history::History>() {
                store.set_cols(cols as usize);
                store.extend_newest(&rows);
            }
            main.history_sink = Some(sink);
        }
    }

    /// The primary screen's grid, on display or behind the alternate screen: the one that
    /// keeps the history.
    fn primary_grid_mut(&mut self) -> &mut alacritty_terminal::grid::Grid<Cell> {
        if self.alt_screen() {
            self.term.inactive_grid_mut()
        } else {
            self.term.grid_mut()
        }
    }

    /// The alternate screen's grid, on display or shelved behind the primary one (then a 1x1
    /// grid that keeps its cursors: vendored alacritty's lazy alternate screen).
    fn alternate_grid_mut(&mut self) -> &mut alacritty_terminal::grid::Grid<Cell> {
        if self.alt_screen() {
            self.term.grid_mut()
        } else {
            self.term.inactive_grid_mut()
        }
    }

    /// Count every row of `grid` as used in full and drop its spare rows (see
    /// [`Grid::resize`]).
    fn count_rows_used(grid: &mut alacritty_terminal::grid::Grid<Cell>) {
        for line in -(grid.history_size() as i32)..grid.screen_lines() as i32 {
            std::ops::IndexMut::index_mut(&mut grid[Line(line)], ..);
        }
        grid.truncate();
    }

    /// Rows of history kept.
    pub fn scrollback(&self) -> usize {
        self.scrollback
    }

    /// Grid width.
    pub fn cols(&self) -> u16 {
        self.term.columns() as u16
    }

    /// Grid height.
    pub fn rows(&self) -> u16 {
        self.term.screen_lines() as u16
    }

    /// Rows of history retained (none on the alternate screen).
    pub fn history(&self) -> usize {
        match self.store() {
            Some(store) => store.len(),
            None => self.term.grid().history_size(),
        }
    }

    /// Run `f` on the cells of row `line` (0.. the viewport, negative lines history). A
    /// history row gives the cells it holds, decoded for the call: the rest of it is blank
    /// default cells.
    pub fn with_cells<R>(&self, line: i32, f: impl FnOnce(&[Cell]) -> R) -> R {
        match self.store() {
            Some(store) if line < 0 => {
                let mut cells = Vec::new();
                store.back(-line as usize).cells_into(&mut cells);
                f(&cells)
            }
            _ => f(&self.term.grid()[Line(line)][..]),
        }
    }

    /// Cursor (column, row) and visibility.
    pub fn cursor(&self) -> (u16, u16, bool) {
        let p = self.term.grid().cursor.point;
        (
            p.column.0 as u16,
            p.line.0.max(0) as u16,
            self.term.mode().contains(TermMode::SHOW_CURSOR),
        )
    }

    /// Whether the alternate screen is active.
    pub fn alt_screen(&self) -> bool {
        self.term.mode().contains(TermMode::ALT_SCREEN)
    }

    /// A row: `line` 0.. is the viewport, negative lines are history (-1 = newest).
    pub fn row(&self, line: i32) -> Row {
        let mut text = String::new();
        let (wrapped, input) = self.row_into(line, &mut text);
        Row {
            text,
            wrapped,
            input,
        }
    }

    /// Append the text of a row ([`Grid::row`]) to `text`; whether the row wraps and
    /// whether it holds an input cell.
    fn row_into(&self, line: i32, text: &mut String) -> (bool, bool) {
        if let (Some(store), true) = (self.store(), line < 0) {
            let row = store.back(-line as usize);
            let input = row.text_into(text, |cell| semantic(cell) == Some(Semantic::Input));
            return (row.wrapped(self.cols() as usize), input);
        }
        let row = &self.term.grid()[Line(line)];
        let cells: &[Cell] = &row[..];
        // Only the cells up to the last one that holds anything: most rows are far shorter
        // than the screen, and the blanks after them would only be trimmed.
        let used = cells
            .iter()
            .rposition(|cell| cell.c != ' ' || cell.extra.is_some())
            .map_or(0, |c| c + 1);
        let start = text.len();
        text.reserve(used);
        let mut input = false;
        const SPACERS: Flags = Flags::WIDE_CHAR_SPACER.union(Flags::LEADING_WIDE_CHAR_SPACER);
        for cell in &cells[..used] {
            if cell.extra.is_none() && cell.c.is_ascii() && !cell.flags.intersects(SPACERS) {
                // The common cell: one ASCII byte, no semantic, no combining marks; a tab
                // stays in the cell it started from (for copying), but on screen, and so
                // in the text, it is the blanks it moved over.
                text.push(if cell.c == '\t' { ' ' } else { cell.c });
                continue;
            }
            if cell.flags.intersects(SPACERS) {
                continue;
            }
            input = input || semantic(cell) == Some(Semantic::Input);
            text.push(if cell.c == '\t' { ' ' } else { cell.c });
            if let Some(extra) = cell.zerowidth() {
                text.extend(extra);
            }
        }
        let wrapped = cells
            .last()
            .is_some_and(|c| c.flags.contains(Flags::WRAPLINE));
        let trimmed = start + text[start..].trim_end_matches(' ').len();
        text.truncate(trimmed);
        (wrapped, input)
    }
}

/// The OSC 133 region a cell was written in (`None` for output and unmarked cells).
pub(super) fn semantic(cell: &Cell) -> Option<Semantic> {
    // Most cells have no extra storage at all: no clone, no string compare.
    cell.extra.as_ref()?;
    match cell.hyperlink()?.id() {
        PROMPT_ID => Some(Semantic::Prompt),
        INPUT_ID => Some(Semantic::Input),
        _ => None,
    }
}

/// Join rows into logical lines (soft-wrapped rows continue into the next).
pub fn logical(rows: &[Row]) -> Vec<String> {
    join(rows, true)
}

/// The logical lines that hold no OSC 133 input cell (`wait --output-only`).
pub fn output_lines(rows: &[Row]) -> Vec<String> {
    join(rows, false)
}

/// Logical lines; those holding an input cell on any of their rows only with `keep_input`.
fn join(rows: &[Row], keep_input: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut input = false;
    let mut open = false;
    for r in rows {
        current.push_str(&r.text);
        input |= r.input;
        open = true;
        if !r.wrapped {
            if keep_input || !input {
                out.push(std::mem::take(&mut current));
            }
            current.clear();
            input = false;
            open = false;
        }
    }
    if open && (keep_input || !input) {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alacritty_terminal::term::cell::Extra;
    use alacritty_terminal::vte::ansi::Color;
    use maxx_protocol::screen::CellColor;

    #[test]
    fn ring_keeps_what_was_not_consumed_addressed_by_stream_offset() {
        let mut r = RawRing::default();
        r.push(b"hello");
        assert_eq!(r.since(2), (&b"llo"[..], &b""[..]));
        let big = vec![b'x'; RAW_RING_BYTES];
        r.push(&big);
        assert!(r.full());
        assert_eq!(r.len(), RAW_RING_BYTES + 5, "nothing is evicted");
        r.consume_to(5);
        assert_eq!(r.start(), 5);
        assert_eq!(r.copy_from(5, 3), b"xxx");
        r.consume_to(5 + RAW_RING_BYTES as u64);
        assert!(r.is_empty());
        assert_eq!(r.total(), 5 + RAW_RING_BYTES as u64);
    }

    #[test]
    fn the_rows_scrolled_off_since_the_last_look_are_counted_exactly() {
        let mut g = Grid::materialise(10, 3, 100, b"1\r\n2\r\n3\r\n4\r\n5");
        // materialise looked once already: nothing new.
        assert_eq!(g.take_unscanned(), 0);
        g.feed(b"\r\n6\r\n7");
        assert_eq!(g.take_unscanned(), 2);
        // A scroll by escape sequence (SU) and a wrap count too; a cursor move does not.
        g.feed(b"\x1b[2S\x1b[H");
        assert_eq!(g.take_unscanned(), 2);
        g.feed(b"\x1b[3;1H0123456789abcdefghij");
        assert_eq!(g.take_unscanned(), 1);
        assert_eq!(g.take_unscanned(), 0);
        // The mark is invisible to readers.
        let mut cells = Vec::new();
        g.styled_cells(-1, 0, &mut cells);
        assert!(cells.is_empty());
    }

    #[test]
    fn rows_taken_while_feeding_are_the_rows_that_scrolled() {
        // Several pieces per feed; with a long history every row is kept as it scrolls,
        // with a short one the rows overflow the buffer and the look takes all history.
        let mut out = String::new();
        for i in 0..3000 {
            out.push_str(&format!("line {i} {}\r\n", "x".repeat(i % 70)));
        }
        for scrollback in [10_000, 100] {
            let mut scanning = Grid::new(80, 10, scrollback);
            let mut plain = Grid::new(80, 10, scrollback);
            let (mut taken, mut expected) = (Vec::new(), Vec::new());
            for part in out.as_bytes().chunks(50_000) {
                scanning.feed_scanning(part);
                let mut lines = scanning.take_scrolled();
                lines.finish();
                taken.extend(lines.iter().map(|(l, _)| l.to_string()));
                plain.feed(part);
                let n = plain.take_unscanned().min(plain.history()) as i32;
                expected.extend((-n..0).map(|l| plain.row(l).text));
            }
            assert!(expected.len() > 10, "{scrollback}: {}", expected.len());
            assert_eq!(taken, expected, "scrollback {scrollback}");
        }
        // The rows are taken as they scroll, not at the look: a row that scrolled and was
        // then cleared from history (`CSI 3 J`, as `clear` sends) in a later piece is kept.
        let mut g = Grid::materialise(80, 10, 10_000, b"");
        let mut out = String::from("NEEDLE\r\n");
        while out.len() <= SCAN_PIECE {
            out.push_str("padding padding padding\r\n");
        }
        out.push_str("\x1b[3J");
        g.feed_scanning(out.as_bytes());
        assert_eq!(g.history(), 0);
        assert!(g.take_scrolled().iter().any(|(l, _)| l == "NEEDLE"));
    }

    #[test]
    fn wide_characters_read_once() {
        let g = Grid::materialise(20, 2, 10, "日本 x".as_bytes());
        assert_eq!(g.row(0).text, "日本 x");
    }

    #[test]
    fn tabs_read_as_the_blanks_they_cover() {
        let g = Grid::materialise(20, 2, 10, b"a\tb\r\n\tc");
        assert_eq!(g.row(0).text, "a       b");
        assert_eq!(g.row(1).text, "        c");
    }

    #[test]
    fn grid_text_cursor_and_wrap() {
        let mut g = Grid::materialise(10, 3, 100, b"hello\r\nworld\x1b[1;31mred\x1b[0m");
        assert_eq!(g.row(0).text, "hello");
        assert_eq!(g.row(1).text, "worldred");
        assert_eq!(g.cursor(), (8, 1, true));
        g.feed(b"\r\n0123456789abc");
        g.finish_feed();
        let rows: Vec<Row> = (0..3).map(|l| g.row(l)).collect();
        assert!(rows[2].wrapped || g.history() > 0);
        let mut cells = Vec::new();
        g.styled_cells(-(g.history() as i32).min(0) + 1, 1, &mut cells);
        let g2 = Grid::materialise(10, 3, 100, b"\x1b[1;31mR\x1b[0m");
        let mut cells = Vec::new();
        g2.styled_cells(0, 0, &mut cells);
        assert_eq!(cells.len(), 1);
        assert!(cells[0].style.bold);
        assert_eq!(cells[0].style.fg, CellColor::Palette { index: 1 });
    }

    /// Output pieces for the recycling property: text (wide characters too), line feeds,
    /// scrolls, inserts and deletes, erases in colour, scroll regions, RIS and `CSI 3 J`.
    fn recycling_piece() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        prop_oneof![
            prop::sample::select(vec![
                "hello",
                "日本語",
                "wrap-me-around-the-edge-please",
                "é\t",
                "x"
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
            Just(b"\r\n".to_vec()),
            (
                0u8..8,
                prop::sample::select(vec!['S', 'T', 'M', 'L', 'J', 'K', 'b'])
            )
                .prop_map(|(n, c)| format!("\x1b[{n}{c}").into_bytes()),
            (0u8..8).prop_map(|n| format!("\x1b[4{n}m").into_bytes()),
            Just(b"\x1b[0m".to_vec()),
            (1u8..7, 1u8..7).prop_map(|(t, h)| format!("\x1b[{t};{}r", t + h).into_bytes()),
            Just(b"\x1b[r".to_vec()),
            (1u8..12, 1u8..30).prop_map(|(l, c)| format!("\x1b[{l};{c}H").into_bytes()),
            Just(b"\x1b[3J".to_vec()),
            Just(b"\x1bc".to_vec()),
            Just(b"\x1b[?7l".to_vec()),
            Just(b"\x1b[?7h".to_vec()),
            prop::sample::select(vec![
                "\x1b[?1049h",
                "\x1b[?1049l",
                "\x1b[?47h",
                "\x1b[?47l",
                "\x1b[?1047h",
                "\x1b[?1047l"
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
        ]
    }

    proptest::proptest! {
        /// Whatever rows alacritty reuses, the screen and history are those of a terminal
        /// that always starts a new line from a fresh row (the reference drops the spare
        /// rows of both its grids after every byte). Resizes on either screen; both grids
        /// compared, the one on display and the one behind it.
        #[test]
        fn the_screen_does_not_depend_on_which_row_alacritty_reuses(
            steps in proptest::collection::vec(
                (recycling_piece(), proptest::option::weighted(0.1, (2u16..36, 1u16..14))),
                1..150,
            ),
        ) {
            let mut grid = Grid::new_reference(20, 6, 50);
            let mut fresh = Grid::new_reference(20, 6, 50);
            for (bytes, resize) in &steps {
                if let Some((cols, rows)) = resize {
                    grid.resize(*cols, *rows);
                    fresh.resize(*cols, *rows);
                }
                grid.feed(bytes);
                for b in bytes {
                    fresh.feed(std::slice::from_ref(b));
                    fresh.term.grid_mut().truncate();
                    fresh.term.inactive_grid_mut().truncate();
                }
            }
            let all = |grid: &alacritty_terminal::grid::Grid<Cell>| {
                let cursors = [&grid.cursor, &grid.saved_cursor].map(|c| (c.point, c.input_needs_wrap));
                let rows = (-(grid.history_size() as i32)..grid.screen_lines() as i32)
                    .map(|l| grid[Line(l)][..].to_vec())
                    .collect::<Vec<_>>();
                (rows, cursors)
            };
            proptest::prop_assert_eq!(grid.alt_screen(), fresh.alt_screen());
            proptest::prop_assert_eq!(all(grid.term.grid()), all(fresh.term.grid()));
            proptest::prop_assert_eq!(
                all(grid.term.inactive_grid()),
                all(fresh.term.inactive_grid())
            );
        }
    }

    /// Output pieces for the history property: the recycling pieces and those that reach
    /// history in other ways (`ED 2` on a full or an empty screen, reverse index, a scroll
    /// region at the top with rows fixed below it, bursts of line feeds, a wide character
    /// wrapped at the last column or written over at the top left).
    fn history_piece() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        prop_oneof![
            4 => recycling_piece(),
            1 => prop::sample::select(vec![
                "\x1b[2J",
                "\x1b[H\x1b[2J",
                "\x1b[3J\x1b[H\x1b[2J",
                "\x1bM",
                "\x1b[1;3r",
                "\x1b[4S",
                "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n",
                "\x1b[999C日本",
                "\x1b[999C日\r\n",
                "\x1b[H日",
                "\x1b[1;2H語",
                "\x1b[H x",
                "a\tb\tc",
                "e\u{301}\u{302}",
                "\x1b[41m\x1b[K\r\n",
                "\x1b]8;;http://x\x07link\x1b]8;;\x07",
                // A blank with a link at the end of a row: held by the compact row (its
                // cell has extra data), a blank to a checkpoint (maxx keeps no links).
                "\x1b]8;;http://x\x07 \x1b]8;;\x07\r\n",
                "\x1b]133;A\x07$ \x1b]133;B\x07in\x1b]133;C\x07\r\n",
                "\x1b7",
                "\x1b8",
                "\x1b[5;9H\x1b[31m\x1b7\x1b[0m",
                "\x1b(0q\x1b(B",
                "\x1b)0\x0eq",
                "\x0f",
                // Printable runs and what the fast path for them leaves to `input`: insert
                // mode, no autowrap, DEL, C1 controls amid text, REP of the last character.
                "\x1b[4hins\x1b[4l",
                "\x1b[?7lno wrap at all here\x1b[?7h",
                "a\x7fb",
                "x\u{85}y\u{9b}z",
                "abc\x1b[3b",
                "\x1b[1;5H\x1b[4mstyled run over the edge\x1b[24m",
                // Every kind of colour a history row stores, default or not, and flags.
                "\x1b[38;5;200mfg\x1b[48;2;1;2;3mbg\x1b[39;49m",
                "\x1b[1;33;44mbold\x1b[22;39;49mplain",
                "\x1b[95;105mbright\x1b[0m",
                "\x1b[38;2;250;0;7m\x1b[48;5;0mtrue\x1b[0m",
                "\x1b[58;5;3m\x1b[4munder\x1b[0m",
                "\x1b[7;2;9mflags\x1b[0m",
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
        ]
    }

    /// A row's cells as a compact string: a default blank is `.`, a plain cell its
    /// character, any other `{c fg bg flags extra}` (a link's id alacritty made up itself, a
    /// count shared by all grids, left out).
    fn cells_text(cells: &[Cell]) -> String {
        let mut out = String::new();
        for cell in cells {
            let plain = cell.fg == Cell::default().fg
                && cell.bg == Cell::default().bg
                && cell.flags.is_empty()
                && cell.extra.is_none();
            match (plain, cell.c) {
                (true, ' ') => out.push('.'),
                (true, c) => out.push(c),
                (false, c) => {
                    let link = cell.hyperlink().map(|h| {
                        let id = if h.id().ends_with("_alacritty") {
                            ""
                        } else {
                            h.id()
                        };
                        format!("{id}|{}", h.uri())
                    });
                    out.push_str(&format!(
                        "{{{c:?} {:?} {:?} {:x} {:?} {:?} {link:?}}}",
                        cell.fg,
                        cell.bg,
                        cell.flags.bits(),
                        cell.zerowidth(),
                        cell.underline_color()
                    ));
                }
            }
        }
        out
    }

    /// What a reader can see of `g` and what decides what it shows next: the cells of the
    /// history (of the primary screen, wherever it is) and of both screens, both cursors of
    /// both grids, and which screen is on display.
    fn everything(g: &Grid) -> Vec<String> {
        let main = if g.alt_screen() {
            g.term.inactive_grid()
        } else {
            g.term.grid()
        };
        let mut out = vec![format!("alt {}", g.alt_screen())];
        match main
            .history_sink
            .as_ref()
            .and_then(|s| s.as_any().downcast_ref::<history::History>())
        {
            Some(store) => out.extend((1..=store.len()).rev().map(|n| {
                format!(
                    "h {}",
                    cells_text(&store.back(n).to_row(main.columns())[..])
                )
            })),
            None => out.extend(
                (-(main.history_size() as i32)..0)
                    .map(|l| format!("h {}", cells_text(&main[Line(l)][..]))),
            ),
        };
        for (name, grid) in [("on", g.term.grid()), ("off", g.term.inactive_grid())] {
            for c in [&grid.cursor, &grid.saved_cursor] {
                let template = cells_text(std::slice::from_ref(&c.template));
                out.push(format!(
                    "{name} cursor {:?} {} {template} {:?}",
                    c.point, c.input_needs_wrap, c.charsets
                ));
            }
            // The alternate grid off display holds nothing a program can see again (every
            // entry clears it): a grid may keep it as a 1x1 placeholder.
            if name == "off" && !g.alt_screen() {
                continue;
            }
            for l in 0..grid.screen_lines() as i32 {
                out.push(format!("{name} {}", cells_text(&grid[Line(l)][..])));
            }
        }
        out
    }

    #[test]
    fn a_linked_blank_at_a_rows_end_is_written_as_its_cell_would_be() {
        let mut g = Grid::new(20, 2, 10);
        g.feed(b"a\x1b]8;;http://x\x07 \x1b]8;;\x07\r\n\r\n\r\n");
        let (stored, cells) = checkpoint::RowWriter::history_both_ways(&g);
        assert_eq!(stored, cells);
        // The oldest row, "a" and the linked blank: both cells written.
        assert_eq!(stored.first(), Some(&2));
    }

    proptest::proptest! {
        /// The compact history is exactly alacritty's own: after any output and resizes (of
        /// either screen, same width or not), a grid keeping its history in compact rows
        /// equals one whose alacritty keeps it, history and both screens, cell for cell.
        #[test]
        fn the_compact_history_is_alacrittys_own(
            scrollback in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..6, proptest::strategy::Just(40)],
            steps in proptest::collection::vec(
                (
                    history_piece(),
                    proptest::option::weighted(
                        0.1,
                        (proptest::option::weighted(0.5, 2u16..36), 1u16..14),
                    ),
                ),
                1..200,
            ),
        ) {
            let mut grid = Grid::new(20, 6, scrollback);
            let mut reference = Grid::new_reference(20, 6, scrollback);
            for (bytes, resize) in &steps {
                if let Some((cols, rows)) = resize {
                    let cols = cols.unwrap_or(grid.cols());
                    grid.resize(cols, *rows);
                    reference.resize(cols, *rows);
                }
                grid.feed(bytes);
                reference.feed(bytes);
            }
            grid.finish_feed();
            reference.finish_feed();
            let (a, b) = (everything(&grid), everything(&reference));
            if a != b {
                let diff: Vec<String> = a
                    .iter()
                    .zip(&b)
                    .enumerate()
                    .filter(|(_, (x, y))| x != y)
                    .map(|(i, (x, y))| format!("line {i}:\n  compact   {x}\n  alacritty {y}"))
                    .take(6)
                    .collect();
                proptest::prop_assert!(false, "{} vs {} lines\n{}", a.len(), b.len(), diff.join("\n"));
            }
            proptest::prop_assert_eq!(grid.history(), reference.history());
            // What readers get: each row's text and its styled cells.
            let read = |g: &Grid, line: i32| {
                let (row, mut cells) = (g.row(line), Vec::new());
                g.styled_cells_json(line, 0, &mut cells);
                (row.text, row.wrapped, row.input, String::from_utf8(cells).unwrap_or_default())
            };
            for line in -(grid.history() as i32)..grid.rows() as i32 {
                proptest::prop_assert_eq!(read(&grid, line), read(&reference, line));
            }
            // History rows are written to a checkpoint straight from their compact form: the
            // bytes their cells would make.
            let (stored, cells) = checkpoint::RowWriter::history_both_ways(&grid);
            proptest::prop_assert!(stored == cells, "a history row written unlike its cells");
            // A checkpoint carries the compact history and restores into one that reads alike.
            let bytes = grid.checkpoint();
            let restored = Grid::restore(&bytes, None).expect("a checkpoint restores");
            proptest::prop_assert_eq!(restored.history(), grid.history());
            for line in -(grid.history() as i32)..grid.rows() as i32 {
                proptest::prop_assert_eq!(read(&restored, line), read(&grid, line));
            }
        }
    }

    proptest::proptest! {
        /// After any output and resizes on the main screen, a program entering the
        /// alternate screen finds it blank (alacritty clears the hidden alternate grid at
        /// entry only up to the cells it counts as used, and resizing it undercounts them).
        #[test]
        fn the_alternate_screen_starts_blank_after_resizes(
            steps in proptest::collection::vec(
                (
                    proptest::prop_oneof![
                        4 => recycling_piece(),
                        1 => proptest::strategy::Just(b"\x1b[?1049h".to_vec()),
                        1 => proptest::strategy::Just(b"\x1b[?1049l".to_vec()),
                    ],
                    proptest::option::weighted(0.15, (2u16..36, 1u16..14)),
                ),
                1..150,
            ),
        ) {
            let mut grid = Grid::new(20, 6, 50);
            for (bytes, resize) in &steps {
                if let (Some((cols, rows)), false) = (resize, grid.alt_screen()) {
                    grid.resize(*cols, *rows);
                }
                grid.feed(bytes);
            }
            grid.feed(b"\x1b[?1049l\x1b[?1049h");
            let bg = grid.term.grid().cursor.template.bg;
            let term = grid.term.grid();
            for line in 0..grid.rows() as i32 {
                for cell in &term[Line(line)][..] {
                    proptest::prop_assert_eq!(cell, &Cell { bg, ..Cell::default() });
                }
            }
        }
    }

    #[test]
    fn a_resize_on_the_main_screen_changes_nothing_alacritty_would_not() {
        // The swap to the hidden alternate grid and back must leave the main screen, its
        // cursor, its saved cursor and the modes as alacritty's own resize leaves them.
        // The cursor saved (DECSC, in red) differs from the cursor at the resize.
        let before =
            "one\r\ntwo\x1b[?1049hin alt\x1b[?1049l\x1b[1;2H\x1b[1;31m\x1b7\x1b[0m\x1b[4;2Hthree";
        let after = "\x1b8X\x1b[?1049hfresh\x1b[?1049l\r\nmore";
        let mut grid = Grid::new(20, 6, 50);
        let mut raw = Grid::term(20, 6, 50);
        let mut parser: Processor = Processor::new();
        grid.feed(before.as_bytes());
        parser.advance(&mut raw, before.as_bytes());
        grid.resize(30, 8);
        raw.resize(Size { cols: 30, rows: 8 });
        let state = |t: &Term<alacritty_terminal::event::VoidListener>| {
            let g = t.grid();
            let rows: Vec<Vec<Cell>> = (-(g.history_size() as i32)..g.screen_lines() as i32)
                .map(|l| g[Line(l)][..].to_vec())
                .collect();
            (rows, g.cursor.point, g.saved_cursor.point, *t.mode())
        };
        assert_eq!(state(&grid.term), state(&raw));
        grid.feed(after.as_bytes());
        parser.advance(&mut raw, after.as_bytes());
        assert_eq!(state(&grid.term), state(&raw));
        assert_eq!(
            grid.term.grid().saved_cursor.template,
            raw.grid().saved_cursor.template
        );
    }

    #[test]
    fn lines_built_from_cells_equal_the_joined_rows() {
        // Wraps (one across the history/viewport boundary), blank lines, a wrapped blank
        // row, OSC 133 input, and a last row that wraps onto nothing yet.
        let out =
            "abcdefghijklmno\r\n\r\nx\r\n\x1b]133;B\x07typed input that wraps\x1b]133;C\x07\r\n\
                   0123456789          z\r\nout\r\n0123456789abcdefghij";
        for rows_on_screen in [2u16, 3, 4, 20] {
            let g = Grid::materialise(10, rows_on_screen, 100, out.as_bytes());
            let rows: Vec<Row> = (-(g.history() as i32)..g.rows() as i32)
                .map(|l| g.row(l))
                .collect();
            let mut lines = Lines::default();
            for l in -(g.history() as i32)..0 {
                lines.push_row(&g, l);
            }
            for l in 0..g.rows() as i32 {
                lines.push_row(&g, l);
            }
            lines.finish();
            let all: Vec<String> = lines.iter().map(|(l, _)| l.to_string()).collect();
            let output: Vec<String> = lines
                .iter()
                .filter(|(_, input)| !input)
                .map(|(l, _)| l.to_string())
                .collect();
            assert_eq!(all, logical(&rows), "{rows_on_screen} rows");
            assert_eq!(output, output_lines(&rows), "{rows_on_screen} rows");
            assert_eq!(lines.len(), all.len());
            assert!(all.iter().any(|l| l == "typed input that wraps"));
            assert!(!output.iter().any(|l| l.contains("typed")));
        }
    }

    #[test]
    fn logical_lines_join_wraps() {
        let rows = vec![
            Row {
                text: "abc".into(),
                wrapped: true,
                input: false,
            },
            Row {
                text: "def".into(),
                wrapped: false,
                input: true,
            },
            Row {
                text: "g".into(),
                wrapped: false,
                input: false,
            },
        ];
        assert_eq!(logical(&rows), ["abcdef", "g"]);
        assert_eq!(
            output_lines(&rows),
            ["g"],
            "a wrapped line with input is input"
        );
    }

    /// The semantic of each column of viewport row `line`, as a compact string: `p` prompt,
    /// `i` input, `.` none (trailing untagged blanks trimmed).
    fn marks(g: &Grid, line: i32) -> String {
        let mut cells = Vec::new();
        g.styled_cells(line, 0, &mut cells);
        let mut out = vec!['.'; g.cols() as usize];
        for c in cells {
            out[c.col as usize] = match c.semantic {
                Some(Semantic::Prompt) => 'p',
                Some(Semantic::Input) => 'i',
                None => '.',
            };
        }
        let s: String = out.into_iter().collect();
        s.trim_end_matches('.').to_string()
    }

    fn grid_of(bytes: &[u8], cols: u16, rows: u16) -> Grid {
        Grid::materialise(cols, rows, 100, bytes)
    }

    const A: &[u8] = b"\x1b]133;A\x07";
    const B: &[u8] = b"\x1b]133;B\x07";
    const C: &[u8] = b"\x1b]133;C\x07";
    const D: &[u8] = b"\x1b]133;D;0\x07";

    #[test]
    fn osc133_regions_tag_the_cells_written_in_them() {
        let bytes = [A, b"$ ", B, b"ls -l", C, b"\r\nout\r\n", D, A, b"$ "].concat();
        let g = grid_of(&bytes, 20, 4);
        assert_eq!(g.row(0).text, "$ ls -l");
        assert_eq!(marks(&g, 0), "ppiiiii", "the typed space is input too");
        assert_eq!(marks(&g, 1), "", "output has no semantic");
        assert_eq!(marks(&g, 2), "pp");
        assert!(g.row(0).input && !g.row(1).input && !g.row(2).input);
        // A plain cell with a semantic is listed, with the default style.
        let mut cells = Vec::new();
        g.styled_cells(0, 0, &mut cells);
        assert_eq!(cells[2].text, "l");
        assert_eq!(cells[2].style.fg, CellColor::Default);
        assert!(!cells[2].style.bold);
    }

    #[test]
    fn marks_split_anywhere_across_feeds_and_st_terminated() {
        let bytes = [
            &b"\x1b]133;A\x1b\\> "[..],
            b"\x1b]133;B\x1b\\",
            b"typed",
            b"\x1b]133;C\x1b\\",
            b"\r\nout",
        ]
        .concat();
        let whole = grid_of(&bytes, 20, 3);
        for split in 1..bytes.len() {
            let mut g = Grid::materialise(20, 3, 100, &bytes[..split]);
            g.feed(&bytes[split..]);
            g.finish_feed();
            for line in 0..3 {
                assert_eq!(marks(&g, line), marks(&whole, line), "split at {split}");
            }
        }
        assert_eq!(marks(&whole, 0), "ppiiiii");
        assert_eq!(marks(&whole, 1), "");
    }

    #[test]
    fn marks_scroll_into_history_with_their_cells() {
        let mut bytes = [A, b"$ ", B, b"cmd", C].concat();
        for i in 0..50 {
            bytes.extend(format!("\r\nline{i}").bytes());
        }
        let g = grid_of(&bytes, 10, 3);
        let top = -(g.history() as i32);
        assert_eq!(g.row(top).text, "$ cmd");
        assert_eq!(marks(&g, top), "ppiii");
        assert!(g.row(top).input);
        assert_eq!(marks(&g, 0), "");
    }

    #[test]
    fn sgr_reset_and_colours_keep_the_tag() {
        let bytes = [A, b"\x1b[1;32muser\x1b[0m$ ", B, b"\x1b[0mx", C].concat();
        let g = grid_of(&bytes, 20, 2);
        assert_eq!(marks(&g, 0), "ppppppi");
        let mut cells = Vec::new();
        g.styled_cells(0, 0, &mut cells);
        assert!(cells[0].style.bold, "style and semantic together");
        assert_eq!(cells[0].semantic, Some(Semantic::Prompt));
    }

    #[test]
    fn a_programs_own_hyperlink_neither_hides_nor_forges_a_tag() {
        // A link inside the prompt: the cells stay Prompt, and so do those after it ends.
        let bytes = [A, b"\x1b]8;;http://x\x07ln\x1b]8;;\x07$ ", B, b"i", C].concat();
        let g = grid_of(&bytes, 20, 2);
        assert_eq!(marks(&g, 0), "ppppi");
        // Outside any region, a link whose id and URI spell maxx's tag is not a tag: the
        // control character in the real one never survives an OSC string.
        let forged = b"\x1b]8;id=\x01maxx-semantic-input;\x01maxx-semantic-input\x07x\x1b]8;;\x07\
                       \x1b]8;id=maxx-semantic-input;maxx-semantic-input\x07y";
        let g = grid_of(forged, 20, 2);
        assert_eq!(marks(&g, 0), "");
        assert!(!g.row(0).input);
    }

    #[test]
    fn saved_cursor_restore_and_erase() {
        // DECSC before the prompt, DECRC inside input: still input. DECSC in the prompt,
        // DECRC in the output: no tag comes back.
        let bytes = [
            &b"\x1b7"[..],
            A,
            b"$ \x1b7",
            B,
            b"\x1b8\x1b[3Ga",
            C,
            b"\r\n\x1b8\x1b[2Bo",
        ]
        .concat();
        let g = grid_of(&bytes, 20, 4);
        assert_eq!(marks(&g, 0), "ppi");
        assert_eq!(g.row(2).text, "  o");
        assert_eq!(marks(&g, 2), "");
        // Erased cells are blank and untagged; a redraw in the region tags again.
        let bytes = [A, b"$ ", B, b"abc\x1b[2D\x1b[K", b"Z", C].concat();
        let g = grid_of(&bytes, 20, 2);
        assert_eq!(g.row(0).text, "$ aZ");
        assert_eq!(marks(&g, 0), "ppii");
    }

    #[test]
    fn dec_47_and_1047_switch_screens_with_one_cursor_as_tmux_does() {
        // tmux 3.3a, the same bytes (checked by hand, and by `scripts/fidelity.sh`
        // `alt_screen_47`): the alternate screen's text never reaches the primary one; the
        // cursor is where the program left it on the alternate screen; DECSC is untouched.
        let bytes = b"main 1\r\nmain 2\r\nmain 3\r\n\x1b[5;7H\x1b7\x1b[1;1H\
                      \x1b[?47hA47\r\n\x1b[10;20HALT\x1b[?47lafter47\
                      \x1b[?1047hB1047\x1b[12;3HALT2\x1b[?1047lafter1047\x1b8R";
        let g = Grid::materialise(80, 24, 100, bytes);
        let rows: Vec<String> = (0..13).map(|l| g.row(l).text).collect();
        assert_eq!(rows[..3], ["main 1", "main 2", "main 3"]);
        assert_eq!(rows[4], "      R");
        assert_eq!(rows[9], format!("{}after47", " ".repeat(22)));
        assert_eq!(rows[11], "      after1047");
        assert!(rows
            .iter()
            .all(|r| !r.contains("ALT") && !r.contains("47 ")));
        assert_eq!((g.cursor().0, g.cursor().1, g.alt_screen()), (7, 4, false));
        // And on the alternate screen, it is the one on display (blank, the cursor where it
        // was).
        let g = Grid::materialise(80, 24, 100, b"main\x1b[?1047hon alt");
        assert!(g.alt_screen());
        assert_eq!(g.row(0).text, "    on alt");
    }

    #[test]
    fn a_region_that_changes_on_the_alternate_screen_holds_after_leaving_it() {
        // Entered in the output, a prompt starts while a program is on the alternate
        // screen: the primary screen's restored cursor writes the prompt; and back.
        let (enter, leave) = (&b"\x1b[?1049h"[..], &b"\x1b[?1049l"[..]);
        let g = grid_of(&[b"out", enter, A, b"~", leave, b"$ "].concat(), 20, 3);
        assert_eq!(g.row(0).text, "out$");
        assert_eq!(marks(&g, 0), "...pp");
        let g = grid_of(&[A, b"$ ", enter, C, leave, b"o"].concat(), 20, 3);
        assert_eq!(marks(&g, 0), "pp");
    }

    #[test]
    fn reset_ends_the_region_and_missing_c_is_ended_by_d_or_a() {
        // (A link after the reset must not bring the old region's tag back.)
        let g = grid_of(
            &[A, b"$ ", B, b"x\x1bca\x1b]8;;http://x\x07b\x1b]8;;\x07c"].concat(),
            20,
            2,
        );
        assert_eq!(g.row(0).text, "abc");
        assert_eq!(marks(&g, 0), "");
        // No C: D ends the input region, A starts a new prompt.
        let g = grid_of(
            &[A, b"$ ", B, b"x", D, b"\r\nout\r\n", A, b"%"].concat(),
            20,
            3,
        );
        assert_eq!(marks(&g, 0), "ppi");
        assert_eq!(marks(&g, 1), "");
        assert_eq!(marks(&g, 2), "p");
    }

    #[test]
    fn held_synchronized_update_bytes_land_in_their_own_region() {
        let bytes = [
            &b"\x1b[?2026h"[..],
            A,
            b"$ ",
            B,
            b"in",
            C,
            b"\r\nout\x1b[?2026l",
        ]
        .concat();
        let g = grid_of(&bytes, 20, 3);
        assert_eq!(marks(&g, 0), "ppii");
        assert_eq!(marks(&g, 1), "");
    }

    #[test]
    fn unrelated_sequences_are_not_marks() {
        // OSC 1337, OSC 13, OSC 133 without a mark letter, a CSI: none changes the region.
        let bytes = b"\x1b]1337;B\x07\x1b]13;B\x07\x1b]133\x07\x1b[31mx\x1b]133;;B\x07y";
        let g = grid_of(bytes, 20, 2);
        assert_eq!(g.row(0).text, "xy");
        assert_eq!(marks(&g, 0), "");
    }

    /// vendor patch 7: a cell is 20 bytes (a 120-column row in jemalloc's 2,560-byte class).
    const _: () = assert!(std::mem::size_of::<Cell>() == 20);
    const _: () = assert!(std::mem::size_of::<Option<Extra>>() == 4);

    #[test]
    fn a_cells_extra_is_shared_until_changed_and_its_index_is_freed_with_the_last_handle() {
        let mut a = Cell::default();
        a.push_zerowidth('\u{301}');
        let mut b = a.clone();
        let id = a.extra.as_ref().unwrap().id();
        assert_eq!(
            b.extra.as_ref().unwrap().id(),
            id,
            "a clone shares the value"
        );
        // Changing a shared value copies it first: the other cell keeps its own.
        b.push_zerowidth('\u{302}');
        assert_ne!(b.extra.as_ref().unwrap().id(), id);
        assert_eq!(a.zerowidth(), Some(&['\u{301}'][..]));
        assert_eq!(b.zerowidth(), Some(&['\u{301}', '\u{302}'][..]));
        assert_ne!(a, b);
        // A value with one handle is changed where it is.
        let b_id = b.extra.as_ref().unwrap().id();
        b.set_underline_color(Some(Color::Indexed(3)));
        assert_eq!(b.extra.as_ref().unwrap().id(), b_id);
        assert_eq!(b.underline_color(), Some(Color::Indexed(3)));
        // Equal values under two indices are equal cells, as with `Arc`.
        let mut c = Cell::default();
        c.push_zerowidth('\u{301}');
        assert_eq!(a, c);
        // Dropping every handle frees the value: a handle made next may take its index.
        let d = Extra::new(Default::default());
        let d_id = d.id();
        drop(d);
        let mut seen = false;
        let held: Vec<Extra> = (0..64)
            .map(|_| {
                let e = Extra::new(Default::default());
                seen |= e.id() == d_id;
                e
            })
            .collect();
        assert!(seen, "the freed index is given again");
        drop(held);
    }

    #[test]
    fn cells_extras_made_shared_and_dropped_on_many_threads_stay_their_own() {
        // Each thread makes values, shares them with a second thread and changes its copies:
        // a value freed early or an index given twice shows as a wrong zerowidth list.
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Cell>>();
        let reader = std::thread::spawn(move || {
            let mut checked = 0;
            for cells in rx {
                for (i, cell) in cells.iter().enumerate() {
                    let want = char::from_u32(0x300 + (i % 64) as u32).unwrap();
                    assert_eq!(cell.zerowidth(), Some(&[want][..]));
                    checked += 1;
                }
            }
            checked
        });
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let cells: Vec<Cell> = (0..256)
                            .map(|i| {
                                let mut c = Cell::default();
                                c.push_zerowidth(char::from_u32(0x300 + (i % 64) as u32).unwrap());
                                c
                            })
                            .collect();
                        let mut mine = cells.clone();
                        tx.send(cells).unwrap();
                        for c in &mut mine {
                            c.push_zerowidth('\u{20dd}');
                            assert_eq!(c.zerowidth().map(<[char]>::len), Some(2));
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(reader.join().unwrap(), 4 * 200 * 256);
    }
}

/// `MAXX_FEED_FILE=/tmp/out100.txt cargo test --release -p maxx-actors --lib feed_speed --
/// --ignored --nocapture`: the parse alone, outside a PTY (the file from `maxx-bench
/// gen-output`), in the pump's 64 KiB slices. `MAXX_FEED_WATCH=1`: as with a text wait
/// pending (rows taken as they scroll, a look every 640 KiB); `MAXX_FEED_SB` the history,
/// `MAXX_FEED_RUNS` how many times (default 2); `MAXX_FEED_REF=1` with the history kept by
/// alacritty instead of the compact store (the text wait then sees no scrolled rows).
#[cfg(test)]
#[test]
#[ignore]
fn feed_speed() {
    let Ok(path) = std::env::var("MAXX_FEED_FILE") else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let runs = std::env::var("MAXX_FEED_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    for _ in 0..runs {
        let sb = std::env::var("MAXX_FEED_SB")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(maxx_protocol::limits::DEFAULT_SCROLLBACK_LINES);
        let mut g = if std::env::var("MAXX_FEED_REF").is_ok() {
            Grid::new_reference(200, 50, sb)
        } else {
            Grid::new(200, 50, sb)
        };
        let cpu = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid timespec out-pointer.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        };
        let every: usize = std::env::var("MAXX_FEED_CKPT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut ck_s, mut ck_n, mut ck_len, mut since) = (0.0, 0, 0, 0);
        let t = cpu();
        let watch = std::env::var("MAXX_FEED_WATCH").is_ok();
        let mut looked = 0usize;
        let mut lines_seen = 0usize;
        for chunk in bytes.chunks(64 * 1024) {
            if watch {
                g.feed_scanning(chunk);
                looked += chunk.len();
                if looked >= 640 * 1024 {
                    looked = 0;
                    let mut lines = g.take_scrolled();
                    for line in 0..g.rows() as i32 {
                        lines.push_row(&g, line);
                    }
                    lines.finish();
                    lines_seen += lines.len();
                    assert!(!lines.text().contains("DONE"));
                }
            } else {
                g.feed(chunk);
            }
            since += chunk.len();
            if every > 0 && since >= every {
                since = 0;
                let c = cpu();
                ck_len = g.checkpoint().len();
                ck_s += cpu() - c;
                ck_n += 1;
            }
        }
        g.finish_feed();
        let s = cpu() - t;
        if ck_n > 0 {
            println!("{ck_n} checkpoints, {ck_s:.3} CPU-s, last {ck_len} bytes");
        }
        println!(
            "fed {} MB in {s:.3} CPU-s = {:.1} MB/s; history {}; lines matched {lines_seen}",
            bytes.len() / 1_000_000,
            bytes.len() as f64 / 1e6 / s,
            g.history()
        );
        // What a resize costs with that history: at the same width, and at another (which
        // reflows all of it).
        for (cols, rows) in [(200, 60), (160, 60), (200, 50)] {
            let t = cpu();
            g.resize(cols, rows);
            println!("resize to {cols}x{rows}: {:.1} ms CPU", (cpu() - t) * 1e3);
        }
    }
}
