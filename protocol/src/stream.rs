//! The structured event stream: the envelope every `stream.watch` line and `stream.wait`
//! match carries, and the stream verbs' params.

use crate::audit::{AuditEntry, AuditKind};
use crate::session::SessionView;
use crate::time::now_rfc3339;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Envelope version; bump only on an incompatible change.
pub const STREAM_SCHEMA: u32 = 1;

/// Who owns the fact an event reports (`source_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// `maxx`: a mechanical runtime fact maxx observed or performed.
    Maxx,
    /// `agent`: a fact an agent declared.
    Agent,
}

/// One event on the bus, in the seed's envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEvent {
    /// Envelope version ([`STREAM_SCHEMA`]).
    pub schema: u32,
    /// Process-wide position, from 1, never reused; pass back as `since` to resume.
    pub cursor: u64,
    /// The per-session audit seq, for events that are also audit entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// `maxx` or `agent`.
    pub source_kind: SourceKind,
    /// `lifecycle` for maxx-owned events; the audit kind for declarations.
    pub kind: String,
    /// `created`, `exited`, `group.joined`, ... or the declared name.
    pub name: Option<String>,
    /// `maxx`, or who declared it.
    pub source: String,
    /// Free text.
    pub message: Option<String>,
    /// Structured payload.
    pub payload: Option<Value>,
    /// When it happened.
    pub created_at: String,
    /// Always `session` for now; reserved so other resources stay additive.
    pub resource_kind: String,
    /// The session.
    pub session_id: String,
    /// The session's surface at the time.
    pub surface_id: String,
    /// The session's group (for `group.joined`/`group.left`: the affected group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Foreground process group of the PTY at the time, if any.
    pub pid: Option<i32>,
}

impl StreamEvent {
    /// A mechanical fact maxx observed about a session (`source_kind`/`source` `maxx`, `kind`
    /// `lifecycle`), named `name` (`created`, `exited`, `failed`, `dropped`, ...), stamped now,
    /// with the session's ids and group and no message, payload or pid. The bus assigns the
    /// cursor. Set the rest with struct update syntax:
    /// `StreamEvent { payload: Some(p), ..StreamEvent::mechanical("dropped", view) }`.
    pub fn mechanical(name: &str, view: &SessionView) -> StreamEvent {
        StreamEvent {
            schema: STREAM_SCHEMA,
            cursor: 0,
            seq: None,
            source_kind: SourceKind::Maxx,
            kind: AuditKind::Lifecycle.as_str().to_string(),
            name: Some(name.to_string()),
            source: "maxx".into(),
            message: None,
            payload: None,
            created_at: now_rfc3339(),
            resource_kind: "session".into(),
            session_id: view.session_id.clone(),
            surface_id: view.surface_id.clone(),
            group: view.group.clone(),
            pid: None,
        }
    }

    /// The bus's copy of an audit entry: same seq, kind, name, source, message, payload, time
    /// and pid; `source_kind` `maxx` for a `lifecycle` entry, `agent` for a declaration. `group`
    /// is the session's group when it was recorded (the entry does not carry one).
    pub fn audited(entry: &AuditEntry, group: Option<String>) -> StreamEvent {
        StreamEvent {
            schema: STREAM_SCHEMA,
            cursor: 0,
            seq: Some(entry.seq),
            source_kind: if entry.kind == AuditKind::Lifecycle {
                SourceKind::Maxx
            } else {
                SourceKind::Agent
            },
            kind: entry.kind.as_str().to_string(),
            name: entry.name.clone(),
            source: entry.source.clone(),
            message: entry.message.clone(),
            payload: entry.payload.clone(),
            created_at: entry.created_at.clone(),
            resource_kind: "session".into(),
            session_id: entry.session_id.clone(),
            surface_id: entry.surface_id.clone(),
            group,
            pid: entry.pid,
        }
    }
}

