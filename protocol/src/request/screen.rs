//! The screen family: what a session's terminal shows and what is typed into it:
//! `sessions.snapshot`, `dump`, `inspect`, `run`, `send-keys`, `paste`, `resize`, `attach`.

use super::*;
use crate::keys::KeyToken;
use crate::screen::Size;

/// A call on a session's terminal.
#[derive(Debug, Clone, PartialEq)]
pub enum ScreenCall {
    /// `sessions.snapshot`, `sessions.dump`, `sessions.inspect`.
    Read(ReadParams),
    /// `sessions.run`
    Run(RunParams),
    /// `sessions.send-keys`: encoded bytes are computed by the session (mode-dependent).
    SendKeys {
        /// Canonical session id.
        session_id: String,
        /// Parsed keys.
        keys: Vec<KeyToken>,
    },
    /// `sessions.paste`
    Paste {
        /// Canonical session id.
        session_id: String,
        /// Text, pasted as one block.
        text: String,
    },
    /// `sessions.resize`
    Resize {
        /// Canonical session id.
        session_id: String,
        /// Requested size.
        size: Size,
    },
    /// `sessions.attach` (streaming, binary after the first line): a person's terminal
    /// joined to the session's PTY.
    Attach {
        /// The session, or `None` for the focused one.
        session_id: Option<String>,
        /// The attaching terminal's size, applied to the PTY.
        size: Option<Size>,
    },
}

const fn terminal(
    name: &'static str,
    capabilities: &'static [Capability],
    serve: Serve,
) -> MethodSpec {
    MethodSpec {
        name,
        capabilities,
        changes_records: false,
        serve,
    }
}

const READ: Serve = Serve::Session { input: false };
const INPUT: Serve = Serve::Session { input: true };

