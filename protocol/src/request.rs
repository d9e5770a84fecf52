//! Typed requests: one params struct per method, decoded from `(method, params)` at the
//! socket edge, with the seed's validation beside each.
//!
//! Params objects reject unknown fields (`invalid_request`), so a typo or a field this
//! daemon does not implement can never be silently ignored. The request *envelope* ignores
//! unknown fields, as the brief requires.

use crate::duration::duration_from_json;
use crate::error::{ErrorBody, ErrorCode};
use crate::limits::*;
use crate::session::{
    Lifecycle, Location, RestartMode, RestartPolicy, SplitDirection, WorkflowState,
};
use crate::stream::{AllCondition, StreamFilter};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::time::Duration;

/// Every method this daemon implements besides the declaration verbs
/// ([`DECLARATION_METHODS`]); [`all_methods`] lists both.
pub const METHODS: &[&str] = &[
    "sessions.create",
    "sessions.get",
    "sessions.list",
    "sessions.update",
    "sessions.action",
    "sessions.cancel",
    "sessions.wait",
    "sessions.watch",
    "sessions.events",
    "sessions.register-current",
    "sessions.set-group",
    "sessions.set-parent",
    "stream.watch",
    "stream.wait",
    "event.emit",
    "sessions.archive",
    "sessions.restart",
    "profiles.list",
    "sessions.snapshot",
    "sessions.dump",
    "sessions.inspect",
    "sessions.run",
    "sessions.send-keys",
    "sessions.paste",
    "sessions.resize",
    "sessions.set-restart-policy",
    "sessions.attach",
    "daemon.status",
    "daemon.stats",
    "policy.check",
    "policy.sources",
];

/// A decoded, validated request.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `sessions.create`
    Create(Box<CreateParams>),
    /// `sessions.get`
    Get(SessionRef),
    /// `sessions.list`
    List(ListParams),
    /// `sessions.update`
    Update(UpdateParams),
    /// `sessions.action`
    Action(ActionParams),
    /// `sessions.cancel`
    Cancel(SessionRef),
    /// `sessions.wait`
    Wait(WaitParams),
    /// `sessions.register-current`
    RegisterCurrent(RegisterParams),
    /// `sessions.watch` (streaming)
    Watch(WatchParams),
    /// `sessions.events`
    Events(EventsParams),
    /// Every declaration verb (`sessions.declare-state`, `sessions.set-metadata`, ...).
    Declare(DeclareParams),
    /// `daemon.stats`: counts of live daemon objects, for diagnostics and leak tests.
    Stats,
    /// `sessions.set-group`: join a group, or leave with `group` absent/empty.
    SetGroup {
        /// Canonical session id.
        session_id: String,
        /// New group; `None` leaves the current one.
        group: Option<String>,
    },
    /// `sessions.set-parent`: set the parent edge, or clear it with an empty `parent`.
    SetParent {
        /// Canonical session id (the child).
        session_id: String,
        /// New parent; `None` detaches.
        parent: Option<String>,
    },
    /// `stream.watch` (streaming)
    StreamWatch(StreamWatchParams),
    /// `stream.wait`
    StreamWait(StreamWaitParams),
    /// `sessions.archive`: close the surface, keep the record; idempotent.
    Archive {
        /// Canonical session id.
        session_id: String,
        /// Why (≤ 1024 chars).
        reason: Option<String>,
    },
    /// `sessions.restart`: a fresh surface under the same session id.
    Restart {
        /// Canonical session id.
        session_id: String,
        /// Replace the recorded command; `None` replays the last one.
        command: Option<String>,
    },
    /// `profiles.list`: profile names and env key names (never values).
    ProfilesList,
    /// `sessions.snapshot`, `sessions.dump`, `sessions.inspect`.
    Read(ReadParams),
    /// `sessions.run`
    Run(RunParams),
    /// `sessions.send-keys`: encoded bytes are computed by the session (mode-dependent).
    SendKeys {
        /// Canonical session id.
        session_id: String,
        /// Parsed keys.
        keys: Vec<crate::keys::KeyToken>,
    },
    /// `sessions.paste`
    Paste {
        /// Canonical session id.
        session_id: String,
        /// Text, pasted as one block.
        text: String,
    },
    /// `sessions.attach` (streaming, binary after the first line): a person's terminal
    /// joined to the session's PTY.
    Attach {
        /// The session, or `None` for the focused one.
        session_id: Option<String>,
        /// The attaching terminal's size, applied to the PTY.
        size: Option<crate::screen::Size>,
    },
    /// `daemon.status`: version, pid, control dir, counts by lifecycle, bus cursor.
    Status,
    /// `policy.check`: the decision for (the request's caller, capability, target), with no
    /// side effect.
    PolicyCheck {
        /// The capability to evaluate.
        capability: crate::capability::Capability,
        /// The target, if any.
        target: Option<String>,
    },
    /// `policy.sources`: the active sources and the fate of the policy file.
    PolicySources,
    /// `debug.panic` (debug builds only): make a session's actor panic, to test recovery.
    #[cfg(debug_assertions)]
    DebugPanic(SessionRef),
    /// `sessions.set-restart-policy` (`None` = never).
    SetRestartPolicy {
        /// Canonical session id.
        session_id: String,
        /// The policy.
        policy: Option<RestartPolicy>,
    },
    /// `sessions.resize`
    Resize {
        /// Canonical session id.
        session_id: String,
        /// Requested size.
        size: crate::screen::Size,
    },
}

/// The restart-policy fields shared by `sessions.create` and `sessions.set-restart-policy`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRestart {
    restart: Option<RestartMode>,
    restart_exit_codes: Option<Vec<i32>>,
    max_restarts: Option<u32>,
    restart_window: Option<Value>,
    backoff: Option<String>,
}

/// Default `max_restarts`.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;
/// Default restart window.
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(600);
/// Default backoff range.
pub const DEFAULT_BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

impl RawRestart {
    fn is_empty(&self) -> bool {
        self.restart.is_none()
            && self.restart_exit_codes.is_none()
            && self.max_restarts.is_none()
            && self.restart_window.is_none()
            && self.backoff.is_none()
    }

    /// The policy, or `None` for `never`. Tuning without a mode is refused.
    fn policy(self) -> Result<Option<RestartPolicy>, ErrorBody> {
        let mode = match self.restart {
            None if self.is_empty() => return Ok(None),
            None => {
                return Err(ErrorBody::invalid(
                    "restart_exit_codes, max_restarts, restart_window and backoff need restart",
                ))
            }
            Some(RestartMode::Never) => return Ok(None),
            Some(m) => m,
        };
        let exit_codes = self.restart_exit_codes.unwrap_or_else(|| vec![0]);
        if exit_codes.len() > 256 || exit_codes.iter().any(|c| !(0..=255).contains(c)) {
            return Err(ErrorBody::invalid(
                "restart_exit_codes are 0..=255, at most 256",
            ));
        }
        let max_restarts = self.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS);
        if max_restarts == 0 || max_restarts > 10_000 {
            return Err(ErrorBody::invalid("max_restarts must be 1..=10000"));
        }
        let window = match &self.restart_window {
            None | Some(Value::Null) => DEFAULT_RESTART_WINDOW,
            Some(v) => duration_from_json(v).map_err(ErrorBody::invalid)?,
        };
        if window.is_zero() || window > Duration::from_secs(7 * 24 * 3600) {
            return Err(ErrorBody::invalid(
                "restart_window must be between 1s and 7 days",
            ));
        }
        let (min, max) = match &self.backoff {
            None => DEFAULT_BACKOFF,
            Some(text) => {
                let (a, b) = text
                    .split_once("..")
                    .ok_or_else(|| ErrorBody::invalid("backoff is MIN..MAX, e.g. 1s..1m"))?;
                let min = crate::duration::parse_duration(a).map_err(ErrorBody::invalid)?;
                let max = crate::duration::parse_duration(b).map_err(ErrorBody::invalid)?;
                (min, max)
            }
        };
        if min.is_zero() || min > max || max > Duration::from_secs(3600) {
            return Err(ErrorBody::invalid("backoff needs 0 < MIN <= MAX <= 1h"));
        }
        Ok(Some(RestartPolicy {
            mode,
            exit_codes,
            max_restarts,
            window_secs: window.as_secs().max(1),
            backoff_min_ms: min.as_millis() as u64,
            backoff_max_ms: max.as_millis() as u64,
        }))
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
}

/// A text condition for `sessions.wait` / `sessions.run`.
#[derive(Debug, Clone)]
pub enum TextPattern {
    /// A substring.
    Literal(String),
    /// A regex (validated).
    Regex(regex::Regex),
}

impl PartialEq for TextPattern {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TextPattern::Literal(a), TextPattern::Literal(b)) => a == b,
            (TextPattern::Regex(a), TextPattern::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl Eq for TextPattern {}

impl TextPattern {
    /// Whether a logical line matches.
    pub fn matches(&self, line: &str) -> bool {
        match self {
            TextPattern::Literal(s) => line.contains(s.as_str()),
            TextPattern::Regex(r) => r.is_match(line),
        }
    }
}

/// A text wait: the pattern, and whether lines holding OSC 133 input cells are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextWait {
    /// What a logical line must contain or match.
    pub pattern: TextPattern,
    /// `output_only`: ignore logical lines that hold a cell the program wrote between
    /// OSC 133 `B` and `C` (typed input). With no such marks it filters nothing.
    pub output_only: bool,
}

