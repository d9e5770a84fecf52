//! Agent profiles: a user-authored, read-only JSON file of named create-time inputs
//! (`command`, `agent_type`, `env`, `metadata`, `title`, `cwd`). maxx never writes it.
//!
//! Path: `$MAXX_PROFILES_FILE`, else `$XDG_CONFIG_HOME/maxx/agent-profiles.json`, else
//! `~/.config/maxx/agent-profiles.json`. Either a versioned envelope
//! `{"version":1,"profiles":{...}}` or a bare `{name: profile}` map. Read fresh on every
//! use (bounded), so edits apply without a restart. Profile env values may be secrets:
//! they reach the child only and are never returned, logged or persisted.

use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::request::{validate_env, validate_metadata_map, CreateParams};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Largest profiles file read.
pub const PROFILES_MAX_BYTES: u64 = 1024 * 1024;

/// Env in a profile: `["K=V", ...]` or `{"K": "V"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum ProfileEnv {
    List(Vec<String>),
    Map(BTreeMap<String, String>),
}

/// One profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    command: Option<String>,
    agent_type: Option<String>,
    env: Option<ProfileEnv>,
    #[serde(default)]
    metadata: Map<String, Value>,
    title: Option<String>,
    cwd: Option<String>,
}

impl Profile {
    fn env_pairs(&self) -> Result<Vec<(String, String)>, ErrorBody> {
        let entries: Vec<String> = match &self.env {
            None => Vec::new(),
            Some(ProfileEnv::List(l)) => l.clone(),
            Some(ProfileEnv::Map(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        };
        validate_env(&entries)
    }
}

/// The profiles file path the environment names.
pub fn profiles_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MAXX_PROFILES_FILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("maxx").join("agent-profiles.json"))
}

/// Load every profile. A missing file is no profiles; a malformed one is an error naming
/// what is wrong (never a value).
pub fn load(path: Option<&PathBuf>) -> Result<BTreeMap<String, Profile>, ErrorBody> {
    let Some(path) = path else {
        return Ok(BTreeMap::new());
    };
    // Never blocks (a FIFO is refused after a non-blocking open, not waited on), and only
    // a regular file is read. Links are followed: this is the user's own config, which
    // dotfile managers commonly symlink, not a file in the shared control dir.
    use crate::control_dir::{read_regular_bounded, ReadBoundedError};
    let bytes = match read_regular_bounded(path, PROFILES_MAX_BYTES, true) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(BTreeMap::new()),
        Err(ReadBoundedError::NotRegular(e)) => {
            return Err(
                ErrorBody::new(ErrorCode::UnsafeFile, e.to_string()).with_remedy(format!(
                    "make {} a regular file (or point MAXX_PROFILES_FILE at one)",
                    path.display()
                )),
            )
        }
        Err(ReadBoundedError::TooLarge(_) | ReadBoundedError::Grew) => {
            return Err(ErrorBody::internal(format!(
                "{} is larger than {PROFILES_MAX_BYTES} bytes",
                path.display()
            )))
        }
        Err(ReadBoundedError::Io(e)) => {
            return Err(ErrorBody::internal(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ErrorBody::internal(format!("{} is not valid JSON: {e}", path.display())))?;
    let map = match value {
        Value::Object(mut o) if o.contains_key("profiles") => {
            match o.remove("version") {
                Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
                other => {
                    return Err(ErrorBody::internal(format!(
                        "{}: unsupported version {}",
                        path.display(),
                        other.unwrap_or(Value::Null)
                    )))
                }
            }
            o.remove("profiles").unwrap_or(Value::Null)
        }
        other => other,
    };
    serde_json::from_value(map).map_err(|e| {
        ErrorBody::internal(format!(
            "{}: bad profile: {}",
            path.display(),
            maxx_protocol::request::redact_serde_values(&e.to_string())
        ))
    })
}

/// `profiles.list`: names, the fields each sets, and env key names only.
pub fn list(path: Option<&PathBuf>) -> Result<Value, ErrorBody> {
    let profiles = load(path)?;
    let entries: Vec<Value> = profiles
        .iter()
        .map(|(name, p)| {
            let env_keys: Vec<String> = p
                .env_pairs()
                .map(|pairs| pairs.into_iter().map(|(k, _)| k).collect())
                .unwrap_or_default();
            serde_json::json!({
                "name": name,
                "command": p.command,
                "agent_type": p.agent_type,
                "env_keys": env_keys,
                "metadata_keys": p.metadata.keys().collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(serde_json::json!({ "profiles": entries }))
}

/// Fill `params` from the named profile: explicit caller fields win; env merges by key and
/// metadata by key, the caller winning both. The merged result is re-validated.
pub fn apply(params: &mut CreateParams, path: Option<&PathBuf>) -> Result<(), ErrorBody> {
    let Some(name) = params.profile.clone() else {
        return Ok(());
    };
    let profiles = load(path)?;
    let Some(profile) = profiles.get(&name) else {
        return Err(ErrorBody::invalid(format!("no profile named {name:?}"))
            .with_remedy("list them with `maxx profiles list`"));
    };
    if !params.explicit.command {
        if let Some(c) = &profile.command {
            maxx_protocol::request::validate_command(c)?;
            params.command = Some(c.clone());
        }
    }
    if !params.explicit.agent_type {
        if let Some(a) = &profile.agent_type {
            maxx_protocol::request::validate_agent_type(a)?;
            params.agent_type = Some(a.clone());
        }
    }
    if !params.explicit.title {
        if let Some(t) = &profile.title {
            maxx_protocol::request::validate_title(t)?;
            params.title = Some(t.clone());
        }
    }
    if !params.explicit.cwd {
        if let Some(c) = &profile.cwd {
            if !c.starts_with('/') {
                return Err(ErrorBody::invalid(format!(
                    "profile {name:?}: cwd must be absolute"
                )));
            }
            params.cwd = Some(c.clone());
        }
    }
    let mut env = profile.env_pairs()?;
    for (k, v) in std::mem::take(&mut params.env) {
        env.retain(|(pk, _)| *pk != k);
        env.push((k, v));
    }
    if env.len() > maxx_protocol::limits::ENV_MAX_ENTRIES {
        return Err(ErrorBody::invalid(
            "profile env and --env together exceed 256 entries",
        ));
    }
    params.env = env;
    let mut metadata = profile.metadata.clone();
    for (k, v) in std::mem::take(&mut params.metadata) {
        metadata.insert(k, v);
    }
    validate_metadata_map(&metadata)?;
    params.metadata = metadata;
    Ok(())
}
