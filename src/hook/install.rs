//! `maxx hook install <runtime> [--print]`: show, or merge into the runtime's settings file
//! (after a timestamped backup of it), the setting that runs `maxx hook <runtime>`.
//!
//! - Claude Code: `~/.claude/settings.json`, a `hooks.Stop` entry running
//!   `maxx hook claude-code` (JSON: merged with serde_json, key order kept).
//! - Codex: `~/.codex/config.toml`, `notify = ["maxx", "hook", "codex"]` (top-level key).
//!   There is no TOML parser here: the line is added at the top of the file only when the file
//!   has no top-level `notify` yet and no multi-line string that could hide a table header;
//!   otherwise nothing is written and the line to add is printed.

use crate::exit;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// How a runtime's settings file is merged.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    /// Claude Code `settings.json`: a `hooks.<event>` matcher group running `command`.
    ClaudeHooks { event: &'static str },
    /// Codex `config.toml`: a top-level `notify` array.
    CodexNotify,
}

/// What wires a runtime's hook in.
#[derive(Debug, Clone, Copy)]
pub struct Install {
    /// The settings file (`~/` is `$HOME`).
    pub file: &'static str,
    /// The command the runtime runs.
    pub command: &'static [&'static str],
    pub format: Format,
}

pub const CLAUDE_CODE: Install = Install {
    file: "~/.claude/settings.json",
    command: &["maxx", "hook", "claude-code"],
    format: Format::ClaudeHooks { event: "Stop" },
};

pub const CODEX: Install = Install {
    file: "~/.codex/config.toml",
    command: &["maxx", "hook", "codex"],
    format: Format::CodexNotify,
};

fn settings_path(i: &Install) -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(i.file.strip_prefix("~/")?))
}

/// The snippet `--print` shows.
pub fn snippet(i: &Install) -> String {
    match i.format {
        Format::ClaudeHooks { event } => {
            let v = json!({"hooks": {event: [claude_group(i)]}});
            serde_json::to_string_pretty(&v).expect("json")
        }
        Format::CodexNotify => codex_line(i),
    }
}

fn claude_group(i: &Install) -> Value {
    json!({"hooks": [{"type": "command", "command": i.command.join(" ")}]})
}

fn codex_line(i: &Install) -> String {
    let items: Vec<String> = i.command.iter().map(|c| format!("\"{c}\"")).collect();
    format!("notify = [{}]", items.join(", "))
}

/// What merging would do with the file's current text.
#[derive(Debug, PartialEq)]
pub enum Merge {
    /// The setting is there already.
    Present,
    /// Write this text.
    Write(String),
    /// Cannot merge safely: why.
    Refuse(String),
}

/// Merge the setting into `current` (None: the file does not exist).
pub fn merge(i: &Install, current: Option<&str>) -> Merge {
    match i.format {
        Format::ClaudeHooks { event } => merge_claude(i, event, current),
        Format::CodexNotify => merge_codex(i, current),
    }
}

fn merge_claude(i: &Install, event: &str, current: Option<&str>) -> Merge {
    let mut root: Value = match current {
        None => json!({}),
        Some(t) if t.trim().is_empty() => json!({}),
        Some(t) => match serde_json::from_str(t) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return Merge::Refuse("the file is not a JSON object".into()),
            Err(e) => return Merge::Refuse(format!("the file is not valid JSON: {e}")),
        },
    };
    let command = i.command.join(" ");
    let obj = root.as_object_mut().expect("object");
    let hooks = obj.entry("hooks").or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        return Merge::Refuse("`hooks` is not an object".into());
    };
    let groups = hooks.entry(event).or_insert_with(|| json!([]));
    let Some(groups) = groups.as_array_mut() else {
        return Merge::Refuse(format!("`hooks.{event}` is not an array"));
    };
    let present = groups.iter().any(|g| {
        g.get("hooks")
            .and_then(Value::as_array)
            .is_some_and(|hs| hs.iter().any(|h| h.get("command") == Some(&json!(command))))
    });
    if present {
        return Merge::Present;
    }
    groups.push(claude_group(i));
    let mut text = serde_json::to_string_pretty(&root).expect("json");
    text.push('\n');
    Merge::Write(text)
}

/// The top-level `key = value` lines of a TOML text (before its first table header), as
/// (key, rest of the line).
fn toml_top_level(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            break;
        }
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        if let Some((k, v)) = t.split_once('=') {
            let key = k.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
            out.push((key, v.trim().to_string()));
        }
    }
    out
}