/// Compile a `--regex` (bounded size), or refuse it.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, ErrorBody> {
    if pattern.len() > PATTERN_MAX_BYTES {
        return Err(ErrorBody::invalid("regex is too long"));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ErrorBody::invalid(format!("invalid regex: {e}")))
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

impl Call {
    /// Decode and validate `params` for `method`. `params: null`/absent means `{}`.
    pub fn decode(method: &str, params: Option<Value>) -> Result<Call, ErrorBody> {
        let params = match params {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(ErrorBody::invalid("params must be a JSON object")),
        };
        // Backstop for any stored value a per-field check does not name: nothing deeper
        // than the params object, a map, and the deepest storable value.
        let depth = json_depth(&params);
        if depth > PARAMS_MAX_DEPTH {
            return Err(ErrorBody::invalid(format!(
                "params nest {depth} levels deep; a value may nest at most {JSON_MAX_DEPTH}"
            ))
            .with_remedy(format!(
                "flatten the deepest value to at most {JSON_MAX_DEPTH} nested arrays/objects; \
                 nothing was changed"
            )));
        }
        let call = match method {
            "sessions.create" => Call::Create(Box::new(CreateParams::decode(params)?)),
            "sessions.get" => Call::Get(SessionRef::decode(params)?),
            "sessions.list" => Call::List(ListParams::decode(params)?),
            "sessions.update" => Call::Update(UpdateParams::decode(params)?),
            "sessions.action" => Call::Action(ActionParams::decode(params)?),
            "sessions.cancel" => Call::Cancel(SessionRef::decode(params)?),
            "sessions.wait" => Call::Wait(WaitParams::decode(params)?),
            "sessions.register-current" => Call::RegisterCurrent(decode(params)?),
            "sessions.watch" => Call::Watch(WatchParams::decode(params)?),
            "sessions.events" => Call::Events(EventsParams::decode(params)?),
            "daemon.stats" => {
                let _: Empty = decode(params)?;
                Call::Stats
            }
            "sessions.set-group" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    group: Option<String>,
                }
                let raw: Raw = decode(params)?;
                let group = raw.group.filter(|g| !g.is_empty());
                if let Some(g) = &group {
                    validate_group(g)?;
                }
                Call::SetGroup {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    group,
                }
            }
            "sessions.set-parent" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    parent: Option<String>,
                }
                let raw: Raw = decode(params)?;
                let session_id = parse_session_id("session_id", &raw.session_id)?;
                let parent = match raw.parent.filter(|p| !p.is_empty()) {
                    Some(p) => Some(parse_session_id("parent", &p)?),
                    None => None,
                };
                Call::SetParent { session_id, parent }
            }
            "stream.watch" => Call::StreamWatch(StreamWatchParams::decode(params)?),
            "stream.wait" => Call::StreamWait(StreamWaitParams::decode(params)?),
            "event.emit" => Call::Declare(DeclareParams::decode_event_emit(params)?),
            "sessions.archive" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    reason: Option<String>,
                }
                let raw: Raw = decode(params)?;
                if let Some(r) = &raw.reason {
                    check_chars("reason", r, SUMMARY_MAX_CHARS)?;
                }
                Call::Archive {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    reason: raw.reason,
                }
            }
            "sessions.restart" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    command: Option<String>,
                    #[serde(default)]
                    last_command: bool,
                }
                let raw: Raw = decode(params)?;
                if raw.last_command && raw.command.is_some() {
                    return Err(ErrorBody::invalid(
                        "sessions.restart takes command or last_command, not both",
                    ));
                }
                if let Some(c) = &raw.command {
                    validate_command(c)?;
                }
                Call::Restart {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    command: raw.command,
                }
            }
            "profiles.list" => {
                let _: Empty = decode(params)?;
                Call::ProfilesList
            }
            "sessions.snapshot" | "sessions.dump" | "sessions.inspect" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    scrollback: Option<Value>,
                    #[serde(default)]
                    cells: bool,
                    #[serde(default)]
                    unwrap: bool,
                    tail: Option<usize>,
                }
                let raw: Raw = decode(params)?;
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
                Call::Read(ReadParams {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    kind,
                    scrollback,
                    cells: raw.cells,
                    unwrap: raw.unwrap,
                    tail: raw.tail.map(|t| t.min(MAX_SCROLLBACK_LINES)),
                })
            }
            "sessions.run" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    command: String,
                    timeout: Option<Value>,
                }
                let raw: Raw = decode(params)?;
                validate_command(&raw.command)?;
                if raw.command.contains('\n') || raw.command.contains('\r') {
                    return Err(ErrorBody::invalid("run takes a one-line command"));
                }
                Call::Run(RunParams {
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
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    keys: Vec<String>,
                    #[serde(default)]
                    literal: bool,
                }
                let raw: Raw = decode(params)?;
                let total: usize = raw.keys.iter().map(String::len).sum();
                if total > INPUT_MAX_BYTES || raw.keys.len() > 4096 {
                    return Err(ErrorBody::invalid("too many keys"));
                }
                Call::SendKeys {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    keys: crate::keys::parse_keys(&raw.keys, raw.literal)?,
                }
            }
            "sessions.paste" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    text: String,
                }
                let raw: Raw = decode(params)?;
                if raw.text.len() > INPUT_MAX_BYTES {
                    return Err(ErrorBody::invalid(format!(
                        "text is {} bytes; the limit is {INPUT_MAX_BYTES}",
                        raw.text.len()
                    )));
                }
                Call::Paste {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    text: raw.text,
                }
            }
            "policy.check" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    capability: String,
                    target: Option<String>,
                }
                let raw: Raw = decode(params)?;
                if let Some(t) = &raw.target {
                    check_chars("target", t, 256)?;
                }
                Call::PolicyCheck {
                    capability: crate::capability::Capability::parse(&raw.capability)?,
                    target: raw.target,
                }
            }
            "policy.sources" => {
                let _: Empty = decode(params)?;
                Call::PolicySources
            }
            // Fault injection exists only in debug builds: a release build answers
            // `unknown_method`.
            #[cfg(debug_assertions)]
            "debug.panic" => Call::DebugPanic(SessionRef::decode(params)?),
            "daemon.status" => {
                let _: Empty = decode(params)?;
                Call::Status
            }
            "sessions.attach" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: Option<String>,
                    cols: Option<u16>,
                    rows: Option<u16>,
                }
                let raw: Raw = decode(params)?;
                let size = match (raw.cols, raw.rows) {
                    (Some(cols), Some(rows))
                        if (1..=MAX_DIMENSION).contains(&cols)
                            && (1..=MAX_DIMENSION).contains(&rows) =>
                    {
                        // A terminal narrower than the grid supports is drawn at the minimum.
                        Some(crate::screen::Size {
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
                Call::Attach {
                    session_id: match raw.session_id {
                        Some(id) => Some(parse_session_id("session_id", &id)?),
                        None => None,
                    },
                    size,
                }
            }
            "sessions.set-restart-policy" => {
                let mut map = match params {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                let session_id = match map.remove("session_id") {
                    Some(Value::String(s)) => parse_session_id("session_id", &s)?,
                    _ => return Err(ErrorBody::invalid("session_id is required")),
                };
                let raw: RawRestart = decode(Value::Object(map))?;
                if raw.restart.is_none() {
                    return Err(ErrorBody::invalid(
                        "sessions.set-restart-policy needs restart (never removes the policy)",
                    ));
                }
                Call::SetRestartPolicy {
                    session_id,
                    policy: raw.policy()?,
                }
            }
            "sessions.resize" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    session_id: String,
                    cols: u16,
                    rows: u16,
                }
                let raw: Raw = decode(params)?;
                check_size(raw.cols, raw.rows)?;
                Call::Resize {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    size: crate::screen::Size {
                        cols: raw.cols,
                        rows: raw.rows,
                    },
                }
            }
            m if m.starts_with("sessions.") && Declaration::is_method(m) => {
                Call::Declare(DeclareParams::decode(m, params)?)
            }
            other => {
                return Err(ErrorBody::new(
                    ErrorCode::UnknownMethod,
                    format!("unknown method {:?}", truncate(other, 64)),
                )
                .with_remedy(format!(
                    "known methods: {}",
                    all_methods().collect::<Vec<_>>().join(", ")
                )))
            }
        };
        Ok(call)
    }

    /// Whether the request may hold its connection for long: a stream (`sessions.watch`,
    /// `stream.watch`, `sessions.attach`) or a wait (`sessions.wait`, `stream.wait`,
    /// `sessions.run`). These share a capped number of slots
    /// ([`crate::limits::MAX_LONG_LIVED_CONNECTIONS`]).
    pub fn is_long_lived(&self) -> bool {
        matches!(
            self,
            Call::Watch(_)
                | Call::StreamWatch(_)
                | Call::Attach { .. }
                | Call::Wait(_)
                | Call::StreamWait(_)
                | Call::Run(_)
        )
    }

    /// The wire method name.
    pub fn method(&self) -> &'static str {
        match self {
            Call::Create(_) => "sessions.create",
            Call::Get(_) => "sessions.get",
            Call::List(_) => "sessions.list",
            Call::Update(_) => "sessions.update",
            Call::Action(_) => "sessions.action",
            Call::Cancel(_) => "sessions.cancel",
            Call::Wait(_) => "sessions.wait",
            Call::RegisterCurrent(_) => "sessions.register-current",
            Call::Watch(_) => "sessions.watch",
            Call::Events(_) => "sessions.events",
            Call::Declare(d) => d.declaration.method(),
            Call::Stats => "daemon.stats",
            Call::SetGroup { .. } => "sessions.set-group",
            Call::SetParent { .. } => "sessions.set-parent",
            Call::StreamWatch(_) => "stream.watch",
            Call::StreamWait(_) => "stream.wait",
            Call::Archive { .. } => "sessions.archive",
            Call::Restart { .. } => "sessions.restart",
            Call::ProfilesList => "profiles.list",
            Call::Read(p) => match p.kind {
                ReadKind::Snapshot => "sessions.snapshot",
                ReadKind::Dump => "sessions.dump",
                ReadKind::Inspect => "sessions.inspect",
            },
            Call::Run(_) => "sessions.run",
            Call::SendKeys { .. } => "sessions.send-keys",
            Call::Paste { .. } => "sessions.paste",
            Call::Resize { .. } => "sessions.resize",
            Call::SetRestartPolicy { .. } => "sessions.set-restart-policy",
            Call::Attach { .. } => "sessions.attach",
            Call::Status => "daemon.status",
            Call::PolicyCheck { .. } => "policy.check",
            Call::PolicySources => "policy.sources",
            #[cfg(debug_assertions)]
            Call::DebugPanic(_) => "debug.panic",
        }
    }
}

