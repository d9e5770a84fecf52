//! A grid's state as bytes, and back: the checkpoint a session's screen memory keeps so the
//! next daemon rebuilds the screen without the output that led to it (`screen_model/store.rs`,
//! `docs/recovery.md`).
//!
//! Written only at a point of the stream where the parser is in its ground state (no escape
//! sequence or UTF-8 character half read), on either screen. It holds every cell of the
//! primary screen's history and screen (character, colours, attributes, underline colour,
//! combining characters, the OSC 133 tag), how many cells of each row alacritty counts as
//! occupied, both its cursors (position, template, charsets, pending wrap), the modes, the
//! tab stops (the last column's included) and the active charset; then the alternate screen:
//! its cells and their occupied counts while it is on display, and its two cursors either way
//! (its saved one outlives a visit: `ESC 7` on it, left, entered again, `ESC 8`). The scroll
//! region and the kitty keyboard stacks are the light pass's (`screen.rs`), which carries them
//! in its own part of the checkpoint. Not carried (none is visible in a read): a program's own
//! OSC 8 links, colours it set with OSC 4/10/11/12, and the title stack.
//!
//! The decoder treats its input as hostile: every count and size is bounded before anything
//! is allocated, and anything out of place refuses the whole checkpoint.

use super::history::StoredRow;
use super::{Grid, Region, Size, INPUT_ID, PROMPT_ID};
use alacritty_terminal::grid::{Cursor, Dimensions, Grid as AlacGrid, Row};
use alacritty_terminal::index::{Column, Line, Point};
use alacritty_terminal::term::cell::{Cell, Flags, Hyperlink};
use alacritty_terminal::term::TermMode;
use alacritty_terminal::vte::ansi::{
    CharsetIndex, Color, CursorShape, CursorStyle, NamedColor, Rgb, StandardCharset,
};
use maxx_protocol::limits::{GRID_MAX_CELLS, MAX_SCROLLBACK_LINES, MIN_COLS};

/// Little-endian writer with LEB128 varints.
#[derive(Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn var(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.var(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// The matching reader: every read is bounds-checked.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

/// Why a checkpoint was refused.
pub(crate) type Bad = &'static str;

impl<'a> Reader<'a> {
    pub(crate) fn u8(&mut self) -> Result<u8, Bad> {
        let (b, rest) = self.0.split_first().ok_or("a cut checkpoint")?;
        self.0 = rest;
        Ok(*b)
    }
    pub(crate) fn var(&mut self) -> Result<u64, Bad> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint too long")
    }
    /// A varint no larger than `max`.
    pub(crate) fn upto(&mut self, max: u64) -> Result<u64, Bad> {
        let v = self.var()?;
        if v > max {
            return Err("a value out of bounds");
        }
        Ok(v)
    }
    pub(crate) fn bytes(&mut self, max: usize) -> Result<&'a [u8], Bad> {
        let n = self.upto(max as u64)? as usize;
        if n > self.0.len() {
            return Err("a cut checkpoint");
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(b)
    }
    pub(crate) fn bool(&mut self) -> Result<bool, Bad> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err("a bad flag"),
        }
    }
}

pub(super) const NAMED: [NamedColor; 29] = {
    use NamedColor::*;
    [
        Black,
        Red,
        Green,
        Yellow,
        Blue,
        Magenta,
        Cyan,
        White,
        BrightBlack,
        BrightRed,
        BrightGreen,
        BrightYellow,
        BrightBlue,
        BrightMagenta,
        BrightCyan,
        BrightWhite,
        Foreground,
        Background,
        Cursor,
        DimBlack,
        DimRed,
        DimGreen,
        DimYellow,
        DimBlue,
        DimMagenta,
        DimCyan,
        DimWhite,
        BrightForeground,
        DimForeground,
    ]
};

fn put_color(w: &mut Writer, c: Color) {
    match c {
        Color::Named(n) => {
            w.u8(0);
            w.var(NAMED.iter().position(|x| *x == n).unwrap_or(0) as u64);
        }
        Color::Spec(Rgb { r, g, b }) => {
            w.u8(1);
            w.0.extend_from_slice(&[r, g, b]);
        }
        Color::Indexed(i) => {
            w.u8(2);
            w.u8(i);
        }
    }
}

fn get_color(r: &mut Reader) -> Result<Color, Bad> {
    Ok(match r.u8()? {
        0 => Color::Named(NAMED[r.upto(NAMED.len() as u64 - 1)? as usize]),
        1 => Color::Spec(Rgb {
            r: r.u8()?,
            g: r.u8()?,
            b: r.u8()?,
        }),
        2 => Color::Indexed(r.u8()?),
        _ => return Err("a bad colour"),
    })
}

/// What a cell looks like apart from its characters.
#[derive(Clone, PartialEq)]
struct Style {
    fg: Color,
    bg: Color,
    flags: u16,
    underline: Option<Color>,
    /// 0 none, 1 prompt, 2 input (the OSC 133 tag).
    tag: u8,
}

fn style_of(cell: &Cell) -> Style {
    let tag = match cell.hyperlink() {
        Some(h) if h.id() == PROMPT_ID => 1,
        Some(h) if h.id() == INPUT_ID => 2,
        _ => 0,
    };
    Style {
        fg: cell.fg,
        bg: cell.bg,
        flags: cell.flags.bits(),
        underline: cell.underline_color(),
        tag,
    }
}

/// Styles seen so far: each is written where it is first used, so the reader builds the
/// same table in the same order.
/// Indexed by a style's packed key ([`Style::key`]): a program that uses thousands of
/// colours costs a hash lookup per cell, not a scan of every style seen (that scan was most
/// of the daemon's CPU under a colourful flood).
#[derive(Default)]
struct Styles {
    index: std::collections::HashMap<u128, usize>,
    last: Option<(u128, usize)>,
}

impl Styles {
    /// Write `s` as its index (and the style itself where it is new); the index.
    fn put(&mut self, s: Style, w: &mut Writer) -> usize {
        let key = s.key();
        if let Some((k, i)) = self.last {
            if k == key {
                w.var(i as u64);
                return i;
            }
        }
        let next = self.index.len();
        let i = *self.index.entry(key).or_insert(next);
        w.var(i as u64);
        if i == next {
            put_style(w, &s);
        }
        self.last = Some((key, i));
        i
    }
}

impl Style {
    /// The style as one number, equal exactly when the styles are (colours 26 bits each,
    /// flags 16, the underline colour 27 with its presence, the tag 2).
    fn key(&self) -> u128 {
        fn color(c: Color) -> u128 {
            (match c {
                Color::Named(n) => (1 << 24) | n as u32,
                Color::Spec(Rgb { r, g, b }) => {
                    (2 << 24) | (r as u32) << 16 | (g as u32) << 8 | b as u32
                }
                Color::Indexed(i) => (3 << 24) | i as u32,
            }) as u128
        }
        let underline = self.underline.map_or(0, |c| (1 << 26) | color(c));
        color(self.fg)
            | color(self.bg) << 26
            | (self.flags as u128) << 52
            | underline << 68
            | (self.tag as u128) << 95
    }
}

