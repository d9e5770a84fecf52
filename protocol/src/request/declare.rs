use super::*;

/// A declaration: a fact an agent states and maxx stores verbatim.
#[derive(Debug, Clone, PartialEq)]
pub enum Declaration {
    /// `sessions.declare-state`: set the free-form status.
    State {
        /// New status.
        state: String,
        /// Optional note.
        message: Option<String>,
    },
    /// `sessions.emit-event`
    Event {
        /// Event name.
        event: String,
        /// Structured payload.
        payload: Option<Value>,
        /// Optional note.
        message: Option<String>,
    },
    /// `sessions.set-metadata`: one key.
    SetMetadata {
        /// Key.
        key: String,
        /// Any JSON value.
        value: Value,
    },
    /// `sessions.remove-metadata`: absent keys are ignored.
    RemoveMetadata {
        /// Keys to remove (at least one).
        keys: Vec<String>,
    },
    /// `sessions.clear-metadata`
    ClearMetadata,
    /// `sessions.set-state`: the displayed workflow state.
    WorkflowState {
        /// One of the fixed vocabulary.
        state: WorkflowState,
        /// Optional note.
        message: Option<String>,
    },
    /// `sessions.set-summary`
    Summary {
        /// ≤ 1024 chars.
        summary: String,
    },
    /// `sessions.set-result`
    SetResult {
        /// ≤ 16384 bytes; must satisfy the declared schema, if any.
        result: String,
    },
    /// `sessions.clear-result`
    ClearResult,
    /// `sessions.set-result-schema`
    SetResultSchema {
        /// A validated schema of the supported subset.
        schema: Value,
    },
    /// `sessions.clear-result-schema`
    ClearResultSchema,
    /// `sessions.set-agent-type`
    AgentType {
        /// Opaque token.
        agent_type: String,
    },
}

/// A declaration verb's table entry: `metadata:set` or `state:set`, changes its record,
/// served by the session's actor.
const fn verb(name: &'static str, capability: &'static [Capability]) -> MethodSpec {
    MethodSpec {
        name,
        capabilities: capability,
        changes_records: true,
        serve: Serve::Session { input: false },
    }
}

const STATE: &[Capability] = &[Capability::StateSet];
const METADATA: &[Capability] = &[Capability::MetadataSet];

impl Family for DeclareParams {
    const METHODS: &'static [MethodSpec] = &[
        verb("sessions.declare-state", STATE),
        verb("sessions.emit-event", STATE),
        verb("sessions.set-metadata", METADATA),
        verb("sessions.remove-metadata", METADATA),
        verb("sessions.clear-metadata", METADATA),
        verb("sessions.set-state", STATE),
        verb("sessions.set-summary", STATE),
        verb("sessions.set-result", STATE),
        verb("sessions.clear-result", STATE),
        verb("sessions.set-result-schema", STATE),
        verb("sessions.clear-result-schema", STATE),
        verb("sessions.set-agent-type", STATE),
        verb("event.emit", STATE),
    ];

    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody> {
        match method {
            "event.emit" => Self::decode_event_emit(params),
            verb => Self::decode_verb(verb, params),
        }
    }

    /// `event.emit` carries a `sessions.emit-event`, and is named so.
    fn method(&self) -> &'static str {
        self.declaration.method()
    }

    fn target(&self) -> Option<String> {
        Some(self.session_id.clone())
    }

    fn session_id(&self) -> Option<&str> {
        Some(&self.session_id)
    }
}

impl Declaration {
    /// The wire method that carries this declaration.
    pub fn method(&self) -> &'static str {
        match self {
            Declaration::State { .. } => "sessions.declare-state",
            Declaration::Event { .. } => "sessions.emit-event",
            Declaration::SetMetadata { .. } => "sessions.set-metadata",
            Declaration::RemoveMetadata { .. } => "sessions.remove-metadata",
            Declaration::ClearMetadata => "sessions.clear-metadata",
            Declaration::WorkflowState { .. } => "sessions.set-state",
            Declaration::Summary { .. } => "sessions.set-summary",
            Declaration::SetResult { .. } => "sessions.set-result",
            Declaration::ClearResult => "sessions.clear-result",
            Declaration::SetResultSchema { .. } => "sessions.set-result-schema",
            Declaration::ClearResultSchema => "sessions.clear-result-schema",
            Declaration::AgentType { .. } => "sessions.set-agent-type",
        }
    }
}

