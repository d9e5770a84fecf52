//! The MCP tool catalog: one entry per tool, each one socket method whose params are one of
//! the protocol's wire types. Adding a tool is adding an entry to [`TOOLS`] (and its row to
//! `docs/agents.md`, which a test compares with this table).
//!
//! A call's arguments are decoded into the entry's wire type (which refuses unknown fields
//! and wrong types), after the entry's own narrowing: only its `fields`, its `required`
//! ones present, its `fixed` ones set by the tool. The wire value is then serialized as the
//! request's params, exactly as the CLI sends them (`crate::request`).

use maxx_protocol::capability::Capability;
use maxx_protocol::error::ErrorBody;
use maxx_protocol::request::{wire, ListParams};
use rmcp::model::{JsonObject, Tool as McpTool, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// What a tool does to the world, for the MCP annotations hosts show and gate on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only (records, the screen, the policy).
    Read,
    /// Changes a record or types into a terminal, ending nothing.
    Write,
    /// Ends or replaces a running program (close, archive, restart, a killing signal).
    Destructive,
}

/// The JSON Schema and the typed encoder of one wire params type.
#[derive(Clone, Copy)]
pub struct Params {
    /// The input schema, derived from the wire type (`schemars`).
    schema: fn() -> Arc<JsonObject>,
    /// Arguments → the wire type → the params object; the error says what serde refused.
    encode: fn(Value) -> Result<Value, String>,
}

/// The schema and encoder of wire type `P`.
const fn typed<P: JsonSchema + DeserializeOwned + Serialize + 'static>() -> Params {
    Params {
        schema: schema_of::<P>,
        encode: encode_as::<P>,
    }
}

fn schema_of<P: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::tool::schema_for_input::<P>()
        .unwrap_or_else(|e| panic!("a wire params type's schema is an object: {e}"))
}

/// A tool's arguments as its wire type. An argument the type does not take is refused here
/// (the daemon would ignore it with a warning, but a tool's schema comes from the same build,
/// so an unknown argument is the agent's typo, and is refused before anything is sent).
fn encode_as<P: DeserializeOwned + Serialize>(args: Value) -> Result<Value, String> {
    let mut unknown = Vec::new();
    let typed: P = serde_ignored::deserialize(&args, |path| unknown.push(path.to_string()))
        .map_err(|e| e.to_string())?;
    if !unknown.is_empty() {
        return Err(format!(
            "unknown argument(s): {}; the tool's input schema lists what it takes",
            unknown.join(", ")
        ));
    }
    Ok(serde_json::to_value(typed).expect("wire params serialize"))
}

/// The params of the methods that take none (`daemon.status`, `policy.sources`, ...).
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// One MCP tool.
pub struct Tool {
    /// The tool's name, as hosts list it.
    pub name: &'static str,
    /// The socket method every call sends (exactly one request per call).
    pub method: &'static str,
    /// What the model reads to pick the tool.
    pub description: &'static str,
    /// The capabilities the `example` call needs; `more` says when a call needs others.
    pub capabilities: &'static [Capability],
    /// When a call needs other capabilities (empty: never). Shown in the docs table.
    pub more: &'static str,
    /// The wire params type.
    params: Params,
    /// The wire fields this tool takes; `None`: all of the type's.
    fields: Option<&'static [&'static str]>,
    /// Fields this tool requires though the wire type has them optional.
    required: &'static [&'static str],
    /// Wire fields the tool sets itself, as JSON strings (`submit` sets `action`).
    fixed: &'static [(&'static str, &'static str)],
    /// For the annotations.
    pub effect: Effect,
    /// A long wait: it reports progress, ends when the client cancels it, and the socket
    /// read is bounded by its own `timeout` rather than the short default.
    pub waits: bool,
    /// One call that works, with `ID` for a session id (tests decode it; docs show it).
    pub example: &'static str,
}