/// Which events a stream follows. Empty = everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamFilter {
    /// Only events whose `group` is this.
    pub group: Option<String>,
    /// Only this session's events.
    pub session_id: Option<String>,
    /// Only events of this surface.
    pub surface_id: Option<String>,
}

impl StreamFilter {
    /// Whether an event passes the filter.
    pub fn matches(&self, e: &StreamEvent) -> bool {
        self.group
            .as_ref()
            .is_none_or(|g| e.group.as_ref() == Some(g))
            && self.session_id.as_ref().is_none_or(|s| &e.session_id == s)
            && self.surface_id.as_ref().is_none_or(|s| &e.surface_id == s)
    }
}

/// What every member of a group must satisfy for `stream.wait --all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllCondition {
    /// `exited`: every member's lifecycle left `running`.
    Exited,
    /// `idle`: no member is declared `running`.
    Idle,
    /// `declared:<state>`: every member's workflow_state equals it.
    Declared(crate::session::WorkflowState),
}

impl AllCondition {
    /// Parse `exited`, `idle` or `declared:<state>`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "exited" => Ok(AllCondition::Exited),
            "idle" => Ok(AllCondition::Idle),
            other => match other.strip_prefix("declared:") {
                Some(state) => serde_json::from_value(Value::String(state.to_string()))
                    .map(AllCondition::Declared)
                    .map_err(|_| {
                        format!(
                            "declared:<state> takes running, needsInput, blocked, complete or failed; got {state:?}"
                        )
                    }),
                None => Err(format!(
                    "all must be exited, idle or declared:<state>; got {other:?}"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view() -> SessionView {
        serde_json::from_value(json!({
            "session_id": "s1", "surface_id": "f1", "title": null, "command": null, "cwd": "/",
            "status": null, "lifecycle": "running", "metadata": {}, "created_at": "t",
            "updated_at": "t", "pid": 9, "location": "tab", "focused": false,
            "restart_count": 0, "cols": 80, "rows": 24, "group": "g"
        }))
        .unwrap()
    }

    #[test]
    fn a_mechanical_event_is_maxx_lifecycle_with_the_sessions_ids() {
        let mut e = serde_json::to_value(StreamEvent {
            payload: Some(json!({"reason": "count"})),
            ..StreamEvent::mechanical("dropped", &view())
        })
        .unwrap();
        assert!(e["created_at"].as_str().unwrap().ends_with('Z'));
        e["created_at"] = json!("T");
        assert_eq!(
            e,
            json!({
                "schema": 1, "cursor": 0, "source_kind": "maxx", "kind": "lifecycle",
                "name": "dropped", "source": "maxx", "message": null,
                "payload": {"reason": "count"}, "created_at": "T", "resource_kind": "session",
                "session_id": "s1", "surface_id": "f1", "group": "g", "pid": null
            })
        );
    }

    #[test]
    fn an_audited_event_copies_the_entry() {
        let entry = AuditEntry {
            seq: 7,
            kind: AuditKind::Event,
            name: Some("built".into()),
            message: Some("m".into()),
            payload: Some(json!(1)),
            source: "agent-x".into(),
            created_at: "T".into(),
            session_id: "s1".into(),
            surface_id: "f1".into(),
            pid: Some(42),
        };
        let e = StreamEvent::audited(&entry, Some("g".into()));
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({
                "schema": 1, "cursor": 0, "seq": 7, "source_kind": "agent", "kind": "event",
                "name": "built", "source": "agent-x", "message": "m", "payload": 1,
                "created_at": "T", "resource_kind": "session", "session_id": "s1",
                "surface_id": "f1", "group": "g", "pid": 42
            })
        );
        let lifecycle = AuditEntry {
            kind: AuditKind::Lifecycle,
            ..entry
        };
        assert_eq!(
            StreamEvent::audited(&lifecycle, None).source_kind,
            SourceKind::Maxx
        );
    }
}
