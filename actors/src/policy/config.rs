//! The policy file: where it lives, reading it bounded, and parsing it into sources, failing
//! closed with reasons.

use super::rules::{builtin_sources, shown, ConfirmScope, Policy, Source, SourceKind};
use super::{MAX_REASONS, POLICY_MAX_BYTES, POLICY_VERSION, SOURCE_ID_MAX_CHARS};
use maxx_protocol::capability::Capability;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What became of the policy file at startup, serialised `no_path`, `missing`, `loaded`,
/// `rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigStatus {
    /// No path could be resolved (no `$MAXX_CONTROL_POLICY_FILE`, `$XDG_CONFIG_HOME` or
    /// `$HOME`): built-ins only.
    NoPath,
    /// The file does not exist: built-ins only.
    Missing,
    /// The file was read and its sources are active beside the built-ins.
    Loaded,
    /// The file was refused as a whole (see `reasons`): built-ins only.
    Rejected,
}

/// The outcome of loading the policy file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    /// The file consulted.
    pub path: Option<String>,
    /// What became of it.
    pub status: ConfigStatus,
    /// Why it was rejected (empty otherwise).
    pub reasons: Vec<String>,
}

/// The answer of an offline `policy validate`: the configured sources the file declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigSummary {
    /// The file validated.
    pub path: String,
    /// Its version.
    pub version: u64,
    /// Its sources (the built-ins are not repeated).
    pub sources: Vec<Source>,
}

/// The policy file the environment names: `$MAXX_CONTROL_POLICY_FILE`, else
/// `$XDG_CONFIG_HOME/maxx/control-policy.json`, else `~/.config/maxx/control-policy.json`.
/// `None` if none of those variables is set.
pub fn policy_path() -> Option<PathBuf> {
    policy_path_from(|name| std::env::var_os(name))
}

pub(super) fn policy_path_from(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(p) = set("MAXX_CONTROL_POLICY_FILE") {
        return Some(PathBuf::from(p));
    }
    let base = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("maxx").join("control-policy.json"))
}

/// Load the policy the daemon enforces. Fail-closed: a missing file (or no path) means the
/// built-ins; any problem with the file rejects it as a whole, with reasons, and the
/// built-ins are used.
pub fn load_policy(path: Option<&Path>) -> (Policy, LoadReport) {
    let Some(path) = path else {
        return (
            Policy::builtin(),
            LoadReport {
                path: None,
                status: ConfigStatus::NoPath,
                reasons: Vec::new(),
            },
        );
    };
    let report = |status, reasons| LoadReport {
        path: Some(path.display().to_string()),
        status,
        reasons,
    };
    let builtins = Policy::with_configured(Vec::new(), Some(path.to_path_buf()));
    match read_bounded(path) {
        Ok(None) => (builtins, report(ConfigStatus::Missing, Vec::new())),
        Err(reason) => (builtins, report(ConfigStatus::Rejected, vec![reason])),
        Ok(Some(bytes)) => match parse_config(&bytes) {
            Ok((_, sources)) => (
                Policy::with_configured(sources, Some(path.to_path_buf())),
                report(ConfigStatus::Loaded, Vec::new()),
            ),
            Err(reasons) => (builtins, report(ConfigStatus::Rejected, reasons)),
        },
    }
}

/// Validate a policy file offline (`maxx policy validate --config FILE`, no daemon): its
/// configured sources, or every reason it would be rejected. A missing file is an error.
pub fn validate_config_file(path: &Path) -> Result<ConfigSummary, Vec<String>> {
    let bytes = match read_bounded(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(vec![format!("{} does not exist", path.display())]),
        Err(reason) => return Err(vec![reason]),
    };
    let (version, sources) = parse_config(&bytes)?;
    Ok(ConfigSummary {
        path: path.display().to_string(),
        version,
        sources,
    })
}

/// Read the file (links followed: it is the user's own config), bounded by `fstat` before
/// reading and while reading, never blocking on a FIFO. `Ok(None)` if it does not exist.
pub(super) fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use crate::control_dir::{read_regular_bounded, ReadBoundedError};
    read_regular_bounded(path, POLICY_MAX_BYTES, true).map_err(|e| match e {
        ReadBoundedError::NotRegular(_) => format!("{} is not a regular file", path.display()),
        ReadBoundedError::TooLarge(len) => format!(
            "{} is {len} bytes, larger than the {POLICY_MAX_BYTES}-byte limit",
            path.display()
        ),
        ReadBoundedError::Grew => format!(
            "{} grew past the {POLICY_MAX_BYTES}-byte limit while being read",
            path.display()
        ),
        ReadBoundedError::Io(e) => format!("cannot read {}: {e}", path.display()),
    })
}

/// The file's shape, strict about fields (a typo such as `alow` must not silently grant
/// less or more than the user meant); values are checked one by one below so every problem
/// is reported.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a policy object {\"version\": 1, \"sources\": [...]}"
)]
struct RawConfig {
    version: Option<Value>,
    sources: Option<Vec<RawSource>>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a source object {\"id\", \"kind\", \"allow\", \"confirm\", \"confirm_scope\"}"
)]
struct RawSource {
    id: Option<Value>,
    kind: Option<Value>,
    allow: Option<Value>,
    confirm: Option<Value>,
    confirm_scope: Option<Value>,
}