fn merge_codex(i: &Install, current: Option<&str>) -> Merge {
    let line = codex_line(i);
    let text = current.unwrap_or("");
    if text.contains("\"\"\"") || text.contains("'''") {
        return Merge::Refuse(
            "the file has multi-line strings, which this merge (no TOML parser) cannot read \
             safely"
                .into(),
        );
    }
    let ours = line.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    match toml_top_level(text).into_iter().find(|(k, _)| k == "notify") {
        Some((_, v)) if squash(&v) == squash(ours) => Merge::Present,
        Some((_, v)) => Merge::Refuse(format!(
            "the file already sets notify = {v}; Codex runs one notify program: replace it (or \
             call `maxx hook codex \"$1\"` from it) by hand"
        )),
        None => Merge::Write(format!(
            "# Added by `maxx hook install codex`: declare each turn's final answer.\n{line}\n{text}"
        )),
    }
}

/// `maxx hook install <runtime> [--print]`.
pub fn command(i: &Install, runtime: &str, print: bool) -> i32 {
    if print {
        println!("{}", snippet(i));
        return exit::OK;
    }
    let Some(path) = settings_path(i) else {
        return crate::report::usage_error(
            "HOME is not set: cannot find the settings file",
            format!(
                "set HOME, or add this to {} by hand: {}",
                i.file,
                snippet(i)
            ),
        );
    };
    let current = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return fail(&path, &format!("cannot read it: {e}"), i),
    };
    match merge(i, current.as_deref()) {
        Merge::Present => {
            eprintln!(
                "maxx hook install {runtime}: {} already runs `{}`; nothing changed",
                path.display(),
                i.command.join(" ")
            );
            exit::OK
        }
        Merge::Refuse(why) => fail(&path, &why, i),
        Merge::Write(text) => match write(&path, current.is_some(), &text) {
            Ok(backup) => {
                match backup {
                    Some(b) => eprintln!(
                        "maxx hook install {runtime}: merged into {} (backup: {})",
                        path.display(),
                        b.display()
                    ),
                    None => eprintln!("maxx hook install {runtime}: wrote {}", path.display()),
                }
                exit::OK
            }
            Err(e) => fail(&path, &format!("cannot write it: {e}"), i),
        },
    }
}

fn fail(path: &Path, why: &str, i: &Install) -> i32 {
    crate::report::print_error(
        &maxx_protocol::error::ErrorBody::invalid(format!(
            "not merged into {}: {why}",
            path.display()
        ))
        .with_remedy(format!("add this by hand:\n{}", snippet(i))),
    );
    exit::FAILED
}

/// Back the file up (`<file>.bak-<unix seconds>`, when it exists), then replace it atomically
/// (a temp file in the same folder, renamed), keeping its permissions.
fn write(path: &Path, exists: bool, text: &str) -> std::io::Result<Option<PathBuf>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut backup = None;
    if exists {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let b = dir.join(format!("{name}.bak-{secs}"));
        std::fs::copy(path, &b)?;
        backup = Some(b);
    }
    let tmp = dir.join(format!(
        ".{}.maxx-tmp-{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, text)?;
    if exists {
        let perms = std::fs::metadata(path)?.permissions();
        std::fs::set_permissions(&tmp, perms)?;
    }
    std::fs::rename(&tmp, path)?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_settings_merge_keeps_what_is_there_and_is_idempotent() {
        let before = r#"{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}"#;
        let Merge::Write(after) = merge(&CLAUDE_CODE, Some(before)) else {
            panic!("should merge")
        };
        let v: Value = serde_json::from_str(&after).unwrap();
        assert_eq!(v["model"], "opus");
        assert_eq!(v["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(
            v["hooks"]["Stop"][1]["hooks"][0]["command"],
            "maxx hook claude-code"
        );
        assert_eq!(merge(&CLAUDE_CODE, Some(&after)), Merge::Present);
        assert!(matches!(merge(&CLAUDE_CODE, None), Merge::Write(_)));
        assert!(matches!(merge(&CLAUDE_CODE, Some("[1]")), Merge::Refuse(_)));
        assert!(matches!(
            merge(&CLAUDE_CODE, Some("{bad")),
            Merge::Refuse(_)
        ));
    }

    #[test]
    fn codex_config_merge_adds_a_top_level_line_or_refuses() {
        let before = "model = \"o3\"\n\n[mcp_servers.x]\ncommand = \"x\"\nnotify = 1\n";
        let Merge::Write(after) = merge(&CODEX, Some(before)) else {
            panic!("should merge")
        };
        assert!(after.contains("notify = [\"maxx\", \"hook\", \"codex\"]\n"));
        assert!(after.ends_with(before));
        assert_eq!(merge(&CODEX, Some(&after)), Merge::Present);
        assert!(matches!(
            merge(&CODEX, Some("notify = [\"notify-send\"]\n")),
            Merge::Refuse(_)
        ));
        assert!(matches!(
            merge(&CODEX, Some("x = \"\"\"\n[a]\n\"\"\"\n")),
            Merge::Refuse(_)
        ));
        assert!(matches!(merge(&CODEX, None), Merge::Write(_)));
    }
}
