//! The history above the screen, kept outside alacritty's grid as compact rows.
//!
//! alacritty keeps every history row as a full-width vector of 24-byte cells (20 with vendor
//! patch 7), and the first time anything scrolls into history it allocates 1,000 spare rows
//! of them: 2.8 MiB for a 120-column session that scrolled one line, 48 MiB for a full
//! 10,000-row history at 200 columns (unpatched). Here a row is its characters (one byte for
//! an ASCII cell) and its styles as runs of equal cells, up to its last cell that is not a
//! blank default cell. The grid's alacritty keeps no history of its own: a patched alacritty
//! (`vendor/README.md`) hands each row that leaves the top of the screen to this store through
//! its `HistorySink`, and treats the rows here as the history above the screen where it reads
//! or clears history.
//! The row round-trips exactly (every cell's character, colours, flags and `extra`), which
//! the property tests in `grid/mod.rs` check against an alacritty that keeps its own history.

use super::checkpoint::NAMED;
use alacritty_terminal::grid::{HistorySink, Row as GridRow};
use alacritty_terminal::index::Column;
use alacritty_terminal::term::cell::{Cell, Extra, Flags};
use alacritty_terminal::vte::ansi::{Color, NamedColor, Rgb};
use std::collections::VecDeque;

/// Buffers [`StoredRow::of_cells`] reuses from row to row: the encoded runs and the
/// characters, kept apart until the runs' length is known.
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

/// Bytes before the runs: the count of cells and the runs' bytes (`u16` each).
pub(super) const HEAD_BYTES: usize = 4;

/// A run's first byte: the kind of each colour ([`COLOR_KIND`] bits each, the foreground's
/// lowest), whether flags follow ([`HAS_FLAGS`]) and whether its length takes two bytes
/// ([`LONG`]).
const COLOR_KIND: u8 = 0b11;
const HAS_FLAGS: u8 = 1 << 4;
const LONG: u8 = 1 << 5;
/// Colour kinds: the default one (the foreground's or the background's own named colour:
/// nothing follows), another named one (its place in [`NAMED`]), an indexed one (its index),
/// a true colour (3 bytes).
const DEFAULT: u8 = 0;
const NAMED_KIND: u8 = 1;
const INDEXED: u8 = 2;
const SPEC: u8 = 3;

/// One history row: the characters of its cells up to the last one that is not a default
/// blank, and their styles as runs, in one allocation: the counts ([`HEAD_BYTES`]), the runs
/// (a tag byte, the length in one or two bytes, each colour that is not its default in one or
/// three, the flags in two if any: 2 bytes for a plain run, 3 for a run in one of the 256
/// colours, 12 for any before stop 45), then the characters as UTF-8. The cells after them
/// are default blanks. The few runs whose cells carry extra data (combining marks, an underline
/// colour, an OSC 133 tag) keep it beside, by run index. A plain 60-character line: 66 bytes.
#[derive(Clone, Debug, Default)]
pub struct StoredRow {
    data: Box<[u8]>,
    /// Boxed twice: 8 bytes in every row for what few rows have (24 bytes a row in all, 40
    /// before stop 45).
    extras: Option<Box<RowExtras>>,
}

/// The extra data of a row's runs, by run index.
#[derive(Clone, Debug)]
struct RowExtras(Box<[(u16, Extra)]>);

const _: () = assert!(std::mem::size_of::<StoredRow>() == 24);

/// Append colour `c` (whose default is `default`) after a run's tag; its kind.
fn put_color(out: &mut Vec<u8>, c: Color, default: NamedColor) -> u8 {
    match c {
        Color::Named(n) if n == default => DEFAULT,
        Color::Named(n) => {
            out.push(named_index(n));
            NAMED_KIND
        }
        Color::Indexed(i) => {
            out.push(i);
            INDEXED
        }
        Color::Spec(Rgb { r, g, b }) => {
            out.extend_from_slice(&[r, g, b]);
            SPEC
        }
    }
}

/// A named colour's place in [`NAMED`]: the 16 ANSI colours are 0..16 in both, the others
/// follow from 256 in vte's numbering, in the same order (checked by a test).
fn named_index(n: NamedColor) -> u8 {
    let d = n as usize;
    (if d < 16 { d } else { d - 240 }) as u8
}

/// A colour of kind `kind` from `b` (moved past it); `default` for [`DEFAULT`].
fn get_color(b: &mut &[u8], kind: u8, default: NamedColor) -> Color {
    match kind {
        DEFAULT => Color::Named(default),
        NAMED_KIND => Color::Named(NAMED[take_le(b, 1) as usize % NAMED.len()]),
        INDEXED => Color::Indexed(take_le(b, 1) as u8),
        _ => match take(b, 3) {
            &[r, g, b] => Color::Spec(Rgb { r, g, b }),
            _ => Color::Named(default),
        },
    }
}

