//! The history above the screen, kept outside alacritty's grid as compact rows.
//!
//! alacritty keeps every history row as a full-width vector of 24-byte cells (20 with vendor
//! patch 7), and the first time anything scrolls into history it allocates 1,000 spare rows
//! of them: 2.8 MiB for a 120-column session that scrolled one line, 48 MiB for a full
//! 10,000-row history at 200 columns (unpatched). Here a row is its characters (one byte for an ASCII cell) and its styles as runs
//! of equal cells, up to its last cell that is not a blank default cell. The grid's
//! alacritty keeps no history of its own: a patched alacritty (`vendor/README.md`) hands each
//! row that leaves the top of the screen to this store through its `HistorySink`, and
//! treats the rows here as the history above the screen where it reads or clears history.
//! The row round-trips exactly (every cell's character, colours, flags and `extra`), which
//! the property tests in `grid/mod.rs` check against an alacritty that keeps its own history.

use super::checkpoint::NAMED;
use alacritty_terminal::grid::{HistorySink, Row as GridRow};
use alacritty_terminal::index::Column;
use alacritty_terminal::term::cell::{Cell, Extra, Flags};
use alacritty_terminal::vte::ansi::{Color, NamedColor, Rgb};
use std::collections::VecDeque;

/// Buffers [`StoredRow::of_cells`] reuses from row to row: the encoded runs and the
/// characters, kept apart until the count of runs is known.
#[derive(Clone, Debug, Default)]
struct Scratch {
    runs: Vec<u8>,
    chars: Vec<u8>,
}

/// Append `c` as UTF-8 (one byte where it is ASCII, the common cell).
#[inline(always)]
fn put_char(out: &mut Vec<u8>, c: char) {
    if c.is_ascii() {
        out.push(c as u8);
    } else {
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    }
}

/// Cells in a row with one style.
#[derive(Clone, Debug)]
struct Run {
    len: u16,
    fg: Color,
    bg: Color,
    flags: Flags,
    extra: Option<Extra>,
}

impl Run {
    fn cell(&self, c: char) -> Cell {
        Cell {
            c,
            fg: self.fg,
            bg: self.bg,
            flags: self.flags,
            extra: self.extra.clone(),
        }
    }
}

/// Bytes of one run in a [`StoredRow`]: its length (`u16`), the two colours (4 bytes each,
/// [`put_color`]) and the flags (`u16`), little-endian.
const RUN_BYTES: usize = 12;

/// Bytes before the runs: their count and the count of cells.
const HEAD_BYTES: usize = 4;

/// One history row: the characters of its cells up to the last one that is not a default
/// blank, and their styles as runs, in one allocation: the count of runs and of cells (`u16`
/// each, [`HEAD_BYTES`]), the runs ([`RUN_BYTES`] each), then the characters as UTF-8. The cells after them are default
/// blanks. The few runs whose cells carry extra data (combining marks, an underline colour,
/// an OSC 133 tag) keep it beside, by run index. A plain 60-character line: ~80 bytes.
#[derive(Clone, Debug, Default)]
pub struct StoredRow {
    data: Vec<u8>,
    extras: Box<[(u16, Extra)]>,
}

/// A colour as 4 bytes: a tag and its value (named colours by their place in
/// [`NAMED`]).
fn color_bytes(c: Color) -> [u8; 4] {
    match c {
        Color::Named(n) => [0, named_index(n), 0, 0],
        Color::Spec(Rgb { r, g, b }) => [1, r, g, b],
        Color::Indexed(i) => [2, i, 0, 0],
    }
}

/// A named colour's place in [`NAMED`]: the 16 ANSI colours are 0..16 in both, the others
/// follow from 256 in vte's numbering, in the same order (checked by a test).
fn named_index(n: NamedColor) -> u8 {
    let d = n as usize;
    (if d < 16 { d } else { d - 240 }) as u8
}

fn get_color(b: &[u8]) -> Color {
    match b[0] {
        0 => Color::Named(NAMED[b[1] as usize % NAMED.len()]),
        1 => Color::Spec(Rgb {
            r: b[1],
            g: b[2],
            b: b[3],
        }),
        _ => Color::Indexed(b[1]),
    }
}

