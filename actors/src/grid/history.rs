//! The history above the screen, kept outside alacritty's grid as compact rows.
//!
//! alacritty keeps every history row as a full-width vector of 24-byte cells, and the first
//! time anything scrolls into history it allocates 1,000 spare rows of them: 2.8 MiB for a
//! 120-column session that scrolled one line, 48 MiB for a full 10,000-row history at 200
//! columns. Here a row is its characters (one byte for an ASCII cell) and its styles as runs
//! of equal cells, up to its last cell that is not a blank default cell. The grid's
//! alacritty keeps no history of its own: a patched alacritty (`vendor/README.md`) hands each
//! row that leaves the top of the screen to this store through its `HistorySink`, and
//! treats the rows here as the history above the screen where it reads or clears history.
//! The row round-trips exactly (every cell's character, colours, flags and `extra`), which
//! the property tests in `grid/mod.rs` check against an alacritty that keeps its own history.

use alacritty_terminal::grid::{HistorySink, Row as GridRow};
use alacritty_terminal::index::Column;
use alacritty_terminal::term::cell::{Cell, CellExtra, Flags};
use alacritty_terminal::vte::ansi::Color;
use std::collections::VecDeque;
use std::sync::Arc;

/// Cells in a row with one style.
#[derive(Clone, Debug)]
struct Run {
    len: u16,
    fg: Color,
    bg: Color,
    flags: Flags,
    extra: Option<Arc<CellExtra>>,
}

impl Run {
    fn of(cell: &Cell) -> Run {
        Run {
            len: 1,
            fg: cell.fg,
            bg: cell.bg,
            flags: cell.flags,
            extra: cell.extra.clone(),
        }
    }

    /// Whether `cell` has this run's style (`extra` compared by identity: the cells a
    /// template wrote share one).
    fn fits(&self, cell: &Cell) -> bool {
        self.fg == cell.fg
            && self.bg == cell.bg
            && self.flags == cell.flags
            && match (&self.extra, &cell.extra) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }

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

/// One history row: the characters of its cells up to the last one that is not a default
/// blank, and their styles. The cells after them are default blanks.
#[derive(Clone, Debug, Default)]
pub struct StoredRow {
    chars: String,
    runs: Vec<Run>,
}

impl StoredRow {
    fn of(row: &GridRow<Cell>) -> StoredRow {
        let mut stored = StoredRow::default();
        stored.fill(row);
        stored
    }

    /// Make this the compact form of `row`, in the buffers it has (a row evicted from a full
    /// history is reused for the next: no allocation once the history is full).
    fn fill(&mut self, row: &GridRow<Cell>) {
        self.chars.clear();
        self.runs.clear();
        let cells = &row[..];
        // Past the cells alacritty counts as used, a row holds copies of its last cell: where
        // that is a default blank, only the used cells need a look.
        let upper = match cells.last() {
            Some(last) if is_default(last) => row.occupied().min(cells.len()),
            _ => cells.len(),
        };
        let len = cells[..upper]
            .iter()
            .rposition(|c| !is_default(c))
            .map_or(0, |last| last + 1);
        let cells = &cells[..len];
        let Some(first) = cells.first() else {
            return;
        };
        // The characters: a byte per cell where all are ASCII (a tight loop, then a SIMD
        // check), else as UTF-8.
        let mut bytes = std::mem::take(&mut self.chars).into_bytes();
        let mut high = 0;
        bytes.extend(cells.iter().map(|cell| {
            high |= cell.c as u32;
            cell.c as u8
        }));
        self.chars = if high < 0x80 {
            String::from_utf8(bytes).unwrap_or_default()
        } else {
            bytes.clear();
            let mut chars = String::from_utf8(bytes).unwrap_or_default();
            chars.extend(cells.iter().map(|cell| cell.c));
            chars
        };
        let mut run = Run::of(first);
        for cell in &cells[1..] {
            if run.fits(cell) && run.len < u16::MAX {
                run.len += 1;
            } else {
                self.runs.push(std::mem::replace(&mut run, Run::of(cell)));
            }
        }
        self.runs.push(run);
    }

    /// Cells held (the rest of the row is default blanks).
    fn len(&self) -> usize {
        self.runs.iter().map(|run| run.len as usize).sum()
    }

    /// Each held cell, in order, with its column.
    pub fn for_each_cell(&self, mut f: impl FnMut(usize, Cell)) {
        let mut chars = self.chars.chars();
        let mut col = 0;
        for run in self.runs.iter() {
            for c in chars.by_ref().take(run.len as usize) {
                f(col, run.cell(c));
                col += 1;
            }
        }
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
        self.runs
            .last()
            .is_some_and(|run| run.flags.contains(Flags::WRAPLINE))
            && self.len() == cols
    }

    /// Append the row's text as [`super::Grid::row`] reads it (spacers skipped, a tab as a
    /// blank, combining characters after their base, trailing blanks trimmed); whether a cell
    /// satisfies `input` (asked once per run of cells that share their extra data).
    pub fn text_into(&self, text: &mut String, input: impl Fn(&Cell) -> bool) -> bool {
        const SPACERS: Flags = Flags::WIDE_CHAR_SPACER.union(Flags::LEADING_WIDE_CHAR_SPACER);
        let start = text.len();
        // Where every cell is one byte, a run's characters are a slice of them.
        let ascii = self.chars.len() == self.len();
        let mut pos = 0;
        let mut is_input = false;
        for run in self.runs.iter() {
            let n = run.len as usize;
            let end = if ascii {
                pos + n
            } else {
                self.chars[pos..]
                    .char_indices()
                    .nth(n)
                    .map_or(self.chars.len(), |(i, _)| pos + i)
            };
            let piece = &self.chars[pos..end];
            pos = end;
            if run.flags.intersects(SPACERS) {
                continue;
            }
            let blank = |c: char| if c == '\t' { ' ' } else { c };
            if run.extra.is_none() {
                if piece.contains('\t') {
                    text.extend(piece.chars().map(blank));
                } else {
                    text.push_str(piece);
                }
                continue;
            }
            let probe = run.cell(' ');
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

/// The history: at most `limit` rows, oldest first, `cols` wide.
#[derive(Clone, Debug)]
pub struct History {
    rows: VecDeque<StoredRow>,
    limit: usize,
    cols: usize,
    /// Rows ever pushed (what the pending-pattern matcher counts new rows by).
    pushed: u64,
}

impl History {
    pub fn new(limit: usize, cols: usize) -> History {
        History {
            rows: VecDeque::new(),
            limit,
            cols,
            pushed: 0,
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
            self.rows.push_back(StoredRow::of(row));
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
        let mut stored = if self.rows.len() == self.limit {
            self.rows.pop_front().unwrap_or_default()
        } else {
            StoredRow::default()
        };
        stored.fill(row);
        self.rows.push_back(stored);
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
        let Some(last) = row.runs.last() else { return };
        if !last.flags.contains(Flags::LEADING_WIDE_CHAR_SPACER) || row.len() != self.cols {
            return;
        }
        // Only the row's last cell: split it off its run.
        let runs = &mut row.runs;
        let mut single = runs.last().cloned().expect("a last run");
        single.flags.remove(Flags::LEADING_WIDE_CHAR_SPACER);
        single.len = 1;
        let last = runs.last_mut().expect("a last run");
        last.len -= 1;
        if last.len == 0 {
            runs.pop();
        }
        runs.push(single);
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