fn put_style(w: &mut Writer, s: &Style) {
    put_color(w, s.fg);
    put_color(w, s.bg);
    w.var(s.flags as u64);
    match s.underline {
        None => w.u8(0),
        Some(c) => {
            w.u8(1);
            put_color(w, c);
        }
    }
    w.u8(s.tag);
}

/// What is carried from row to row while rows are written: the styles seen so far, the
/// last plain style, and buffers reused.
#[derive(Default)]
pub(super) struct RowWriter {
    /// History rows as [`FORMAT`] writes them (else cell by cell, with no byte saying so, as
    /// older builds did).
    compact: bool,
    styles: Styles,
    plain: Option<(Color, Color, u16, usize)>,
    scratch: Scratch,
}

impl RowWriter {
    /// `grid`'s last `history` rows of history (from its compact history when it keeps
    /// one) and its screen, oldest first; each row's occupied cells pushed on `occupied`.
    fn put_grid(
        &mut self,
        grid: &mut AlacGrid<Cell>,
        history: usize,
        w: &mut Writer,
        occupied: &mut Vec<usize>,
    ) {
        let cols = grid.columns();
        let screen = grid.screen_lines() as i32;
        // A history row gives the cells it holds (the rest are blank default cells), every
        // cell counted as used. Each row's occupied cells are read just before it is written
        // (the row is then in cache), and written after all the rows.
        match super::history::of(grid) {
            // Each history row says how it is written: its compact bytes as the history
            // holds them (a copy: most rows), or cell by cell like a screen row (a row with
            // combining characters, an underline colour or a tag).
            Some(store) => {
                for back in (1..=history).rev() {
                    occupied.push(cols);
                    let row = store.back(back);
                    match row.compact().filter(|_| self.compact) {
                        Some(bytes) => {
                            w.u8(HISTORY_COMPACT);
                            w.bytes(bytes);
                        }
                        None => {
                            self.put_kind(HISTORY_CELLS, w);
                            self.put_stored(row, w);
                        }
                    }
                }
            }
            None => {
                for line in -(history as i32)..0 {
                    let row = &mut grid[Line(line)];
                    occupied.push(occupied_cells(row, &mut self.scratch));
                    self.put_kind(HISTORY_CELLS, w);
                    self.put_row(&row[..], w);
                }
            }
        }
        for line in 0..screen {
            let row = &mut grid[Line(line)];
            occupied.push(occupied_cells(row, &mut self.scratch));
            self.put_row(&row[..], w);
        }
    }

    /// How the next history row is written, where the format says so (older builds' does not).
    fn put_kind(&self, kind: u8, w: &mut Writer) {
        if self.compact {
            w.u8(kind);
        }
    }

    /// [`RowWriter::put_row`] of a history row's cells, the same bytes, a run at a time:
    /// every cell of a run has its first cell's style and combined characters, so only the
    /// first asks for the style's index (the cells after it would find it as the last plain
    /// one, or the last one used), and no cell is made.
    fn put_stored(&mut self, row: &StoredRow, w: &mut Writer) {
        // The row holds its cells up to the last one that is not a default blank, which is
        // where `put_row` stops too (a cell with extra data is never one of its blanks:
        // `zerowidth` is `Some` for it).
        w.var(row.len() as u64);
        let mut combined = Combined::default();
        let mut col = 0;
        row.for_each_run(|cell, chars| {
            let i = self.style_index(cell, w);
            let start = col;
            for c in chars.chars() {
                if col > start {
                    w.var(i as u64);
                }
                w.var(c as u64);
                col += 1;
            }
            if let Some(z) = cell.zerowidth() {
                for at in start..col {
                    combined.add(at, z);
                }
            }
        });
        combined.finish(w);
    }

    /// Write the index of `cell`'s style (and the style itself the first time): a cell with
    /// the colours and flags of the last plain one (no `extra`) writes that index again
    /// without building the style.
    fn style_index(&mut self, cell: &Cell, w: &mut Writer) -> usize {
        let flags = cell.flags.bits();
        match self.plain {
            Some((fg, bg, f, i))
                if cell.extra.is_none() && cell.fg == fg && cell.bg == bg && flags == f =>
            {
                w.var(i as u64);
                i
            }
            _ => {
                let i = self.styles.put(style_of(cell), w);
                if cell.extra.is_none() {
                    self.plain = Some((cell.fg, cell.bg, flags, i));
                }
                i
            }
        }
    }

    /// The history rows of `grid`, written by [`RowWriter::put_stored`] and by
    /// [`RowWriter::put_row`] of their cells (tests: the two must be the same bytes).
    #[cfg(test)]
    pub(super) fn history_both_ways(grid: &Grid) -> (Vec<u8>, Vec<u8>) {
        let (mut a, mut b) = (RowWriter::default(), RowWriter::default());
        let (mut wa, mut wb) = (Writer::default(), Writer::default());
        if let Some(store) = super::history::of(grid.term.grid()) {
            let mut cells = Vec::new();
            for back in (1..=store.len()).rev() {
                a.put_stored(store.back(back), &mut wa);
                store.back(back).cells_into(&mut cells);
                b.put_row(&cells, &mut wb);
            }
        }
        (wa.0, wb.0)
    }

    fn put_row(&mut self, cells: &[Cell], w: &mut Writer) {
        let default = Cell::default();
        let blank = style_of(&default).key();
        // Blank cells at the end of a row (a space, no style, nothing combined: what a
        // fresh row holds) are not written: most rows are far shorter than the terminal.
        let len = cells
            .iter()
            .rposition(|cell| {
                if cell.extra.is_none() {
                    // No combining characters, underline colour or tag: the style is the
                    // colours and flags.
                    cell.c != ' '
                        || cell.fg != default.fg
                        || cell.bg != default.bg
                        || !cell.flags.is_empty()
                } else {
                    cell.c != ' ' || cell.zerowidth().is_some() || style_of(cell).key() != blank
                }
            })
            .map_or(0, |col| col + 1);
        w.var(len as u64);
        let mut combined = Combined::default();
        for (col, cell) in cells[..len].iter().enumerate() {
            self.style_index(cell, w);
            w.var(cell.c as u64);
            if let Some(z) = cell.zerowidth() {
                combined.add(col, z);
            }
        }
        combined.finish(w);
    }