/// The next `n` bytes of `b` (fewer at its end), moving `b` past them.
fn take<'a>(b: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, rest) = b.split_at(n.min(b.len()));
    *b = rest;
    head
}

/// The next `n` bytes of `b` as a little-endian number (0 past its end).
fn take_le(b: &mut &[u8], n: usize) -> u16 {
    take(b, n).iter().rev().fold(0, |v, &x| v << 8 | x as u16)
}

/// A run's style as stored.
struct RunHead {
    len: usize,
    fg: Color,
    bg: Color,
    flags: Flags,
}

/// Bytes after a run's tag for a colour of kind `kind`.
const COLOR_BYTES: [usize; 4] = [0, 1, 1, 3];

/// The runs in `b` (a row's run bytes), in order; their colours only `with_colors` (else the
/// defaults: skipped, not read).
fn decode_runs(mut b: &[u8], with_colors: bool) -> impl Iterator<Item = RunHead> + '_ {
    std::iter::from_fn(move || {
        let &tag = take(&mut b, 1).first()?;
        let len = take_le(&mut b, if tag & LONG != 0 { 2 } else { 1 }) as usize;
        let (fg_kind, bg_kind) = (tag & COLOR_KIND, tag >> 2 & COLOR_KIND);
        let (fg, bg) = if with_colors {
            (
                get_color(&mut b, fg_kind, NamedColor::Foreground),
                get_color(&mut b, bg_kind, NamedColor::Background),
            )
        } else {
            take(
                &mut b,
                COLOR_BYTES[fg_kind as usize] + COLOR_BYTES[bg_kind as usize],
            );
            (
                Color::Named(NamedColor::Foreground),
                Color::Named(NamedColor::Background),
            )
        };
        let flags = if tag & HAS_FLAGS != 0 {
            Flags::from_bits_retain(take_le(&mut b, 2))
        } else {
            Flags::empty()
        };
        Some(RunHead { len, fg, bg, flags })
    })
}

impl StoredRow {
    /// The compact form of `row`; `scratch`: buffers reused from row to row.
    fn of(row: &GridRow<Cell>, scratch: &mut Scratch) -> StoredRow {
        let cells = &row[..];
        // Past the cells alacritty counts as used, a row holds copies of its last cell: where
        // that is a default blank, only the used cells need a look.
        let upper = match cells.last() {
            Some(last) if is_default(last) => row.occupied().min(cells.len()),
            _ => cells.len(),
        };
        StoredRow::of_cells(&cells[..upper], scratch)
    }

