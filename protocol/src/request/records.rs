//! The records family: a session's record and its place in the fleet:
//! `sessions.get`, `list`, `update`, `action`, `cancel`, `set-group`, `set-parent`,
//! `archive`, `restart`, `set-restart-policy`.

use super::*;

/// A call on session records.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordsCall {
    /// `sessions.get`
    Get(SessionRef),
    /// `sessions.list`
    List(ListParams),
    /// `sessions.update`
    Update(UpdateParams),
    /// `sessions.action`
    Action(ActionParams),
    /// `sessions.cancel`
    Cancel(SessionRef),
    /// `sessions.set-group`: join a group, or leave with `group` absent/empty.
    SetGroup {
        /// Canonical session id.
        session_id: String,
        /// New group; `None` leaves the current one.
        group: Option<String>,
    },
    /// `sessions.set-parent`: set the parent edge, or clear it with an empty `parent`.
    SetParent {
        /// Canonical session id (the child).
        session_id: String,
        /// New parent; `None` detaches.
        parent: Option<String>,
    },
    /// `sessions.archive`: close the surface, keep the record; idempotent.
    Archive {
        /// Canonical session id.
        session_id: String,
        /// Why (≤ 1024 chars).
        reason: Option<String>,
    },
    /// `sessions.restart`: a fresh surface under the same session id.
    Restart {
        /// Canonical session id.
        session_id: String,
        /// Replace the recorded command; `None` replays the last one.
        command: Option<String>,
    },
    /// `sessions.set-restart-policy` (`None` = never).
    SetRestartPolicy {
        /// Canonical session id.
        session_id: String,
        /// The policy.
        policy: Option<RestartPolicy>,
    },
}

const fn record(
    name: &'static str,
    capabilities: &'static [Capability],
    changes: bool,
    serve: Serve,
) -> MethodSpec {
    MethodSpec {
        name,
        capabilities,
        changes_records: changes,
        serve,
    }
}

const SESSION: Serve = Serve::Session { input: false };

