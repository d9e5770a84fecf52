//! Typed requests: one params struct per method, decoded from `(method, params)` at the
//! socket edge, with the seed's validation beside each.
//!
//! Params objects reject unknown fields (`invalid_request`), so a typo or a field this
//! daemon does not implement can never be silently ignored. The request *envelope* ignores
//! unknown fields, as the brief requires.

use crate::duration::duration_from_json;
use crate::error::{ErrorBody, ErrorCode};
use crate::limits::*;
use crate::session::{Lifecycle, Location, SplitDirection};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::time::Duration;

/// Every method this daemon implements, in documentation order.
pub const METHODS: &[&str] = &[
    "sessions.create",
    "sessions.get",
    "sessions.list",
    "sessions.update",
    "sessions.action",
    "sessions.cancel",
    "sessions.wait",
    "sessions.register-current",
];

/// A decoded, validated request.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `sessions.create`
    Create(CreateParams),
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
}

impl Call {
    /// Decode and validate `params` for `method`. `params: null`/absent means `{}`.
    pub fn decode(method: &str, params: Option<Value>) -> Result<Call, ErrorBody> {
        let params = match params {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(ErrorBody::invalid("params must be a JSON object")),
        };
        let call = match method {
            "sessions.create" => Call::Create(CreateParams::decode(params)?),
            "sessions.get" => Call::Get(SessionRef::decode(params)?),
            "sessions.list" => Call::List(decode(params)?),
            "sessions.update" => Call::Update(UpdateParams::decode(params)?),
            "sessions.action" => Call::Action(ActionParams::decode(params)?),
            "sessions.cancel" => Call::Cancel(SessionRef::decode(params)?),
            "sessions.wait" => Call::Wait(WaitParams::decode(params)?),
            "sessions.register-current" => Call::RegisterCurrent(decode(params)?),
            other => {
                return Err(ErrorBody::new(
                    ErrorCode::UnknownMethod,
                    format!("unknown method {:?}", truncate(other, 64)),
                )
                .with_remedy(format!("known methods: {}", METHODS.join(", "))))
            }
        };
        Ok(call)
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
        }
    }
}

fn decode<T: DeserializeOwned>(params: Value) -> Result<T, ErrorBody> {
    serde_json::from_value(params).map_err(|e| ErrorBody::invalid(format!("bad params: {e}")))
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

/// Validate one metadata value (≤ 2048 bytes of compact JSON).
pub fn validate_metadata_value(key: &str, value: &Value) -> Result<(), ErrorBody> {
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
        }
        let raw: Raw = decode(params)?;
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
        if cols == 0 || rows == 0 || cols > MAX_DIMENSION || rows > MAX_DIMENSION {
            return Err(ErrorBody::invalid(format!(
                "cols and rows must be 1..={MAX_DIMENSION}"
            )));
        }
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
        })
    }
}

/// `sessions.list` params (filters arrive with later capabilities).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitCondition {
    /// `--lifecycle L`: level-triggered on the Maxx-owned lifecycle.
    Lifecycle(Lifecycle),
}

/// `sessions.wait` params.
#[derive(Debug, Clone, PartialEq, Eq)]
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
            timeout: Option<Value>,
        }
        let raw: Raw = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        let condition = match raw.lifecycle {
            Some(l) => WaitCondition::Lifecycle(l),
            None => return Err(ErrorBody::invalid("sessions.wait needs lifecycle")),
        };
        let timeout = match &raw.timeout {
            None | Some(Value::Null) => WAIT_DEFAULT_TIMEOUT,
            Some(v) => duration_from_json(v).map_err(ErrorBody::invalid)?,
        };
        if timeout > WAIT_MAX_TIMEOUT {
            return Err(ErrorBody::invalid(format!(
                "timeout is capped at {}s",
                WAIT_MAX_TIMEOUT.as_secs()
            )));
        }
        Ok(WaitParams {
            session_id,
            condition,
            timeout,
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
}