fn decode<T: DeserializeOwned>(params: Value) -> Result<T, ErrorBody> {
    T::deserialize(&params).map_err(|e| {
        ErrorBody::invalid(format!("bad params: {}", decode_error_message(&e, &params)))
            .with_remedy(
                "send the fields the method takes, each of its type: `maxx <noun> <verb> --help` \
                 and docs/protocol.md list them",
            )
    })
}

/// A serde decode error as a message that never quotes a value the caller sent (an `env`
/// entry, a profile's env, a token may be a secret): `invalid type: string "API_KEY=..."`
/// becomes `env: invalid type: a string, expected a sequence`. The field is named when the
/// offending value can be found under exactly one top-level key of `params`; the expected
/// type is kept. Field names themselves (`unknown field`) are kept: they are names, not
/// values.
pub fn decode_error_message(e: &serde_json::Error, params: &Value) -> String {
    let text = e.to_string();
    let field = locate_field(&text, params);
    let text = redact_serde_values(&text);
    match field {
        Some(f) => format!("{}: {text}", truncate(&f, 64)),
        None => text,
    }
}

/// `text` (a serde error message) with every quoted value replaced by its kind.
pub fn redact_serde_values(text: &str) -> String {
    use std::sync::OnceLock;
    static PATTERNS: OnceLock<Vec<(regex::Regex, &'static str)>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            // serde writes a string (or char) with Rust's Debug quoting: `string "a\"b"`.
            (r#"string "(?:[^"\\]|\\.)*""#, "a string"),
            (r#"character '(?:[^'\\]|\\.)*'"#, "a character"),
            (r"integer `[^`]*`", "an integer"),
            (r"floating point `[^`]*`", "a number"),
            (r"boolean `[^`]*`", "a boolean"),
            (r"unknown variant `[^`]*`", "unknown variant"),
            (r"byte array", "bytes"),
        ]
        .into_iter()
        .map(|(p, r)| (regex::Regex::new(p).expect("static pattern"), r))
        .collect()
    });
    let mut out = text.to_string();
    for (re, with) in patterns {
        out = re.replace_all(&out, *with).into_owned();
    }
    out
}

/// The top-level key of `params` holding the value a serde message complains about, when
/// exactly one does.
fn locate_field(text: &str, params: &Value) -> Option<String> {
    fn holds(v: &Value, text: &str) -> bool {
        match v {
            Value::String(s) => text.contains(&format!("string {s:?}")),
            Value::Number(n) => {
                text.contains(&format!("integer `{n}`"))
                    || (n.is_f64() && text.contains("floating point `"))
            }
            Value::Bool(b) => text.contains(&format!("boolean `{b}`")),
            Value::Null => text.contains("invalid type: null"),
            Value::Array(a) => {
                text.contains("invalid type: sequence") || a.iter().any(|x| holds(x, text))
            }
            Value::Object(m) => {
                text.contains("invalid type: map") || m.values().any(|x| holds(x, text))
            }
        }
    }
    let Value::Object(map) = params else {
        return None;
    };
    if !(text.starts_with("invalid type") || text.starts_with("invalid value")) {
        return None;
    }
    let mut found = map.iter().filter(|(_, v)| holds(v, text)).map(|(k, _)| k);
    match (found.next(), found.next()) {
        (Some(k), None) => Some(k.clone()),
        _ => None,
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// A session id in canonical form (uppercase hyphenated UUID).
pub fn parse_session_id(field: &str, text: &str) -> Result<String, ErrorBody> {
    let bytes = text.as_bytes();
    let ok = bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if !ok {
        return Err(ErrorBody::invalid(format!(
            "{field} must be a session UUID, got {:?}",
            truncate(text, 64)
        )));
    }
    Ok(text.to_ascii_uppercase())
}

/// `{session_id}`: the params of `sessions.get` and `sessions.cancel`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    /// Canonical session id.
    pub session_id: String,
}

impl SessionRef {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            session_id: String,
        }
        let raw: Raw = decode(params)?;
        Ok(SessionRef {
            session_id: parse_session_id("session_id", &raw.session_id)?,
        })
    }
}

/// Check a `chars`-bounded string field.
fn check_chars(field: &str, value: &str, max: usize) -> Result<(), ErrorBody> {
    let n = value.chars().count();
    if n > max {
        return Err(ErrorBody::invalid(format!(
            "{field} is {n} characters; the limit is {max}"
        )));
    }
    Ok(())
}

fn check_no_nul(field: &str, value: &str) -> Result<(), ErrorBody> {
    if value.contains('\0') {
        return Err(ErrorBody::invalid(format!("{field} must not contain NUL")));
    }
    Ok(())
}

/// Validate a `title` (≤ 256 chars).
pub fn validate_title(title: &str) -> Result<(), ErrorBody> {
    check_chars("title", title, TITLE_MAX_CHARS)
}

/// Validate a `status` (≤ 128 chars).
pub fn validate_status(status: &str) -> Result<(), ErrorBody> {
    check_chars("status", status, STATUS_MAX_CHARS)
}

/// Validate a `command` (≤ 4096 chars, non-blank, no NUL).
pub fn validate_command(command: &str) -> Result<(), ErrorBody> {
    check_chars("command", command, COMMAND_MAX_CHARS)?;
    check_no_nul("command", command)?;
    if command.trim().is_empty() {
        return Err(ErrorBody::invalid("command must not be blank"));
    }
    Ok(())
}

/// Validate a metadata key: 1..=64 chars of `[A-Za-z0-9_.-]`.
pub fn validate_metadata_key(key: &str) -> Result<(), ErrorBody> {
    let n = key.chars().count();
    if n == 0 || n > METADATA_KEY_MAX_CHARS {
        return Err(ErrorBody::invalid(format!(
            "metadata key must be 1..={METADATA_KEY_MAX_CHARS} characters, got {n}"
        )));
    }
    if let Some(bad) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(ErrorBody::invalid(format!(
            "metadata key {:?} has {bad:?}; keys match [A-Za-z0-9_.-]",
            truncate(key, 64)
        )));
    }
    Ok(())
}

/// Compact-JSON size of a value, in bytes.
pub fn json_size(value: &Value) -> usize {
    serde_json::to_vec(value)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
}

/// How deep a JSON value nests: a scalar 0, `[]`/`{}` 1, `[[1]]` 2. Iterative, so a hostile
/// value cannot exhaust the stack here.
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    deepest
}

/// The one nesting bound on a stored value ([`JSON_MAX_DEPTH`]): whatever the daemon
/// acknowledges, its durable registry can read back.
pub fn validate_depth(field: &str, value: &Value) -> Result<(), ErrorBody> {
    let depth = json_depth(value);
    if depth > JSON_MAX_DEPTH {
        return Err(ErrorBody::invalid(format!(
            "{field} nests {depth} levels deep; the limit is {JSON_MAX_DEPTH}"
        ))
        .with_remedy(format!(
            "flatten {field} to at most {JSON_MAX_DEPTH} nested arrays/objects (or send it \
             as a JSON string); nothing was changed"
        )));
    }
    Ok(())
}

