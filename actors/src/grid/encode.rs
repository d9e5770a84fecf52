//! Encoding the grid for readers: the bytes that repaint it on a fresh terminal (`maxx
//! attach`) and the styled cells of a snapshot.

use super::{semantic, Grid};
use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::TermMode;
use alacritty_terminal::vte::ansi::{Color, CursorShape, NamedColor};
use maxx_protocol::screen::{CellColor, CellStyle, Semantic, StyledCell};

impl Grid {
    /// Bytes that draw this screen on a fresh terminal, as `maxx attach` shows it: the
    /// visible rows with their colours and attributes, then the scroll region `region`,
    /// the modes a program's input depends on (alternate screen, cursor keys, keypad,
    /// bracketed paste, mouse reporting, focus events, autowrap, kitty keyboard `kitty`),
    /// the cursor style, position and visibility, and the title. Drawn from the grid, so
    /// nothing the program once printed (a query, a mode long since reset) is replayed.
    /// (The main screen hidden behind an active alternate screen is not drawn: a terminal
    /// that leaves the alternate screen shows what it had before the attach.)
    pub fn repaint(&self, region: Option<(u16, u16)>, kitty: u8, title: Option<&str>) -> Vec<u8> {
        use std::fmt::Write;
        let mode = *self.term.mode();
        let mut out = String::new();
        out.push_str("\x1b[0m\x1b[r\x1b[?6l\x1b[?7h\x1b[?25l");
        if mode.contains(TermMode::ALT_SCREEN) {
            out.push_str("\x1b[?1049h");
        }
        out.push_str("\x1b[H\x1b[2J");
        let cols = self.term.columns();
        let mut pen = String::from("0");
        for line in 0..self.term.screen_lines() {
            let row = &self.term.grid()[Line(line as i32)];
            // Trailing cells that draw nothing are left to the clear.
            let last = (0..cols).rev().find(|&c| {
                let cell = &row[Column(c)];
                (cell.c != ' ' && cell.c != '\t')
                    || cell.bg != Color::Named(NamedColor::Background)
                    || cell.flags.intersects(Flags::INVERSE | Flags::UNDERLINE)
            });
            let Some(last) = last else { continue };
            let _ = write!(out, "\x1b[{};1H", line + 1);
            for col in 0..=last {
                let cell = &row[Column(col)];
                if cell
                    .flags
                    .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
                {
                    continue;
                }
                let sgr = cell_sgr(cell);
                if sgr != pen {
                    let _ = write!(out, "\x1b[{sgr}m");
                    pen = sgr;
                }
                out.push(if cell.c == '\t' { ' ' } else { cell.c });
                if let Some(extra) = cell.zerowidth() {
                    out.extend(extra);
                }
            }
        }
        out.push_str("\x1b[0m");
        if let Some((top, bottom)) = region {
            let _ = write!(out, "\x1b[{top};{bottom}r");
        }
        for (flag, n) in [
            (TermMode::APP_CURSOR, 1),
            (TermMode::MOUSE_REPORT_CLICK, 1000),
            (TermMode::MOUSE_DRAG, 1002),
            (TermMode::MOUSE_MOTION, 1003),
            (TermMode::FOCUS_IN_OUT, 1004),
            (TermMode::UTF8_MOUSE, 1005),
            (TermMode::SGR_MOUSE, 1006),
            (TermMode::BRACKETED_PASTE, 2004),
        ] {
            if mode.contains(flag) {
                let _ = write!(out, "\x1b[?{n}h");
            }
        }
        if mode.contains(TermMode::APP_KEYPAD) {
            out.push_str("\x1b=");
        }
        if !mode.contains(TermMode::LINE_WRAP) {
            out.push_str("\x1b[?7l");
        }
        if kitty != 0 {
            let _ = write!(out, "\x1b[>{kitty}u");
        }
        let style = self.term.cursor_style();
        let shape = match style.shape {
            CursorShape::Underline => 3,
            CursorShape::Beam => 5,
            _ => 1,
        };
        let _ = write!(
            out,
            "\x1b[{} q",
            if style.blinking { shape } else { shape + 1 }
        );
        let p = self.term.grid().cursor.point;
        if mode.contains(TermMode::ORIGIN) {
            out.push_str("\x1b[?6h");
            let top = region.map_or(1, |(t, _)| t) as i32;
            let _ = write!(out, "\x1b[{};{}H", p.line.0 + 2 - top, p.column.0 + 1);
        } else {
            let _ = write!(out, "\x1b[{};{}H", p.line.0 + 1, p.column.0 + 1);
        }
        if mode.contains(TermMode::SHOW_CURSOR) {
            out.push_str("\x1b[?25h");
        }
        if let Some(title) = title {
            let _ = write!(out, "\x1b]2;{title}\x07");
        }
        out.into_bytes()
    }

