//! The full screen model, kept off the PTY drain path.
//!
//! Every session keeps a bounded ring of its most recent raw output ([`RawRing`], at most
//! [`RAW_RING_BYTES`], allocated as it fills). The grid itself ([`Grid`], an
//! `alacritty_terminal::Term`) exists only once someone reads the screen: it is materialised
//! by replaying the ring, and afterwards brought up to date lazily — on the next read, or on
//! every chunk while a text wait is pending. If it fell further behind than the ring holds,
//! it is rebuilt from the ring instead of parsing an unbounded backlog (and the snapshot says
//! so with `truncated_reason: "replayed"`). The drain itself only ever runs the light vte
//! pass in `screen.rs`, so a slow or absent reader never slows the child.

use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::Flags;
use alacritty_terminal::term::{Config, Term, TermMode};
use alacritty_terminal::vte::ansi::{Color, NamedColor, Processor};
use maxx_protocol::limits::RAW_RING_BYTES;
use maxx_protocol::screen::{CellColor, CellStyle, StyledCell};
use std::collections::VecDeque;

/// The most recent raw output, with its position in the whole output stream.
#[derive(Default)]
pub struct RawRing {
    buf: VecDeque<u8>,
    /// Bytes ever pushed.
    total: u64,
}

impl RawRing {
    /// Append output, evicting the oldest bytes past the cap.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = if bytes.len() > RAW_RING_BYTES {
            &bytes[bytes.len() - RAW_RING_BYTES..]
        } else {
            bytes
        };
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(RAW_RING_BYTES);
        self.buf.drain(..overflow);
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

    /// Retained bytes (for tests and memory accounting).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is retained.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
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
}

/// A materialised screen.
pub struct Grid {
    term: Term<alacritty_terminal::event::VoidListener>,
    parser: Processor,
    /// Stream offset up to which output has been parsed.
    fed: u64,
    scrollback: usize,
    /// The grid was rebuilt from the ring at least once (older history is gone).
    pub replayed: bool,
    /// Output parsed since the pending-pattern matcher last looked: newlines and bytes
    /// (to bound how many rows may have scrolled off since), and whether the grid was
    /// rebuilt in between (then everything is new).
    unscanned_newlines: usize,
    unscanned_bytes: usize,
    rebuilt_since_scan: bool,
}

impl Grid {
    /// A grid of `cols`×`rows` with `scrollback` lines of history, fed from the ring.
    pub fn materialise(cols: u16, rows: u16, scrollback: usize, ring: &RawRing) -> Grid {
        let mut g = Grid::empty(cols, rows, scrollback, ring.start());
        g.catch_up(ring);
        // Pending patterns are matched against what changes from now on.
        g.take_unscanned();
        g
    }

    /// A blank grid that will be fed output from stream offset `start` on (output before it
    /// is gone: the grid says so with `replayed`).
    pub fn empty(cols: u16, rows: u16, scrollback: usize, start: u64) -> Grid {
        Grid {
            term: Grid::term(cols, rows, scrollback),
            parser: Processor::new(),
            fed: start,
            scrollback,
            replayed: start > 0,
            unscanned_newlines: 0,
            unscanned_bytes: 0,
            rebuilt_since_scan: false,
        }
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

    /// Parse whatever output arrived since the last call. If the ring no longer holds it,
    /// rebuild from the ring.
    pub fn catch_up(&mut self, ring: &RawRing) {
        self.rebuild_if_behind(ring);
        let (a, b) = ring.since(self.fed);
        self.feed(a);
        self.feed(b);
        self.finish_feed();
    }

    /// Start over from the oldest retained output if the grid fell further behind than the
    /// ring holds.
    fn rebuild_if_behind(&mut self, ring: &RawRing) {
        if self.fed < ring.start() {
            let cols = self.term.columns() as u16;
            let rows = self.term.screen_lines() as u16;
            self.term = Grid::term(cols, rows, self.scrollback);
            self.parser = Processor::new();
            self.fed = ring.start();
            self.replayed = true;
            self.rebuilt_since_scan = true;
        }
    }

    /// Copy out up to `max` bytes of output not parsed yet (rebuilding first if the ring
    /// dropped some), so they can be parsed without holding the ring.
    pub fn take_slice(&mut self, ring: &RawRing, max: usize) -> Vec<u8> {
        self.rebuild_if_behind(ring);
        let (a, b) = ring.since(self.fed);
        let mut out = Vec::with_capacity((a.len() + b.len()).min(max));
        out.extend_from_slice(&a[..a.len().min(max)]);
        out.extend_from_slice(&b[..b.len().min(max - out.len())]);
        out
    }

    /// Parse output that follows what was parsed so far.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.term, bytes);
        self.fed += bytes.len() as u64;
        self.unscanned_bytes += bytes.len();
        self.unscanned_newlines += bytes.iter().filter(|b| **b == b'\n').count();
    }

    /// Release what a synchronized-update block (DEC 2026) holds back: a read wants it all.
    pub fn finish_feed(&mut self) {
        self.parser.stop_sync(&mut self.term);
    }

    /// How many history rows may have scrolled off since the last call (an upper bound:
    /// one per newline plus one per `cols` bytes), and start counting afresh.
    pub fn take_unscanned(&mut self) -> usize {
        let back = if self.rebuilt_since_scan {
            self.history()
        } else {
            self.unscanned_newlines + self.unscanned_bytes / self.term.columns().max(1) + 1
        };
        self.unscanned_newlines = 0;
        self.unscanned_bytes = 0;
        self.rebuilt_since_scan = false;
        back.min(self.history())
    }

