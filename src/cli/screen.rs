//! The screen-readback and input verbs of `maxx sessions`: `snapshot`, `dump`, `run`,
//! `send-keys`, `paste`, `resize`. (`inspect` takes only a session: [`super::SelfIdArg`].)

use super::duration;
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// Include history: no value (or 0) = all retained rows, N = the newest N.
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "N")]
    pub scrollback: Option<u64>,
    /// Include styled cells.
    #[arg(long, conflicts_with = "unwrap")]
    pub cells: bool,
    /// Join soft-wrapped rows into logical lines.
    #[arg(long)]
    pub unwrap: bool,
    /// At least the viewport, plus history rows to make N.
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,
    /// Skip the window's first N rows (history oldest first, then the viewport): pass the
    /// `next_row` of an answer cut at 16 MiB (`truncated_reason: "size_limit"`).
    #[arg(long, value_name = "N")]
    pub start_row: Option<usize>,
    /// Accepted for scripts; output is always JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title; inside a session,
    /// that session.
    #[arg(env = "MAXX_SESSION_ID", hide_env_values = true,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub session_id: String,
    /// Prepend all retained history.
    #[arg(long)]
    pub scrollback: bool,
    /// Skip the first N rows: pass the `next_row` of an answer cut at 16 MiB.
    #[arg(long, value_name = "N")]
    pub start_row: Option<usize>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Whole budget (default 10m, at most 1h; 0 means no limit).
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// The command (one line, POSIX shell; run in a subshell).
    pub command: String,
}

#[derive(Args, Debug)]
pub struct SendKeysArgs {
    /// Send every word as text: no key names, no chords.
    #[arg(long, short = 'l')]
    pub literal: bool,
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// Keys and text, in order.
    #[arg(required = true, allow_hyphen_values = true)]
    pub keys: Vec<String>,
}

#[derive(Args, Debug)]
pub struct PasteArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// The text, or - for stdin.
    pub text: String,
}

#[derive(Args, Debug)]
pub struct ResizeArgs {
    /// The session: an id, an id prefix (4+ hex digits) or %title.
    pub session_id: String,
    /// Columns.
    #[arg(long)]
    pub cols: u16,
    /// Rows.
    #[arg(long)]
    pub rows: u16,
}
