//! Screen readback documents: `sessions.snapshot` (ScreenState), `sessions.inspect`,
//! `sessions.run` (RunResult) and `sessions.resize`. Reads are explicit caller requests
//! gated by `output:read`; nothing here ever becomes declared state.

use serde::{Deserialize, Serialize};

/// Version of the ScreenState document. Moves when a key is removed, renamed or retyped,
/// never when one is added.
pub const SCREEN_SCHEMA: u32 = 1;

/// Cursor position in the viewport (0-based).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Column.
    pub x: u16,
    /// Row.
    pub y: u16,
    /// Whether the program shows it (DECTCEM).
    pub visible: bool,
}

/// A cell colour: the terminal default, a palette index, or RGB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellColor {
    /// The terminal's default (distinct from explicitly black).
    Default,
    /// A palette index (0–255).
    Palette {
        /// Index.
        index: u8,
    },
    /// A true colour.
    Rgb {
        /// Red.
        r: u8,
        /// Green.
        g: u8,
        /// Blue.
        b: u8,
    },
}

/// SGR attributes of a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellStyle {
    /// SGR 1.
    pub bold: bool,
    /// SGR 2.
    pub dim: bool,
    /// SGR 3.
    pub italic: bool,
    /// SGR 4.
    pub underline: bool,
    /// SGR 7.
    pub inverse: bool,
    /// SGR 8.
    pub hidden: bool,
    /// SGR 9.
    pub strikethrough: bool,
    /// Foreground.
    pub fg: CellColor,
    /// Background.
    pub bg: CellColor,
}

/// What the program said a cell is, with OSC 133 marks it emitted itself (`semantic` on a
/// cell). Spelled as the seed spells it: `"Prompt"`, `"Input"`. Output has no variant: it is
/// the absence of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Semantic {
    /// Written between OSC 133 `A` (prompt start) and `B`.
    Prompt,
    /// Written between OSC 133 `B` (input start) and `C` (output start; `D` or `A` also end it).
    Input,
}

/// One cell (`--cells`): only cells with a non-default style or a `semantic` are listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StyledCell {
    /// Column.
    pub col: u16,
    /// Row index into `lines` (into `scrollback` for `scrollback_cells`).
    pub row: u32,
    /// `Prompt` or `Input` from the program's OSC 133 marks; absent for output and for cells
    /// of a program that emits no marks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic: Option<Semantic>,
    /// The character.
    pub text: String,
    /// Its style.
    pub style: CellStyle,
}

/// Which rows continue onto the next one (soft wrap), per array.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SoftWrap {
    /// Indices into `lines`.
    pub lines: Vec<u32>,
    /// Indices into `scrollback`.
    pub scrollback: Vec<u32>,
}

/// `sessions.snapshot`: the screen as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScreenState {
    /// [`SCREEN_SCHEMA`].
    pub schema_version: u32,
    /// The session.
    pub session_id: String,
    /// Grid width.
    pub cols: u16,
    /// Grid height.
    pub rows: u16,
    /// Cursor.
    pub cursor: Cursor,
    /// Viewport rows (trailing blanks trimmed), or logical lines with `unwrap`.
    pub lines: Vec<String>,
    /// Requested history rows, oldest first (empty unless asked for).
    pub scrollback: Vec<String>,
    /// Styled cells of `lines` with `cells`, else null.
    pub cells: Option<Vec<StyledCell>>,
    /// With `cells`: the same for the `scrollback` rows (`row` indexes `scrollback`); absent
    /// without `cells`. A separate key, so a reader that predates it cannot mistake a history
    /// cell for a viewport one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback_cells: Option<Vec<StyledCell>>,
    /// Soft-wrapped rows (absent with `unwrap`, where they are already joined).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soft_wrap: Option<SoftWrap>,
    /// Whether the answer lacks rows of the requested window: they are past what is retained
    /// (`history_limit`), or past what one answer may hold (`size_limit`, with `next_row`).
    pub truncated: bool,
    /// Why, when truncated: `"history_limit"` (rows asked for were dropped by the
    /// scrollback limit) or `"size_limit"` (the answer reached
    /// [`SCREEN_ANSWER_MAX_BYTES`](crate::limits::SCREEN_ANSWER_MAX_BYTES) and holds only the
    /// window's rows up to `next_row`).
    pub truncated_reason: Option<String>,
    /// Title from OSC 0/2.
    pub title: Option<String>,
    /// Only in an answer cut for size: the window row (history rows oldest first, then the
    /// viewport's) its rows stop before; ask again with `start_row` set to it for the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_row: Option<u64>,
}

/// `sessions.run`: the result of a command run between printed sentinels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The command as given.
    pub command: String,
    /// `$?` printed by the end sentinel.
    pub exit_code: i32,
    /// Output between the sentinels.
    pub output: String,
    /// Wall-clock from the start of the budget.
    pub duration_ms: u64,
    /// The begin marker had scrolled out of retained history.
    pub truncated: bool,
}

/// A PTY size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Size {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// History geometry in `inspect`: rows in total, how far the view is scrolled back, rows shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrollbackInfo {
    /// History rows plus viewport rows.
    pub total: u32,
    /// Rows the view is scrolled back (always 0: maxx never scrolls a reader's view).
    pub offset: u32,
    /// Viewport rows.
    pub len: u32,
}

/// The foreground process group of the PTY (kernel facts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreground {
    /// `tcgetpgrp` on the master.
    pub pid: i32,
    /// `/proc/<pid>/cmdline`, space-joined (bounded).
    pub command: Option<String>,
}

/// `sessions.inspect`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectDoc {
    /// [`SCREEN_SCHEMA`].
    pub schema_version: u32,
    /// The session.
    pub session_id: String,
    /// Grid size.
    pub grid: Size,
    /// History geometry.
    pub scrollback: ScrollbackInfo,
    /// Alternate screen active.
    pub alt_screen: bool,
    /// DEC 2004 on.
    pub bracketed_paste: bool,
    /// DEC 1 on.
    pub app_cursor: bool,
    /// The foreground job, while the surface exists.
    pub foreground: Option<Foreground>,
    /// The child exited (kernel-reported).
    pub exited: bool,
    /// Title from OSC 0/2.
    pub title: Option<String>,
    /// Output bytes that were waiting for the grid when the read arrived (the read parsed
    /// them first; at most 1 MiB, past which the program waits on its PTY buffer).
    pub backlog_bytes: u64,
}

/// `sessions.resize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizeResult {
    /// [`SCREEN_SCHEMA`].
    pub schema_version: u32,
    /// The session.
    pub session_id: String,
    /// What was asked.
    pub requested: Size,
    /// What the PTY reports now (read back with TIOCGWINSZ).
    pub applied: Size,
    /// Whether applied equals requested.
    pub held: bool,
}