/// Validate one metadata value (≤ 2048 bytes of compact JSON, ≤ [`JSON_MAX_DEPTH`] deep).
pub fn validate_metadata_value(key: &str, value: &Value) -> Result<(), ErrorBody> {
    validate_depth(
        &format!("metadata value for {:?}", truncate(key, 64)),
        value,
    )?;
    let size = json_size(value);
    if size > METADATA_VALUE_MAX_BYTES {
        return Err(ErrorBody::invalid(format!(
            "metadata value for {key:?} is {size} bytes; the limit is {METADATA_VALUE_MAX_BYTES}"
        )));
    }
    Ok(())
}

/// Validate a whole metadata map (≤ 32 keys, each key and value valid, ≤ 16384 bytes).
pub fn validate_metadata_map(map: &Map<String, Value>) -> Result<(), ErrorBody> {
    if map.len() > METADATA_MAX_KEYS {
        return Err(ErrorBody::invalid(format!(
            "metadata has {} keys; the limit is {METADATA_MAX_KEYS}",
            map.len()
        )));
    }
    for (k, v) in map {
        validate_metadata_key(k)?;
        validate_metadata_value(k, v)?;
    }
    let size = json_size(&Value::Object(map.clone()));
    if size > METADATA_MAP_MAX_BYTES {
        return Err(ErrorBody::invalid(format!(
            "metadata is {size} bytes; the limit is {METADATA_MAP_MAX_BYTES}"
        )));
    }
    Ok(())
}

/// Validate `env` entries (≤ 256 `KEY=VALUE`, keys `[A-Za-z0-9_]+`) and split them.
pub fn validate_env(env: &[String]) -> Result<Vec<(String, String)>, ErrorBody> {
    if env.len() > ENV_MAX_ENTRIES {
        return Err(ErrorBody::invalid(format!(
            "env has {} entries; the limit is {ENV_MAX_ENTRIES}",
            env.len()
        )));
    }
    env.iter()
        .enumerate()
        .map(|(i, entry)| {
            // Never echo an env value: it may be a secret.
            let Some((key, value)) = entry.split_once('=') else {
                return Err(ErrorBody::invalid(format!(
                    "env entry #{i} is not KEY=VALUE"
                )));
            };
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(ErrorBody::invalid(format!(
                    "env entry #{i}: key must match [A-Za-z0-9_]+"
                )));
            }
            if entry.len() > ENV_ENTRY_MAX_BYTES || entry.contains('\0') {
                return Err(ErrorBody::invalid(format!(
                    "env entry #{i} ({key}) is over {ENV_ENTRY_MAX_BYTES} bytes or contains NUL"
                )));
            }
            Ok((key.to_string(), value.to_string()))
        })
        .collect()
}

/// `sessions.create` params.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CreateParams {
    /// Caller-supplied title (≤ 256 chars).
    pub title: Option<String>,
    /// Working directory; the daemon's home when absent.
    pub cwd: Option<String>,
    /// Command run with `/bin/sh -c`; a login shell when absent.
    pub command: Option<String>,
    /// Extra environment for the child, applied and never stored.
    pub env: Vec<(String, String)>,
    /// Create-time metadata (rides on `tabs:spawn`).
    pub metadata: Map<String, Value>,
    /// Caller-owned status.
    pub status: Option<String>,
    /// `tab` | `window` | `split`.
    pub location: Location,
    /// For `split`: the session whose surface is split (required there, rejected elsewhere).
    pub split_target: Option<String>,
    /// For `split`: the edge (default right; rejected on tab/window).
    pub split_direction: Option<SplitDirection>,
    /// Whether the new session takes focus. Default: true for tab/window, false for split.
    pub focus: bool,
    /// PTY columns.
    pub cols: u16,
    /// PTY rows.
    pub rows: u16,
    /// Declared agent type (recorded as an `agent-type` audit entry).
    pub agent_type: Option<String>,
    /// Declared result contract.
    pub result_schema: Option<Value>,
    /// Group to join at create (needs groups:create).
    pub group: Option<String>,
    /// Parent session (needs groups:create; must exist).
    pub parent: Option<String>,
    /// Profile to start from; explicit fields override it.
    pub profile: Option<String>,
    /// History lines of the screen model (default 10,000).
    pub scrollback_lines: Option<usize>,
    /// Opt-in automatic restart (needs tabs:restart too).
    pub restart_policy: Option<RestartPolicy>,
    /// Which fields the caller set explicitly (so a profile does not override them).
    pub explicit: ExplicitFields,
}

/// Which profile-overridable create fields the caller supplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExplicitFields {
    /// `command` was given.
    pub command: bool,
    /// `agent_type` was given.
    pub agent_type: bool,
    /// `title` was given.
    pub title: bool,
    /// `cwd` was given.
    pub cwd: bool,
}

impl CreateParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            title: Option<String>,
            cwd: Option<String>,
            command: Option<String>,
            #[serde(default)]
            env: Vec<String>,
            metadata: Option<Map<String, Value>>,
            status: Option<String>,
            location: Option<Location>,
            split_target: Option<String>,
            split_direction: Option<SplitDirection>,
            focus: Option<bool>,
            cols: Option<u16>,
            rows: Option<u16>,
            agent_type: Option<String>,
            result_schema: Option<Value>,
            group: Option<String>,
            parent: Option<String>,
            profile: Option<String>,
            scrollback_lines: Option<usize>,
            restart: Option<RestartMode>,
            restart_exit_codes: Option<Vec<i32>>,
            max_restarts: Option<u32>,
            restart_window: Option<Value>,
            backoff: Option<String>,
        }
        let raw: Raw = decode(params)?;
        let restart_policy = RawRestart {
            restart: raw.restart,
            restart_exit_codes: raw.restart_exit_codes.clone(),
            max_restarts: raw.max_restarts,
            restart_window: raw.restart_window.clone(),
            backoff: raw.backoff.clone(),
        }
        .policy()?;
        if raw
            .scrollback_lines
            .is_some_and(|n| n > MAX_SCROLLBACK_LINES)
        {
            return Err(ErrorBody::invalid(format!(
                "scrollback_lines is capped at {MAX_SCROLLBACK_LINES}"
            )));
        }
        if let Some(p) = &raw.profile {
            check_chars("profile", p, 128)?;
        }
        let explicit = ExplicitFields {
            command: raw.command.is_some(),
            agent_type: raw.agent_type.is_some(),
            title: raw.title.is_some(),
            cwd: raw.cwd.is_some(),
        };
        let group = raw.group.filter(|g| !g.is_empty());
        if let Some(g) = &group {
            validate_group(g)?;
        }
        let parent = match raw.parent.filter(|p| !p.is_empty()) {
            Some(p) => Some(parse_session_id("parent", &p)?),
            None => None,
        };
        if let Some(a) = &raw.agent_type {
            validate_agent_type(a)?;
        }
        if let Some(s) = &raw.result_schema {
            validate_result_schema(s)?;
        }
        if let Some(t) = &raw.title {
            validate_title(t)?;
        }
        if let Some(s) = &raw.status {
            validate_status(s)?;
        }
        if let Some(c) = &raw.command {
            validate_command(c)?;
        }
        if let Some(cwd) = &raw.cwd {
            check_no_nul("cwd", cwd)?;
            if cwd.len() > CWD_MAX_BYTES || !cwd.starts_with('/') {
                return Err(ErrorBody::invalid(
                    "cwd must be an absolute path of at most 4096 bytes",
                ));
            }
        }
        let env = validate_env(&raw.env)?;
        let metadata = raw.metadata.unwrap_or_default();
        validate_metadata_map(&metadata)?;
        let location = raw.location.unwrap_or_default();
        let split_target = match (location, raw.split_target) {
            (Location::Split, Some(t)) => Some(parse_session_id("split_target", &t)?),
            (Location::Split, None) => {
                return Err(ErrorBody::invalid("location split requires split_target"))
            }
            (_, Some(_)) => {
                return Err(ErrorBody::invalid(
                    "split_target is only valid with location split",
                ))
            }
            (_, None) => None,
        };
        let split_direction = match (location, raw.split_direction) {
            (Location::Split, d) => Some(d.unwrap_or_default()),
            (_, Some(_)) => {
                return Err(ErrorBody::invalid(
                    "split_direction is only valid with location split",
                ))
            }
            (_, None) => None,
        };
        let cols = raw.cols.unwrap_or(DEFAULT_COLS);
        let rows = raw.rows.unwrap_or(DEFAULT_ROWS);
        check_size(cols, rows)?;
        Ok(CreateParams {
            title: raw.title,
            cwd: raw.cwd,
            command: raw.command,
            env,
            metadata,
            status: raw.status,
            location,
            split_target,
            split_direction,
            focus: raw.focus.unwrap_or(location != Location::Split),
            cols,
            rows,
            agent_type: raw.agent_type,
            result_schema: raw.result_schema,
            group,
            parent,
            profile: raw.profile,
            scrollback_lines: raw.scrollback_lines,
            restart_policy,
            explicit,
        })
    }
}

/// `{}`: methods without params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// One `metadata_filter` constraint: the key is present, and (if `value` is given) its
/// value, compared as a string, equals it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataFilter {
    /// Key that must be present.
    pub key: String,
    /// Value it must equal, compared as a string (non-strings as compact JSON).
    #[serde(default)]
    pub value: Option<Value>,
}

