//! Validation shared by every family: the params decoder with its secret-free errors,
//! session ids, and the seed's limits on titles, commands, metadata and tokens.

use super::*;

pub(crate) fn decode<T: DeserializeOwned>(params: Value) -> Result<T, ErrorBody> {
    let mut ignored = Vec::new();
    let decoded = serde_ignored::deserialize(&params, |path| ignored.push(path.to_string()));
    IGNORED.with(|list| {
        if let Some(list) = list.borrow_mut().as_mut() {
            list.extend(ignored);
        }
    });
    decoded.map_err(|e| {
        ErrorBody::invalid(format!("bad params: {}", decode_error_message(&e, &params)))
            .with_remedy(
                "send the fields the method takes, each of its type: `maxx <noun> <verb> --help` \
                 and docs/protocol.md list them",
            )
    })
}

std::thread_local! {
    /// Params the decoders of the request being decoded on this thread did not read:
    /// `Some` while [`collect_ignored`] runs.
    static IGNORED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// Run `decode` (a request's whole, synchronous decode) and return what it gave with the
/// params paths (`titel`, `condition.foo`) its decoders did not read. Unknown params are
/// ignored, never refused, so a newer client works with an older daemon; the caller is told.
pub(crate) fn collect_ignored<T>(decode: impl FnOnce() -> T) -> (T, Vec<String>) {
    IGNORED.with(|list| *list.borrow_mut() = Some(Vec::new()));
    let decoded = decode();
    let mut ignored = IGNORED
        .with(|list| list.borrow_mut().take())
        .unwrap_or_default();
    ignored.sort();
    ignored.dedup();
    (decoded, ignored)
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
pub(crate) fn locate_field(text: &str, params: &Value) -> Option<String> {
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

pub(crate) fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// A session a caller names: a full id in canonical form (uppercase hyphenated UUID), or a
/// prefix or `%title` selector, carried as given (uppercased) until the daemon resolves it
/// to one session before routing (see [`crate::selector`]).
pub fn parse_session_id(field: &str, text: &str) -> Result<String, ErrorBody> {
    match crate::selector::Selector::parse(text) {
        Some(selector) => Ok(selector.to_wire()),
        None => Err(ErrorBody::invalid(format!(
            "{field} must name a session: a session id, a prefix of one (at least {} hex \
             digits) or %title; got {:?}",
            crate::selector::SELECTOR_PREFIX_MIN_HEX,
            truncate(text, 64)
        ))
        .with_remedy("`maxx ls` shows each session's id prefix and title")),
    }
}

/// A UUID in canonical form (uppercase, hyphenated): a surface id.
pub fn parse_uuid(field: &str, text: &str) -> Result<String, ErrorBody> {
    let bytes = text.as_bytes();
    let ok = bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if !ok {
        return Err(ErrorBody::invalid(format!(
            "{field} must be a UUID, got {:?}",
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
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: wire::Session = decode(params)?;
        Ok(SessionRef {
            session_id: parse_session_id("session_id", &raw.session_id)?,
        })
    }
}

/// Check a `chars`-bounded string field.
pub(crate) fn check_chars(field: &str, value: &str, max: usize) -> Result<(), ErrorBody> {
    let n = value.chars().count();
    if n > max {
        return Err(ErrorBody::invalid(format!(
            "{field} is {n} characters; the limit is {max}"
        )));
    }
    Ok(())
}

pub(crate) fn check_no_nul(field: &str, value: &str) -> Result<(), ErrorBody> {
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

/// `{}`: methods without params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub(crate) struct Empty {}

/// Decode an optional `timeout` (seconds or a duration string), capped at 1 h.
pub(crate) fn decode_timeout(value: Option<&Value>) -> Result<Option<Duration>, ErrorBody> {
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

pub(crate) fn check_token(field: &str, value: &str, max: usize) -> Result<(), ErrorBody> {
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

/// The params objects of this family's methods as the wire carries them: what a client
/// builds (and serializes) and what the decoder reads before it validates.
pub(crate) mod wire {
    use super::*;
    use serde::Serialize;

    /// Any method that names one session and nothing else (`sessions.get`, `sessions.cancel`, ...).
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Session {
        /// Session id (a UUID, any case).
        pub session_id: String,
    }
}
