//! The create family: `sessions.create` (a new session running a command) and
//! `sessions.register-current` (a process proving it runs in a session).

use super::*;

/// A call that brings a session into being or binds a caller to one.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateCall {
    /// `sessions.create`
    Create(Box<CreateParams>),
    /// `sessions.register-current`
    RegisterCurrent(RegisterParams),
}

impl Family for CreateCall {
    const METHODS: &'static [MethodSpec] = &[
        MethodSpec {
            name: "sessions.create",
            capabilities: &[Capability::TabsSpawn],
            changes_records: true,
            serve: Serve::Daemon,
        },
        MethodSpec {
            name: "sessions.register-current",
            capabilities: &[Capability::TabsList],
            changes_records: false,
            serve: Serve::Daemon,
        },
    ];

    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody> {
        let call = match method {
            "sessions.create" => CreateCall::Create(Box::new(CreateParams::decode(params)?)),
            "sessions.register-current" => CreateCall::RegisterCurrent(decode(params)?),
            other => return Err(unknown_method(other)),
        };
        Ok(call)
    }

    fn method(&self) -> &'static str {
        match self {
            CreateCall::Create(_) => "sessions.create",
            CreateCall::RegisterCurrent(_) => "sessions.register-current",
        }
    }

    /// A create's target is the group it joins.
    fn target(&self) -> Option<String> {
        match self {
            CreateCall::Create(p) => p.group.clone(),
            CreateCall::RegisterCurrent(_) => None,
        }
    }

    /// `sessions.create` with `group` or `parent` also needs `groups:create`; with a restart
    /// policy also `tabs:restart`. Create-time metadata rides on `tabs:spawn`.
    fn capabilities(&self) -> Vec<Capability> {
        let mut caps = self.spec().capabilities.to_vec();
        if let CreateCall::Create(p) = self {
            if p.group.is_some() || p.parent.is_some() {
                caps.push(Capability::GroupsCreate);
            }
            if p.restart_policy.is_some() {
                caps.push(Capability::TabsRestart);
            }
        }
        caps
    }
}

/// The restart-policy fields shared by `sessions.create` and `sessions.set-restart-policy`
/// as the wire carries them (`wire::RestartFields`).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RawRestart {
    /// `never`, `on-failure`, `always`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartMode>,
    /// Exit codes that restart under `on-failure`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_exit_codes: Option<Vec<i32>>,
    /// Restarts allowed within `restart_window`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<u32>,
    /// Seconds or a duration string.
    #[cfg_attr(
        feature = "schemars",
        schemars(schema_with = "crate::duration::json_schema")
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_window: Option<Value>,
    /// `MIN..MAX` durations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
}

/// Default `max_restarts`.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;
/// Default restart window.
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(600);
/// Default backoff range.
pub const DEFAULT_BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

impl RawRestart {
    fn is_empty(&self) -> bool {
        self.restart.is_none()
            && self.restart_exit_codes.is_none()
            && self.max_restarts.is_none()
            && self.restart_window.is_none()
            && self.backoff.is_none()
    }

    /// The policy, or `None` for `never`. Tuning without a mode is refused.
    pub(crate) fn policy(self) -> Result<Option<RestartPolicy>, ErrorBody> {
        let mode = match self.restart {
            None if self.is_empty() => return Ok(None),
            None => {
                return Err(ErrorBody::invalid(
                    "restart_exit_codes, max_restarts, restart_window and backoff need restart",
                ))
            }
            Some(RestartMode::Never) => return Ok(None),
            Some(m) => m,
        };
        let exit_codes = self.restart_exit_codes.unwrap_or_else(|| vec![0]);
        if exit_codes.len() > 256 || exit_codes.iter().any(|c| !(0..=255).contains(c)) {
            return Err(ErrorBody::invalid(
                "restart_exit_codes are 0..=255, at most 256",
            ));
        }
        let max_restarts = self.max_restarts.unwrap_or(DEFAULT_MAX_RESTARTS);
        if max_restarts == 0 || max_restarts > 10_000 {
            return Err(ErrorBody::invalid("max_restarts must be 1..=10000"));
        }
        let window = match &self.restart_window {
            None | Some(Value::Null) => DEFAULT_RESTART_WINDOW,
            Some(v) => duration_from_json(v).map_err(ErrorBody::invalid)?,
        };
        if window.is_zero() || window > Duration::from_secs(7 * 24 * 3600) {
            return Err(ErrorBody::invalid(
                "restart_window must be between 1s and 7 days",
            ));
        }
        let (min, max) = match &self.backoff {
            None => DEFAULT_BACKOFF,
            Some(text) => {
                let (a, b) = text
                    .split_once("..")
                    .ok_or_else(|| ErrorBody::invalid("backoff is MIN..MAX, e.g. 1s..1m"))?;
                let min = crate::duration::parse_duration(a).map_err(ErrorBody::invalid)?;
                let max = crate::duration::parse_duration(b).map_err(ErrorBody::invalid)?;
                (min, max)
            }
        };
        if min.is_zero() || min > max || max > Duration::from_secs(3600) {
            return Err(ErrorBody::invalid("backoff needs 0 < MIN <= MAX <= 1h"));
        }
        Ok(Some(RestartPolicy {
            mode,
            exit_codes,
            max_restarts,
            window_secs: window.as_secs().max(1),
            backoff_min_ms: min.as_millis() as u64,
            backoff_max_ms: max.as_millis() as u64,
        }))
    }
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
    /// Declared agent type (recorded as an `agent-type` audit entry).
    pub agent_type: Option<String>,
    /// Declared result contract.
    pub result_schema: Option<Value>,
    /// Group to join at create (needs groups:create).
    pub group: Option<String>,
    /// Parent session (needs groups:create; must exist).
    pub parent: Option<String>,
    /// Profile to start from; explicit fields override it.
    pub profile: Option<String>,
    /// History lines of the screen model (default 10,000).
    pub scrollback_lines: Option<usize>,
    /// Opt-in automatic restart (needs tabs:restart too).
    pub restart_policy: Option<RestartPolicy>,
    /// Which fields the caller set explicitly (so a profile does not override them).
    pub explicit: ExplicitFields,
}

