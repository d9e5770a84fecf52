//! The session view: what `sessions.get`, `sessions.list` and `sessions.create` return.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Maxx-owned lifecycle of a session (`lifecycle` on the wire).
///
/// `running` → `exited` (the child's exit status arrived from the kernel) → `closed` (the
/// surface was closed by `cancel`/`close`). A session closed while its child still ran goes
/// straight from `running` to `closed`.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// The child process is alive.
    Running,
    /// The child exited; its status is in `exit_code`/`exit_signal`. The surface (PTY,
    /// screen) still exists.
    Exited,
    /// The surface was closed; the record and its audit log stay readable.
    Closed,
    /// The session was archived; the record and its audit log stay readable.
    Archived,
    /// The child exited and its restart policy will start it again at `next_restart_at`.
    Backoff,
}

impl Lifecycle {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Running => "running",
            Lifecycle::Exited => "exited",
            Lifecycle::Closed => "closed",
            Lifecycle::Archived => "archived",
            Lifecycle::Backoff => "backoff",
        }
    }

    /// Whether no further lifecycle transition can happen without a restart.
    pub fn is_terminal(self) -> bool {
        matches!(self, Lifecycle::Closed | Lifecycle::Archived)
    }

    /// Whether the run is over (the lifecycle left `running`): `watch` streams end and
    /// `wait --state/--event` answer `ended`.
    pub fn has_ended(self) -> bool {
        !matches!(self, Lifecycle::Running | Lifecycle::Backoff)
    }

    /// Whether the session still has a surface (PTY) to act on.
    pub fn has_surface(self) -> bool {
        matches!(self, Lifecycle::Running | Lifecycle::Exited)
    }
}

/// Where a new surface is placed (`location`): `tab` (default), `window` or `split`.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    /// A new tab.
    #[default]
    Tab,
    /// A new window.
    Window,
    /// A pane splitting the surface of `split_target`.
    Split,
}

/// The edge a split pane is placed on (`split_direction`), default `right`.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitDirection {
    /// Right of the target (default).
    #[default]
    Right,
    /// Below the target.
    Down,
    /// Left of the target.
    Left,
    /// Above the target.
    Up,
}

/// One session as the API reports it. Field names follow the seed's response example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    /// Stable UUID of the session; survives restarts.
    pub session_id: String,
    /// UUID of the current surface (PTY + screen); new on every restart.
    pub surface_id: String,
    /// Caller-supplied title.
    pub title: Option<String>,
    /// The command the session runs (`sh -c`), or null for a login shell.
    pub command: Option<String>,
    /// Working directory the child started in.
    pub cwd: String,
    /// Caller-owned free-form status.
    pub status: Option<String>,
    /// Maxx-owned lifecycle.
    pub lifecycle: Lifecycle,
    /// Agent-reported metadata, verbatim.
    pub metadata: Map<String, Value>,
    /// When the session was created.
    pub created_at: String,
    /// When anything in the record last changed.
    pub updated_at: String,
    /// Pid of the child process while it runs; null once it exited or the surface closed.
    pub pid: Option<u32>,
    /// Exit code of the child, once the kernel reported an exit (null if killed by a signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Name of the signal that killed the child (`SIGKILL`), if it died by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_signal: Option<String>,
    /// Where the surface was placed.
    pub location: Location,
    /// For a split: the session whose surface was split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_target: Option<String>,
    /// For a split: the edge it was placed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_direction: Option<SplitDirection>,
    /// Whether this is the daemon's focused session (what `maxx attach` opens).
    pub focused: bool,
    /// How many times the session was restarted.
    pub restart_count: u32,
    /// The title the program set with an OSC 0/2 escape (a mechanical fact), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_title: Option<String>,
    /// PTY width in columns.
    pub cols: u16,
    /// PTY height in rows.
    pub rows: u16,
    /// Restored from `registry.json` at daemon start and not restarted since: detached
    /// from any live surface (a mechanical fact about this run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
    /// Last time maxx observed the surface still existing (used for retention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
    /// The opt-in automatic restart policy (absent = never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    /// In `backoff`: when the next automatic restart happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_restart_at: Option<String>,
    /// The restart policy's budget was spent; the session stays `exited`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restart_gave_up: bool,
    /// Why the session was archived (`archive --reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_reason: Option<String>,
    /// The session's group, a caller-supplied opaque label (`set-group`, `create --group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The parent session (`set-parent`, `create --parent`); durable, never inferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Agent-declared workflow state (`set-state`), shown as a badge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_state: Option<WorkflowState>,
    /// When `workflow_state` was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_state_at: Option<String>,
    /// Who declared `workflow_state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_state_source: Option<String>,
    /// Agent-declared one-line summary (`set-summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// When `summary` was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_at: Option<String>,
    /// Who declared `summary`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_source: Option<String>,
    /// Agent-declared result text (`set-result`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// When `result` was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_at: Option<String>,
    /// Who declared `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_source: Option<String>,
    /// Declared contract every `set-result` must satisfy (`set-result-schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_schema: Option<Value>,
    /// Agent-declared type, an opaque token (`set-agent-type`, `agent_type` at create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// When `agent_type` was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type_at: Option<String>,
    /// Who declared `agent_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type_source: Option<String>,
}

/// The agent-declared workflow state (`workflow_state`): exactly one of `running`,
/// `needsInput`, `blocked`, `complete`, `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WorkflowState {
    /// `running`
    #[serde(rename = "running")]
    Running,
    /// `needsInput`
    #[serde(rename = "needsInput")]
    NeedsInput,
    /// `blocked`
    #[serde(rename = "blocked")]
    Blocked,
    /// `complete`
    #[serde(rename = "complete")]
    Complete,
    /// `failed`
    #[serde(rename = "failed")]
    Failed,
}

impl WorkflowState {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowState::Running => "running",
            WorkflowState::NeedsInput => "needsInput",
            WorkflowState::Blocked => "blocked",
            WorkflowState::Complete => "complete",
            WorkflowState::Failed => "failed",
        }
    }
}

/// How a wait ended (`result.outcome`): `matched`, `timeout` or `ended`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The condition held.
    Matched,
    /// The timeout elapsed first (CLI exit 124).
    Timeout,
    /// The session reached a state from which the condition can no longer hold (CLI exit 1).
    Ended,
}

/// When a restart policy fires (`restart`): never, on a failing exit, or on any exit.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartMode {
    /// `never` (the default).
    Never,
    /// `on-failure`: an exit whose code is not in `exit_codes`, or death by a signal.
    OnFailure,
    /// `always`: any exit.
    Always,
}

/// An opt-in automatic restart policy. The only trigger is the child's exit status as
/// the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartPolicy {
    /// When to restart.
    pub mode: RestartMode,
    /// Exit codes that count as success for `on-failure` (default `[0]`).
    pub exit_codes: Vec<i32>,
    /// At most this many automatic restarts within `window_secs`.
    pub max_restarts: u32,
    /// The sliding window for `max_restarts`, in seconds.
    pub window_secs: u64,
    /// First backoff delay, in milliseconds (doubles per restart in the window).
    pub backoff_min_ms: u64,
    /// Backoff cap, in milliseconds.
    pub backoff_max_ms: u64,
}
