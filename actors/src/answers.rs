//! The answers a terminal gives to a program's queries, and the facts they are made of.
//!
//! The light pass (`screen.rs`) finds each query in the output as the pump drains it and
//! turns it into a [`Query`], capturing whatever state the answer needs that the light pass
//! itself tracks at that byte (the scroll region, the cursor style, the kitty keyboard
//! flags, DEC 2026). Most
//! queries are then answered at once from that and the session's size ([`prepare`] gives a
//! [`Prepared::Ready`] answer); the few that need the full screen state at that byte (the
//! cursor for CPR, the modes for DECRQM, the SGR and cursor style for DECRQSS) become a
//! [`GridQuery`], answered by [`grid_answer`] once the grid has been fed exactly up to the
//! query (`screen_model/` stops its feed there). A program that never asks costs nothing.
//!
//! `docs/terminal.md` lists every query with what maxx, xterm and tmux answer.

use crate::grid::Grid;
use alacritty_terminal::term::cell::Flags;
use alacritty_terminal::term::TermMode;
use alacritty_terminal::vte::ansi::{Color, NamedColor};

/// The nominal cell size reported in pixels (XTWINOPS 14/16): there is no window, so a
/// fixed, documented 8x16 cell (a VGA text cell).
pub const CELL_WIDTH_PX: u32 = 8;
/// See [`CELL_WIDTH_PX`].
pub const CELL_HEIGHT_PX: u32 = 16;
/// Default foreground (OSC 10) and cursor (OSC 12) colour: xterm's colour 7.
pub const DEFAULT_FG: (u8, u8, u8) = (0xe5, 0xe5, 0xe5);
/// Default background (OSC 11): black.
pub const DEFAULT_BG: (u8, u8, u8) = (0, 0, 0);

/// A query a program wrote, as the light pass found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// DSR 6 (`CSI 6 n`) or, `private`, DECXCPR (`CSI ? 6 n`). `origin_top` is the scroll
    /// region's top row (0-based) when origin mode (DECOM) is set: the report is relative
    /// to it, as xterm and tmux report.
    CursorPosition {
        private: bool,
        origin_top: Option<u16>,
    },
    /// DSR 5 (`CSI 5 n`): "are you OK?".
    Status,
    /// DA1 (`CSI c`).
    PrimaryAttributes,
    /// DA2 (`CSI > c`).
    SecondaryAttributes,
    /// DA3 (`CSI = c`).
    TertiaryAttributes,
    /// XTVERSION (`CSI > q`).
    Version,
    /// DECRQM (`CSI ? Ps $ p`, or `CSI Ps $ p` for an ANSI mode). `sync` is DEC 2026 as the
    /// light pass tracks it (the grid's parser handles that mode itself).
    Mode {
        private: bool,
        mode: u16,
        sync: bool,
    },
    /// DECRQSS (`DCS $ q Pt ST`) with its `Pt`; `region` is the scroll region (1-based
    /// top and bottom, `None` = the whole screen) for `Pt = r`, `cursor_style` the last
    /// DECSCUSR parameter (0 = never set) for `Pt = " q"`.
    Setting {
        pt: Vec<u8>,
        region: Option<(u16, u16)>,
        cursor_style: u16,
    },
    /// OSC 10/11/12 (`code`) or OSC 4 (`code` 4, `index`) with `?`; `st` = the query ended
    /// with ST rather than BEL (the answer ends the same way).
    Color { code: u8, index: u8, st: bool },
    /// XTWINOPS report (`CSI 14/16/18/19 t`).
    Window(u16),
    /// XTGETTCAP (`DCS + q hex;hex ST`): the hex-encoded names asked for.
    Capabilities(Vec<Vec<u8>>),
    /// The kitty keyboard protocol's query (`CSI ? u`), with the flags in effect then.
    Keyboard(u8),
}

/// A query whose answer needs the grid fed exactly up to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GridQuery {
    /// CPR / DECXCPR.
    CursorPosition {
        private: bool,
        origin_top: Option<u16>,
    },
    /// DECRQM of a mode the grid tracks.
    Mode { private: bool, mode: u16 },
    /// DECRQSS `m`: the current SGR.
    Sgr,
}