impl Family for RecordsCall {
    const METHODS: &'static [MethodSpec] = {
        use Capability::*;
        &[
            record("sessions.get", &[TabsList], false, Serve::Daemon),
            record("sessions.list", &[TabsList], false, Serve::Daemon),
            record("sessions.update", &[MetadataSet], true, SESSION),
            // Input actions type into the terminal: the input budget.
            record(
                "sessions.action",
                &[TabsFocus],
                true,
                Serve::Session { input: true },
            ),
            record("sessions.cancel", &[TabsClose], true, SESSION),
            record("sessions.set-group", &[GroupsCreate], true, SESSION),
            // The registry checks the edge (no cycle) before the session records it.
            record("sessions.set-parent", &[GroupsCreate], true, Serve::Daemon),
            record("sessions.archive", &[TabsClose], true, SESSION),
            record("sessions.restart", &[TabsRestart], true, SESSION),
            record("sessions.set-restart-policy", &[TabsRestart], true, SESSION),
        ]
    };

    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody> {
        let call = match method {
            "sessions.get" => RecordsCall::Get(SessionRef::decode(params)?),
            "sessions.list" => RecordsCall::List(ListParams::decode(params)?),
            "sessions.update" => RecordsCall::Update(UpdateParams::decode(params)?),
            "sessions.action" => RecordsCall::Action(ActionParams::decode(params)?),
            "sessions.cancel" => RecordsCall::Cancel(SessionRef::decode(params)?),
            "sessions.set-group" => {
                let raw: wire::SetGroup = decode(params)?;
                let group = raw.group.filter(|g| !g.is_empty());
                if let Some(g) = &group {
                    validate_group(g)?;
                }
                RecordsCall::SetGroup {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    group,
                }
            }
            "sessions.set-parent" => {
                let raw: wire::SetParent = decode(params)?;
                let session_id = parse_session_id("session_id", &raw.session_id)?;
                let parent = match raw.parent.filter(|p| !p.is_empty()) {
                    Some(p) => Some(parse_session_id("parent", &p)?),
                    None => None,
                };
                RecordsCall::SetParent { session_id, parent }
            }
            "sessions.archive" => {
                let raw: wire::Archive = decode(params)?;
                if let Some(r) = &raw.reason {
                    check_chars("reason", r, SUMMARY_MAX_CHARS)?;
                }
                RecordsCall::Archive {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    reason: raw.reason,
                }
            }
            "sessions.restart" => {
                let raw: wire::Restart = decode(params)?;
                if raw.last_command && raw.command.is_some() {
                    return Err(ErrorBody::invalid(
                        "sessions.restart takes command or last_command, not both",
                    ));
                }
                if let Some(c) = &raw.command {
                    validate_command(c)?;
                }
                RecordsCall::Restart {
                    session_id: parse_session_id("session_id", &raw.session_id)?,
                    command: raw.command,
                }
            }
            "sessions.set-restart-policy" => {
                let mut map = match params {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                let session_id = match map.remove("session_id") {
                    Some(Value::String(s)) => parse_session_id("session_id", &s)?,
                    _ => return Err(ErrorBody::invalid("session_id is required")),
                };
                let raw: RawRestart = decode(Value::Object(map))?;
                // (The wire form a client builds is `wire::SetRestartPolicy`: the session id
                // and the restart fields.)
                if raw.restart.is_none() {
                    return Err(ErrorBody::invalid(
                        "sessions.set-restart-policy needs restart (never removes the policy)",
                    ));
                }
                RecordsCall::SetRestartPolicy {
                    session_id,
                    policy: raw.policy()?,
                }
            }
            other => return Err(unknown_method(other)),
        };
        Ok(call)
    }

    fn method(&self) -> &'static str {
        match self {
            RecordsCall::Get(_) => "sessions.get",
            RecordsCall::List(_) => "sessions.list",
            RecordsCall::Update(_) => "sessions.update",
            RecordsCall::Action(_) => "sessions.action",
            RecordsCall::Cancel(_) => "sessions.cancel",
            RecordsCall::SetGroup { .. } => "sessions.set-group",
            RecordsCall::SetParent { .. } => "sessions.set-parent",
            RecordsCall::Archive { .. } => "sessions.archive",
            RecordsCall::Restart { .. } => "sessions.restart",
            RecordsCall::SetRestartPolicy { .. } => "sessions.set-restart-policy",
        }
    }

    fn target(&self) -> Option<String> {
        self.session_id().map(str::to_string)
    }

    fn session_id(&self) -> Option<&str> {
        match self {
            RecordsCall::List(_) => None,
            RecordsCall::Get(r) | RecordsCall::Cancel(r) => Some(&r.session_id),
            RecordsCall::Update(p) => Some(&p.session_id),
            RecordsCall::Action(p) => Some(&p.session_id),
            RecordsCall::SetGroup { session_id, .. }
            | RecordsCall::SetParent { session_id, .. }
            | RecordsCall::Archive { session_id, .. }
            | RecordsCall::Restart { session_id, .. }
            | RecordsCall::SetRestartPolicy { session_id, .. } => Some(session_id),
        }
    }

    /// - `sessions.update` that sets `status` needs `state:set` (the stronger gate when both
    ///   are present); a metadata-only update needs `metadata:set`.
    /// - `sessions.action` depends on the action: focus → `tabs:focus`, input/submit →
    ///   `input:send`, cancel/close → `tabs:close`, interrupt → `keys:press`; an interrupt
    ///   whose `signal` ends the program (SIGTERM, SIGKILL, SIGHUP, SIGQUIT) also
    ///   `tabs:close`.
    /// - `sessions.restart` with a `command` other than the recorded one also needs
    ///   `tabs:spawn` (checked by the daemon, which knows the recorded command).
    fn capabilities(&self) -> Vec<Capability> {
        use Capability::*;
        match self {
            RecordsCall::Update(p) if p.status.is_some() => vec![StateSet],
            // A signal that ends the program (anything but SIGINT) is a close, not a key.
            RecordsCall::Action(p) => match p.action {
                ActionKind::Focus => vec![TabsFocus],
                ActionKind::Input | ActionKind::Submit => vec![InputSend],
                ActionKind::Cancel | ActionKind::Close => vec![TabsClose],
                ActionKind::Interrupt => match p.signal {
                    Some(s) if s.ends_the_program() => vec![KeysPress, TabsClose],
                    _ => vec![KeysPress],
                },
            },
            _ => self.spec().capabilities.to_vec(),
        }
    }

    /// An action changes a record only when it focuses or ends the session.
    fn changes_records(&self) -> bool {
        match self {
            RecordsCall::Action(p) => matches!(
                p.action,
                ActionKind::Focus | ActionKind::Cancel | ActionKind::Close
            ),
            _ => self.spec().changes_records,
        }
    }
}