    /// Cells of `line` with a non-default style or an OSC 133 semantic, reported at
    /// `row_index`.
    pub fn styled_cells(&self, line: i32, row_index: u32, out: &mut Vec<StyledCell>) {
        self.with_cells(line, |cells| styled_cells_of(cells, row_index, out))
    }

    /// [`Grid::styled_cells`] as JSON, each cell followed by a comma, straight into `out`
    /// (the bytes serde writes for a [`StyledCell`], without building one: a snapshot
    /// encodes up to ~84,000 of them twice). Returns how many cells were written.
    pub fn styled_cells_json(&self, line: i32, row_index: u32, out: &mut Vec<u8>) -> usize {
        self.with_cells(line, |cells| styled_cells_json_of(cells, row_index, out))
    }
}

/// The listed cells of a row's `cells` (its blank default cells are never listed, so a
/// history row's held cells are enough).
fn styled_cells_of(cells: &[Cell], row_index: u32, out: &mut Vec<StyledCell>) {
    for (col, cell) in cells.iter().enumerate() {
        if let Some((style, semantic)) = listed(cell) {
            out.push(StyledCell {
                col: col as u16,
                row: row_index,
                semantic,
                text: cell.c.to_string(),
                style,
            });
        }
    }
}

/// [`styled_cells_of`] as JSON.
fn styled_cells_json_of(cells: &[Cell], row_index: u32, out: &mut Vec<u8>) -> usize {
    use std::io::Write;
    let mut n = 0;
    for (col, cell) in cells.iter().enumerate() {
        let Some((style, semantic)) = listed(cell) else {
            continue;
        };
        n += 1;
        let _ = write!(out, "{{\"col\":{col},\"row\":{row_index},");
        match semantic {
            Some(Semantic::Prompt) => out.extend_from_slice(b"\"semantic\":\"Prompt\","),
            Some(Semantic::Input) => out.extend_from_slice(b"\"semantic\":\"Input\","),
            None => {}
        }
        out.extend_from_slice(b"\"text\":");
        let mut buf = [0u8; 4];
        let _ = serde_json::to_writer(&mut *out, &*cell.c.encode_utf8(&mut buf));
        let _ = write!(
            out,
            ",\"style\":{{\"bold\":{},\"dim\":{},\"italic\":{},\"underline\":{},\
             \"inverse\":{},\"hidden\":{},\"strikethrough\":{},\"fg\":",
            style.bold,
            style.dim,
            style.italic,
            style.underline,
            style.inverse,
            style.hidden,
            style.strikethrough
        );
        color_json(&style.fg, out);
        out.extend_from_slice(b",\"bg\":");
        color_json(&style.bg, out);
        out.extend_from_slice(b"}},");
    }
    n
}

/// A cell's style and semantic, when it is listed: a non-default style or a semantic. The
/// right half of a double-width glyph never is.
fn listed(cell: &Cell) -> Option<(CellStyle, Option<Semantic>)> {
    if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
        return None;
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
    let semantic = semantic(cell);
    (!plain || semantic.is_some()).then_some((style, semantic))
}

/// A [`CellColor`] as serde writes it.
fn color_json(c: &CellColor, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = match c {
        CellColor::Default => out.write_all(b"\"default\""),
        CellColor::Palette { index } => write!(out, "{{\"palette\":{{\"index\":{index}}}}}"),
        CellColor::Rgb { r, g, b } => {
            write!(out, "{{\"rgb\":{{\"r\":{r},\"g\":{g},\"b\":{b}}}}}")
        }
    };
}

/// The SGR parameters that draw `cell`'s attributes and colours (`0` first, so each
/// change is absolute).
fn cell_sgr(cell: &Cell) -> String {
    let mut p = String::from("0");
    for (flag, code) in crate::answers::SGR_FLAGS {
        if cell.flags.contains(flag) {
            p.push(';');
            p.push_str(code);
        }
    }
    for (c, default, base) in [
        (cell.fg, NamedColor::Foreground, 30),
        (cell.bg, NamedColor::Background, 40),
    ] {
        if let Some(c) = crate::answers::color_param(c, default, base) {
            p.push(';');
            p.push_str(&c);
        }
    }
    p
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
