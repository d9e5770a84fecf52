//! The adapter table: one entry per agent runtime. Adding a runtime that writes a structured
//! transcript is one [`Adapter`] in [`ADAPTERS`] (and its name as a `maxx hook` subcommand,
//! which a unit test checks): its transcript roots, where its hook payload arrives, how the
//! payload names the transcript, and how to read the final answer out of one record.

use super::{Record, Refusal};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where the runtime hands its hook the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadFrom {
    /// One JSON object on stdin (Claude Code hooks).
    Stdin,
    /// One JSON object as the last command-line argument (Codex's `notify` program).
    LastArg,
}

impl PayloadFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            PayloadFrom::Stdin => "stdin",
            PayloadFrom::LastArg => "argv",
        }
    }
}

/// What a payload tells the hook: which transcript, and what to match in it.
#[derive(Debug, Clone)]
pub struct Located {
    /// The transcript file as the payload names it (checked against the roots later).
    pub path: PathBuf,
    /// The turn the payload reports, when the runtime names one (Codex `turn-id`).
    pub turn_id: Option<String>,
    /// Whether the payload says the turn has a final answer (Claude Code's
    /// `last_assistant_message`, Codex's `last-assistant-message`): then a transcript that
    /// does not show one yet is re-read for a short while (the runtimes call the hook before
    /// their transcript write is always on disk).
    pub answer_expected: bool,
}

/// One runtime.
pub struct Adapter {
    /// `maxx hook <name>`; the declaration's source is `hook:<name>`.
    pub name: &'static str,
    /// Where the payload arrives.
    pub payload: PayloadFrom,
    /// The directories its transcripts live under (`~/` is `$HOME`); a transcript outside
    /// them is never read. `MAXX_HOOK_ROOTS` replaces them.
    pub roots: &'static [&'static str],
    /// The payload → the transcript (or why this payload declares nothing).
    pub locate: fn(&Value, &[PathBuf]) -> Result<Located, Refusal>,
    /// One transcript record, read from the end: the final answer, a record that ends the
    /// search, or one to skip.
    pub record: fn(&Value, &Located) -> Record,
    /// One line for the docs and `--capabilities`: the final-answer rule.
    pub rule: &'static str,
    /// What `maxx hook install <name>` wires in.
    pub install: super::install::Install,
}

/// Every runtime maxx captures results from.
pub const ADAPTERS: &[Adapter] = &[
    Adapter {
        name: "claude-code",
        payload: PayloadFrom::Stdin,
        roots: &["~/.claude/projects"],
        locate: claude_locate,
        record: claude_record,
        rule: "the last assistant record (not a sidechain) after the last user prompt: its \
               `message.content` `text` blocks, joined; none if that record is a tool_use, \
               thinking-only or API-error record",
        install: super::install::CLAUDE_CODE,
    },
    Adapter {
        name: "codex",
        payload: PayloadFrom::LastArg,
        roots: &["~/.codex/sessions", "~/.codex/archived_sessions"],
        locate: codex_locate,
        record: codex_record,
        rule: "in the rollout `rollout-*-<thread-id>.jsonl`, the last `task_complete` event of \
               this turn (`last_agent_message`) or assistant `message` item (`output_text`, \
               not `commentary`) after the turn's user message",
        install: super::install::CODEX,
    },
];

/// The adapter named `name`.
pub fn adapter(name: &str) -> Option<&'static Adapter> {
    ADAPTERS.iter().find(|a| a.name == name)
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn non_empty(s: Option<&str>) -> bool {
    s.is_some_and(|s| !s.trim().is_empty())
}

// ---- Claude Code ------------------------------------------------------------------------
//
// Hook input (stdin): `{session_id, transcript_path, cwd, permission_mode, hook_event_name:
// "Stop", stop_hook_active, last_assistant_message?}`. Transcript: JSONL under
// `~/.claude/projects/<project>/<session_id>.jsonl`, one record per line: `{type:
// "user"|"assistant"|"system"|..., isSidechain, isMeta?, message: {role, content}, ...}`;
// an assistant record's `content` is a list of blocks (`text`, `tool_use`, `thinking`).

fn claude_locate(p: &Value, _roots: &[PathBuf]) -> Result<Located, Refusal> {
    match str_field(p, "hook_event_name") {
        Some("Stop") => {}
        Some(other) => {
            return Err(Refusal::new(format!(
                "hook_event_name is {other:?}: only Stop ends a turn with a final answer"
            )))
        }
        None => return Err(Refusal::new("the payload has no hook_event_name")),
    }
    let path = str_field(p, "transcript_path")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Refusal::new("the payload has no transcript_path"))?;
    Ok(Located {
        path: PathBuf::from(path),
        turn_id: None,
        answer_expected: non_empty(str_field(p, "last_assistant_message")),
    })
}