/// One `metadata_filter` constraint: the key is present, and (if `value` is given) its
/// value, compared as a string, equals it.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetadataFilter {
    /// Key that must be present.
    pub key: String,
    /// Value it must equal, compared as a string (non-strings as compact JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// A metadata value as the filter compares it: a string as itself, anything else as
/// compact JSON.
pub fn filter_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl MetadataFilter {
    /// Whether a metadata map satisfies this constraint.
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        match (metadata.get(&self.key), &self.value) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(have), Some(want)) => filter_string(have) == filter_string(want),
        }
    }
}

/// `sessions.list` params (the wire form and the validated form are the same).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ListParams {
    /// Constraints that must all hold (AND).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metadata_filter: Vec<MetadataFilter>,
    /// Only members of this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Only children of this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl ListParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let p: ListParams = decode(params)?;
        if p.metadata_filter.len() > METADATA_FILTER_MAX {
            return Err(ErrorBody::invalid(format!(
                "at most {METADATA_FILTER_MAX} metadata_filter constraints"
            )));
        }
        for f in &p.metadata_filter {
            validate_metadata_key(&f.key)?;
        }
        if let Some(g) = &p.group {
            validate_group(g)?;
        }
        let parent = match &p.parent {
            Some(id) => Some(parse_session_id("parent", id)?),
            None => None,
        };
        Ok(ListParams { parent, ..p })
    }
}

/// `sessions.update` params: status and/or a metadata merge, nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateParams {
    /// Canonical session id.
    pub session_id: String,
    /// New caller-owned status.
    pub status: Option<String>,
    /// Keys to add or overwrite.
    pub metadata: Option<Map<String, Value>>,
}

impl UpdateParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        if let Value::Object(map) = &params {
            if let Some(bad) = map
                .keys()
                .find(|k| !matches!(k.as_str(), "session_id" | "status" | "metadata"))
            {
                return Err(ErrorBody::invalid(format!(
                    "sessions.update accepts only status and metadata; {:?} is not caller-settable",
                    truncate(bad, 64)
                )));
            }
        }
        let raw: wire::Update = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        if raw.status.is_none() && raw.metadata.is_none() {
            return Err(ErrorBody::invalid(
                "sessions.update needs status and/or metadata",
            ));
        }
        if let Some(s) = &raw.status {
            validate_status(s)?;
        }
        if let Some(m) = &raw.metadata {
            validate_metadata_map(m)?;
        }
        Ok(UpdateParams {
            session_id,
            status: raw.status,
            metadata: raw.metadata,
        })
    }
}

/// The `action` of `sessions.action`.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Make this the focused session.
    Focus,
    /// Paste `input` (bracketed when the app enabled mode 2004). Does not submit.
    Input,
    /// Paste `input`, then press Enter.
    Submit,
    /// Close the surface (idempotent).
    Cancel,
    /// Close the surface (idempotent).
    Close,
    /// Ctrl-C through the tty, or `signal` to the foreground process group.
    Interrupt,
}

/// A signal `interrupt` may deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptSignal {
    /// SIGINT
    Int,
    /// SIGTERM
    Term,
    /// SIGKILL
    Kill,
    /// SIGHUP
    Hup,
    /// SIGQUIT
    Quit,
}

impl InterruptSignal {
    /// Whether the signal ends the program rather than interrupting it: everything but
    /// SIGINT. Such an interrupt is a close and needs `tabs:close` as well as `keys:press`.
    pub fn ends_the_program(self) -> bool {
        !matches!(self, InterruptSignal::Int)
    }