    /// A cursor: position, template, pending wrap, charsets.
    fn put_cursor(&mut self, cursor: &Cursor<Cell>, w: &mut Writer) {
        w.var((cursor.point.line.0 + 1) as u64);
        w.var(cursor.point.column.0 as u64);
        self.styles.put(style_of(&cursor.template), w);
        w.u8(cursor.input_needs_wrap as u8);
        for i in CHARSETS {
            w.u8(match cursor.charsets[i] {
                StandardCharset::Ascii => 0,
                StandardCharset::SpecialCharacterAndLineDrawing => 1,
            });
        }
    }
}

/// A row's combining characters, written after its cells: the count of cells that have
/// them, then each cell's column and its characters.
#[derive(Default)]
struct Combined {
    cells: usize,
    bytes: Writer,
}

impl Combined {
    fn add(&mut self, col: usize, chars: &[char]) {
        self.cells += 1;
        self.bytes.var(col as u64);
        self.bytes.var(chars.len() as u64);
        for c in chars {
            self.bytes.var(*c as u64);
        }
    }

    fn finish(self, w: &mut Writer) {
        w.var(self.cells as u64);
        w.0.extend_from_slice(&self.bytes.0);
    }
}

/// The checkpoint's format, after a leading zero (an older build's checkpoint has neither):
/// history rows as their compact bytes.
const FORMAT: u8 = 2;
/// How a history row is written: cell by cell, as a screen row is.
const HISTORY_CELLS: u8 = 0;
/// How a history row is written: its compact bytes, as the grid's history holds them.
const HISTORY_COMPACT: u8 = 1;

/// The four charset slots of a cursor.
const CHARSETS: [CharsetIndex; 4] = [
    CharsetIndex::G0,
    CharsetIndex::G1,
    CharsetIndex::G2,
    CharsetIndex::G3,
];

impl Grid {
    /// The grid's state as a checkpoint. The caller makes sure the parser is in its ground
    /// state.
    #[cfg(test)]
    pub fn checkpoint(&mut self) -> Vec<u8> {
        let mut w = Writer::default();
        self.checkpoint_into(&mut w);
        w.0
    }

    /// The checkpoint appended to `w` (the screen memory's checkpoint is the light
    /// pass's part, then this: one buffer, no copy).
    pub(crate) fn checkpoint_into(&mut self, w: &mut Writer) {
        self.checkpoint_as(w, true);
    }

    /// The checkpoint as the build before [`FORMAT`] wrote it (tests: it must still restore).
    #[cfg(test)]
    pub fn checkpoint_of_an_older_build(&mut self) -> Vec<u8> {
        let mut w = Writer::default();
        self.checkpoint_as(&mut w, false);
        w.0
    }

    /// The checkpoint into `w`: in [`FORMAT`] (`compact`), or as older builds wrote it.
    fn checkpoint_as(&mut self, w: &mut Writer, compact: bool) {
        self.finish_feed();
        let preceding = self.probe_preceding();
        let tabs = self.probe_tabs();
        let last_tab = self.probe_last_tab();
        let g1 = self.probe_charset();
        // The probes printed: a fresh parser (this is a ground point, so it is in the same
        // state) with the last printed character put back, as a restored grid gets it.
        self.parser = alacritty_terminal::vte::ansi::Processor::new();
        self.set_preceding(preceding);
        // A zero where an older build's checkpoint starts with its columns (never zero), then
        // the format.
        if compact {
            w.var(0);
            w.u8(FORMAT);
        }
        w.var(self.cols() as u64);
        w.var(self.rows() as u64);
        w.var(self.scrollback as u64);
        w.var(self.fed);
        w.u8(match self.region {
            Region::Output => 0,
            Region::Prompt => 1,
            Region::Input => 2,
        });
        w.var(self.term.mode().bits() as u64);
        w.u8(g1 as u8);
        w.var(preceding.map_or(0, |c| c as u64 + 1));
        // The cursor style as DECSCUSR's parameter (0: as a fresh terminal has it).
        let style = self.term.cursor_style();
        let shape = match style.shape {
            CursorShape::Underline => 3,
            CursorShape::Beam => 5,
            _ => 1,
        };
        let decscusr = shape + u8::from(!style.blinking);
        w.u8(if style == CursorStyle::default() {
            0
        } else {
            decscusr
        });
        w.var(tabs.len() as u64);
        for t in tabs {
            w.var(t as u64);
        }
        // The primary screen (behind the alternate one if that is on display) and its
        // history, then its cursors.
        let alt = self.alt_screen();
        let mut rows = RowWriter {
            compact,
            ..RowWriter::default()
        };
        let primary = self.primary_grid_mut();
        let history = super::history::of(primary).map_or(primary.history_size(), |s| s.len());
        w.var(history as u64);
        let mut occupied = Vec::with_capacity(history + primary.screen_lines());
        rows.put_grid(primary, history, w, &mut occupied);
        rows.put_cursor(&primary.cursor, w);
        rows.put_cursor(&primary.saved_cursor, w);
        // Each row's occupied cells, and whether the last column has a tab stop (a checkpoint
        // of an older build ends before them).
        for n in occupied {
            w.var(n as u64);
        }
        w.u8(last_tab as u8);
        // The alternate screen (an older build's checkpoint ends before it; it took none
        // while the alternate screen showed): whether it is on display, its rows and their
        // occupied cells if so, and its cursors either way (the saved one outlives a visit).
        w.u8(alt as u8);
        let alternate = self.alternate_grid_mut();
        if alt {
            let mut occupied = Vec::with_capacity(alternate.screen_lines());
            rows.put_grid(alternate, 0, w, &mut occupied);
            for n in occupied {
                w.var(n as u64);
            }
        }
        rows.put_cursor(&alternate.cursor, w);
        rows.put_cursor(&alternate.saved_cursor, w);
    }

    /// Run `probe` with the cursor at the top left over two plain cells, ASCII charsets and
    /// no pending wrap, then put the first row and the cursor back.
    fn at_probe_spot<T>(&mut self, probe: impl FnOnce(&mut Grid) -> T) -> T {
        let grid = self.term.grid_mut();
        let saved_row = grid[Line(0)].clone();
        let saved_cursor = grid.cursor.clone();
        grid.cursor.point = Point::new(Line(0), Column(0));
        grid.cursor.input_needs_wrap = false;
        for i in [
            CharsetIndex::G0,
            CharsetIndex::G1,
            CharsetIndex::G2,
            CharsetIndex::G3,
        ] {
            grid.cursor.charsets[i] = StandardCharset::Ascii;
        }
        // Plain cells: overwriting half of a wide character would also touch the row above.
        grid[Line(0)][Column(0)] = Cell::default();
        grid[Line(0)][Column(1)] = Cell::default();
        let out = probe(self);
        let grid = self.term.grid_mut();
        grid[Line(0)] = saved_row;
        grid.cursor = saved_cursor;
        out
    }