impl Family for ScreenCall {
    const METHODS: &'static [MethodSpec] = {
        use Capability::*;
        &[
            terminal("sessions.snapshot", &[OutputRead], READ),
            terminal("sessions.dump", &[OutputRead], READ),
            terminal("sessions.inspect", &[OutputRead], READ),
            terminal("sessions.run", &[OutputRead, InputSend], Serve::Held),
            terminal("sessions.send-keys", &[KeysPress], INPUT),
            terminal("sessions.paste", &[InputSend], INPUT),
            // A resize is recorded (the record carries the size).
            MethodSpec {
                name: "sessions.resize",
                capabilities: &[InputSend],
                changes_records: true,
                serve: READ,
            },
            // Attaching shows the screen: `output:read` too.
            terminal("sessions.attach", &[SurfaceAttach, OutputRead], Serve::Held),
        ]
    };

    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody> {
        let call = match method {
            "sessions.snapshot" | "sessions.dump" | "sessions.inspect" => {
                let raw: wire::Read = decode(params)?;
                let kind = match method {
                    "sessions.snapshot" => ReadKind::Snapshot,
                    "sessions.dump" => ReadKind::Dump,
                    _ => ReadKind::Inspect,
                };
                let scrollback = match raw.scrollback {
                    None | Some(Value::Null) | Some(Value::Bool(false)) => ScrollbackWindow::None,
                    Some(Value::Bool(true)) => ScrollbackWindow::All,
                    Some(Value::Number(n)) => match n.as_u64() {
                        Some(0) => ScrollbackWindow::All,
                        Some(n) => {
                            ScrollbackWindow::Last(n.min(MAX_SCROLLBACK_LINES as u64) as usize)
                        }
                        None => return Err(ErrorBody::invalid("scrollback must be a count >= 0")),
                    },
                    Some(_) => {
                        return Err(ErrorBody::invalid(
                            "scrollback must be a count >= 0 or a boolean",
                        ))
                    }
                };
                if raw.cells && raw.unwrap {
                    return Err(ErrorBody::invalid("unwrap cannot combine with cells"));
                }
                if kind != ReadKind::Snapshot && (raw.cells || raw.unwrap || raw.tail.is_some()) {
                    return Err(ErrorBody::invalid(format!(
                        "{method} does not take cells, unwrap or tail"
                    )));
                }
                if kind == ReadKind::Inspect && raw.start_row.is_some() {
                    return Err(ErrorBody::invalid(
                        "sessions.inspect does not take start_row",
                    ));
                }
                ScreenCall::Read(ReadParams {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    kind,
                    scrollback,
                    cells: raw.cells,
                    unwrap: raw.unwrap,
                    tail: raw.tail.map(|t| t.min(MAX_SCROLLBACK_LINES)),
                    start_row: raw.start_row.unwrap_or(0),
                })
            }
            "sessions.run" => {
                let raw: wire::Run = decode(params)?;
                validate_command(&raw.command)?;
                if raw.command.contains('\n') || raw.command.contains('\r') {
                    return Err(ErrorBody::invalid("run takes a one-line command"));
                }
                ScreenCall::Run(RunParams {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    command: raw.command,
                    timeout: match decode_timeout(raw.timeout.as_ref())? {
                        None => Some(RUN_DEFAULT_TIMEOUT),
                        Some(t) if t.is_zero() => None,
                        Some(t) => Some(t),
                    },
                })
            }
            "sessions.send-keys" => {
                let raw: wire::SendKeys = decode(params)?;
                let total: usize = raw.keys.iter().map(String::len).sum();
                if total > INPUT_MAX_BYTES || raw.keys.len() > 4096 {
                    return Err(ErrorBody::invalid("too many keys"));
                }
                ScreenCall::SendKeys {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    keys: crate::keys::parse_keys(&raw.keys, raw.literal)?,
                }
            }
            "sessions.paste" => {
                let raw: wire::Paste = decode(params)?;
                if raw.text.len() > INPUT_MAX_BYTES {
                    return Err(ErrorBody::invalid(format!(
                        "text is {} bytes; the limit is {INPUT_MAX_BYTES}",
                        raw.text.len()
                    )));
                }
                ScreenCall::Paste {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    text: raw.text,
                }
            }
            "sessions.attach" => {
                let raw: wire::Attach = decode(params)?;
                let size = match (raw.cols, raw.rows) {
                    (Some(cols), Some(rows))
                        if (1..=MAX_DIMENSION).contains(&cols)
                            && (1..=MAX_DIMENSION).contains(&rows) =>
                    {
                        // A terminal narrower than the grid supports is drawn at the minimum.
                        Some(Size {
                            cols: cols.max(MIN_COLS),
                            rows,
                        })
                    }
                    (None, None) => None,
                    _ => {
                        return Err(ErrorBody::invalid(format!(
                            "cols and rows go together, 1..={MAX_DIMENSION}"
                        )))
                    }
                };
                ScreenCall::Attach {
                    session_id: match raw.session_id {
                        Some(id) => Some(parse_session_id("session_id", &id)?),
                        None => None,
                    },
                    size,
                }
            }
            "sessions.resize" => {
                let raw: wire::Resize = decode(params)?;
                check_size(raw.cols, raw.rows)?;
                ScreenCall::Resize {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    size: Size {
                        cols: raw.cols,
                        rows: raw.rows,
                    },
                }
            }
            other => return Err(unknown_method(other)),
        };
        Ok(call)
    }

    fn method(&self) -> &'static str {
        match self {
            ScreenCall::Read(p) => match p.kind {
                ReadKind::Snapshot => "sessions.snapshot",
                ReadKind::Dump => "sessions.dump",
                ReadKind::Inspect => "sessions.inspect",
            },
            ScreenCall::Run(_) => "sessions.run",
            ScreenCall::SendKeys { .. } => "sessions.send-keys",
            ScreenCall::Paste { .. } => "sessions.paste",
            ScreenCall::Resize { .. } => "sessions.resize",
            ScreenCall::Attach { .. } => "sessions.attach",
        }
    }

    fn target(&self) -> Option<String> {
        self.session_id().map(str::to_string)
    }

    fn session_id(&self) -> Option<&str> {
        match self {
            ScreenCall::Read(p) => Some(&p.session_id),
            ScreenCall::Run(p) => Some(&p.session_id),
            ScreenCall::SendKeys { session_id, .. }
            | ScreenCall::Paste { session_id, .. }
            | ScreenCall::Resize { session_id, .. } => Some(session_id),
            ScreenCall::Attach { session_id, .. } => session_id.as_deref(),
        }
    }

    /// `sessions.send-keys` with literal text (a word that is not a key name, `literal`, or
    /// an unmodified character) also needs `input:send`: it types input.
    fn capabilities(&self) -> Vec<Capability> {
        let mut caps = self.spec().capabilities.to_vec();
        if let ScreenCall::SendKeys { keys, .. } = self {
            if keys.iter().any(KeyToken::is_text) {
                caps.push(Capability::InputSend);
            }
        }
        caps
    }
}

/// Which screen read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// ScreenState.
    Snapshot,
    /// Plain text.
    Dump,
    /// Grid, modes, kernel facts.
    Inspect,
}

/// How much history a snapshot includes (`scrollback` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrollbackWindow {
    /// Absent: the viewport only.
    None,
    /// `0` (or `true`): every retained row.
    All,
    /// `N`: the most recent N rows.
    Last(usize),
}

/// `sessions.snapshot` / `sessions.dump` / `sessions.inspect` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadParams {
    /// Canonical session id.
    pub session_id: String,
    /// Which read.
    pub kind: ReadKind,
    /// History to include.
    pub scrollback: ScrollbackWindow,
    /// Styled cells (snapshot).
    pub cells: bool,
    /// Join soft-wrapped rows (snapshot; not with cells).
    pub unwrap: bool,
    /// At least the viewport, and up to N rows counting back from the bottom.
    pub tail: Option<usize>,
    /// `start_row` (snapshot, dump): skip this many rows of the window (history rows
    /// oldest first, then the viewport's) — the `next_row` of an answer cut at
    /// [`SCREEN_ANSWER_MAX_BYTES`].
    pub start_row: usize,
}