impl StoredRow {
    /// The compact form of `row`; `scratch`: buffers reused from row to row; `reuse`: the
    /// bytes of a row that left the history, to write this one into (a full history stores
    /// a row without an allocation).
    fn of(row: &GridRow<Cell>, scratch: &mut Scratch, reuse: Vec<u8>) -> StoredRow {
        let cells = &row[..];
        // Past the cells alacritty counts as used, a row holds copies of its last cell: where
        // that is a default blank, only the used cells need a look.
        let upper = match cells.last() {
            Some(last) if is_default(last) => row.occupied().min(cells.len()),
            _ => cells.len(),
        };
        StoredRow::of_cells(&cells[..upper], scratch, reuse)
    }

    /// The compact form of a row whose cells are `cells` and default blanks after them.
    fn of_cells(cells: &[Cell], scratch: &mut Scratch, reuse: Vec<u8>) -> StoredRow {
        let len = cells
            .iter()
            .rposition(|c| !is_default(c))
            .map_or(0, |last| last + 1);
        let cells = &cells[..len];
        if cells.is_empty() {
            return StoredRow::default();
        }
        let Scratch { runs, chars } = scratch;
        runs.clear();
        chars.clear();
        chars.reserve(cells.len());
        let mut extras = Vec::new();
        // One pass over the cells (this is a quarter of parsing a flood): each run's first
        // cell against the cells after it, its style held in registers, each cell's
        // character taken on the way (one byte for ASCII, else its UTF-8).
        let mut at = 0;
        while let Some(first) = cells.get(at) {
            let (fg, bg, flags) = (first.fg, first.bg, first.flags);
            let extra = first.extra.as_ref().map_or(0, Extra::id);
            put_char(chars, first.c);
            let mut end = at + 1;
            for c in &cells[end..] {
                if c.flags != flags
                    || c.fg != fg
                    || c.bg != bg
                    || c.extra.as_ref().map_or(0, Extra::id) != extra
                {
                    break;
                }
                put_char(chars, c.c);
                end += 1;
            }
            if let Some(extra) = &first.extra {
                extras.push(((runs.len() / RUN_BYTES) as u16, extra.clone()));
            }
            // At most `MAX_DIMENSION` (1,000) cells in a row.
            let mut run = [0; RUN_BYTES];
            run[0..2].copy_from_slice(&((end - at) as u16).to_le_bytes());
            run[2..6].copy_from_slice(&color_bytes(fg));
            run[6..10].copy_from_slice(&color_bytes(bg));
            run[10..12].copy_from_slice(&flags.bits().to_le_bytes());
            runs.extend_from_slice(&run);
            at = end;
        }
        let mut data = reuse;
        data.clear();
        let len = HEAD_BYTES + runs.len() + chars.len();
        data.reserve_exact(len);
        // A reused buffer keeps at most about twice what it holds.
        if data.capacity() > 2 * len + 64 {
            data.shrink_to(len);
        }
        data.extend_from_slice(&((runs.len() / RUN_BYTES) as u16).to_le_bytes());
        data.extend_from_slice(&(cells.len() as u16).to_le_bytes());
        data.extend_from_slice(runs);
        data.extend_from_slice(chars);
        StoredRow {
            data,
            extras: extras.into_boxed_slice(),
        }
    }