/// What to do about a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// Write these bytes (in their turn).
    Ready(Vec<u8>),
    /// Feed the grid up to the query, then ask [`grid_answer`].
    Grid(GridQuery),
}

/// Prepare the answer to `query` for a session of `cols` x `rows`.
pub fn prepare(query: Query, cols: u16, rows: u16) -> Prepared {
    let ready = |s: String| Prepared::Ready(s.into_bytes());
    match query {
        Query::CursorPosition {
            private,
            origin_top,
        } => Prepared::Grid(GridQuery::CursorPosition {
            private,
            origin_top,
        }),
        Query::Status => ready("\x1b[0n".into()),
        Query::PrimaryAttributes => ready("\x1b[?62;22c".into()),
        Query::SecondaryAttributes => ready("\x1b[>0;10;1c".into()),
        Query::TertiaryAttributes => ready("\x1bP!|00000000\x1b\\".into()),
        Query::Version => ready(format!("\x1bP>|maxx({})\x1b\\", env!("CARGO_PKG_VERSION"))),
        Query::Mode {
            private: true,
            mode: 2026,
            sync,
        } => ready(mode_report(true, 2026, if sync { 1 } else { 2 })),
        Query::Mode { private, mode, .. } => {
            if mode_flag(private, mode).is_some() || (private && mode == 12) {
                Prepared::Grid(GridQuery::Mode { private, mode })
            } else {
                ready(mode_report(private, mode, 0))
            }
        }
        Query::Setting {
            pt,
            region,
            cursor_style,
        } => match pt.as_slice() {
            b"m" => Prepared::Grid(GridQuery::Sgr),
            b" q" => ready(format!("\x1bP1$r{cursor_style} q\x1b\\")),
            b"r" => {
                let (top, bottom) = region.unwrap_or((1, rows));
                ready(format!("\x1bP1$r{top};{bottom}r\x1b\\"))
            }
            _ => ready("\x1bP0$r\x1b\\".into()),
        },
        Query::Color { code, index, st } => {
            let rgb = match code {
                10 | 12 => DEFAULT_FG,
                11 => DEFAULT_BG,
                _ => palette(index),
            };
            let body = if code == 4 {
                format!("4;{index};{}", rgb_spec(rgb))
            } else {
                format!("{code};{}", rgb_spec(rgb))
            };
            ready(format!("\x1b]{body}{}", if st { "\x1b\\" } else { "\x07" }))
        }
        Query::Window(op) => {
            let (c, r) = (u32::from(cols), u32::from(rows));
            match op {
                14 => ready(format!(
                    "\x1b[4;{};{}t",
                    r * CELL_HEIGHT_PX,
                    c * CELL_WIDTH_PX
                )),
                16 => ready(format!("\x1b[6;{CELL_HEIGHT_PX};{CELL_WIDTH_PX}t")),
                18 => ready(format!("\x1b[8;{r};{c}t")),
                19 => ready(format!("\x1b[9;{r};{c}t")),
                _ => Prepared::Ready(Vec::new()),
            }
        }
        Query::Capabilities(names) => {
            let mut out = Vec::new();
            for name in names {
                match capability(&name) {
                    Some(value) => {
                        out.extend_from_slice(b"\x1bP1+r");
                        out.extend_from_slice(&name);
                        out.push(b'=');
                        out.extend(hex(value.as_bytes()).into_bytes());
                    }
                    None => {
                        out.extend_from_slice(b"\x1bP0+r");
                        out.extend_from_slice(&name);
                    }
                }
                out.extend_from_slice(b"\x1b\\");
            }
            Prepared::Ready(out)
        }
        Query::Keyboard(flags) => ready(format!("\x1b[?{flags}u")),
    }
}

/// The answer to a grid query, from the grid fed exactly up to it.
pub fn grid_answer(query: &GridQuery, grid: &Grid) -> Vec<u8> {
    let term = grid.state();
    let answer = match query {
        GridQuery::CursorPosition {
            private,
            origin_top,
        } => {
            let p = term.grid().cursor.point;
            let line = (p.line.0.max(0) as u32).saturating_sub(origin_top.map_or(0, u32::from));
            let col = p.column.0 as u32;
            if *private {
                format!("\x1b[?{};{};1R", line + 1, col + 1)
            } else {
                format!("\x1b[{};{}R", line + 1, col + 1)
            }
        }
        GridQuery::Mode { private, mode } => {
            let set = if *private && *mode == 12 {
                term.cursor_style().blinking
            } else {
                mode_flag(*private, *mode).is_some_and(|f| term.mode().contains(f))
            };
            mode_report(*private, *mode, if set { 1 } else { 2 })
        }
        GridQuery::Sgr => format!("\x1bP1$r{}m\x1b\\", sgr(grid)),
    };
    answer.into_bytes()
}