/// `sessions.run` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunParams {
    /// Canonical session id.
    pub session_id: String,
    /// A POSIX shell command, run in a subshell at the session's prompt.
    pub command: String,
    /// The whole budget (default 600 s, at most 1 h); `None` = no limit (`timeout: 0`, as
    /// the phux seed's `--timeout 0`).
    pub timeout: Option<Duration>,
}

/// A session's size: `MIN_COLS..=MAX_DIMENSION` columns, `1..=MAX_DIMENSION` rows.
pub(crate) fn check_size(cols: u16, rows: u16) -> Result<(), ErrorBody> {
    if !(MIN_COLS..=MAX_DIMENSION).contains(&cols) || !(1..=MAX_DIMENSION).contains(&rows) {
        return Err(ErrorBody::invalid(format!(
            "cols must be {MIN_COLS}..={MAX_DIMENSION} and rows 1..={MAX_DIMENSION}"
        ))
        .with_remedy(format!(
            "pass a size the terminal can hold, e.g. --cols 80 --rows 24 (a double-width \
             character needs {MIN_COLS} columns)"
        )));
    }
    Ok(())
}

/// A session's screen: `cols x (rows + scrollback_lines)` cells at most
/// [`GRID_MAX_CELLS`], checked at create and resize.
pub fn check_grid(cols: u16, rows: u16, scrollback_lines: usize) -> Result<(), ErrorBody> {
    use crate::limits::GRID_MAX_CELLS;
    let cells = cols as u64 * (rows as u64 + scrollback_lines as u64);
    if cells <= GRID_MAX_CELLS {
        return Ok(());
    }
    let fits = (GRID_MAX_CELLS / cols.max(1) as u64).saturating_sub(rows as u64);
    Err(ErrorBody::invalid(format!(
        "a screen of {cols} columns x ({rows} rows + {scrollback_lines} scrollback lines) is \
         {cells} cells; a session's screen may have at most {GRID_MAX_CELLS}"
    ))
    .with_remedy(format!(
        "cols x (rows + scrollback_lines) must be at most {GRID_MAX_CELLS}: at {cols}x{rows} \
         up to {fits} scrollback lines fit (create --scrollback-lines), or use fewer columns"
    )))
}

/// The params objects of this family's methods as the wire carries them: what a client
/// builds (and serializes) and what the decoder reads before it validates.
pub(crate) mod wire {
    use super::*;
    use serde::Serialize;

    /// `scrollback` is a bool or a row count (`schemars` feature; the field's
    /// `serde(default)` keeps it optional in the schema).
    #[cfg(feature = "schemars")]
    fn scrollback_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": ["boolean", "integer", "null"] })
    }

    /// `sessions.snapshot`, `sessions.dump`, `sessions.inspect` (`cells`, `unwrap` and `tail` are the snapshot's).
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Read {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Scrollback rows to include: absent/false none, `true` or 0 all, N the newest N.
        #[cfg_attr(feature = "schemars", schemars(schema_with = "scrollback_schema"))]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub scrollback: Option<Value>,
        /// Per-cell text, style and OSC 133 semantics.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub cells: bool,
        /// Join soft-wrapped rows into logical lines (not with `cells`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub unwrap: bool,
        /// Only the last N non-blank lines.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub tail: Option<usize>,
        /// Skip the window's first N rows (history oldest first, then the viewport): the
        /// `next_row` of an answer cut at 16 MiB (`truncated_reason: "size_limit"`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub start_row: Option<usize>,
    }

    /// `sessions.run`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Run {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// One shell command line (≤ 4096 chars), typed at the shell prompt.
        pub command: String,
        /// Budget: seconds, or `30s`/`5m`/`1h` (default 600s, ≤ 3600s; 0 = no limit).
        #[cfg_attr(
            feature = "schemars",
            schemars(schema_with = "crate::duration::json_schema")
        )]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub timeout: Option<Value>,
    }

    /// `sessions.send-keys`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct SendKeys {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Key names (`Enter`, `Up`, `F5`), chords (`C-c`, `M-x`) or text words, in order.
        pub keys: Vec<String>,
        /// Every word is text, never a key name.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub literal: bool,
    }

    /// `sessions.paste`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Paste {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Text to paste (≤ 256 KiB); bracketed when the program asked for it. Does not press Enter.
        pub text: String,
    }

    /// `sessions.attach`.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Attach {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub session_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub cols: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub rows: Option<u16>,
    }

    /// `sessions.resize`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Resize {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Columns, 2..=1000.
        pub cols: u16,
        /// Rows, 1..=1000.
        pub rows: u16,
    }
}