    fn head(&self, at: usize) -> usize {
        self.data
            .get(at..at + 2)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize)
    }

    fn run_count(&self) -> usize {
        self.head(0)
    }

    /// Cells held (the rest of the row is default blanks).
    pub(super) fn len(&self) -> usize {
        self.head(2)
    }

    fn run_bytes(&self, i: usize) -> &[u8] {
        &self.data[HEAD_BYTES + i * RUN_BYTES..][..RUN_BYTES]
    }

    /// Each run's length, flags and extra data, without decoding its colours.
    fn heads(&self) -> impl Iterator<Item = (usize, Flags, Option<&Extra>)> + '_ {
        let mut extras = self.extras.iter().peekable();
        (0..self.run_count()).map(move |i| {
            let b = self.run_bytes(i);
            let extra = extras
                .next_if(|(at, _)| *at as usize == i)
                .map(|(_, extra)| extra);
            (
                u16::from_le_bytes([b[0], b[1]]) as usize,
                Flags::from_bits_retain(u16::from_le_bytes([b[10], b[11]])),
                extra,
            )
        })
    }

    /// The runs, in order.
    fn runs(&self) -> impl Iterator<Item = Run> + '_ {
        self.heads().enumerate().map(|(i, (len, flags, extra))| {
            let b = self.run_bytes(i);
            Run {
                len: len as u16,
                fg: get_color(&b[2..6]),
                bg: get_color(&b[6..10]),
                flags,
                extra: extra.cloned(),
            }
        })
    }

    /// The characters of the held cells.
    fn chars(&self) -> &str {
        let at = (HEAD_BYTES + self.run_count() * RUN_BYTES).min(self.data.len());
        let bytes = &self.data[at..];
        debug_assert!(std::str::from_utf8(bytes).is_ok());
        // SAFETY: `data` is private and written only by `of_cells`, which puts the UTF-8
        // encoding of the cells' characters after the runs (or nothing at all); validating
        // it again cost 6% of parsing a flood with a text wait pending.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// Each held cell, in order, with its column.
    pub fn for_each_cell(&self, mut f: impl FnMut(usize, Cell)) {
        let mut chars = self.chars().chars();
        let mut col = 0;
        for run in self.runs() {
            for c in chars.by_ref().take(run.len as usize) {
                f(col, run.cell(c));
                col += 1;
            }
        }
    }

    /// Each run, in order: a cell with its style (and a blank for a character) and the
    /// characters of its cells.
    pub fn for_each_run(&self, mut f: impl FnMut(&Cell, &str)) {
        for (run, chars) in self.runs().zip(self.run_chars()) {
            f(&run.cell(' '), chars);
        }
    }

    /// Each run's characters, in order.
    fn run_chars(&self) -> impl Iterator<Item = &str> + '_ {
        let chars = self.chars();
        // Where every cell is one byte, a run's characters are a slice of them.
        let ascii = chars.len() == self.len();
        let mut pos = 0;
        self.heads().map(move |(n, _, _)| {
            let end = if ascii {
                pos + n
            } else {
                chars[pos..]
                    .char_indices()
                    .nth(n)
                    .map_or(chars.len(), |(i, _)| pos + i)
            };
            let piece = &chars[pos..end];
            pos = end;
            piece
        })
    }

    /// The held cells, in order, into `out` (cleared first).
    pub fn cells_into(&self, out: &mut Vec<Cell>) {
        out.clear();
        out.reserve(self.len());
        self.for_each_cell(|_, cell| out.push(cell));
    }

    /// The row as alacritty's, `cols` wide, every cell counted as used (see `Grid::resize`).
    pub fn to_row(&self, cols: usize) -> GridRow<Cell> {
        let mut row = GridRow::new(cols);
        self.for_each_cell(|col, cell| {
            if col < cols {
                row[Column(col)] = cell;
            }
        });
        std::ops::IndexMut::index_mut(&mut row, ..);
        row
    }

    /// Whether the row continues onto the next (its last cell, at column `cols - 1`, carries
    /// the wrap flag).
    pub fn wrapped(&self, cols: usize) -> bool {
        self.len() == cols
            && self
                .heads()
                .last()
                .is_some_and(|(_, flags, _)| flags.contains(Flags::WRAPLINE))
    }

    /// Append the row's text as [`super::Grid::row`] reads it (spacers skipped, a tab as a
    /// blank, combining characters after their base, trailing blanks trimmed); whether a cell
    /// satisfies `input` (asked once per run of cells that share their extra data).
    pub fn text_into(&self, text: &mut String, input: impl Fn(&Cell) -> bool) -> bool {
        const SPACERS: Flags = Flags::WIDE_CHAR_SPACER.union(Flags::LEADING_WIDE_CHAR_SPACER);
        let start = text.len();
        let chars = self.chars();
        // The common row — no combining marks, tags or links, no wide characters, no tabs —
        // reads as its characters.
        if self.extras.is_empty()
            && !self.heads().any(|(_, flags, _)| flags.intersects(SPACERS))
            && memchr::memchr(b'\t', chars.as_bytes()).is_none()
        {
            text.push_str(chars.trim_end_matches(' '));
            return false;
        }
        let mut is_input = false;
        for ((_, flags, extra), piece) in self.heads().zip(self.run_chars()) {
            if flags.intersects(SPACERS) {
                continue;
            }
            let blank = |c: char| if c == '\t' { ' ' } else { c };
            let Some(extra) = extra else {
                if piece.contains('\t') {
                    text.extend(piece.chars().map(blank));
                } else {
                    text.push_str(piece);
                }
                continue;
            };
            let probe = Cell {
                extra: Some(extra.clone()),
                ..Cell::default()
            };
            is_input = is_input || input(&probe);
            let combined = probe.zerowidth().unwrap_or(&[]);
            for c in piece.chars() {
                text.push(blank(c));
                text.extend(combined);
            }
        }
        let trimmed = start + text[start..].trim_end_matches(' ').len();
        text.truncate(trimmed);
        is_input
    }
}