    /// The last character printed (what REP, `CSI b`, repeats): the parser keeps it to
    /// itself, so it is read by asking it to repeat it once.
    fn probe_preceding(&mut self) -> Option<char> {
        self.at_probe_spot(|g| {
            g.parser.advance(&mut g.term, b"\x1b[b");
            let grid = g.term.grid();
            let cell = &grid[Line(0)][Column(0)];
            if grid.cursor.point.column.0 > 0 || grid.cursor.input_needs_wrap {
                Some(cell.c)
            } else {
                cell.zerowidth().and_then(|z| z.first().copied())
            }
        })
    }

    /// Make `c` the parser's last printed character (by printing it at the probe spot).
    fn set_preceding(&mut self, c: Option<char>) {
        let Some(c) = c else { return };
        self.at_probe_spot(|g| {
            let mut buf = [0u8; 4];
            g.parser
                .advance(&mut g.term, c.encode_utf8(&mut buf).as_bytes());
        });
    }

    /// The tab stops, read by moving the cursor with tabs along the first row (then the row,
    /// which a tab marks, and the cursor are put back).
    fn probe_tabs(&mut self) -> Vec<usize> {
        let cols = self.cols() as usize;
        let grid = self.term.grid_mut();
        let saved_row = grid[Line(0)].clone();
        let saved_cursor = grid.cursor.clone();
        grid.cursor.point = Point::new(Line(0), Column(0));
        grid.cursor.input_needs_wrap = false;
        let mut stops = Vec::new();
        loop {
            self.parser.advance(&mut self.term, b"\t");
            let col = self.term.grid().cursor.point.column.0;
            if col + 1 >= cols || stops.last() == Some(&col) {
                break;
            }
            stops.push(col);
        }
        let grid = self.term.grid_mut();
        grid[Line(0)] = saved_row;
        grid.cursor = saved_cursor;
        stops
    }

    /// Whether the last column has a tab stop. A tab never stops there, so it is read one
    /// column wider, on a blank screen swapped in for the probe (nothing reflows; the screen,
    /// its cursors and the tab stops are as they were after): the scroll region, which a
    /// resize resets, is read first (origin mode clamps the cursor to it) and set again.
    fn probe_last_tab(&mut self) -> bool {
        let cols = self.cols() as usize;
        let rows = self.rows() as usize;
        let blank = AlacGrid::new(rows, cols, 0);
        let saved = std::mem::replace(self.term.grid_mut(), blank);
        // The grid not on display is resized too: the primary screen behind an alternate one
        // would reflow, a shelved alternate one's cursors move. A 1x1 grid stands in for it.
        let hidden = std::mem::replace(self.term.inactive_grid_mut(), AlacGrid::new(1, 1, 0));
        let origin = self.term.mode().contains(TermMode::ORIGIN);
        self.parser.advance(&mut self.term, b"\x1b[?6h\x1b[1;1H");
        let top = self.term.grid().cursor.point.line.0 + 1;
        self.parser.advance(&mut self.term, b"\x1b[9999;1H");
        let bottom = self.term.grid().cursor.point.line.0 + 1;
        if !origin {
            self.parser.advance(&mut self.term, b"\x1b[?6l");
        }
        // A bottom clamped to the screen leaves a region of its last line, or none below it
        // (the top clamped too): both read as the last line. A line feed there scrolls the
        // first (clearing the line, on this blank screen) and not the second.
        let last_line = rows as i32;
        let mut top = top;
        if top == last_line && bottom == last_line {
            let grid = self.term.grid_mut();
            grid.cursor.point = Point::new(Line(last_line - 1), Column(0));
            grid[Line(last_line - 1)][Column(0)].c = 'x';
            self.parser.advance(&mut self.term, b"\n");
            if self.term.grid()[Line(last_line - 1)][Column(0)].c == 'x' {
                top = last_line + 1;
            }
        }
        self.term.resize(Size {
            cols: cols + 1,
            rows,
        });
        let grid = self.term.grid_mut();
        grid.cursor.point = Point::new(Line(0), Column(cols - 2));
        grid.cursor.input_needs_wrap = false;
        self.parser.advance(&mut self.term, b"\t");
        let stop = self.term.grid().cursor.point.column.0 == cols - 1;
        self.term.resize(Size { cols, rows });
        // Set with the bottom past the screen, clamped the same way (as `restore` does).
        let bottom = bottom.max(top + 1);
        self.parser
            .advance(&mut self.term, format!("\x1b[{top};{bottom}r").as_bytes());
        *self.term.grid_mut() = saved;
        *self.term.inactive_grid_mut() = hidden;
        stop
    }

    /// Whether G1 is the active charset (SO), read by printing `q` with G1 set to line
    /// drawing (this changes the parser's last printed character: see
    /// [`Grid::set_preceding`]).
    fn probe_charset(&mut self) -> bool {
        self.at_probe_spot(|g| {
            let grid = g.term.grid_mut();
            grid.cursor.charsets[CharsetIndex::G1] =
                StandardCharset::SpecialCharacterAndLineDrawing;
            g.parser.advance(&mut g.term, b"q");
            g.term.grid()[Line(0)][Column(0)].c != 'q'
        })
    }