/// The text blocks of a message's `content` (a string counts as one text block).
fn text_blocks(content: &Value, kind: &str) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| str_field(b, "type") == Some(kind))
            .filter_map(|b| str_field(b, "text"))
            .filter(|t| !t.trim().is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

fn claude_record(r: &Value, _at: &Located) -> Record {
    if r.get("isSidechain") == Some(&Value::Bool(true)) {
        return Record::Skip;
    }
    let content = r.pointer("/message/content").unwrap_or(&Value::Null);
    match str_field(r, "type") {
        Some("assistant") => {
            if r.get("isApiErrorMessage") == Some(&Value::Bool(true)) {
                return Record::End("the last assistant record is an API error");
            }
            let has_tool_use = content
                .as_array()
                .is_some_and(|b| b.iter().any(|b| str_field(b, "type") == Some("tool_use")));
            let texts = text_blocks(content, "text");
            if has_tool_use {
                Record::End(
                    "the last assistant record is a tool_use (the turn did not end with text)",
                )
            } else if texts.is_empty() {
                Record::End("the last assistant record has no text block")
            } else {
                Record::Answer(texts.join("\n\n"))
            }
        }
        // A person's prompt (text, not tool results) starts a turn: nothing after it answered.
        Some("user") if r.get("isMeta") != Some(&Value::Bool(true)) => {
            let prompt = match content {
                Value::String(_) => true,
                Value::Array(b) => b.iter().any(|b| str_field(b, "type") == Some("text")),
                _ => false,
            };
            if prompt {
                Record::End("no assistant answer after the last user prompt")
            } else {
                Record::Skip
            }
        }
        _ => Record::Skip,
    }
}

// ---- Codex ------------------------------------------------------------------------------
//
// `notify` argument: `{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd",
// "input-messages": [...], "last-assistant-message"}`. Rollout: JSONL
// `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread-id>.jsonl` (moved to
// `~/.codex/archived_sessions/` when archived), one `{timestamp, type, payload}` per line:
// `session_meta`, `turn_context`, `response_item` (`payload.type` `message` with `role` and
// `content` blocks `output_text`/`input_text`, `function_call`, ...), `event_msg`
// (`payload.type` `user_message`, `agent_message`, `task_started`, `task_complete` with
// `turn_id` and `last_agent_message`, ...).

/// How many directory entries the rollout search looks at before it gives up.
const CODEX_SEARCH_MAX_ENTRIES: usize = 50_000;

fn codex_locate(p: &Value, roots: &[PathBuf]) -> Result<Located, Refusal> {
    match str_field(p, "type") {
        Some("agent-turn-complete") => {}
        Some(other) => {
            return Err(Refusal::new(format!(
                "notification type is {other:?}: only agent-turn-complete ends a turn"
            )))
        }
        None => return Err(Refusal::new("the payload has no type")),
    }
    let thread = str_field(p, "thread-id")
        .filter(|t| {
            !t.is_empty()
                && t.len() <= 128
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .ok_or_else(|| Refusal::new("the payload has no usable thread-id"))?;
    let suffix = format!("-{thread}.jsonl");
    let mut seen = 0usize;
    let mut found: Option<PathBuf> = None;
    for root in roots {
        find_named(root, &suffix, 0, &mut seen, &mut found);
    }
    let path = found.ok_or_else(|| {
        Refusal::new(format!(
            "no rollout file rollout-*-{thread}.jsonl under the Codex roots"
        ))
    })?;
    Ok(Located {
        path,
        turn_id: str_field(p, "turn-id").map(str::to_string),
        answer_expected: non_empty(str_field(p, "last-assistant-message")),
    })
}

/// Depth-first search for a file named `rollout-*<suffix>` (roots are `YYYY/MM/DD` deep);
/// the lexically greatest match wins (the newest, by the timestamp in its name).
fn find_named(
    dir: &Path,
    suffix: &str,
    depth: usize,
    seen: &mut usize,
    found: &mut Option<PathBuf>,
) {
    if depth > 4 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        *seen += 1;
        if *seen > CODEX_SEARCH_MAX_ENTRIES {
            return;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            find_named(&entry.path(), suffix, depth + 1, seen, found);
        } else if name.starts_with("rollout-") && name.ends_with(suffix) {
            let path = entry.path();
            if found
                .as_ref()
                .is_none_or(|f| f.file_name() < path.file_name())
            {
                *found = Some(path);
            }
        }
    }
}

fn codex_record(r: &Value, at: &Located) -> Record {
    let p = r.get("payload").unwrap_or(&Value::Null);
    match (str_field(r, "type"), str_field(p, "type")) {
        (Some("event_msg"), Some("task_complete")) => {
            let turn = str_field(p, "turn_id");
            if let (Some(want), Some(got)) = (at.turn_id.as_deref(), turn) {
                if want != got {
                    return Record::End("the rollout's last completed turn is not this one");
                }
            }
            match str_field(p, "last_agent_message").filter(|m| !m.trim().is_empty()) {
                Some(m) => Record::Answer(m.to_string()),
                None => Record::End("the turn completed without an agent message"),
            }
        }
        (Some("event_msg"), Some("turn_aborted")) => Record::End("the turn was aborted"),
        (Some("event_msg"), Some("user_message" | "task_started")) => {
            Record::End("no assistant answer after the turn's user message")
        }
        (Some("response_item"), Some("message")) => match str_field(p, "role") {
            Some("assistant") if str_field(p, "phase") != Some("commentary") => {
                let texts = text_blocks(p.get("content").unwrap_or(&Value::Null), "output_text");
                if texts.is_empty() {
                    Record::Skip
                } else {
                    Record::Answer(texts.join("\n\n"))
                }
            }
            _ => Record::Skip,
        },
        _ => Record::Skip,
    }
}