/// A cell as a fresh row holds it.
fn is_default(cell: &Cell) -> bool {
    cell.c == ' '
        && cell.extra.is_none()
        && cell.flags.is_empty()
        && cell.fg == Color::Named(alacritty_terminal::vte::ansi::NamedColor::Foreground)
        && cell.bg == Color::Named(alacritty_terminal::vte::ansi::NamedColor::Background)
}

/// `grid`'s compact history, if it keeps one (the primary screen's grid does, in maxx).
pub fn of(grid: &alacritty_terminal::grid::Grid<Cell>) -> Option<&History> {
    grid.history_sink.as_ref()?.as_any().downcast_ref()
}

/// The history: at most `limit` rows, oldest first, `cols` wide.
#[derive(Clone, Debug)]
pub struct History {
    rows: VecDeque<StoredRow>,
    limit: usize,
    cols: usize,
    /// Rows ever pushed (what the pending-pattern matcher counts new rows by).
    pushed: u64,
    /// Buffers for the row being stored, reused from row to row.
    scratch: Scratch,
}

impl History {
    pub fn new(limit: usize, cols: usize) -> History {
        History {
            rows: VecDeque::new(),
            limit,
            cols,
            pushed: 0,
            scratch: Scratch::default(),
        }
    }

    /// The rows are now `cols` wide (a resize put them back reflowed).
    pub fn set_cols(&mut self, cols: usize) {
        self.cols = cols;
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Row `n` back from the screen (1 = the newest).
    pub fn back(&self, n: usize) -> &StoredRow {
        &self.rows[self.rows.len() - n]
    }

    /// Rows ever pushed.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// The newest `n` rows taken out as alacritty's, oldest first.
    pub fn take_newest(&mut self, n: usize) -> Vec<GridRow<Cell>> {
        let from = self.rows.len() - n.min(self.rows.len());
        let cols = self.cols;
        self.rows.drain(from..).map(|r| r.to_row(cols)).collect()
    }

    /// Put rows back as the newest (after a resize), dropping the oldest past the limit.
    /// They do not count as pushed.
    pub fn extend_newest(&mut self, rows: &[GridRow<Cell>]) {
        for row in rows {
            self.rows
                .push_back(StoredRow::of(row, &mut self.scratch, Vec::new()));
        }
        let over = self.rows.len().saturating_sub(self.limit);
        self.rows.drain(..over);
    }
}

impl HistorySink<Cell> for History {
    fn push(&mut self, row: &GridRow<Cell>) {
        if self.limit == 0 {
            return;
        }
        let mut reuse = Vec::new();
        if self.rows.len() == self.limit {
            reuse = self
                .rows
                .pop_front()
                .map(|row| row.data)
                .unwrap_or_default();
        } else if self.rows.len() == self.rows.capacity() {
            // Grow by a quarter, not twice over: a history that stops growing keeps little
            // room it never uses.
            let more = (self.rows.len() / 4)
                .max(64)
                .min(self.limit - self.rows.len());
            self.rows.reserve_exact(more);
        }
        self.rows
            .push_back(StoredRow::of(row, &mut self.scratch, reuse));
        self.pushed += 1;
    }

    fn clear(&mut self) {
        self.rows.clear();
    }

    fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn clear_leading_spacer(&mut self) {
        let Some(row) = self.rows.back_mut() else {
            return;
        };
        let held = row.len();
        let last = row.heads().last();
        if !last.is_some_and(|(_, flags, _)| flags.contains(Flags::LEADING_WIDE_CHAR_SPACER))
            || held != self.cols
        {
            return;
        }
        // Only the row's last cell changes: the row is stored again (rare: a wide character
        // at the top left overwritten just after one wrapped at the right edge).
        let mut cells = Vec::new();
        row.cells_into(&mut cells);
        if let Some(cell) = cells.last_mut() {
            cell.flags.remove(Flags::LEADING_WIDE_CHAR_SPACER);
        }
        *row = StoredRow::of_cells(&cells, &mut self.scratch, Vec::new());
    }

    fn boxed_clone(&self) -> Box<dyn HistorySink<Cell>> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_colour_has_its_own_place() {
        for (i, n) in NAMED.iter().enumerate() {
            assert_eq!(named_index(*n) as usize, i, "{n:?}");
        }
    }
}