    /// A grid rebuilt from the bytes of a checkpoint (`Grid::checkpoint_into`; `region`: the
    /// scroll region the light pass carried, 1-based, if set).
    pub fn restore(bytes: &[u8], region: Option<(u16, u16)>) -> Result<Grid, Bad> {
        let r = &mut Reader(bytes);
        // An older build's checkpoint starts with its columns and writes history rows cell
        // by cell only.
        let first = r.upto(u16::MAX as u64)?;
        let compact = first == 0;
        if compact && r.u8()? != FORMAT {
            return Err("a checkpoint of another format");
        }
        let cols = if compact {
            r.upto(u16::MAX as u64)?
        } else {
            first
        } as u16;
        let rows = r.upto(u16::MAX as u64)? as u16;
        let scrollback = r.upto(MAX_SCROLLBACK_LINES as u64)? as usize;
        if cols < MIN_COLS
            || rows == 0
            || cols as u64 * (rows as u64 + scrollback as u64) > GRID_MAX_CELLS
        {
            return Err("a size out of bounds");
        }
        let fed = r.var()?;
        let region_tag = r.upto(2)?;
        let mode = TermMode::from_bits_truncate(r.upto(u32::MAX as u64)? as u32);
        // The alternate screen is entered once the primary one is restored.
        let alt = mode.contains(TermMode::ALT_SCREEN);
        let mode = mode - TermMode::ALT_SCREEN;
        let g1 = r.bool()?;
        let preceding = match r.upto(0x110000)? {
            0 => None,
            c => Some(char::from_u32(c as u32 - 1).ok_or("a bad character")?),
        };
        let decscusr = r.upto(6)?;
        let ntabs = r.upto(cols as u64)? as usize;
        let mut tabs = Vec::with_capacity(ntabs);
        for _ in 0..ntabs {
            tabs.push(r.upto(cols as u64 - 1)? as usize);
        }
        let mut g = Grid::new(cols, rows, scrollback);
        g.fed = fed;
        g.region = match region_tag {
            1 => Region::Prompt,
            2 => Region::Input,
            _ => Region::Output,
        };
        // Modes, region, tabs and charset through the parser, as a program sets them.
        let mut setup = Vec::new();
        for (flag, set, reset) in MODES {
            let on = mode.contains(*flag);
            if on != TermMode::default().contains(*flag) {
                setup.extend_from_slice(if on { set } else { reset });
            }
        }
        // Mouse modes exclude each other: the one that is on goes last.
        for (flag, set) in MOUSE {
            if mode.contains(*flag) {
                setup.extend_from_slice(set);
            }
        }
        // Tab stops between the first and the last column. A tab never stops at either: the
        // first never matters, the last only once the terminal is made wider, and it is read
        // apart ([`Grid::probe_last_tab`], set at the end). A checkpoint of an older build
        // lacks it: it is taken to be cleared if any default stop is (a program that sets its
        // own stops clears them all first, `CSI 3 g`), else to be the default.
        let last = cols as usize - 1;
        let cleared = (8..last).step_by(8).any(|c| !tabs.contains(&c));
        if cleared && last.is_multiple_of(8) {
            setup.extend_from_slice(format!("\x1b[1;{}H\x1b[g", last + 1).as_bytes());
        }
        for col in 1..last {
            let default = col % 8 == 0;
            let stop = tabs.contains(&col);
            if stop != default {
                let set: &str = if stop { "\x1bH" } else { "\x1b[g" };
                setup.extend_from_slice(format!("\x1b[1;{}H{set}", col + 1).as_bytes());
            }
        }
        if let Some((top, bottom)) = region {
            // The light pass keeps the region clamped to the screen as alacritty does (a
            // bottom past the screen becomes its last row, which may not be below the top):
            // a bottom above the top, clamped the same way, sets the same region.
            let bottom = bottom.max(top.saturating_add(1));
            setup.extend_from_slice(format!("\x1b[{top};{bottom}r").as_bytes());
        }
        if g1 {
            setup.push(0x0e);
        }
        if decscusr != 0 {
            setup.extend_from_slice(format!("\x1b[{decscusr} q").as_bytes());
        }
        g.parser.advance(&mut g.term, &setup);
        if *g.term.mode() & !TermMode::KITTY_KEYBOARD_PROTOCOL != mode {
            return Err("modes that do not restore");
        }
        let mut rows = RowReader {
            styles: Vec::new(),
            prompt: g.prompt_link.clone(),
            input: g.input_link.clone(),
            compact,
            cells: Vec::new(),
        };
        let history = r.upto(scrollback as u64)? as usize;
        rows.read_grid(r, g.term.grid_mut(), history)?;
        if g.history() != history {
            return Err("history that does not restore");
        }
        let cursor = rows.read_cursor(r, cursor_room(&g))?;
        let saved_cursor = rows.read_cursor(r, cursor_room(&g))?;
        let grid = g.term.grid_mut();
        grid.cursor = cursor;
        grid.saved_cursor = saved_cursor.clone();
        // Each row's occupied cells and the last column's tab stop, if the checkpoint carries
        // them (an older build's does not: its rows keep the cells they were written with, its
        // last column the stop guessed above).
        if !r.0.is_empty() {
            // The compact history keeps no count: its rows go back into alacritty only for
            // a resize, which counts every cell as used.
            let skip = if g.store().is_some() { history } else { 0 };
            read_occupied(r, g.term.grid_mut(), history, skip)?;
            let set: &str = if r.bool()? { "\x1bH" } else { "\x1b[g" };
            let cursor = g.term.grid().cursor.clone();
            g.parser
                .advance(&mut g.term, format!("\x1b[1;{}H{set}", last + 1).as_bytes());
            g.term.grid_mut().cursor = cursor;
        }
        // The alternate screen, if the checkpoint carries it (an older build's does not; it
        // took none while the alternate screen showed).
        if !r.0.is_empty() {
            if r.bool()? != alt {
                return Err("an alternate screen that does not agree");
            }
            if alt {
                // Entering it gives it the primary cursor and saves that on the primary
                // screen: the primary's saved cursor is put back after.
                g.term.swap_alt();
                g.term.inactive_grid_mut().saved_cursor = saved_cursor;
                let grid = g.term.grid_mut();
                rows.read_grid(r, grid, 0)?;
                read_occupied(r, grid, 0, 0)?;
            }
            let cursor = rows.read_cursor(r, cursor_room(&g))?;
            let saved_cursor = rows.read_cursor(r, cursor_room(&g))?;
            let alternate = g.alternate_grid_mut();
            alternate.cursor = cursor;
            alternate.saved_cursor = saved_cursor;
        } else if alt {
            return Err("an alternate screen without its cells");
        }
        if !r.0.is_empty() {
            return Err("bytes after the checkpoint");
        }
        g.set_preceding(preceding);
        Ok(g)
    }
}

/// The screen's size (where a cursor may be).
fn cursor_room(g: &Grid) -> (usize, usize) {
    (g.rows() as usize, g.cols() as usize)
}

/// What is carried from row to row while rows are read: the styles seen so far (each as a
/// blank cell), and the OSC 133 tags' links.
struct RowReader {
    styles: Vec<Cell>,
    prompt: Hyperlink,
    input: Hyperlink,
    /// Each history row starts with how it is written ([`HISTORY_COMPACT`] or
    /// [`HISTORY_CELLS`]; an older build's rows are all written cell by cell, with no such byte).
    compact: bool,
    /// A compact row's cells (reused from row to row).
    cells: Vec<Cell>,
}

impl RowReader {
    /// `history` rows of history and a screenful into `grid`, oldest first: the first
    /// screenful is written in place, then each further row scrolls the screen up one line
    /// (into the history) and is written at the bottom.
    fn read_grid(
        &mut self,
        r: &mut Reader,
        grid: &mut AlacGrid<Cell>,
        history: usize,
    ) -> Result<(), Bad> {
        let screen = grid.screen_lines();
        let cols = grid.columns();
        let whole = Line(0)..Line(screen as i32);
        for n in 0..history + screen {
            let mut row = Row::new(cols);
            if n < history && self.compact && r.upto(1)? as u8 == HISTORY_COMPACT {
                // At most 14 bytes a cell: a run of its own (10) and a 4-byte character.
                let bytes = r.bytes(super::history::HEAD_BYTES + 14 * cols)?;
                super::history::cells_of_compact(bytes, cols, &mut self.cells)?;
                for (col, cell) in self.cells.drain(..).enumerate() {
                    row[Column(col)] = cell;
                }
            } else {
                self.read_cells(r, &mut row, cols)?;
            }
            let at = if n < screen {
                n
            } else {
                grid.scroll_up::<Color>(&whole, 1);
                screen - 1
            };
            grid[Line(at as i32)] = row;
        }
        Ok(())
    }

