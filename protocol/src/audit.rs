//! Audit entries: the per-session, append-only record of every declaration and of the
//! lifecycle actions maxx takes itself. `wait`, `watch` and `events` read this log, never
//! terminal output.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an audit entry records (`kind` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditKind {
    /// `state`: `declare-state` (the free-form status).
    State,
    /// `event`: `emit-event`.
    Event,
    /// `metadata`: one per affected key of `set-metadata`, `remove-metadata`,
    /// `clear-metadata` (name `*`) and the merge in `update`.
    Metadata,
    /// `workflow-state`: `set-state`.
    WorkflowState,
    /// `summary`: `set-summary`.
    Summary,
    /// `result`: `set-result` (name `result.set`) and `clear-result` (name `result.cleared`).
    Result,
    /// `result-schema`: `set-result-schema` / `clear-result-schema`.
    ResultSchema,
    /// `agent-type`: `set-agent-type`, or `agent_type` at create.
    AgentType,
    /// `lifecycle`: actions maxx records itself (archive, restart).
    Lifecycle,
    /// `ask`: `sessions ask` (name `asked`) and `sessions answer` (name `answered`).
    Ask,
}

impl AuditKind {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::State => "state",
            AuditKind::Event => "event",
            AuditKind::Metadata => "metadata",
            AuditKind::WorkflowState => "workflow-state",
            AuditKind::Summary => "summary",
            AuditKind::Result => "result",
            AuditKind::ResultSchema => "result-schema",
            AuditKind::AgentType => "agent-type",
            AuditKind::Lifecycle => "lifecycle",
            AuditKind::Ask => "ask",
        }
    }
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Per-session sequence, from 1, never reused.
    pub seq: u64,
    /// What was recorded.
    pub kind: AuditKind,
    /// The declared name: the state, the event, the metadata key (`*` for a clear), ...
    pub name: Option<String>,
    /// Free text supplied with the declaration (`removed`/`cleared` for metadata removals).
    pub message: Option<String>,
    /// Structured payload: the event payload, the metadata value, the result, ...
    pub payload: Option<Value>,
    /// Who declared it (agent-supplied, else the caller's policy source), or `maxx`.
    pub source: String,
    /// When it was recorded.
    pub created_at: String,
    /// The session.
    pub session_id: String,
    /// The session's surface at the time.
    pub surface_id: String,
    /// Foreground process group of the PTY at record time (`tcgetpgrp`), if it had one.
    pub pid: Option<i32>,
}
