//! The structured event stream: the envelope every `stream.watch` line and `stream.wait`
//! match carries, and the stream verbs' params.

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