/// Which profile-overridable create fields the caller supplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExplicitFields {
    /// `command` was given.
    pub command: bool,
    /// `agent_type` was given.
    pub agent_type: bool,
    /// `title` was given.
    pub title: bool,
    /// `cwd` was given.
    pub cwd: bool,
}

impl CreateParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: wire::Create = decode(params)?;
        let restart_policy = RawRestart {
            restart: raw.restart,
            restart_exit_codes: raw.restart_exit_codes.clone(),
            max_restarts: raw.max_restarts,
            restart_window: raw.restart_window.clone(),
            backoff: raw.backoff.clone(),
        }
        .policy()?;
        if raw
            .scrollback_lines
            .is_some_and(|n| n > MAX_SCROLLBACK_LINES)
        {
            return Err(ErrorBody::invalid(format!(
                "scrollback_lines is capped at {MAX_SCROLLBACK_LINES}"
            )));
        }
        if let Some(p) = &raw.profile {
            check_chars("profile", p, 128)?;
        }
        let explicit = ExplicitFields {
            command: raw.command.is_some(),
            agent_type: raw.agent_type.is_some(),
            title: raw.title.is_some(),
            cwd: raw.cwd.is_some(),
        };
        let group = raw.group.filter(|g| !g.is_empty());
        if let Some(g) = &group {
            validate_group(g)?;
        }
        let parent = match raw.parent.filter(|p| !p.is_empty()) {
            Some(p) => Some(parse_session_id("parent", &p)?),
            None => None,
        };
        if let Some(a) = &raw.agent_type {
            validate_agent_type(a)?;
        }
        if let Some(s) = &raw.result_schema {
            validate_result_schema(s)?;
        }
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
        check_size(cols, rows)?;
        super::screen::check_grid(
            cols,
            rows,
            raw.scrollback_lines.unwrap_or(DEFAULT_SCROLLBACK_LINES),
        )?;
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
            agent_type: raw.agent_type,
            result_schema: raw.result_schema,
            group,
            parent,
            profile: raw.profile,
            scrollback_lines: raw.scrollback_lines,
            restart_policy,
            explicit,
        })
    }
}

/// `sessions.register-current` params: the proof the spawned process holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterParams {
    /// `MAXX_SURFACE_ID` of the calling process.
    pub surface_id: String,
    /// `MAXX_REGISTRATION_TOKEN` of the calling process.
    pub registration_token: String,
}

/// The params objects of this family's methods as the wire carries them: what a client
/// builds (and serializes) and what the decoder reads before it validates.
pub(crate) mod wire {
    use super::*;
    use serde::Serialize;

    pub use super::RawRestart as RestartFields;

    /// `sessions.create`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Create {
        /// Display title (≤ 256 chars).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub title: Option<String>,
        /// Working directory: absolute, an existing directory. Default: the daemon's $HOME.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub cwd: Option<String>,
        /// Command line run with `/bin/sh -c`. Default: the login shell.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub command: Option<String>,
        /// `KEY=VALUE` entries for the child only; never stored or returned.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub env: Vec<String>,
        /// Create-time metadata: ≤ 32 keys `[A-Za-z0-9_.-]{1,64}`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
        /// Initial declared status (≤ 128 chars).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub status: Option<String>,
        /// Where the surface goes; default `tab`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub location: Option<Location>,
        /// With `location: split`: the session to split.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub split_target: Option<String>,
        /// With `location: split`: the edge; default `right`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub split_direction: Option<SplitDirection>,
        /// Take focus (default true, false for a split).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub focus: Option<bool>,
        /// Terminal columns, 2..=1000 (default 80).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub cols: Option<u16>,
        /// Terminal rows, 1..=1000 (default 24).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub rows: Option<u16>,
        /// The agent runtime in the session (`[A-Za-z0-9_.:-]{1,64}`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_type: Option<String>,
        /// A JSON Schema (supported subset) every declared result must satisfy.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub result_schema: Option<Value>,
        /// Group to join (`[A-Za-z0-9_.:/@-]{1,128}`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub group: Option<String>,
        /// Parent session id.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub parent: Option<String>,
        /// A named profile filling the fields not given.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub profile: Option<String>,
        /// Scrollback kept, ≤ 100000 (default 10000).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub scrollback_lines: Option<usize>,
        /// Restart policy: `never` (default), `on-failure`, `always`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub restart: Option<RestartMode>,
        /// Exit codes that restart under `on-failure`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub restart_exit_codes: Option<Vec<i32>>,
        /// Restarts allowed within `restart_window` (default 5).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub max_restarts: Option<u32>,
        /// The window `max_restarts` counts in: seconds, or `30s`/`5m`/`1h` (default 10m).
        #[cfg_attr(
            feature = "schemars",
            schemars(schema_with = "crate::duration::json_schema")
        )]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub restart_window: Option<Value>,
        /// `MIN..MAX` delay before an automatic restart (default `1s..60s`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub backoff: Option<String>,
    }
}