/// A metadata value as the filter compares it: a string as itself, anything else as
/// compact JSON.
pub fn filter_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl MetadataFilter {
    /// Whether a metadata map satisfies this constraint.
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        match (metadata.get(&self.key), &self.value) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(have), Some(want)) => filter_string(have) == filter_string(want),
        }
    }
}

/// `sessions.list` params.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Constraints that must all hold (AND).
    #[serde(default)]
    pub metadata_filter: Vec<MetadataFilter>,
    /// Only members of this group.
    #[serde(default)]
    pub group: Option<String>,
    /// Only children of this session.
    #[serde(default)]
    pub parent: Option<String>,
}

impl ListParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        let p: ListParams = decode(params)?;
        if p.metadata_filter.len() > METADATA_FILTER_MAX {
            return Err(ErrorBody::invalid(format!(
                "at most {METADATA_FILTER_MAX} metadata_filter constraints"
            )));
        }
        for f in &p.metadata_filter {
            validate_metadata_key(&f.key)?;
        }
        if let Some(g) = &p.group {
            validate_group(g)?;
        }
        let parent = match &p.parent {
            Some(id) => Some(parse_session_id("parent", id)?),
            None => None,
        };
        Ok(ListParams { parent, ..p })
    }
}

/// `sessions.update` params: status and/or a metadata merge, nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateParams {
    /// Canonical session id.
    pub session_id: String,
    /// New caller-owned status.
    pub status: Option<String>,
    /// Keys to add or overwrite.
    pub metadata: Option<Map<String, Value>>,
}

impl UpdateParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        if let Value::Object(map) = &params {
            if let Some(bad) = map
                .keys()
                .find(|k| !matches!(k.as_str(), "session_id" | "status" | "metadata"))
            {
                return Err(ErrorBody::invalid(format!(
                    "sessions.update accepts only status and metadata; {:?} is not caller-settable",
                    truncate(bad, 64)
                )));
            }
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            session_id: String,
            status: Option<String>,
            metadata: Option<Map<String, Value>>,
        }
        let raw: Raw = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        if raw.status.is_none() && raw.metadata.is_none() {
            return Err(ErrorBody::invalid(
                "sessions.update needs status and/or metadata",
            ));
        }
        if let Some(s) = &raw.status {
            validate_status(s)?;
        }
        if let Some(m) = &raw.metadata {
            validate_metadata_map(m)?;
        }
        Ok(UpdateParams {
            session_id,
            status: raw.status,
            metadata: raw.metadata,
        })
    }
}

/// The `action` of `sessions.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Make this the focused session.
    Focus,
    /// Paste `input` (bracketed when the app enabled mode 2004). Does not submit.
    Input,
    /// Paste `input`, then press Enter.
    Submit,
    /// Close the surface (idempotent).
    Cancel,
    /// Close the surface (idempotent).
    Close,
    /// Ctrl-C through the tty, or `signal` to the foreground process group.
    Interrupt,
}

/// A signal `interrupt` may deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptSignal {
    /// SIGINT
    Int,
    /// SIGTERM
    Term,
    /// SIGKILL
    Kill,
    /// SIGHUP
    Hup,
    /// SIGQUIT
    Quit,
}

impl InterruptSignal {
    /// Whether the signal ends the program rather than interrupting it: everything but
    /// SIGINT. Such an interrupt is a close and needs `tabs:close` as well as `keys:press`.
    pub fn ends_the_program(self) -> bool {
        !matches!(self, InterruptSignal::Int)
    }

    /// Parse `SIGTERM`, `TERM` or `term`.
    pub fn parse(text: &str) -> Result<Self, ErrorBody> {
        let upper = text.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        Ok(match name {
            "INT" => InterruptSignal::Int,
            "TERM" => InterruptSignal::Term,
            "KILL" => InterruptSignal::Kill,
            "HUP" => InterruptSignal::Hup,
            "QUIT" => InterruptSignal::Quit,
            _ => {
                return Err(ErrorBody::invalid(format!(
                    "signal must be one of SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGQUIT; got {:?}",
                    truncate(text, 32)
                )))
            }
        })
    }

    /// The conventional name, e.g. `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            InterruptSignal::Int => "SIGINT",
            InterruptSignal::Term => "SIGTERM",
            InterruptSignal::Kill => "SIGKILL",
            InterruptSignal::Hup => "SIGHUP",
            InterruptSignal::Quit => "SIGQUIT",
        }
    }
}

/// `sessions.action` params.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionParams {
    /// Canonical session id.
    pub session_id: String,
    /// What to do.
    pub action: ActionKind,
    /// Text for `input`/`submit`.
    pub input: Option<String>,
    /// Signal for `interrupt`.
    pub signal: Option<InterruptSignal>,
}

impl ActionParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            session_id: String,
            action: ActionKind,
            input: Option<String>,
            signal: Option<String>,
        }
        let raw: Raw = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        match raw.action {
            ActionKind::Input if raw.input.is_none() => {
                return Err(ErrorBody::invalid("action input requires input"))
            }
            ActionKind::Input | ActionKind::Submit => {}
            _ if raw.input.is_some() => {
                return Err(ErrorBody::invalid(
                    "input is only valid with action input or submit",
                ))
            }
            _ => {}
        }
        if let Some(input) = &raw.input {
            if input.len() > INPUT_MAX_BYTES {
                return Err(ErrorBody::invalid(format!(
                    "input is {} bytes; the limit is {INPUT_MAX_BYTES}",
                    input.len()
                )));
            }
        }
        let signal = match (raw.action, raw.signal) {
            (ActionKind::Interrupt, Some(s)) => Some(InterruptSignal::parse(&s)?),
            (_, Some(_)) => {
                return Err(ErrorBody::invalid(
                    "signal is only valid with action interrupt",
                ))
            }
            (_, None) => None,
        };
        Ok(ActionParams {
            session_id,
            action: raw.action,
            input: raw.input,
            signal,
        })
    }
}

/// What `sessions.wait` waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitCondition {
    /// `--lifecycle L`: level-triggered on the Maxx-owned lifecycle.
    Lifecycle(Lifecycle),
    /// `--state S`: level-triggered on the declared status.
    State(String),
    /// `--event E`: edge-triggered on a new `emit-event` named E, after audit seq `since`
    /// (default: the last seq when the wait begins).
    Event {
        /// Event name.
        name: String,
        /// Baseline audit seq; `None` = the current last seq.
        since: Option<u64>,
    },
    /// `--until TEXT` / `--regex RE` (`--output-only`): a logical screen line matches
    /// (level-triggered on the screen; gated by output:read).
    Text(TextWait),
}

/// `sessions.wait` params.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitParams {
    /// Canonical session id.
    pub session_id: String,
    /// The condition.
    pub condition: WaitCondition,
    /// How long to wait (default 30 s, at most 1 h).
    pub timeout: Duration,
}

impl WaitParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            session_id: String,
            lifecycle: Option<Lifecycle>,
            state: Option<String>,
            event: Option<String>,
            since: Option<u64>,
            timeout: Option<Value>,
            until: Option<String>,
            regex: Option<String>,
            #[serde(default)]
            output_only: bool,
        }
        let raw: Raw = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        let given = [
            raw.lifecycle.is_some(),
            raw.state.is_some(),
            raw.event.is_some(),
            raw.until.is_some(),
            raw.regex.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(ErrorBody::invalid(
                "sessions.wait takes exactly one of state, event, lifecycle, until, regex",
            ));
        }
        let condition = if let Some(l) = raw.lifecycle {
            WaitCondition::Lifecycle(l)
        } else if let Some(s) = raw.state {
            validate_status(&s)?;
            WaitCondition::State(s)
        } else if let Some(e) = raw.event {
            validate_event_name(&e)?;
            WaitCondition::Event {
                name: e,
                since: raw.since,
            }
        } else if let Some(text) = raw.until {
            if text.is_empty() || text.len() > PATTERN_MAX_BYTES {
                return Err(ErrorBody::invalid("until must be 1..=4096 bytes"));
            }
            WaitCondition::Text(TextWait {
                pattern: TextPattern::Literal(text),
                output_only: raw.output_only,
            })
        } else {
            WaitCondition::Text(TextWait {
                pattern: TextPattern::Regex(compile_regex(
                    raw.regex.as_deref().unwrap_or_default(),
                )?),
                output_only: raw.output_only,
            })
        };
        if raw.since.is_some() && !matches!(condition, WaitCondition::Event { .. }) {
            return Err(ErrorBody::invalid("since is only valid with event"));
        }
        if raw.output_only && !matches!(condition, WaitCondition::Text(_)) {
            return Err(ErrorBody::invalid(
                "output_only is only valid with until or regex",
            ));
        }
        let timeout = decode_timeout(raw.timeout.as_ref())?.unwrap_or(WAIT_DEFAULT_TIMEOUT);
        Ok(WaitParams {
            session_id,
            condition,
            timeout,
        })
    }
}