    /// The compact form of a row whose cells are `cells` and default blanks after them.
    fn of_cells(cells: &[Cell], scratch: &mut Scratch) -> StoredRow {
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
        let mut count = 0;
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
                extras.push((count as u16, extra.clone()));
            }
            // At most `MAX_DIMENSION` (1,000) cells in a row.
            let len = (end - at) as u16;
            let tag_at = runs.len();
            runs.push(0);
            let mut tag = 0;
            if len > 255 {
                tag |= LONG;
                runs.extend_from_slice(&len.to_le_bytes());
            } else {
                runs.push(len as u8);
            }
            tag |= put_color(runs, fg, NamedColor::Foreground);
            tag |= put_color(runs, bg, NamedColor::Background) << 2;
            if !flags.is_empty() {
                tag |= HAS_FLAGS;
                runs.extend_from_slice(&flags.bits().to_le_bytes());
            }
            runs[tag_at] = tag;
            count += 1;
            at = end;
        }
        // Exactly as long as it needs (the box is made without a copy).
        let mut data = Vec::with_capacity(HEAD_BYTES + runs.len() + chars.len());
        data.extend_from_slice(&(cells.len() as u16).to_le_bytes());
        // At most 1,000 runs of at most 10 bytes.
        data.extend_from_slice(&(runs.len() as u16).to_le_bytes());
        data.extend_from_slice(runs);
        data.extend_from_slice(chars);
        StoredRow {
            data: data.into_boxed_slice(),
            extras: (!extras.is_empty()).then(|| Box::new(RowExtras(extras.into_boxed_slice()))),
        }
    }

    /// The row's compact bytes, if it has no extra data (a checkpoint then carries these
    /// bytes as they are: [`cells_of_compact`] reads them back).
    pub(super) fn compact(&self) -> Option<&[u8]> {
        self.extras.is_none().then_some(&self.data)
    }

    fn head(&self, at: usize) -> usize {
        self.data
            .get(at..at + 2)
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize)
    }

    /// Cells held (the rest of the row is default blanks).
    pub(super) fn len(&self) -> usize {
        self.head(0)
    }

    /// The bytes of the runs.
    fn run_bytes(&self) -> &[u8] {
        let end = (HEAD_BYTES + self.head(2)).min(self.data.len());
        self.data.get(HEAD_BYTES..end).unwrap_or(&[])
    }

    /// Each run's style (its colours only `with_colors`) and extra data, in order.
    fn decoded(&self, with_colors: bool) -> impl Iterator<Item = (RunHead, Option<&Extra>)> + '_ {
        let mut extras = self.extras.iter().flat_map(|e| e.0.iter()).peekable();
        decode_runs(self.run_bytes(), with_colors)
            .enumerate()
            .map(move |(i, run)| {
                let extra = extras
                    .next_if(|(at, _)| *at as usize == i)
                    .map(|(_, extra)| extra);
                (run, extra)
            })
    }

    /// Each run's length, flags and extra data, without decoding its colours.
    fn heads(&self) -> impl Iterator<Item = (usize, Flags, Option<&Extra>)> + '_ {
        self.decoded(false)
            .map(|(run, extra)| (run.len, run.flags, extra))
    }

    /// The runs, in order.
    fn runs(&self) -> impl Iterator<Item = Run> + '_ {
        self.decoded(true).map(|(run, extra)| Run {
            len: run.len as u16,
            fg: run.fg,
            bg: run.bg,
            flags: run.flags,
            extra: extra.cloned(),
        })
    }

    /// The bytes of the held cells' characters (after the runs).
    fn char_bytes(&self) -> &[u8] {
        let at = (HEAD_BYTES + self.head(2)).min(self.data.len());
        &self.data[at..]
    }

    /// The characters of the held cells.
    fn chars(&self) -> &str {
        let bytes = self.char_bytes();
        debug_assert!(std::str::from_utf8(bytes).is_ok());
        // SAFETY: `data` is private and written only by `of_cells`, which puts the UTF-8
        // encoding of the cells' characters after the runs (or nothing at all), and by
        // `cells_of_compact`, which checks them first; validating it again cost 6% of
        // parsing a flood with a text wait pending.
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
        if self.extras.is_none()
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

/// The cells of a row from compact bytes ([`StoredRow::compact`]) a checkpoint carried, into
/// `out` (cleared first): hostile input, refused unless the characters are UTF-8, the row
/// fits in `cols`, no cell has a flag alacritty does not know, and the bytes are exactly
/// the ones [`StoredRow::of_cells`] makes of the cells read (so every count, length, colour
/// and run in them is the one the writer put there, and a cut row is refused).
pub(super) fn cells_of_compact(
    bytes: &[u8],
    cols: usize,
    out: &mut Vec<Cell>,
) -> Result<(), &'static str> {
    out.clear();
    let row = StoredRow {
        data: bytes.into(),
        extras: None,
    };
    if row.len() > cols {
        return Err("a row out of bounds");
    }
    std::str::from_utf8(row.char_bytes()).map_err(|_| "a bad character")?;
    // The characters are UTF-8: `chars` (which does not check again) reads them.
    row.cells_into(out);
    if out
        .iter()
        .any(|c| Flags::from_bits(c.flags.bits()).is_none())
        || *StoredRow::of_cells(out, &mut Scratch::default()).data != *bytes
    {
        return Err("a row that does not add up");
    }
    Ok(())
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
            self.rows.push_back(StoredRow::of(row, &mut self.scratch));
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
        if self.rows.len() == self.limit {
            self.rows.pop_front();
        } else if self.rows.len() == self.rows.capacity() {
            // Grow by a quarter, not twice over: a history that stops growing keeps little
            // room it never uses.
            let more = (self.rows.len() / 4)
                .max(64)
                .min(self.limit - self.rows.len());
            self.rows.reserve_exact(more);
        }
        self.rows.push_back(StoredRow::of(row, &mut self.scratch));
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
        *row = StoredRow::of_cells(&cells, &mut self.scratch);
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
    fn a_row_round_trips_with_every_colour_kind_flags_and_runs_over_255_cells() {
        use alacritty_terminal::vte::ansi::NamedColor as N;
        let colours = [
            Color::Named(N::Foreground),
            Color::Named(N::Background),
            Color::Named(N::Red),
            Color::Named(N::BrightWhite),
            Color::Named(N::DimCyan),
            Color::Indexed(0),
            Color::Indexed(255),
            Color::Spec(Rgb { r: 1, g: 2, b: 3 }),
        ];
        let mut cells = Vec::new();
        // Runs of 1 to 300 cells (one and two length bytes), every pair of colours, no flags
        // and some, ASCII and not.
        for (i, (fg, bg)) in colours
            .iter()
            .flat_map(|fg| colours.iter().map(move |bg| (*fg, *bg)))
            .enumerate()
        {
            let n = if i % 7 == 0 { 300 } else { i % 5 + 1 };
            let flags = [Flags::empty(), Flags::BOLD | Flags::UNDERCURL, Flags::all()][i % 3];
            let c = if i % 2 == 0 { 'x' } else { 'é' };
            cells.extend((0..n).map(|_| Cell {
                c,
                fg,
                bg,
                flags,
                extra: None,
            }));
        }
        let mut linked = Cell::default();
        linked.push_zerowidth('\u{301}');
        cells.push(linked);
        cells.push(Cell {
            c: 'z',
            ..Cell::default()
        });
        let row = StoredRow::of_cells(&cells, &mut Scratch::default());
        let mut back = Vec::new();
        row.cells_into(&mut back);
        assert_eq!(back, cells);
        assert_eq!(row.len(), cells.len());
        // A plain row: the counts, one run's tag and length, its characters.
        let plain: Vec<Cell> = "sixty"
            .chars()
            .map(|c| Cell {
                c,
                ..Cell::default()
            })
            .collect();
        let row = StoredRow::of_cells(&plain, &mut Scratch::default());
        assert_eq!(row.data.len(), HEAD_BYTES + 2 + 5);
    }

    /// Compact bytes from a checkpoint: what `of_cells` wrote reads back as its cells; a row
    /// wider than the terminal, a cut one, a bad character, runs that do not cover the cells,
    /// a named colour past the table, or any bytes but the ones `of_cells` writes for what
    /// they read as are refused; and no single changed byte, nor random bytes, make it panic.
    #[test]
    fn compact_bytes_read_back_only_as_written() {
        let style = |c: char, fg: Color, flags: Flags| Cell {
            c,
            fg,
            flags,
            ..Cell::default()
        };
        let plain = Color::Named(NamedColor::Foreground);
        let cells = vec![
            style('a', plain, Flags::empty()),
            style('b', plain, Flags::empty()),
            style('é', Color::Named(NamedColor::Red), Flags::BOLD),
            style('x', Color::Spec(Rgb { r: 1, g: 2, b: 3 }), Flags::empty()),
        ];
        let row = StoredRow::of_cells(&cells, &mut Scratch::default());
        let bytes = row.compact().unwrap().to_vec();
        let mut out = Vec::new();
        cells_of_compact(&bytes, 10, &mut out).unwrap();
        assert_eq!(out, cells);
        assert!(
            cells_of_compact(&bytes, 3, &mut out).is_err(),
            "wider than 3"
        );
        cells_of_compact(&[], 10, &mut out).unwrap();
        assert!(out.is_empty(), "an empty row");
        for n in 1..bytes.len() {
            assert!(
                cells_of_compact(&bytes[..n], 10, &mut out).is_err(),
                "cut at {n}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(b'z');
        assert!(
            cells_of_compact(&longer, 10, &mut out).is_err(),
            "a byte after it"
        );
        // One cell of the foreground's named colour number 1 (red), then number 200.
        let named = |i: u8| [1, 0, 3, 0, NAMED_KIND, 1, i, b'q'];
        cells_of_compact(&named(1), 10, &mut out).unwrap();
        assert_eq!(out[0].fg, Color::Named(NamedColor::Red));
        assert!(
            cells_of_compact(&named(200), 10, &mut out).is_err(),
            "colour 200"
        );
        // A default colour written as a named one reads as the same cells, but is not what
        // `of_cells` writes for them.
        assert!(
            cells_of_compact(&named(16), 10, &mut out).is_err(),
            "the default named"
        );
        for at in 0..bytes.len() {
            for v in 0..=255u8 {
                let mut b = bytes.clone();
                b[at] = v;
                if cells_of_compact(&b, 10, &mut out).is_ok() {
                    let again = StoredRow::of_cells(&out, &mut Scratch::default());
                    assert_eq!(*again.data, *b, "byte {at} as {v}");
                }
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..50_000 {
            let len = (next() % 24) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if b.len() >= 4 {
                // Counts that fit, more often than chance.
                b[0] %= 12;
                b[1] = 0;
                b[2] %= 16;
                b[3] = 0;
            }
            let _ = cells_of_compact(&b, 10, &mut out);
        }
    }

    #[test]
    fn every_named_colour_has_its_own_place() {
        for (i, n) in NAMED.iter().enumerate() {
            assert_eq!(named_index(*n) as usize, i, "{n:?}");
        }
    }
}