    /// A row written cell by cell into `row` (`cols` wide).
    fn read_cells(&mut self, r: &mut Reader, row: &mut Row<Cell>, cols: usize) -> Result<(), Bad> {
        let len = r.upto(cols as u64)? as usize;
        for col in 0..len {
            let mut cell = self.style(r)?;
            cell.c = char::from_u32(r.upto(0x10ffff)? as u32).ok_or("a bad character")?;
            row[Column(col)] = cell;
        }
        let extras = r.upto(len as u64)?;
        for _ in 0..extras {
            // (`extras` is 0 on an empty row, so `len` ≥ 1 here.)
            let col = r.upto(len as u64 - 1)? as usize;
            let count = r.upto(64)?;
            for _ in 0..count {
                let c = char::from_u32(r.upto(0x10ffff)? as u32).ok_or("a bad character")?;
                row[Column(col)].push_zerowidth(c);
            }
        }
        Ok(())
    }

    /// A cursor on a screen of `(rows, cols)`.
    fn read_cursor(
        &mut self,
        r: &mut Reader,
        (rows, cols): (usize, usize),
    ) -> Result<Cursor<Cell>, Bad> {
        let line = r.upto(rows as u64)? as i32 - 1;
        let col = r.upto(cols as u64 - 1)? as usize;
        let mut cursor = Cursor {
            point: Point::new(Line(line.max(0)), Column(col)),
            template: self.style(r)?,
            input_needs_wrap: r.bool()?,
            ..Cursor::default()
        };
        for i in CHARSETS {
            cursor.charsets[i] = match r.upto(1)? {
                0 => StandardCharset::Ascii,
                _ => StandardCharset::SpecialCharacterAndLineDrawing,
            };
        }
        Ok(cursor)
    }

    fn style(&mut self, r: &mut Reader) -> Result<Cell, Bad> {
        read_style(r, &mut self.styles, &self.prompt, &self.input)
    }
}

/// Each row's occupied cells (see [`occupied_cells`]) for `grid`'s `history` rows of history
/// and its screen, set on the rows from the `skip`th on.
fn read_occupied(
    r: &mut Reader,
    grid: &mut AlacGrid<Cell>,
    history: usize,
    skip: usize,
) -> Result<(), Bad> {
    let cols = grid.columns();
    let screen = grid.screen_lines() as i32;
    for (n, line) in (-(history as i32)..screen).enumerate() {
        let occupied = r.upto(cols as u64)? as usize;
        if n < skip {
            continue;
        }
        let row = &mut grid[Line(line)];
        let cells: Vec<Cell> = (&*row).into_iter().cloned().collect();
        *row = Row::from_vec(cells, occupied);
    }
    Ok(())
}

/// Buffers [`occupied_cells`] reuses from row to row.
#[derive(Default)]
struct Scratch {
    marker: Vec<Cell>,
    saved: Vec<Cell>,
}

/// How many of `row`'s cells alacritty counts as occupied (its private `Row::occ`): a reset
/// of the row with a template of the same background as its last cell clears only those, so
/// cells past them keep what they held. Rows made wider after a clear have such cells (the
/// cells added are not counted), and a restored row must count the same ones, or a later
/// reset clears what the live one keeps. Read by resetting the row (or a copy of it) and
/// seeing which cells changed; the row is put back as it was, with the same count.
/// `scratch`: buffers reused from row to row.
fn occupied_cells(row: &mut Row<Cell>, scratch: &mut Scratch) -> usize {
    let n = row.len();
    let blank = Cell::default();
    // The common case, read without touching the row. Past `occ` a row holds only cells a
    // reset or a grow left there: blanks with the background of that reset (or the default).
    // Where no blank of the row has another background, every cell past `occ` is a default
    // blank, so `occ` is at least the count up to the last cell that is not one, and counting
    // that is as good: a reset with the default background (the last cell's) leaves the
    // default blanks in between as they are, one with another background marks every cell,
    // and every other change of `occ` (a write, a shrink, a split, `append_front`, an append
    // after `last_mut` counted the whole row) keeps the cells in between default blanks.
    let mut written = 0;
    let mut coloured_blank = false;
    for (i, c) in row[..].iter().enumerate() {
        let plain = c.fg == blank.fg && c.extra.is_none() && c.flags.is_empty();
        if c.c == ' ' && plain && c.bg != blank.bg {
            coloured_blank = true;
            break;
        }
        if !(c.c == ' ' && plain && c.flags.is_empty()) {
            written = i + 1;
        }
    }
    if !coloured_blank {
        return written;
    }
    // Cells past the last that is not blank; none when the last cell is not blank.
    let written = (0..n)
        .rev()
        .find(|&i| row[Column(i)] != blank)
        .map_or(0, |i| i + 1);
    if written == 0 {
        // Blank cells read the same cleared or not, then and after any change.
        return 0;
    }
    // A background no cell of the row has, on a cell appended past the occupied ones (which
    // counts it as one more): a reset with it as the template then marks every cell in
    // `0..occ + 1`.
    let mut marker = Cell {
        bg: Color::Spec(Rgb { r: 1, g: 2, b: 3 }),
        ..Cell::default()
    };
    while (&*row).into_iter().any(|c| c.bg == marker.bg) {
        if let Color::Spec(rgb) = &mut marker.bg {
            rgb.b = rgb.b.wrapping_add(1);
            rgb.g = rgb.g.wrapping_add(u8::from(rgb.b == 0));
        }
    }
    let mut marked = |probe: &mut Row<Cell>| {
        scratch.marker.push(marker.clone());
        probe.append(&mut scratch.marker);
        probe.reset(&marker);
        (0..n)
            .take_while(|&i| probe[Column(i)].bg == marker.bg)
            .count()
    };
    if written < n {
        // The last cell is blank: `occ` is read on the row itself, whose cells that are not
        // blank are saved first and put back after (the blank ones are blank again).
        let mut saved = std::mem::take(&mut scratch.saved);
        saved.clear();
        saved.extend((0..written).map(|i| row[Column(i)].clone()));
        let marked = marked(row);
        let mut cells = row.front_split_off(n + 1);
        cells.truncate(n);
        for (i, cell) in cells.iter_mut().enumerate().take(marked) {
            *cell = saved.get(i).cloned().unwrap_or_default();
        }
        scratch.saved = saved;
        // `occ` is `marked - 1`; where that is `n - 1` or `n`, the last cell (blank) reads
        // the same cleared or not, then and after any change (a write counts it).
        let occ = if marked < n {
            marked.saturating_sub(1)
        } else {
            n
        };
        *row = Row::from_vec(cells, occ);
        return occ;
    }
    let marked = marked(&mut row.clone());
    if marked < n {
        return marked.saturating_sub(1);
    }
    // `occ` is `n - 1` or `n`: whether the last cell is cleared by a reset with a blank
    // template after a blank cell is added past it (which the reset does not count) tells.
    let mut probe = row.clone();
    probe.grow(n + 1);
    probe.reset(&blank);
    if probe[Column(n - 1)] == blank {
        n
    } else {
        n - 1
    }
}