/// Params of every declaration verb: the session, who declares, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclareParams {
    /// Canonical session id.
    pub session_id: String,
    /// Agent-supplied source; the caller's policy source when absent.
    pub source: Option<String>,
    /// The declaration.
    pub declaration: Declaration,
}

pub(crate) fn check_message(message: &Option<String>) -> Result<(), ErrorBody> {
    if let Some(m) = message {
        check_chars("message", m, MESSAGE_MAX_CHARS)?;
    }
    Ok(())
}

impl DeclareParams {
    /// `event.emit {session_id, type, payload?, message?, source?}`: the shorthand for
    /// `sessions.emit-event`.
    fn decode_event_emit(params: Value) -> Result<Self, ErrorBody> {
        let mut params = params;
        if let Value::Object(map) = &mut params {
            if let Some(t) = map.remove("type") {
                if map.insert("event".into(), t).is_some() {
                    return Err(ErrorBody::invalid("event.emit takes type, not event"));
                }
            } else if map.contains_key("event") {
                return Err(ErrorBody::invalid("event.emit takes type, not event"));
            }
        }
        Self::decode_verb("sessions.emit-event", params)
    }

    fn decode_verb(method: &str, params: Value) -> Result<Self, ErrorBody> {
        let raw: wire::Declare = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        if let Some(s) = &raw.source {
            validate_source(s)?;
        }
        check_message(&raw.message)?;
        // Each verb takes only its own fields; anything else is a caller mistake.
        let allowed: &[&str] = match method {
            "sessions.declare-state" => &["state", "message"],
            "sessions.emit-event" => &["event", "payload", "message"],
            "sessions.set-metadata" => &["key", "value", "value_json"],
            "sessions.remove-metadata" => &["key", "keys"],
            "sessions.set-state" => &["state", "message"],
            "sessions.set-summary" => &["summary"],
            "sessions.set-result" => &["result"],
            "sessions.set-result-schema" => &["result_schema"],
            "sessions.set-agent-type" => &["agent_type"],
            _ => &[],
        };
        let present: [(&str, bool); 12] = [
            ("state", raw.state.is_some()),
            ("message", raw.message.is_some()),
            ("event", raw.event.is_some()),
            ("payload", raw.payload.is_some()),
            ("key", raw.key.is_some()),
            ("keys", raw.keys.is_some()),
            ("value", raw.value.is_some()),
            ("value_json", raw.value_json.is_some()),
            ("summary", raw.summary.is_some()),
            ("result", raw.result.is_some()),
            ("result_schema", raw.result_schema.is_some()),
            ("agent_type", raw.agent_type.is_some()),
        ];
        if let Some((field, _)) = present.iter().find(|(f, set)| *set && !allowed.contains(f)) {
            return Err(ErrorBody::invalid(format!(
                "{method} does not take {field}"
            )));
        }
        let missing = |field: &str| ErrorBody::invalid(format!("{method} requires {field}"));
        let declaration = match method {
            "sessions.declare-state" => {
                let state = raw.state.ok_or_else(|| missing("state"))?;
                validate_status(&state)?;
                Declaration::State {
                    state,
                    message: raw.message,
                }
            }
            "sessions.emit-event" => {
                let event = raw.event.ok_or_else(|| missing("event"))?;
                validate_event_name(&event)?;
                if let Some(p) = &raw.payload {
                    validate_depth("payload", p)?;
                    let size = json_size(p);
                    if size > PAYLOAD_MAX_BYTES {
                        return Err(ErrorBody::invalid(format!(
                            "payload is {size} bytes; the limit is {PAYLOAD_MAX_BYTES}"
                        )));
                    }
                }
                Declaration::Event {
                    event,
                    payload: raw.payload,
                    message: raw.message,
                }
            }
            "sessions.set-metadata" => {
                let key = raw.key.ok_or_else(|| missing("key"))?;
                validate_metadata_key(&key)?;
                let value = match (raw.value, raw.value_json) {
                    (Some(v), None) => v,
                    (None, Some(text)) => serde_json::from_str(&text).map_err(|e| {
                        ErrorBody::invalid(format!("value_json is not valid JSON: {e}"))
                    })?,
                    _ => {
                        return Err(ErrorBody::invalid(
                            "sessions.set-metadata takes exactly one of value, value_json",
                        ))
                    }
                };
                validate_metadata_value(&key, &value)?;
                Declaration::SetMetadata { key, value }
            }
            "sessions.remove-metadata" => {
                let mut keys = raw.keys.unwrap_or_default();
                keys.extend(raw.key);
                if keys.is_empty() {
                    return Err(missing("key or keys (at least one)"));
                }
                if keys.len() > METADATA_MAX_KEYS * 4 {
                    return Err(ErrorBody::invalid("too many keys"));
                }
                for k in &keys {
                    validate_metadata_key(k)?;
                }
                Declaration::RemoveMetadata { keys }
            }
            "sessions.clear-metadata" => Declaration::ClearMetadata,
            "sessions.set-state" => {
                let text = raw.state.ok_or_else(|| missing("state"))?;
                let state = serde_json::from_value(Value::String(text.clone())).map_err(|_| {
                    ErrorBody::invalid(format!(
                        "state must be one of running, needsInput, blocked, complete, failed; got {:?}",
                        truncate(&text, 64)
                    ))
                })?;
                Declaration::WorkflowState {
                    state,
                    message: raw.message,
                }
            }
            "sessions.set-summary" => {
                let summary = raw.summary.ok_or_else(|| missing("summary"))?;
                check_chars("summary", &summary, SUMMARY_MAX_CHARS)?;
                Declaration::Summary { summary }
            }
            "sessions.set-result" => {
                let result = raw.result.ok_or_else(|| missing("result"))?;
                validate_result(&result)?;
                Declaration::SetResult { result }
            }
            "sessions.clear-result" => Declaration::ClearResult,
            "sessions.set-result-schema" => {
                let schema = raw.result_schema.ok_or_else(|| missing("result_schema"))?;
                validate_result_schema(&schema)?;
                Declaration::SetResultSchema { schema }
            }
            "sessions.clear-result-schema" => Declaration::ClearResultSchema,
            "sessions.set-agent-type" => {
                let agent_type = raw.agent_type.ok_or_else(|| missing("agent_type"))?;
                validate_agent_type(&agent_type)?;
                Declaration::AgentType { agent_type }
            }
            other => {
                return Err(ErrorBody::new(
                    ErrorCode::UnknownMethod,
                    format!("unknown method {other:?}"),
                ))
            }
        };
        Ok(DeclareParams {
            session_id,
            source: raw.source,
            declaration,
        })
    }
}