/// Decode an optional `timeout` (seconds or a duration string), capped at 1 h.
fn decode_timeout(value: Option<&Value>) -> Result<Option<Duration>, ErrorBody> {
    let timeout = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => duration_from_json(v).map_err(ErrorBody::invalid)?,
    };
    if timeout > WAIT_MAX_TIMEOUT {
        return Err(ErrorBody::invalid(format!(
            "timeout is capped at {}s",
            WAIT_MAX_TIMEOUT.as_secs()
        )));
    }
    Ok(Some(timeout))
}

/// `sessions.watch` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchParams {
    /// Canonical session id.
    pub session_id: String,
    /// Stop after this long (at most 1 h); `None` runs until the session ends or the
    /// caller disconnects.
    pub timeout: Option<Duration>,
}

impl WatchParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            session_id: String,
            timeout: Option<Value>,
        }
        let raw: Raw = decode(params)?;
        Ok(WatchParams {
            session_id: parse_session_id("session_id", &raw.session_id)?,
            timeout: decode_timeout(raw.timeout.as_ref())?,
        })
    }
}

/// `sessions.events` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsParams {
    /// Canonical session id.
    pub session_id: String,
    /// Return entries with `seq` greater than this (default 0: everything).
    pub since: u64,
}

impl EventsParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            session_id: String,
            #[serde(default)]
            since: u64,
        }
        let raw: Raw = decode(params)?;
        Ok(EventsParams {
            session_id: parse_session_id("session_id", &raw.session_id)?,
            since: raw.since,
        })
    }
}

fn check_token(field: &str, value: &str, max: usize) -> Result<(), ErrorBody> {
    let n = value.chars().count();
    if n == 0 || n > max {
        return Err(ErrorBody::invalid(format!(
            "{field} must be 1..={max} characters, got {n}"
        )));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(ErrorBody::invalid(format!(
            "{field} {:?} has {bad:?}; it must match [A-Za-z0-9_.:-]",
            truncate(value, 64)
        )));
    }
    Ok(())
}

/// Validate a group label: 1..=128 chars of `[A-Za-z0-9_.:/@-]`, an opaque token.
pub fn validate_group(group: &str) -> Result<(), ErrorBody> {
    let n = group.chars().count();
    let ok = n > 0
        && n <= GROUP_MAX_CHARS
        && group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '@' | '-'));
    if !ok {
        return Err(ErrorBody::invalid(format!(
            "group must be 1..={GROUP_MAX_CHARS} characters of [A-Za-z0-9_.:/@-]"
        )));
    }
    Ok(())
}

/// `stream.watch` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamWatchParams {
    /// Which events.
    pub filter: StreamFilter,
    /// Replay retained events after this cursor first.
    pub since: Option<u64>,
    /// Stop after this long (at most 1 h).
    pub timeout: Option<Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStream {
    group: Option<String>,
    session_id: Option<String>,
    surface_id: Option<String>,
    since: Option<u64>,
    timeout: Option<Value>,
    event: Option<String>,
    all: Option<String>,
}

impl RawStream {
    fn filter(&self) -> Result<StreamFilter, ErrorBody> {
        if let Some(g) = &self.group {
            validate_group(g)?;
        }
        Ok(StreamFilter {
            group: self.group.clone(),
            session_id: match &self.session_id {
                Some(id) => Some(parse_session_id("session_id", id)?),
                None => None,
            },
            surface_id: match &self.surface_id {
                Some(id) => Some(parse_session_id("surface_id", id)?),
                None => None,
            },
        })
    }
}

impl StreamWatchParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: RawStream = decode(params)?;
        if raw.event.is_some() || raw.all.is_some() {
            return Err(ErrorBody::invalid(
                "event and all belong to stream.wait, not stream.watch",
            ));
        }
        Ok(StreamWatchParams {
            filter: raw.filter()?,
            since: raw.since,
            timeout: decode_timeout(raw.timeout.as_ref())?,
        })
    }
}

/// What `stream.wait` waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamWaitFor {
    /// A new event with this name passing the filter (edge-triggered).
    Event(String),
    /// Every member of the filter's group satisfies the condition (level-triggered).
    All(AllCondition),
}

/// `stream.wait` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamWaitParams {
    /// Which events / which group.
    pub filter: StreamFilter,
    /// The condition.
    pub wait_for: StreamWaitFor,
    /// How long (default 30 s, at most 1 h).
    pub timeout: Duration,
}

impl StreamWaitParams {
    fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: RawStream = decode(params)?;
        if raw.since.is_some() {
            return Err(ErrorBody::invalid("since belongs to stream.watch"));
        }
        let filter = raw.filter()?;
        let wait_for = match (raw.event, raw.all) {
            (Some(e), None) => {
                validate_event_name(&e)?;
                StreamWaitFor::Event(e)
            }
            (None, Some(all)) => {
                if filter.group.is_none()
                    || filter.session_id.is_some()
                    || filter.surface_id.is_some()
                {
                    return Err(ErrorBody::invalid("all needs group (and only group)"));
                }
                StreamWaitFor::All(AllCondition::parse(&all).map_err(ErrorBody::invalid)?)
            }
            _ => {
                return Err(ErrorBody::invalid(
                    "stream.wait takes exactly one of event, all",
                ))
            }
        };
        Ok(StreamWaitParams {
            filter,
            wait_for,
            timeout: decode_timeout(raw.timeout.as_ref())?.unwrap_or(WAIT_DEFAULT_TIMEOUT),
        })
    }
}

/// Validate an event name: 1..=128 chars of `[A-Za-z0-9_.:-]`.
pub fn validate_event_name(name: &str) -> Result<(), ErrorBody> {
    check_token("event", name, EVENT_NAME_MAX_CHARS)
}

/// Validate an agent type: 1..=64 chars of `[A-Za-z0-9_.:-]`, an opaque token.
pub fn validate_agent_type(agent_type: &str) -> Result<(), ErrorBody> {
    check_token("agent_type", agent_type, AGENT_TYPE_MAX_CHARS)
}

/// Validate a declaration `source`: 1..=128 chars, no control characters.
pub fn validate_source(source: &str) -> Result<(), ErrorBody> {
    let n = source.chars().count();
    if n == 0 || n > SOURCE_MAX_CHARS || source.chars().any(char::is_control) {
        return Err(ErrorBody::invalid(format!(
            "source must be 1..={SOURCE_MAX_CHARS} characters with no control characters"
        )));
    }
    Ok(())
}

/// Validate a `result` (≤ 16384 UTF-8 bytes).
pub fn validate_result(result: &str) -> Result<(), ErrorBody> {
    if result.len() > RESULT_MAX_BYTES {
        return Err(ErrorBody::invalid(format!(
            "result is {} bytes; the limit is {RESULT_MAX_BYTES}",
            result.len()
        )));
    }
    Ok(())
}

/// Validate a `result_schema`: the supported subset, ≤ 16384 bytes.
pub fn validate_result_schema(schema: &Value) -> Result<(), ErrorBody> {
    validate_depth("result_schema", schema)?;
    let size = json_size(schema);
    if size > RESULT_SCHEMA_MAX_BYTES {
        return Err(ErrorBody::invalid(format!(
            "result_schema is {size} bytes; the limit is {RESULT_SCHEMA_MAX_BYTES}"
        )));
    }
    crate::schema::validate_schema(schema)
        .map_err(|e| ErrorBody::invalid(format!("result_schema: {e}")))
}

/// A declaration: a fact an agent states and maxx stores verbatim.
#[derive(Debug, Clone, PartialEq)]
pub enum Declaration {
    /// `sessions.declare-state`: set the free-form status.
    State {
        /// New status.
        state: String,
        /// Optional note.
        message: Option<String>,
    },
    /// `sessions.emit-event`
    Event {
        /// Event name.
        event: String,
        /// Structured payload.
        payload: Option<Value>,
        /// Optional note.
        message: Option<String>,
    },
    /// `sessions.set-metadata`: one key.
    SetMetadata {
        /// Key.
        key: String,
        /// Any JSON value.
        value: Value,
    },
    /// `sessions.remove-metadata`: absent keys are ignored.
    RemoveMetadata {
        /// Keys to remove (at least one).
        keys: Vec<String>,
    },
    /// `sessions.clear-metadata`
    ClearMetadata,
    /// `sessions.set-state`: the displayed workflow state.
    WorkflowState {
        /// One of the fixed vocabulary.
        state: WorkflowState,
        /// Optional note.
        message: Option<String>,
    },
    /// `sessions.set-summary`
    Summary {
        /// ≤ 1024 chars.
        summary: String,
    },
    /// `sessions.set-result`
    SetResult {
        /// ≤ 16384 bytes; must satisfy the declared schema, if any.
        result: String,
    },
    /// `sessions.clear-result`
    ClearResult,
    /// `sessions.set-result-schema`
    SetResultSchema {
        /// A validated schema of the supported subset.
        schema: Value,
    },
    /// `sessions.clear-result-schema`
    ClearResultSchema,
    /// `sessions.set-agent-type`
    AgentType {
        /// Opaque token.
        agent_type: String,
    },
}

/// Every method this daemon implements, in documentation order.
pub fn all_methods() -> impl Iterator<Item = &'static str> {
    METHODS.iter().chain(DECLARATION_METHODS).copied()
}