/// Read a style index (and the style itself where it first appears) as a blank cell.
fn read_style(
    r: &mut Reader,
    styles: &mut Vec<Cell>,
    prompt: &alacritty_terminal::term::cell::Hyperlink,
    input: &alacritty_terminal::term::cell::Hyperlink,
) -> Result<Cell, Bad> {
    let i = r.upto(styles.len() as u64)? as usize;
    if i == styles.len() {
        if styles.len() >= 1 << 20 {
            return Err("too many styles");
        }
        let mut cell = Cell {
            fg: get_color(r)?,
            bg: get_color(r)?,
            flags: Flags::from_bits_truncate(r.upto(u16::MAX as u64)? as u16),
            ..Cell::default()
        };
        if r.bool()? {
            cell.set_underline_color(Some(get_color(r)?));
        }
        match r.upto(2)? {
            1 => cell.set_hyperlink(Some(prompt.clone())),
            2 => cell.set_hyperlink(Some(input.clone())),
            _ => {}
        }
        styles.push(cell);
    }
    Ok(styles[i].clone())
}

/// Modes set with DECSET/DECRST (or SM/RM, or DECKPAM/DECKPNM), and their two sequences.
const MODES: &[(TermMode, &[u8], &[u8])] = &[
    (TermMode::SHOW_CURSOR, b"\x1b[?25h", b"\x1b[?25l"),
    (TermMode::APP_CURSOR, b"\x1b[?1h", b"\x1b[?1l"),
    (TermMode::APP_KEYPAD, b"\x1b=", b"\x1b>"),
    (TermMode::BRACKETED_PASTE, b"\x1b[?2004h", b"\x1b[?2004l"),
    (TermMode::SGR_MOUSE, b"\x1b[?1006h", b"\x1b[?1006l"),
    (TermMode::UTF8_MOUSE, b"\x1b[?1005h", b"\x1b[?1005l"),
    (TermMode::LINE_WRAP, b"\x1b[?7h", b"\x1b[?7l"),
    (TermMode::LINE_FEED_NEW_LINE, b"\x1b[20h", b"\x1b[20l"),
    (TermMode::ORIGIN, b"\x1b[?6h", b"\x1b[?6l"),
    (TermMode::INSERT, b"\x1b[4h", b"\x1b[4l"),
    (TermMode::FOCUS_IN_OUT, b"\x1b[?1004h", b"\x1b[?1004l"),
    (TermMode::ALTERNATE_SCROLL, b"\x1b[?1007h", b"\x1b[?1007l"),
    (TermMode::URGENCY_HINTS, b"\x1b[?1042h", b"\x1b[?1042l"),
];