/// `CSI ? Ps ; Pm $ y` (or without `?`).
fn mode_report(private: bool, mode: u16, state: u8) -> String {
    format!("\x1b[{}{mode};{state}$y", if private { "?" } else { "" })
}

/// The grid's flag for a DEC private (or ANSI) mode number, for the modes maxx tracks.
fn mode_flag(private: bool, mode: u16) -> Option<TermMode> {
    Some(match (private, mode) {
        (true, 1) => TermMode::APP_CURSOR,
        (true, 6) => TermMode::ORIGIN,
        (true, 7) => TermMode::LINE_WRAP,
        (true, 25) => TermMode::SHOW_CURSOR,
        (true, 66) => TermMode::APP_KEYPAD,
        (true, 1000) => TermMode::MOUSE_REPORT_CLICK,
        (true, 1002) => TermMode::MOUSE_DRAG,
        (true, 1003) => TermMode::MOUSE_MOTION,
        (true, 1004) => TermMode::FOCUS_IN_OUT,
        (true, 1005) => TermMode::UTF8_MOUSE,
        (true, 1006) => TermMode::SGR_MOUSE,
        (true, 1007) => TermMode::ALTERNATE_SCROLL,
        (true, 1042) => TermMode::URGENCY_HINTS,
        (true, 47 | 1047 | 1049) => TermMode::ALT_SCREEN,
        (true, 2004) => TermMode::BRACKETED_PASTE,
        (false, 4) => TermMode::INSERT,
        (false, 20) => TermMode::LINE_FEED_NEW_LINE,
        _ => return None,
    })
}

/// Cell attributes and the SGR parameter that sets each.
pub const SGR_FLAGS: [(Flags, &str); 11] = [
    (Flags::BOLD, "1"),
    (Flags::DIM, "2"),
    (Flags::ITALIC, "3"),
    (Flags::UNDERLINE, "4"),
    (Flags::DOUBLE_UNDERLINE, "4:2"),
    (Flags::UNDERCURL, "4:3"),
    (Flags::DOTTED_UNDERLINE, "4:4"),
    (Flags::DASHED_UNDERLINE, "4:5"),
    (Flags::INVERSE, "7"),
    (Flags::HIDDEN, "8"),
    (Flags::STRIKEOUT, "9"),
];

/// The SGR parameters that reproduce the cursor's current attributes (`0` when default).
fn sgr(grid: &Grid) -> String {
    let t = &grid.state().grid().cursor.template;
    let mut p = vec!["0".to_string()];
    for (flag, code) in SGR_FLAGS {
        if t.flags.contains(flag) {
            p.push(code.into());
        }
    }
    if let Some(c) = color_param(t.fg, NamedColor::Foreground, 30) {
        p.push(c);
    }
    if let Some(c) = color_param(t.bg, NamedColor::Background, 40) {
        p.push(c);
    }
    p.join(";")
}

/// The SGR parameter for a colour (`base` 30 for foreground, 40 for background), `None`
/// for the default.
pub fn color_param(c: Color, default: NamedColor, base: u8) -> Option<String> {
    match c {
        Color::Named(n) if n == default => None,
        Color::Named(n) if (n as usize) < 8 => Some(format!("{}", base + n as u8)),
        Color::Named(n) if (n as usize) < 16 => Some(format!("{}", base + 60 + n as u8 - 8)),
        Color::Named(_) => None,
        Color::Indexed(i) => Some(format!("{};5;{i}", base + 8)),
        Color::Spec(rgb) => Some(format!("{};2;{};{};{}", base + 8, rgb.r, rgb.g, rgb.b)),
    }
}

/// `rgb:RRRR/GGGG/BBBB`, the form xterm reports colours in.
fn rgb_spec((r, g, b): (u8, u8, u8)) -> String {
    format!("rgb:{r:02x}{r:02x}/{g:02x}{g:02x}/{b:02x}{b:02x}")
}