/// Declaration tools: `sessions.<verb>` with `session_id`, `source` and the verb's own fields
/// of the shared `wire::Declare`.
macro_rules! declare {
    ($name:literal, $method:literal, $desc:literal, [$($field:literal),*], required [$($req:literal),*], $example:literal) => {
        Tool {
            name: $name,
            method: $method,
            description: $desc,
            capabilities: &[Capability::StateSet],
            more: "",
            params: typed::<wire::Declare>(),
            fields: Some(&["session_id", "source", $($field),*]),
            required: &[$($req),*],
            fixed: &[],
            effect: Effect::Write,
            waits: false,
            example: $example,
        }
    };
}

/// Every tool, in the order hosts list them: lifecycle, the read -> act -> wait loop,
/// declarations, streams, the policy.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "create",
        method: "sessions.create",
        description: "Start a session: a program (`command`, default the login shell) in a new PTY. \
            Returns {session} with its session_id. Set `result_schema` to constrain the result the \
            program will declare.",
        capabilities: &[Capability::TabsSpawn],
        more: "+ `groups:create` with `group`/`parent`; + `tabs:restart` with a restart policy",
        params: typed::<wire::Create>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"command":"make test","title":"tests","cwd":"/tmp"}"#,
    },
    Tool {
        name: "list",
        method: "sessions.list",
        description: "List sessions (records: lifecycle, declared status, result, metadata), \
            optionally filtered by group, parent or metadata.",
        capabilities: &[Capability::TabsList],
        more: "",
        params: typed::<ListParams>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: r#"{"group":"release"}"#,
    },
    Tool {
        name: "get",
        method: "sessions.get",
        description: "One session's record: lifecycle, pid, exit_code/exit_signal, declared \
            status, workflow state, summary, result, metadata.",
        capabilities: &[Capability::TabsList],
        more: "",
        params: typed::<wire::Session>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: r#"{"session_id":"ID"}"#,
    },
    Tool {
        name: "snapshot",
        method: "sessions.snapshot",
        description: "Read the session's screen now: visible lines, cursor, title (optionally \
            scrollback, cells). Needs `output:read`, which the user grants in the policy file.",
        capabilities: &[Capability::OutputRead],
        more: "",
        params: typed::<wire::Read>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: r#"{"session_id":"ID","tail":20}"#,
    },
    Tool {
        name: "inspect",
        method: "sessions.inspect",
        description: "The terminal's modes and foreground process (pid, command line), as \
            reported by the kernel; interprets nothing.",
        capabilities: &[Capability::OutputRead],
        more: "",
        params: typed::<wire::Session>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: r#"{"session_id":"ID"}"#,
    },
    Tool {
        name: "send_keys",
        method: "sessions.send-keys",
        description: "Press keys in the session's terminal: key names (`Enter`, `Up`, `Tab`), \
            chords (`C-c`, `M-x`) and text words, in order. Does not wait for anything: follow \
            it with `wait` (`until`) and read with `snapshot`.",
        capabilities: &[Capability::KeysPress],
        more: "+ `input:send` when a word is text",
        params: typed::<wire::SendKeys>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","keys":["C-c"]}"#,
    },
    Tool {
        name: "paste",
        method: "sessions.paste",
        description: "Paste text into the session's terminal (bracketed when the program asked \
            for it). Does not press Enter.",
        capabilities: &[Capability::InputSend],
        more: "",
        params: typed::<wire::Paste>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","text":"hello"}"#,
    },
    Tool {
        name: "submit",
        method: "sessions.action",
        description: "Paste `input` (may be empty) and press Enter: answer a prompt or type a \
            command line. Does not wait for its outcome.",
        capabilities: &[Capability::InputSend],
        more: "",
        params: typed::<wire::Action>(),
        fields: Some(&["session_id", "input"]),
        required: &[],
        fixed: &[("action", r#""submit""#)],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","input":"yes"}"#,
    },
    Tool {
        name: "run",
        method: "sessions.run",
        description: "Run one command line at the session's shell prompt and wait for it: \
            returns {exit_code, output, duration_ms}. Only for a POSIX shell waiting at its \
            prompt; refused with `foreground_busy` otherwise (use send_keys + wait). Error \
            `timeout` if the budget runs out.",
        capabilities: &[Capability::OutputRead, Capability::InputSend],
        more: "",
        params: typed::<wire::Run>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Write,
        waits: true,
        example: r#"{"session_id":"ID","command":"cargo test","timeout":"10m"}"#,
    },
    Tool {
        name: "wait",
        method: "sessions.wait",
        description: "Wait for exactly one condition: `lifecycle` (e.g. exited), a declared \
            `state`, a declared `event`, or screen text (`until` / `regex`, needs \
            `output:read`). Returns {outcome: matched|timeout|ended, session}; a timeout is an \
            answer, not an error. Reports progress; cancel it to stop waiting.",
        capabilities: &[Capability::TabsList],
        more: "`output:read` instead with `until`/`regex`",
        params: typed::<wire::Wait>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: true,
        example: r#"{"session_id":"ID","lifecycle":"exited","timeout":"10m"}"#,
    },
    Tool {
        name: "interrupt",
        method: "sessions.action",
        description: "Interrupt the foreground program: Ctrl-C through the terminal, or \
            `signal` (SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGQUIT) to its process group. The \
            exit that follows does not trigger the restart policy.",
        capabilities: &[Capability::KeysPress],
        more: "+ `tabs:close` with a `signal` that ends the program (not `SIGINT`)",
        params: typed::<wire::Action>(),
        fields: Some(&["session_id", "signal"]),
        required: &[],
        fixed: &[("action", r#""interrupt""#)],
        effect: Effect::Destructive,
        waits: false,
        example: r#"{"session_id":"ID"}"#,
    },
    Tool {
        name: "resize",
        method: "sessions.resize",
        description: "Resize the session's terminal.",
        capabilities: &[Capability::InputSend],
        more: "",
        params: typed::<wire::Resize>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","cols":120,"rows":40}"#,
    },
    Tool {
        name: "cancel",
        method: "sessions.cancel",
        description: "Close the session: hang up its terminal and end its program's process \
            group. The record stays (lifecycle closed); `restart` can bring it back.",
        capabilities: &[Capability::TabsClose],
        more: "",
        params: typed::<wire::Session>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Destructive,
        waits: false,
        example: r#"{"session_id":"ID"}"#,
    },
    Tool {
        name: "archive",
        method: "sessions.archive",
        description: "Archive the session: close it (if running) and mark it archived, with \
            an optional reason.",
        capabilities: &[Capability::TabsClose],
        more: "",
        params: typed::<wire::Archive>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Destructive,
        waits: false,
        example: r#"{"session_id":"ID","reason":"done"}"#,
    },
    Tool {
        name: "restart",
        method: "sessions.restart",
        description: "Restart the session's program in a fresh terminal (the recorded command, \
            or `command`). Clears the per-run declarations (state, summary, result).",
        capabilities: &[Capability::TabsRestart],
        more: "+ `tabs:spawn` with a `command` other than the recorded one",
        params: typed::<wire::Restart>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Destructive,
        waits: false,
        example: r#"{"session_id":"ID","last_command":true}"#,
    },
    Tool {
        name: "set_status",
        method: "sessions.update",
        description: "Declare the session's status (free-form, shown in lists; `wait` with \
            `state` matches it).",
        capabilities: &[Capability::StateSet],
        more: "",
        params: typed::<wire::Update>(),
        fields: Some(&["session_id", "status"]),
        required: &["status"],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","status":"reviewing"}"#,
    },
    declare!(
        "declare_state",
        "sessions.declare-state",
        "Declare a workflow state (free-form) with an optional note. Recorded verbatim with its source.",
        ["state", "message"],
        required["state"],
        r#"{"session_id":"ID","state":"waiting-for-review"}"#
    ),
    declare!(
        "set_state",
        "sessions.set-state",
        "Declare the workflow state: running, needsInput, blocked, complete or failed.",
        ["state", "message"],
        required["state"],
        r#"{"session_id":"ID","state":"complete"}"#
    ),
    declare!(
        "set_summary",
        "sessions.set-summary",
        "Declare a one-line summary of where the work stands.",
        ["summary"],
        required["summary"],
        r#"{"session_id":"ID","summary":"3 of 5 steps done"}"#
    ),
    declare!(
        "set_result",
        "sessions.set-result",
        "Declare the session's final result (text; validated against its result schema when \
         one is declared). A supervisor reads it with `get`.",
        ["result"],
        required["result"],
        r#"{"session_id":"ID","result":"{\"ok\":true}"}"#
    ),
    declare!(
        "clear_result",
        "sessions.clear-result",
        "Clear the declared result.",
        [],
        required[],
        r#"{"session_id":"ID"}"#
    ),
    declare!(
        "set_result_schema",
        "sessions.set-result-schema",
        "Declare the JSON Schema (supported subset) the result must satisfy.",
        ["result_schema"],
        required["result_schema"],
        r#"{"session_id":"ID","result_schema":{"type":"object"}}"#
    ),
    declare!(
        "clear_result_schema",
        "sessions.clear-result-schema",
        "Remove the declared result schema.",
        [],
        required[],
        r#"{"session_id":"ID"}"#
    ),
    declare!(
        "emit_event",
        "sessions.emit-event",
        "Declare a named event with an optional JSON payload; `wait`/`stream_wait` with \
         `event` wake on it.",
        ["event", "payload", "message"],
        required["event"],
        r#"{"session_id":"ID","event":"tests.passed","payload":{"count":12}}"#
    ),
    Tool {
        name: "set_metadata",
        method: "sessions.set-metadata",
        description: "Set one metadata key (`value`, or JSON text in `value_json`).",
        capabilities: &[Capability::MetadataSet],
        more: "",
        params: typed::<wire::Declare>(),
        fields: Some(&["session_id", "source", "key", "value", "value_json"]),
        required: &["key"],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","key":"ticket","value":"ENG-42"}"#,
    },
    Tool {
        name: "remove_metadata",
        method: "sessions.remove-metadata",
        description: "Remove metadata keys.",
        capabilities: &[Capability::MetadataSet],
        more: "",
        params: typed::<wire::Declare>(),
        fields: Some(&["session_id", "source", "keys"]),
        required: &["keys"],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","keys":["ticket"]}"#,
    },
    Tool {
        name: "clear_metadata",
        method: "sessions.clear-metadata",
        description: "Remove every metadata key.",
        capabilities: &[Capability::MetadataSet],
        more: "",
        params: typed::<wire::Declare>(),
        fields: Some(&["session_id", "source"]),
        required: &[],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID"}"#,
    },
    declare!(
        "set_agent_type",
        "sessions.set-agent-type",
        "Declare which agent runtime runs in the session.",
        ["agent_type"],
        required["agent_type"],
        r#"{"session_id":"ID","agent_type":"claude-code"}"#
    ),
    Tool {
        name: "set_group",
        method: "sessions.set-group",
        description: "Put the session in a group (absent or \"\" leaves its group).",
        capabilities: &[Capability::GroupsCreate],
        more: "",
        params: typed::<wire::SetGroup>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","group":"release"}"#,
    },
    Tool {
        name: "set_parent",
        method: "sessions.set-parent",
        description: "Set the session's parent session (\"\" detaches).",
        capabilities: &[Capability::GroupsCreate],
        more: "",
        params: typed::<wire::SetParent>(),
        fields: None,
        required: &["parent"],
        fixed: &[],
        effect: Effect::Write,
        waits: false,
        example: r#"{"session_id":"ID","parent":""}"#,
    },
    Tool {
        name: "events",
        method: "sessions.events",
        description: "Page through the session's audit log (declarations and lifecycle \
            entries, oldest first): pass `next_since` back as `since` while `more` is true.",
        capabilities: &[Capability::TabsList],
        more: "",
        params: typed::<wire::Events>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: r#"{"session_id":"ID","since":0,"limit":100}"#,
    },
    Tool {
        name: "stream_wait",
        method: "stream.wait",
        description: "Wait on the event stream: for a declared `event` (filtered by group, \
            session or surface), or until `all` members of a `group` are `exited`, `idle` or \
            `declared:<state>`. Returns {outcome, ...}; reports progress; cancel it to stop.",
        capabilities: &[Capability::TabsList],
        more: "",
        params: typed::<wire::Stream>(),
        fields: Some(&["group", "session_id", "surface_id", "event", "all", "timeout"]),
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: true,
        example: r#"{"group":"release","all":"exited","timeout":"1h"}"#,
    },
    Tool {
        name: "policy_check",
        method: "policy.check",
        description: "Ask what the policy would decide for this server's source: allow, deny \
            or confirm a capability (optionally on a target). Changes nothing.",
        capabilities: &[],
        more: "",
        params: typed::<wire::PolicyCheck>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: r#"{"capability":"tabs:close"}"#,
    },
    Tool {
        name: "policy_sources",
        method: "policy.sources",
        description: "The policy's sources and what each may do, and whether the policy file \
            loaded.",
        capabilities: &[],
        more: "",
        params: typed::<NoParams>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: "{}",
    },
    Tool {
        name: "status",
        method: "daemon.status",
        description: "The daemon: version, pid, control dir, session counts, policy status.",
        capabilities: &[Capability::TabsList],
        more: "",
        params: typed::<NoParams>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: "{}",
    },
    Tool {
        name: "profiles",
        method: "profiles.list",
        description: "The agent profiles `create` can name (env values are never returned).",
        capabilities: &[Capability::ProfilesList],
        more: "",
        params: typed::<NoParams>(),
        fields: None,
        required: &[],
        fixed: &[],
        effect: Effect::Read,
        waits: false,
        example: "{}",
    },
];

/// The tool named `name`.
pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

impl Tool {
    /// The input schema: the wire type's, narrowed to this tool's fields and requirements.
    pub fn input_schema(&self) -> Arc<JsonObject> {
        let mut schema = (*(self.params.schema)()).clone();
        // Some hosts want `properties` on every object schema, even an empty one.
        schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(Value::Object(props)) = schema.get_mut("properties") {
            if let Some(fields) = self.fields {
                props.retain(|k, _| fields.contains(&k.as_str()));
            }
        }
        let mut required: Vec<Value> = match schema.get("required") {
            Some(Value::Array(r)) => r
                .iter()
                .filter(|f| !self.fixed.iter().any(|(k, _)| f.as_str() == Some(k)))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        for r in self.required {
            if !required.iter().any(|f| f.as_str() == Some(r)) {
                required.push(Value::from(*r));
            }
        }
        if required.is_empty() {
            schema.remove("required");
        } else {
            schema.insert("required".into(), Value::Array(required));
        }
        Arc::new(schema)
    }

    /// The tool as `tools/list` lists it.
    pub fn to_mcp(&self) -> McpTool {
        let annotations = ToolAnnotations::new()
            .read_only(self.effect == Effect::Read)
            .destructive(self.effect == Effect::Destructive)
            .open_world(false);
        McpTool::new(self.name, self.description, self.input_schema()).annotate(annotations)
    }

    /// The request params for a call's arguments, through the wire type; an error says
    /// which argument is wrong (nothing is sent then).
    pub fn params(&self, args: Option<JsonObject>) -> Result<Value, ErrorBody> {
        let mut args: Map<String, Value> = args.unwrap_or_default();
        let refuse = |message: String| {
            ErrorBody::invalid(message).with_remedy(format!(
                "see the `{}` tool's inputSchema (`maxx mcp --schema`)",
                self.name
            ))
        };
        if let Some(fields) = self.fields {
            if let Some(extra) = args.keys().find(|k| !fields.contains(&k.as_str())) {
                return Err(refuse(format!(
                    "unknown argument `{extra}`; `{}` takes {}",
                    self.name,
                    fields.join(", ")
                )));
            }
        }
        if let Some(missing) = self.required.iter().find(|r| !args.contains_key(**r)) {
            return Err(refuse(format!("missing argument `{missing}`")));
        }
        for (key, value) in self.fixed {
            if args.contains_key(*key) {
                return Err(refuse(format!("unknown argument `{key}`")));
            }
            args.insert(
                key.to_string(),
                serde_json::from_str(value).expect("fixed values are JSON"),
            );
        }
        (self.params.encode)(Value::Object(args)).map_err(|e| refuse(format!("bad arguments: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maxx_protocol::request::Call;

    const ID: &str = "00000001-0000-4000-8000-000000000000";

    /// An argument a tool's wire type does not take is refused before anything is sent,
    /// at any depth (the daemon itself would only warn).
    #[test]
    fn unknown_arguments_are_refused() {
        let create = find("create").unwrap();
        use serde_json::json;
        let args = |v: Value| Some(v.as_object().unwrap().clone());
        assert!(create.params(args(json!({"title": "t"}))).is_ok());
        let e = create.params(args(json!({"titel": "t"}))).unwrap_err();
        assert!(e.message.contains("titel"), "{}", e.message);
        let list = find("list").unwrap();
        let e = list
            .params(args(
                json!({"metadata_filter": [{"key": "k", "valu": "v"}]}),
            ))
            .unwrap_err();
        assert!(e.message.contains("valu"), "{}", e.message);
    }

    /// Each example decodes as its method, and needs exactly the capabilities the entry
    /// lists (so the docs table, printed from the entries, is the daemon's truth).
    #[test]
    fn every_example_is_a_request_the_daemon_accepts() {
        for tool in TOOLS {
            let args: JsonObject = serde_json::from_str(&tool.example.replace("ID", ID))
                .unwrap_or_else(|e| panic!("{}: example is not JSON: {e}", tool.name));
            let params = tool
                .params(Some(args))
                .unwrap_or_else(|e| panic!("{}: {e:?}", tool.name));
            let call = Call::decode(tool.method, Some(params.clone())).unwrap_or_else(|e| {
                panic!("{}: {} refused {params}: {e:?}", tool.name, tool.method)
            });
            assert_eq!(call.method(), tool.method, "{}", tool.name);
            assert_eq!(call.capabilities(), tool.capabilities, "{}", tool.name);
        }
    }

    #[test]
    fn names_are_unique_and_schemas_are_objects() {
        for (i, tool) in TOOLS.iter().enumerate() {
            assert!(
                TOOLS[..i].iter().all(|t| t.name != tool.name),
                "{} twice",
                tool.name
            );
            let schema = tool.input_schema();
            assert_eq!(schema["type"], "object", "{}", tool.name);
            let props = schema.get("properties").and_then(Value::as_object);
            for f in tool.fields.unwrap_or(&[]) {
                assert!(
                    props.is_some_and(|p| p.contains_key(*f)),
                    "{}: field {f} is not in the wire type",
                    tool.name
                );
            }
            for r in tool.required {
                assert!(
                    props.is_some_and(|p| p.contains_key(*r)),
                    "{}: required {r} is not a field",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn arguments_outside_the_tool_are_refused() {
        let submit = find("submit").unwrap();
        let args = serde_json::json!({"session_id": ID, "action": "close"});
        let err = submit.params(args.as_object().cloned()).unwrap_err();
        assert!(err.message.contains("action"), "{err:?}");
        let set_result = find("set_result").unwrap();
        let args = serde_json::json!({"session_id": ID, "state": "x", "result": "r"});
        assert!(set_result.params(args.as_object().cloned()).is_err());
        let args = serde_json::json!({"session_id": ID});
        let err = set_result.params(args.as_object().cloned()).unwrap_err();
        assert!(err.message.contains("result"), "{err:?}");
    }
}