/// The declaration verbs (one `Call::Declare` carries them all).
pub const DECLARATION_METHODS: &[&str] = &[
    "sessions.declare-state",
    "sessions.emit-event",
    "sessions.set-metadata",
    "sessions.remove-metadata",
    "sessions.clear-metadata",
    "sessions.set-state",
    "sessions.set-summary",
    "sessions.set-result",
    "sessions.clear-result",
    "sessions.set-result-schema",
    "sessions.clear-result-schema",
    "sessions.set-agent-type",
];

impl Declaration {
    fn is_method(method: &str) -> bool {
        DECLARATION_METHODS.contains(&method)
    }

    /// The wire method that carries this declaration.
    pub fn method(&self) -> &'static str {
        match self {
            Declaration::State { .. } => "sessions.declare-state",
            Declaration::Event { .. } => "sessions.emit-event",
            Declaration::SetMetadata { .. } => "sessions.set-metadata",
            Declaration::RemoveMetadata { .. } => "sessions.remove-metadata",
            Declaration::ClearMetadata => "sessions.clear-metadata",
            Declaration::WorkflowState { .. } => "sessions.set-state",
            Declaration::Summary { .. } => "sessions.set-summary",
            Declaration::SetResult { .. } => "sessions.set-result",
            Declaration::ClearResult => "sessions.clear-result",
            Declaration::SetResultSchema { .. } => "sessions.set-result-schema",
            Declaration::ClearResultSchema => "sessions.clear-result-schema",
            Declaration::AgentType { .. } => "sessions.set-agent-type",
        }
    }
}

/// Params of every declaration verb: the session, who declares, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclareParams {
    /// Canonical session id.
    pub session_id: String,
    /// Agent-supplied source; the caller's policy source when absent.
    pub source: Option<String>,
    /// The declaration.
    pub declaration: Declaration,
}

fn check_message(message: &Option<String>) -> Result<(), ErrorBody> {
    if let Some(m) = message {
        check_chars("message", m, MESSAGE_MAX_CHARS)?;
    }
    Ok(())
}

impl DeclareParams {
    /// `event.emit {session_id, type, payload?, message?, source?}`: the shorthand for
    /// `sessions.emit-event`.
    fn decode_event_emit(params: Value) -> Result<Self, ErrorBody> {
        let mut params = params;
        if let Value::Object(map) = &mut params {
            if let Some(t) = map.remove("type") {
                if map.insert("event".into(), t).is_some() {
                    return Err(ErrorBody::invalid("event.emit takes type, not event"));
                }
            } else if map.contains_key("event") {
                return Err(ErrorBody::invalid("event.emit takes type, not event"));
            }
        }
        Self::decode("sessions.emit-event", params)
    }

    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            session_id: String,
            source: Option<String>,
            state: Option<String>,
            message: Option<String>,
            event: Option<String>,
            payload: Option<Value>,
            key: Option<String>,
            keys: Option<Vec<String>>,
            value: Option<Value>,
            value_json: Option<String>,
            summary: Option<String>,
            result: Option<String>,
            result_schema: Option<Value>,
            agent_type: Option<String>,
        }
        let raw: Raw = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        if let Some(s) = &raw.source {
            validate_source(s)?;
        }
        check_message(&raw.message)?;
        // Each verb takes only its own fields; anything else is a caller mistake.
        let allowed: &[&str] = match method {
            "sessions.declare-state" => &["state", "message"],
            "sessions.emit-event" => &["event", "payload", "message"],
            "sessions.set-metadata" => &["key", "value", "value_json"],
            "sessions.remove-metadata" => &["key", "keys"],
            "sessions.set-state" => &["state", "message"],
            "sessions.set-summary" => &["summary"],
            "sessions.set-result" => &["result"],
            "sessions.set-result-schema" => &["result_schema"],
            "sessions.set-agent-type" => &["agent_type"],
            _ => &[],
        };
        let present: [(&str, bool); 12] = [
            ("state", raw.state.is_some()),
            ("message", raw.message.is_some()),
            ("event", raw.event.is_some()),
            ("payload", raw.payload.is_some()),
            ("key", raw.key.is_some()),
            ("keys", raw.keys.is_some()),
            ("value", raw.value.is_some()),
            ("value_json", raw.value_json.is_some()),
            ("summary", raw.summary.is_some()),
            ("result", raw.result.is_some()),
            ("result_schema", raw.result_schema.is_some()),
            ("agent_type", raw.agent_type.is_some()),
        ];
        if let Some((field, _)) = present.iter().find(|(f, set)| *set && !allowed.contains(f)) {
            return Err(ErrorBody::invalid(format!(
                "{method} does not take {field}"
            )));
        }
        let missing = |field: &str| ErrorBody::invalid(format!("{method} requires {field}"));
        let declaration = match method {
            "sessions.declare-state" => {
                let state = raw.state.ok_or_else(|| missing("state"))?;
                validate_status(&state)?;
                Declaration::State {
                    state,
                    message: raw.message,
                }
            }
            "sessions.emit-event" => {
                let event = raw.event.ok_or_else(|| missing("event"))?;
                validate_event_name(&event)?;
                if let Some(p) = &raw.payload {
                    validate_depth("payload", p)?;
                    let size = json_size(p);
                    if size > PAYLOAD_MAX_BYTES {
                        return Err(ErrorBody::invalid(format!(
                            "payload is {size} bytes; the limit is {PAYLOAD_MAX_BYTES}"
                        )));
                    }
                }
                Declaration::Event {
                    event,
                    payload: raw.payload,
                    message: raw.message,
                }
            }
            "sessions.set-metadata" => {
                let key = raw.key.ok_or_else(|| missing("key"))?;
                validate_metadata_key(&key)?;
                let value = match (raw.value, raw.value_json) {
                    (Some(v), None) => v,
                    (None, Some(text)) => serde_json::from_str(&text).map_err(|e| {
                        ErrorBody::invalid(format!("value_json is not valid JSON: {e}"))
                    })?,
                    _ => {
                        return Err(ErrorBody::invalid(
                            "sessions.set-metadata takes exactly one of value, value_json",
                        ))
                    }
                };
                validate_metadata_value(&key, &value)?;
                Declaration::SetMetadata { key, value }
            }
            "sessions.remove-metadata" => {
                let mut keys = raw.keys.unwrap_or_default();
                keys.extend(raw.key);
                if keys.is_empty() {
                    return Err(missing("key or keys (at least one)"));
                }
                if keys.len() > METADATA_MAX_KEYS * 4 {
                    return Err(ErrorBody::invalid("too many keys"));
                }
                for k in &keys {
                    validate_metadata_key(k)?;
                }
                Declaration::RemoveMetadata { keys }
            }
            "sessions.clear-metadata" => Declaration::ClearMetadata,
            "sessions.set-state" => {
                let text = raw.state.ok_or_else(|| missing("state"))?;
                let state = serde_json::from_value(Value::String(text.clone())).map_err(|_| {
                    ErrorBody::invalid(format!(
                        "state must be one of running, needsInput, blocked, complete, failed; got {:?}",
                        truncate(&text, 64)
                    ))
                })?;
                Declaration::WorkflowState {
                    state,
                    message: raw.message,
                }
            }
            "sessions.set-summary" => {
                let summary = raw.summary.ok_or_else(|| missing("summary"))?;
                check_chars("summary", &summary, SUMMARY_MAX_CHARS)?;
                Declaration::Summary { summary }
            }
            "sessions.set-result" => {
                let result = raw.result.ok_or_else(|| missing("result"))?;
                validate_result(&result)?;
                Declaration::SetResult { result }
            }
            "sessions.clear-result" => Declaration::ClearResult,
            "sessions.set-result-schema" => {
                let schema = raw.result_schema.ok_or_else(|| missing("result_schema"))?;
                validate_result_schema(&schema)?;
                Declaration::SetResultSchema { schema }
            }
            "sessions.clear-result-schema" => Declaration::ClearResultSchema,
            "sessions.set-agent-type" => {
                let agent_type = raw.agent_type.ok_or_else(|| missing("agent_type"))?;
                validate_agent_type(&agent_type)?;
                Declaration::AgentType { agent_type }
            }
            other => {
                return Err(ErrorBody::new(
                    ErrorCode::UnknownMethod,
                    format!("unknown method {other:?}"),
                ))
            }
        };
        Ok(DeclareParams {
            session_id,
            source: raw.source,
            declaration,
        })
    }
}