/// Parse and validate a policy document into its configured sources, or every reason it
/// is rejected.
pub(super) fn parse_config(bytes: &[u8]) -> Result<(u64, Vec<Source>), Vec<String>> {
    let raw: RawConfig = serde_json::from_slice(bytes).map_err(|e| {
        vec![match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                format!("invalid JSON: {e}")
            }
            _ => format!("unexpected structure: {e}"),
        }]
    })?;
    let mut reasons = Vec::new();
    let version = match &raw.version {
        None => {
            reasons.push(format!("missing \"version\" (expected {POLICY_VERSION})"));
            0
        }
        Some(Value::Number(n)) if n.as_u64() == Some(POLICY_VERSION) => POLICY_VERSION,
        Some(other) => {
            reasons.push(format!(
                "unsupported version {} (this maxx reads version {POLICY_VERSION})",
                bounded_json(other)
            ));
            0
        }
    };
    let Some(raw_sources) = raw.sources else {
        reasons.push("missing \"sources\" (an array of sources, possibly empty)".into());
        return Err(reasons);
    };
    let reserved: HashSet<String> = builtin_sources().into_iter().map(|s| s.id).collect();
    let mut seen = HashSet::new();
    let mut sources = Vec::new();
    for (i, raw) in raw_sources.into_iter().enumerate() {
        let before = reasons.len();
        let id = match &raw.id {
            Some(Value::String(id)) => Some(id.clone()),
            Some(_) | None => {
                reasons.push(format!("sources[{i}]: \"id\" must be a string"));
                None
            }
        };
        let at = match &id {
            Some(id) => format!("sources[{i}] ({})", shown(id)),
            None => format!("sources[{i}]"),
        };
        if let Some(id) = &id {
            if let Err(why) = check_id(id) {
                reasons.push(format!("{at}: {why}"));
            } else if reserved.contains(id) {
                reasons.push(format!(
                    "{at}: id is reserved by a built-in source and cannot be replaced"
                ));
            } else if !seen.insert(id.clone()) {
                reasons.push(format!("{at}: duplicate id"));
            }
        }
        let kind = match &raw.kind {
            Some(Value::String(k)) => SourceKind::parse(k).or_else(|| {
                reasons.push(format!(
                    "{at}: unknown kind {} (expected local, external, webhook or token)",
                    shown(k)
                ));
                None
            }),
            _ => {
                reasons.push(format!(
                    "{at}: \"kind\" must be one of local, external, webhook, token"
                ));
                None
            }
        };
        let allow = capability_list(&at, "allow", raw.allow.as_ref(), &mut reasons);
        let confirm = capability_list(&at, "confirm", raw.confirm.as_ref(), &mut reasons);
        let overlap: Vec<&str> = allow.intersection(&confirm).map(|c| c.as_str()).collect();
        if !overlap.is_empty() {
            reasons.push(format!(
                "{at}: ambiguous: {} on both allow and confirm",
                overlap.join(", ")
            ));
        }
        let confirm_scope = match &raw.confirm_scope {
            None => Some(ConfirmScope::Always),
            Some(Value::String(s)) if s == "always" => Some(ConfirmScope::Always),
            Some(Value::String(s)) if s == "once_per_source" => Some(ConfirmScope::OncePerSource),
            Some(other) => {
                reasons.push(format!(
                    "{at}: unknown confirm_scope {} (expected always or once_per_source)",
                    bounded_json(other)
                ));
                None
            }
        };
        if reasons.len() == before {
            if let (Some(id), Some(kind), Some(confirm_scope)) = (id, kind, confirm_scope) {
                sources.push(Source {
                    id,
                    kind,
                    allow,
                    confirm,
                    confirm_scope,
                    builtin: false,
                });
            }
        }
    }
    if reasons.is_empty() {
        Ok((version, sources))
    } else {
        if reasons.len() > MAX_REASONS {
            let more = reasons.len() - MAX_REASONS;
            reasons.truncate(MAX_REASONS);
            reasons.push(format!("... and {more} more"));
        }
        Err(reasons)
    }
}

pub(super) fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("id is empty".into());
    }
    if id.chars().count() > SOURCE_ID_MAX_CHARS {
        return Err(format!(
            "id is longer than {SOURCE_ID_MAX_CHARS} characters"
        ));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("id may hold only ASCII letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}

pub(super) fn capability_list(
    at: &str,
    field: &str,
    value: Option<&Value>,
    reasons: &mut Vec<String>,
) -> BTreeSet<Capability> {
    let mut set = BTreeSet::new();
    let items = match value {
        None => return set,
        Some(Value::Array(items)) => items,
        Some(_) => {
            reasons.push(format!(
                "{at}: \"{field}\" must be an array of capability names"
            ));
            return set;
        }
    };
    for item in items {
        match item {
            Value::String(name) => match Capability::parse(name) {
                Ok(c) => {
                    set.insert(c);
                }
                Err(_) => reasons.push(format!(
                    "{at}: unknown capability {} in {field}",
                    shown(name)
                )),
            },
            other => reasons.push(format!(
                "{at}: {field} holds {}, not a capability name",
                bounded_json(other)
            )),
        }
    }
    set
}

/// A JSON value for a message, bounded.
pub(super) fn bounded_json(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 64 {
        let head: String = text.chars().take(64).collect();
        format!("{head}…")
    } else {
        text
    }
}