/// xterm's default 256-colour palette.
pub fn palette(index: u8) -> (u8, u8, u8) {
    const BASE: [(u8, u8, u8); 16] = [
        (0x00, 0x00, 0x00),
        (0xcd, 0x00, 0x00),
        (0x00, 0xcd, 0x00),
        (0xcd, 0xcd, 0x00),
        (0x00, 0x00, 0xee),
        (0xcd, 0x00, 0xcd),
        (0x00, 0xcd, 0xcd),
        (0xe5, 0xe5, 0xe5),
        (0x7f, 0x7f, 0x7f),
        (0xff, 0x00, 0x00),
        (0x00, 0xff, 0x00),
        (0xff, 0xff, 0x00),
        (0x5c, 0x5c, 0xff),
        (0xff, 0x00, 0xff),
        (0x00, 0xff, 0xff),
        (0xff, 0xff, 0xff),
    ];
    match index {
        0..=15 => BASE[index as usize],
        16..=231 => {
            let i = index - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            (level(i / 36), level((i / 6) % 6), level(i % 6))
        }
        232..=255 => {
            let v = 8 + (index - 232) * 10;
            (v, v, v)
        }
    }
}

/// The value of a terminfo capability XTGETTCAP asks for by hex-encoded name.
fn capability(hex_name: &[u8]) -> Option<&'static str> {
    let name = unhex(hex_name)?;
    Some(match name.as_slice() {
        b"TN" | b"name" => "xterm-256color",
        b"Co" | b"colors" => "256",
        b"RGB" => "8/8/8",
        _ => return None,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

fn unhex(hex: &[u8]) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(q: Query) -> String {
        match prepare(q, 80, 24) {
            Prepared::Ready(b) => String::from_utf8(b).unwrap(),
            Prepared::Grid(g) => panic!("needs the grid: {g:?}"),
        }
    }

    #[test]
    fn answers_that_need_no_grid() {
        assert_eq!(ready(Query::Status), "\x1b[0n");
        assert_eq!(ready(Query::PrimaryAttributes), "\x1b[?62;22c");
        assert_eq!(ready(Query::SecondaryAttributes), "\x1b[>0;10;1c");
        assert!(ready(Query::Version).starts_with("\x1bP>|maxx("));
        assert_eq!(ready(Query::Window(18)), "\x1b[8;24;80t");
        assert_eq!(ready(Query::Window(14)), "\x1b[4;384;640t");
        assert_eq!(
            ready(Query::Color {
                code: 11,
                index: 0,
                st: false
            }),
            "\x1b]11;rgb:0000/0000/0000\x07"
        );
        assert_eq!(
            ready(Query::Color {
                code: 4,
                index: 196,
                st: true
            }),
            "\x1b]4;196;rgb:ffff/0000/0000\x1b\\"
        );
        assert_eq!(
            ready(Query::Capabilities(vec![
                b"544E".to_vec(),
                b"5858".to_vec()
            ])),
            "\x1bP1+r544E=787465726D2D323536636F6C6F72\x1b\\\x1bP0+r5858\x1b\\"
        );
        assert_eq!(ready(Query::Keyboard(5)), "\x1b[?5u");
        assert_eq!(
            ready(Query::Mode {
                private: true,
                mode: 9999,
                sync: false
            }),
            "\x1b[?9999;0$y"
        );
        assert_eq!(
            ready(Query::Setting {
                pt: b"r".to_vec(),
                region: Some((2, 10)),
                cursor_style: 0
            }),
            "\x1bP1$r2;10r\x1b\\"
        );
        assert_eq!(
            ready(Query::Setting {
                pt: b"x".to_vec(),
                region: None,
                cursor_style: 0
            }),
            "\x1bP0$r\x1b\\"
        );
    }

    #[test]
    fn palette_matches_xterm() {
        assert_eq!(palette(16), (0, 0, 0));
        assert_eq!(palette(21), (0, 0, 0xff));
        assert_eq!(palette(231), (0xff, 0xff, 0xff));
        assert_eq!(palette(232), (8, 8, 8));
        assert_eq!(palette(255), (0xee, 0xee, 0xee));
    }
}