    /// Resize (alacritty reflows).
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.term.resize(Size {
            cols: cols as usize,
            rows: rows as usize,
        });
    }

    /// Grid width.
    pub fn cols(&self) -> u16 {
        self.term.columns() as u16
    }

    /// Grid height.
    pub fn rows(&self) -> u16 {
        self.term.screen_lines() as u16
    }

    /// Rows of history retained.
    pub fn history(&self) -> usize {
        self.term.grid().history_size()
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
        let row = &self.term.grid()[Line(line)];
        let cols = self.term.columns();
        let mut text = String::with_capacity(cols);
        for col in 0..cols {
            let cell = &row[Column(col)];
            if cell
                .flags
                .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
            {
                continue;
            }
            text.push(cell.c);
            if let Some(extra) = cell.zerowidth() {
                text.extend(extra);
            }
        }
        let wrapped = row[Column(cols - 1)].flags.contains(Flags::WRAPLINE);
        let trimmed = text.trim_end_matches(' ').len();
        text.truncate(trimmed);
        Row { text, wrapped }
    }

    /// Rows with a non-default style in `line`, reported at `row_index`.
    pub fn styled_cells(&self, line: i32, row_index: u32, out: &mut Vec<StyledCell>) {
        let row = &self.term.grid()[Line(line)];
        for col in 0..self.term.columns() {
            let cell = &row[Column(col)];
            if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
                continue;
            }
            let style = CellStyle {
                bold: cell.flags.contains(Flags::BOLD),
                dim: cell.flags.contains(Flags::DIM),
                italic: cell.flags.contains(Flags::ITALIC),
                underline: cell.flags.intersects(Flags::ALL_UNDERLINES),
                inverse: cell.flags.contains(Flags::INVERSE),
                hidden: cell.flags.contains(Flags::HIDDEN),
                strikethrough: cell.flags.contains(Flags::STRIKEOUT),
                fg: color(cell.fg, NamedColor::Foreground),
                bg: color(cell.bg, NamedColor::Background),
            };
            let plain = !(style.bold
                || style.dim
                || style.italic
                || style.underline
                || style.inverse
                || style.hidden
                || style.strikethrough)
                && style.fg == CellColor::Default
                && style.bg == CellColor::Default;
            if !plain {
                out.push(StyledCell {
                    col: col as u16,
                    row: row_index,
                    text: cell.c.to_string(),
                    style,
                });
            }
        }
    }
}

fn color(c: Color, default: NamedColor) -> CellColor {
    match c {
        Color::Named(n) if n == default => CellColor::Default,
        Color::Named(n) if (n as usize) < 16 => CellColor::Palette { index: n as u8 },
        Color::Named(_) => CellColor::Default,
        Color::Indexed(index) => CellColor::Palette { index },
        Color::Spec(rgb) => CellColor::Rgb {
            r: rgb.r,
            g: rgb.g,
            b: rgb.b,
        },
    }
}

/// Join rows into logical lines (soft-wrapped rows continue into the next).
pub fn logical(rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut open = false;
    for r in rows {
        current.push_str(&r.text);
        open = true;
        if !r.wrapped {
            out.push(std::mem::take(&mut current));
            open = false;
        }
    }
    if open {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_bounded_and_addressed_by_stream_offset() {
        let mut r = RawRing::default();
        r.push(b"hello");
        assert_eq!(r.since(2), (&b"llo"[..], &b""[..]));
        let big = vec![b'x'; RAW_RING_BYTES];
        r.push(&big);
        assert_eq!(r.len(), RAW_RING_BYTES);
        assert_eq!(r.start(), 5);
        assert_eq!(r.total(), 5 + RAW_RING_BYTES as u64);
    }

    #[test]
    fn grid_text_cursor_and_wrap() {
        let mut ring = RawRing::default();
        ring.push(b"hello\r\nworld\x1b[1;31mred\x1b[0m");
        let mut g = Grid::materialise(10, 3, 100, &ring);
        assert_eq!(g.row(0).text, "hello");
        assert_eq!(g.row(1).text, "worldred");
        assert_eq!(g.cursor(), (8, 1, true));
        ring.push(b"\r\n0123456789abc");
        g.catch_up(&ring);
        let rows: Vec<Row> = (0..3).map(|l| g.row(l)).collect();
        assert!(rows[2].wrapped || g.history() > 0);
        let mut cells = Vec::new();
        g.styled_cells(-(g.history() as i32).min(0) + 1, 1, &mut cells);
        let mut ring2 = RawRing::default();
        ring2.push(b"\x1b[1;31mR\x1b[0m");
        let g2 = Grid::materialise(10, 3, 100, &ring2);
        let mut cells = Vec::new();
        g2.styled_cells(0, 0, &mut cells);
        assert_eq!(cells.len(), 1);
        assert!(cells[0].style.bold);
        assert_eq!(cells[0].style.fg, CellColor::Palette { index: 1 });
    }

    #[test]
    fn logical_lines_join_wraps() {
        let rows = vec![
            Row {
                text: "abc".into(),
                wrapped: true,
            },
            Row {
                text: "def".into(),
                wrapped: false,
            },
            Row {
                text: "g".into(),
                wrapped: false,
            },
        ];
        assert_eq!(logical(&rows), ["abcdef", "g"]);
    }
}