/// The params objects of this family's methods as the wire carries them: what a client
/// builds (and serializes) and what the decoder reads before it validates.
pub(crate) mod wire {
    use super::*;
    use serde::Serialize;

    /// Every declaration verb (`sessions.declare-state`, `sessions.set-metadata`, ...): each takes `session_id`, `source` and its own fields.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Declare {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Who declares it (default: the caller's source).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub source: Option<String>,
        /// The workflow state (≤ 128 chars, free-form; `set-state` takes `running`, `needsInput`, `blocked`, `complete`, `failed`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub state: Option<String>,
        /// A note kept with the declaration.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
        /// Event name (`[A-Za-z0-9_.:-]`, ≤ 128 chars).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub event: Option<String>,
        /// Event payload: any JSON value.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub payload: Option<Value>,
        /// Metadata key (`[A-Za-z0-9_.-]{1,64}`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub key: Option<String>,
        /// Metadata keys to remove.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub keys: Option<Vec<String>>,
        /// Metadata value (≤ 2048 bytes).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub value: Option<Value>,
        /// Metadata value as JSON text (instead of `value`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub value_json: Option<String>,
        /// A one-line summary.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub summary: Option<String>,
        /// The final result text (validated against the declared result schema).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub result: Option<String>,
        /// A JSON Schema (supported subset) for the result.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub result_schema: Option<Value>,
        /// The agent runtime (`[A-Za-z0-9_.:-]{1,64}`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_type: Option<String>,
    }
}