const MOUSE: &[(TermMode, &[u8])] = &[
    (TermMode::MOUSE_REPORT_CLICK, b"\x1b[?1000h"),
    (TermMode::MOUSE_DRAG, b"\x1b[?1002h"),
    (TermMode::MOUSE_MOTION, b"\x1b[?1003h"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn state(g: &Grid) -> String {
        let mut s = format!(
            "{}x{} h{} c{:?}\n",
            g.cols(),
            g.rows(),
            g.history(),
            g.cursor()
        );
        for l in -(g.history() as i32)..g.rows() as i32 {
            s.push_str(&format!("{:?} {}\n", g.row(l).text, g.row(l).wrapped));
        }
        s
    }

    #[test]
    fn probes_change_nothing() {
        let steps: Vec<&[u8]> = vec![
            b"\x1b[?6h",
            b"\x1b[3;7H",
            "日本語".as_bytes(),
            b"\x1b[2;5r\x1b[3;7H",
            b"\x1b[2J",
            b"\x1b[r",
        ];
        for which in 0..5 {
            let mut a = Grid::new(40, 5, 100);
            let mut b = Grid::new(40, 5, 100);
            let mut run = |f: &mut dyn FnMut(&mut Grid)| {
                for s in &steps {
                    a.feed(s);
                    b.feed(s);
                    f(&mut b);
                }
                for g in [&mut a, &mut b] {
                    g.resize(2, 3);
                    g.feed("日本語".as_bytes());
                    g.resize(7, 2);
                    g.feed(b"\x1b[?7l\x1b[K\x1b(0lqk\x1b(B");
                    g.resize(2, 1);
                }
            };
            match which {
                0 => run(&mut |g| {
                    let _ = g.probe_tabs();
                }),
                3 => run(&mut |g| {
                    let c = g.probe_preceding();
                    g.set_preceding(c);
                }),
                1 => run(&mut |g| {
                    let _ = g.probe_charset();
                }),
                4 => run(&mut |g| {
                    let _ = g.probe_last_tab();
                }),
                _ => run(&mut |_| {}),
            }
            assert_eq!(state(&a), state(&b), "probe {which}");
        }
    }

    /// Everything a read shows of a grid, styles included.
    fn styled(g: &Grid) -> String {
        let mut s = state(g);
        s.push_str(&format!("{:?}\n", g.state().mode()));
        for l in -(g.history() as i32)..g.rows() as i32 {
            let mut cells = Vec::new();
            g.styled_cells(l, 0, &mut cells);
            for c in cells {
                s.push_str(&format!("{}:{:?} ", c.col, c.style));
            }
            s.push('\n');
        }
        s
    }

    enum Step<'a> {
        Out(&'a [u8]),
        Resize(u16, u16),
    }

    fn apply(g: &mut Grid, s: &Step) {
        match s {
            Step::Out(b) => g.feed(b),
            Step::Resize(c, r) => {
                g.finish_feed();
                g.resize(*c, *r);
            }
        }
    }

    /// `steps` through a grid, checkpointed and restored at every point between two steps,
    /// the rest through both: the restored one reads as the live one after every step.
    fn restored_goes_on_alike(steps: &[Step]) {
        for at in 0..=steps.len() {
            let mut live = Grid::new(40, 5, 100);
            for s in &steps[..at] {
                apply(&mut live, s);
            }
            let bytes = live.checkpoint();
            let mut restored = Grid::restore(&bytes, None).unwrap();
            assert_eq!(styled(&restored), styled(&live), "restored at {at}");
            for (n, s) in steps[at..].iter().enumerate() {
                apply(&mut live, s);
                apply(&mut restored, s);
                live.finish_feed();
                restored.finish_feed();
                let after = at + n;
                assert_eq!(
                    styled(&restored),
                    styled(&live),
                    "checkpoint at {at}, after step {after}"
                );
            }
        }
    }

    /// A tab stop set at the last column, then the terminal made wider: a tab stops there
    /// (found by `checkpoints_rebuild_the_screen_exactly_long`).
    #[test]
    fn a_tab_stop_at_the_last_column_survives_a_widening() {
        restored_goes_on_alike(&[
            Step::Resize(4, 1),
            Step::Out(b"\x1b[3;7H\x1bH"),
            Step::Out(b" a a aa  "),
            Step::Out(b"\x1b[2;5r\x1b[?6h"),
            Step::Resize(5, 1),
            Step::Out(b"\t\x1b(0lqk\x1b(B"),
        ]);
    }

    /// Checkpoints taken on the alternate screen, and on the primary one after a visit:
    /// the hidden primary screen with its history and saved cursor, the alternate screen's
    /// cells and cursors, and the alternate saved cursor that outlives a visit (`ESC 7` on
    /// it, left, entered again, `ESC 8`), for each way in and out (1049, 1047, 47).
    #[test]
    fn the_alternate_screen_and_its_saved_cursor_survive_a_checkpoint() {
        for (on, off) in [
            (&b"\x1b[?1049h"[..], &b"\x1b[?1049l"[..]),
            (b"\x1b[?1047h", b"\x1b[?1047l"),
            (b"\x1b[?47h", b"\x1b[?47l"),
        ] {
            let steps = [
                Step::Out(b"one\r\ntwo\r\nthree\r\nfour\r\nfive\r\nsix\r\n\x1b[2;3H\x1b[32m\x1b7"),
                Step::Out(b"\x1b[4;5H\x1b[1m"),
                Step::Out(on),
                Step::Out(b"\x1b[3;4H\x1b[31m\x1b(0\x1b7alt \x1b[44mtext\x1b[2;4r"),
                Step::Resize(30, 6),
                Step::Out(b"\x1b[H\x1b[0mtop\r\n\x1b[K\x1bM"),
                Step::Out(off),
                Step::Out(b"back \x1b8after"),
                Step::Out(on),
                Step::Out(b"\x1b8X\r\n"),
                Step::Resize(40, 5),
                Step::Out(off),
                Step::Out(b"\x1b8Y"),
            ];
            restored_goes_on_alike(&steps);
        }
    }

    /// Checkpoints of older builds still restore: one without the alternate screen's part at
    /// its end, and one without the rows' occupied cells either.
    #[test]
    fn a_checkpoint_of_an_older_build_restores() {
        let mut live = Grid::materialise(40, 5, 100, b"\x1b[42mgreen\x1b[0m\r\nplain");
        let mut bytes = live.checkpoint();
        // Whether the alternate screen shows, and its two cursors (each: line, column, the
        // template's style, pending wrap and four charsets, a byte each).
        bytes.truncate(bytes.len() - 17);
        let restored = Grid::restore(&bytes, None).unwrap();
        assert_eq!(styled(&restored), styled(&live));
        // Five rows of at most 40 cells (a byte each) and the last column's tab stop.
        bytes.truncate(bytes.len() - 6);
        let restored = Grid::restore(&bytes, None).unwrap();
        assert_eq!(styled(&restored), styled(&live));
        bytes.push(41);
        assert!(Grid::restore(&bytes, None).is_err(), "a count past the row");
    }

    /// History rows in both of [`FORMAT`]'s ways (compact bytes, or cell by cell for a row
    /// with combining characters or an underline colour) and in an older build's checkpoint
    /// (every row cell by cell, no format byte): each restores the screen and its history as
    /// they were, and writes the same checkpoint again. A compact row changed in any part is
    /// refused.
    #[test]
    fn history_rows_restore_from_the_format_and_from_an_older_builds() {
        let mut live = Grid::new(40, 5, 100);
        live.feed(
            "plain\r\n\x1b[1;31mred\x1b[0m and \x1b[38;2;1;2;3mtrue\x1b[0m\r\ne\u{301} \
             combined\r\n\x1b[4m\x1b[58;5;3munderlined\x1b[0m\r\n\u{4e2d}\u{6587} wide\r\n"
                .as_bytes(),
        );
        for i in 0..30 {
            live.feed(format!("line {i}\r\n").as_bytes());
        }
        live.finish_feed();
        assert_eq!(live.history(), 31);
        let new = live.checkpoint();
        let old = live.checkpoint_of_an_older_build();
        assert_eq!(new[..2], [0, FORMAT]);
        for bytes in [&new, &old] {
            let mut restored = Grid::restore(bytes, None).unwrap();
            assert_eq!(styled(&restored), styled(&live));
            assert_eq!(restored.checkpoint(), new);
        }
        // "line 7" as a compact row: its kind and length, its counts (6 cells, 2 bytes of
        // runs), its one run (plain, 6 cells), its characters.
        let at = new.windows(6).position(|w| w == b"line 7").unwrap();
        assert_eq!(new[at - 8..at], [HISTORY_COMPACT, 12, 6, 0, 2, 0, 0, 6]);
        for (i, v) in [
            (at - 8, 2),
            (at - 6, 7),
            (at - 6, 41),
            (at - 4, 3),
            (at - 2, 0x80),
            (at - 1, 5),
            (at, 0xff),
        ] {
            let mut bytes = new.clone();
            bytes[i] = v;
            assert!(
                Grid::restore(&bytes, None).is_err(),
                "byte {} as {v}",
                i + 8 - at
            );
        }
    }

    /// Rows a clear filled with a background colour, then made wider (the cells added are
    /// past what alacritty counts as the row's occupied cells), then reset by inserted lines:
    /// alacritty resets only the occupied cells, so the colour stays. The restored rows must
    /// count the same occupied cells (found by `checkpoints_rebuild_the_screen_exactly_long`).
    #[test]
    fn rows_widened_after_a_coloured_clear_reset_alike() {
        restored_goes_on_alike(&[
            Step::Resize(2, 4),
            Step::Out(b"\x1b[7;42m\x1b(0lqk\x1b(B\x1b(0lqk\x1b(B\x1b[?7l\x1bH"),
            Step::Out(b"\x1b[2J"),
            Step::Out(b"\x1b8\x1b[1;31m"),
            Step::Out(b"\x1b]2;title\x07\x1b[K\x1b[?1049l"),
            Step::Resize(3, 2),
            Step::Out(b"\x1b[3gx\x1b[3b\x1b]2;title\x07\x1b[K"),
            Step::Out(b"\x1b[K"),
            Step::Out(b"\x1b[2L"),
        ]);
    }
}