/// `sessions.register-current` params: the proof the spawned process holds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterParams {
    /// `MAXX_SURFACE_ID` of the calling process.
    pub surface_id: String,
    /// `MAXX_REGISTRATION_TOKEN` of the calling process.
    pub registration_token: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn create(params: Value) -> Result<Call, ErrorBody> {
        Call::decode("sessions.create", Some(params))
    }

    #[test]
    fn unknown_method() {
        let e = Call::decode("sessions.frobnicate", None).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownMethod);
    }

    #[test]
    fn create_limits() {
        assert!(create(json!({"title": "x".repeat(256)})).is_ok());
        assert!(create(json!({"title": "x".repeat(257)})).is_err());
        assert!(create(json!({"status": "é".repeat(128)})).is_ok());
        assert!(create(json!({"status": "é".repeat(129)})).is_err());
        assert!(create(json!({"command": "x".repeat(4097)})).is_err());
        assert!(create(json!({"env": ["A-B=1"]})).is_err());
        assert!(create(json!({"env": ["NOEQUALS"]})).is_err());
        let many: Vec<String> = (0..257).map(|i| format!("K{i}=v")).collect();
        assert!(create(json!({"env": many})).is_err());
    }

    #[test]
    fn one_nesting_bound_for_every_stored_value() {
        let deep = |n: usize| (0..n).fold(json!(1), |v, _| json!([v]));
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!({"a": [1, {"b": []}]})), 4);
        assert_eq!(json_depth(&deep(JSON_MAX_DEPTH)), JSON_MAX_DEPTH);
        let id = "0123abcd-0000-4000-8000-000000000000";
        let call = |method: &str, p: Value| Call::decode(method, Some(p));
        for (method, at, over) in [
            (
                "sessions.set-metadata",
                json!({"session_id": id, "key": "k", "value": deep(JSON_MAX_DEPTH)}),
                json!({"session_id": id, "key": "k", "value": deep(JSON_MAX_DEPTH + 1)}),
            ),
            (
                "sessions.set-metadata",
                json!({"session_id": id, "key": "k", "value_json": deep(JSON_MAX_DEPTH).to_string()}),
                json!({"session_id": id, "key": "k", "value_json": deep(JSON_MAX_DEPTH + 1).to_string()}),
            ),
            (
                "sessions.emit-event",
                json!({"session_id": id, "event": "e", "payload": deep(JSON_MAX_DEPTH)}),
                json!({"session_id": id, "event": "e", "payload": deep(JSON_MAX_DEPTH + 1)}),
            ),
            (
                "sessions.create",
                json!({"command": "true", "metadata": {"k": deep(JSON_MAX_DEPTH)}}),
                json!({"command": "true", "metadata": {"k": deep(JSON_MAX_DEPTH + 1)}}),
            ),
        ] {
            assert!(call(method, at).is_ok(), "{method} at the bound");
            let e = call(method, over).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{method}");
            assert!(e.remedy.is_some(), "{method}");
        }
        // The backstop: an unknown-to-the-checks value deeper than the params allow.
        let e = call("sessions.list", json!({"x": deep(PARAMS_MAX_DEPTH)})).unwrap_err();
        assert!(e.message.contains("nest"), "{}", e.message);
    }

    #[test]
    fn metadata_limits() {
        let mut m = Map::new();
        for i in 0..33 {
            m.insert(format!("k{i}"), json!(1));
        }
        assert!(create(json!({"metadata": m})).is_err());
        assert!(create(json!({"metadata": {"bad key": 1}})).is_err());
        assert!(create(json!({"metadata": {"k": "x".repeat(2047)}})).is_err());
        assert!(create(json!({"metadata": {"k": "x".repeat(2046)}})).is_ok());
        assert!(create(json!({"metadata": {"k": i64::MIN}})).is_ok());
    }

    #[test]
    fn split_rules() {
        let id = "2b0e0000-0000-4000-8000-000000000000";
        assert!(create(json!({"location": "split"})).is_err());
        assert!(create(json!({"location": "tab", "split_target": id})).is_err());
        assert!(create(json!({"split_direction": "down"})).is_err());
        let Call::Create(p) = create(json!({"location": "split", "split_target": id})).unwrap()
        else {
            panic!()
        };
        assert_eq!(p.split_direction, Some(SplitDirection::Right));
        assert!(!p.focus);
        assert_eq!(p.split_target.as_deref(), Some(&*id.to_ascii_uppercase()));
    }

    #[test]
    fn update_rejects_server_owned() {
        let id = "2B0E0000-0000-4000-8000-000000000000";
        let e = Call::decode(
            "sessions.update",
            Some(json!({"session_id": id, "lifecycle": "closed"})),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(Call::decode("sessions.update", Some(json!({"session_id": id}))).is_err());
    }

    #[test]
    fn wait_timeout_cap() {
        let id = "2B0E0000-0000-4000-8000-000000000000";
        let w = |t: Value| {
            Call::decode(
                "sessions.wait",
                Some(json!({"session_id": id, "lifecycle": "exited", "timeout": t})),
            )
        };
        assert!(w(json!("1h")).is_ok());
        assert!(w(json!("61m")).is_err());
        assert!(w(json!("soon")).is_err());
    }

    #[test]
    fn run_timeout_zero_is_no_limit_and_other_bounds_hold() {
        let id = "2B0E0000-0000-4000-8000-000000000000";
        let run = |t: Option<Value>| {
            let mut p = json!({"session_id": id, "command": "true"});
            if let Some(t) = t {
                p["timeout"] = t;
            }
            match Call::decode("sessions.run", Some(p)) {
                Ok(Call::Run(r)) => Ok(r.timeout),
                Ok(other) => panic!("decoded as {other:?}"),
                Err(e) => Err(e.code),
            }
        };
        assert_eq!(run(None), Ok(Some(RUN_DEFAULT_TIMEOUT)));
        assert_eq!(run(Some(json!(0))), Ok(None));
        assert_eq!(run(Some(json!("0s"))), Ok(None));
        assert_eq!(run(Some(json!(2))), Ok(Some(Duration::from_secs(2))));
        assert_eq!(run(Some(json!("61m"))), Err(ErrorCode::InvalidRequest));
        assert_eq!(run(Some(json!(-1))), Err(ErrorCode::InvalidRequest));
        // A wait's 0 still means "check once, now".
        let wait = Call::decode(
            "sessions.wait",
            Some(json!({"session_id": id, "lifecycle": "exited", "timeout": 0})),
        );
        assert!(
            matches!(wait, Ok(Call::Wait(ref w)) if w.timeout.is_zero()),
            "{wait:?}"
        );
    }

    #[test]
    fn send_keys_literal_and_chords() {
        let id = "2B0E0000-0000-4000-8000-000000000000";
        let keys = |p: Value| match Call::decode("sessions.send-keys", Some(p)) {
            Ok(Call::SendKeys { keys, .. }) => Ok(keys),
            Ok(other) => panic!("decoded as {other:?}"),
            Err(e) => Err(e),
        };
        let e = keys(json!({"session_id": id, "keys": ["ls", "S-Upp"]})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.remedy.is_some());
        let k = keys(json!({"session_id": id, "keys": ["S-Upp"], "literal": true})).unwrap();
        assert_eq!(k, vec![crate::keys::KeyToken::Literal("S-Upp".into())]);
        assert!(keys(json!({"session_id": id, "keys": ["S-Tab"], "literal": "yes"})).is_err());
    }

    #[test]
    fn wait_output_only_needs_a_text_condition() {
        let id = "2B0E0000-0000-4000-8000-000000000000";
        let w = |extra: Value| {
            let mut p = json!({"session_id": id});
            p.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            Call::decode("sessions.wait", Some(p))
        };
        for cond in [json!({"until": "x"}), json!({"regex": "^x$"})] {
            let mut p = cond.clone();
            p["output_only"] = json!(true);
            let Ok(Call::Wait(WaitParams {
                condition: WaitCondition::Text(t),
                ..
            })) = w(p)
            else {
                panic!("{cond} with output_only is a text wait")
            };
            assert!(t.output_only);
        }
        let Ok(Call::Wait(WaitParams {
            condition: WaitCondition::Text(t),
            ..
        })) = w(json!({"until": "x"}))
        else {
            panic!()
        };
        assert!(!t.output_only, "off unless asked");
        for other in [
            json!({"lifecycle": "exited"}),
            json!({"state": "s"}),
            json!({"event": "e"}),
        ] {
            let mut p = other.clone();
            p["output_only"] = json!(true);
            let e = w(p).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{other}");
            assert!(e.message.contains("output_only"), "{}", e.message);
        }
        assert!(w(json!({"lifecycle": "exited", "output_only": false})).is_ok());
    }
}

/// A session's size: `MIN_COLS..=MAX_DIMENSION` columns, `1..=MAX_DIMENSION` rows.
fn check_size(cols: u16, rows: u16) -> Result<(), ErrorBody> {
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

#[cfg(test)]
mod decode_error_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decode_errors_never_quote_a_value() {
        let err = Call::decode(
            "sessions.create",
            Some(json!({"env": "API_KEY=s3cr\"et\\x"})),
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "bad params: env: invalid type: a string, expected a sequence"
        );
        let err = Call::decode("sessions.create", Some(json!({"env": ["A=1", 99]}))).unwrap_err();
        assert!(!err.message.contains("99"), "{}", err.message);
        assert!(
            err.message.contains("env: invalid type: an integer"),
            "{}",
            err.message
        );
        let err = Call::decode("sessions.create", Some(json!({"location": "s3cret"}))).unwrap_err();
        assert!(!err.message.contains("s3cret"), "{}", err.message);
        assert!(err.message.contains("unknown variant"), "{}", err.message);
        // Field names are names, not values: kept.
        let err = Call::decode("sessions.create", Some(json!({"bogus": 1}))).unwrap_err();
        assert!(
            err.message.contains("unknown field `bogus`"),
            "{}",
            err.message
        );
    }
}