    /// Parse `SIGTERM`, `TERM` or `term`.
    pub fn parse(text: &str) -> Result<Self, ErrorBody> {
        let upper = text.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        Ok(match name {
            "INT" => InterruptSignal::Int,
            "TERM" => InterruptSignal::Term,
            "KILL" => InterruptSignal::Kill,
            "HUP" => InterruptSignal::Hup,
            "QUIT" => InterruptSignal::Quit,
            _ => {
                return Err(ErrorBody::invalid(format!(
                    "signal must be one of SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGQUIT; got {:?}",
                    truncate(text, 32)
                )))
            }
        })
    }

    /// The conventional name, e.g. `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            InterruptSignal::Int => "SIGINT",
            InterruptSignal::Term => "SIGTERM",
            InterruptSignal::Kill => "SIGKILL",
            InterruptSignal::Hup => "SIGHUP",
            InterruptSignal::Quit => "SIGQUIT",
        }
    }
}

/// `sessions.action` params.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionParams {
    /// Canonical session id.
    pub session_id: String,
    /// What to do.
    pub action: ActionKind,
    /// Text for `input`/`submit`.
    pub input: Option<String>,
    /// Signal for `interrupt`.
    pub signal: Option<InterruptSignal>,
}

impl ActionParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: wire::Action = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        match raw.action {
            ActionKind::Input if raw.input.is_none() => {
                return Err(ErrorBody::invalid("action input requires input"))
            }
            ActionKind::Input | ActionKind::Submit => {}
            _ if raw.input.is_some() => {
                return Err(ErrorBody::invalid(
                    "input is only valid with action input or submit",
                ))
            }
            _ => {}
        }
        if let Some(input) = &raw.input {
            if input.len() > INPUT_MAX_BYTES {
                return Err(ErrorBody::invalid(format!(
                    "input is {} bytes; the limit is {INPUT_MAX_BYTES}",
                    input.len()
                )));
            }
        }
        let signal = match (raw.action, raw.signal) {
            (ActionKind::Interrupt, Some(s)) => Some(InterruptSignal::parse(&s)?),
            (_, Some(_)) => {
                return Err(ErrorBody::invalid(
                    "signal is only valid with action interrupt",
                ))
            }
            (_, None) => None,
        };
        Ok(ActionParams {
            session_id,
            action: raw.action,
            input: raw.input,
            signal,
        })
    }
}

/// The params objects of this family's methods as the wire carries them: what a client
/// builds (and serializes) and what the decoder reads before it validates.
pub(crate) mod wire {
    use super::*;
    use serde::Serialize;

    /// `sessions.set-group`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct SetGroup {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// The group (`[A-Za-z0-9_.:/@-]{1,128}`); absent or `""` leaves any group.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub group: Option<String>,
    }

    /// `sessions.set-parent`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct SetParent {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// The parent session id; `""` detaches.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub parent: Option<String>,
    }

    /// `sessions.archive`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Archive {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Why (≤ 1024 chars), kept as `archive_reason`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
    }

    /// `sessions.restart`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Restart {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Run this command instead of the recorded one (needs `tabs:spawn` too).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub command: Option<String>,
        /// Run the recorded command again (the default when `command` is absent).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub last_command: bool,
    }

    /// `sessions.update`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Update {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Declared status (≤ 128 chars).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub status: Option<String>,
        /// Metadata keys to set (merged).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    /// `sessions.set-restart-policy`: the session and the restart fields of
    /// `sessions.create`. (Serialize only: the decoder takes `session_id` out and reads the
    /// rest as a `RestartFields`; a field it does not know is reported as ignored.)
    #[derive(Debug, Clone, PartialEq, Default, Serialize)]
    pub struct SetRestartPolicy {
        pub session_id: String,
        #[serde(flatten)]
        pub policy: RawRestart,
    }

    /// `sessions.action`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Action {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// What to do.
        pub action: ActionKind,
        /// `input`/`submit`: the text, pasted (≤ 256 KiB).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub input: Option<String>,
        /// `interrupt`: `SIGINT`, `SIGTERM`, `SIGKILL`, `SIGHUP` or `SIGQUIT` to the foreground process group instead of Ctrl-C.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub signal: Option<String>,
    }
}
