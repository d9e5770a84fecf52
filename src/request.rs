//! Every request the CLI sends, built in one place: one function per method, from the parsed
//! flags to the method name, its params and how long the CLI waits for the answer.
//!
//! Params are `serde_json` maps built by hand. When `maxx_protocol`'s params types derive
//! `Serialize`, each function builds its typed value instead and nothing outside this file
//! changes. A function that refuses its flags (bad JSON, a bad chord, an invalid regex)
//! returns the error to print; nothing has been sent then, and the exit code is 2.
//!
//! `sessions.*` functions are named after their verb (`sessions_set_metadata` sends
//! `sessions.set-metadata`); [`sessions`] picks one per `maxx sessions` verb.

use crate::cli::*;
use maxx_protocol::error::ErrorBody;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// How long the CLI waits for an answer to a request that does not wait on purpose.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a wait or a run is given on top of its own budget before the CLI stops listening:
/// the daemon answers `timeout` itself, and that answer must arrive.
const WAIT_SLACK: Duration = Duration::from_secs(15);

/// One request, ready to send.
#[derive(Debug)]
pub struct Request {
    /// `noun.verb`, as on the wire.
    pub method: &'static str,
    /// The request's `params` object.
    pub params: Value,
    /// How long the CLI waits for the answer (a wait's own budget plus [`WAIT_SLACK`]).
    pub timeout: Duration,
}

/// A request, or why the flags cannot make one (printed as is; exit 2).
pub type Built = Result<Request, ErrorBody>;

impl Request {
    fn new(method: &'static str, params: Map<String, Value>) -> Request {
        Request {
            method,
            params: Value::Object(params),
            timeout: CLIENT_TIMEOUT,
        }
    }

    fn waiting(mut self, timeout: Duration) -> Request {
        self.timeout = timeout;
        self
    }

    /// A streaming verb: NDJSON lines until the daemon ends the stream.
    pub fn is_stream(&self) -> bool {
        self.method == "sessions.watch" || self.method == "stream.watch"
    }

    /// Session-creating verbs start a daemon when none answers; read verbs never do.
    pub fn starts_daemon(&self) -> bool {
        self.method == "sessions.create"
    }
}

/// A usage error the CLI noticed before sending anything.
fn usage(message: impl Into<String>) -> ErrorBody {
    ErrorBody::invalid(message).with_remedy("see --help")
}

fn parse_json(flag: &str, text: &str) -> Result<Value, ErrorBody> {
    serde_json::from_str(text).map_err(|e| usage(format!("{flag} is not valid JSON: {e}")))
}

fn insert_opt(p: &mut Map<String, Value>, key: &str, value: Option<String>) {
    if let Some(v) = value {
        p.insert(key.into(), Value::String(v));
    }
}

fn metadata_map(pairs: Vec<(String, String)>) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect()
}

/// The wire name of a clap value enum (its `--flag` spelling is the wire's).
fn value_name<T: clap::ValueEnum>(v: T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// A session id alone.
fn with_session(session_id: String) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("session_id".into(), json!(session_id));
    p
}

/// The params every declaration verb starts with.
fn declaration(session_id: String, source: Option<String>) -> Map<String, Value> {
    let mut p = with_session(session_id);
    insert_opt(&mut p, "source", source);
    p
}

fn restart_params(p: &mut Map<String, Value>, r: RestartArgsGroup) {
    insert_opt(p, "restart", r.restart);
    if let Some(codes) = r.restart_exit_codes {
        p.insert("restart_exit_codes".into(), json!(codes));
    }
    if let Some(n) = r.max_restarts {
        p.insert("max_restarts".into(), json!(n));
    }
    insert_opt(p, "restart_window", r.restart_window);
    insert_opt(p, "backoff", r.backoff);
}

/// The request for a `maxx sessions` verb.
pub fn sessions(verb: SessionsVerb) -> Built {
    match verb {
        SessionsVerb::Create(a) => sessions_create(a),
        SessionsVerb::Get(a) => Ok(sessions_get(a)),
        SessionsVerb::List(a) => Ok(sessions_list(a)),
        SessionsVerb::Update(a) => Ok(sessions_update(a)),
        SessionsVerb::Action(a) => Ok(sessions_action(a)),
        SessionsVerb::Cancel(a) => Ok(sessions_cancel(a)),
        SessionsVerb::Wait(a) => sessions_wait(a),
        SessionsVerb::RegisterCurrent => sessions_register_current(),
        SessionsVerb::Watch(a) => Ok(sessions_watch(a)),
        SessionsVerb::Events(a) => Ok(sessions_events(a)),
        SessionsVerb::DeclareState(a) => Ok(sessions_declare_state(a)),
        SessionsVerb::EmitEvent(a) => sessions_emit_event(a),
        SessionsVerb::SetMetadata(a) => Ok(sessions_set_metadata(a)),
        SessionsVerb::RemoveMetadata(a) => Ok(sessions_remove_metadata(a)),
        SessionsVerb::ClearMetadata(a) => Ok(sessions_clear_metadata(a)),
        SessionsVerb::SetState(a) => Ok(sessions_set_state(a)),
        SessionsVerb::SetSummary(a) => Ok(sessions_set_summary(a)),
        SessionsVerb::SetResult(a) => Ok(sessions_set_result(a)),
        SessionsVerb::ClearResult(a) => Ok(sessions_clear_result(a)),
        SessionsVerb::SetResultSchema(a) => sessions_set_result_schema(a),
        SessionsVerb::ClearResultSchema(a) => Ok(sessions_clear_result_schema(a)),
        SessionsVerb::SetAgentType(a) => Ok(sessions_set_agent_type(a)),
        SessionsVerb::SetGroup(a) => Ok(sessions_set_group(a)),
        SessionsVerb::SetParent(a) => Ok(sessions_set_parent(a)),
        SessionsVerb::Archive(a) => Ok(sessions_archive(a)),
        SessionsVerb::Snapshot(a) => Ok(sessions_snapshot(a)),
        SessionsVerb::Dump(a) => Ok(sessions_dump(a)),
        SessionsVerb::Inspect(a) => Ok(sessions_inspect(a)),
        SessionsVerb::Run(a) => Ok(sessions_run(a)),
        SessionsVerb::SendKeys(a) => sessions_send_keys(a),
        SessionsVerb::Paste(a) => sessions_paste(a),
        SessionsVerb::Resize(a) => Ok(sessions_resize(a)),
        SessionsVerb::SetRestartPolicy(a) => sessions_set_restart_policy(a),
        SessionsVerb::Restart(a) => Ok(sessions_restart(a)),
    }
}

pub fn sessions_create(a: CreateArgs) -> Built {
    let mut p = Map::new();
    let cwd = match a.cwd {
        Some(c) => Some(c),
        None => std::env::current_dir().ok(),
    };
    if let Some(cwd) = cwd {
        let abs = if cwd.is_absolute() {
            cwd
        } else {
            std::env::current_dir()
                .map_err(|e| usage(format!("cannot resolve --cwd: {e}")))?
                .join(cwd)
        };
        p.insert("cwd".into(), json!(abs.to_string_lossy()));
    }
    if let Some(v) = a.title {
        p.insert("title".into(), json!(v));
    }
    if let Some(v) = a.command {
        p.insert("command".into(), json!(v));
    }
    if !a.env.is_empty() {
        p.insert("env".into(), json!(a.env));
    }
    if !a.metadata.is_empty() {
        p.insert("metadata".into(), Value::Object(metadata_map(a.metadata)));
    }
    if let Some(v) = a.status {
        p.insert("status".into(), json!(v));
    }
    if let Some(v) = a.location {
        p.insert("location".into(), json!(value_name(v)));
    }
    if let Some(v) = a.split_target {
        p.insert("split_target".into(), json!(v));
    }
    if let Some(v) = a.split_direction {
        p.insert("split_direction".into(), json!(value_name(v)));
    }
    if a.focus {
        p.insert("focus".into(), json!(true));
    }
    if a.no_focus {
        p.insert("focus".into(), json!(false));
    }
    if let Some(v) = a.cols {
        p.insert("cols".into(), json!(v));
    }
    if let Some(v) = a.rows {
        p.insert("rows".into(), json!(v));
    }
    insert_opt(&mut p, "agent_type", a.agent_type);
    insert_opt(&mut p, "group", a.group);
    insert_opt(&mut p, "parent", a.parent);
    insert_opt(&mut p, "profile", a.profile);
    if let Some(n) = a.scrollback_lines {
        p.insert("scrollback_lines".into(), json!(n));
    }
    restart_params(&mut p, a.restart);
    if let Some(schema) = a.result_schema {
        p.insert(
            "result_schema".into(),
            parse_json("--result-schema", &schema)?,
        );
    }
    Ok(Request::new("sessions.create", p))
}

pub fn sessions_get(a: IdArg) -> Request {
    Request::new("sessions.get", with_session(a.session_id))
}

pub fn sessions_list(a: ListArgs) -> Request {
    let mut p = Map::new();
    if !a.filters.is_empty() {
        let filters: Vec<Value> = a
            .filters
            .iter()
            .map(|f| match f.split_once('=') {
                Some((k, v)) => json!({"key": k, "value": v}),
                None => json!({"key": f}),
            })
            .collect();
        p.insert("metadata_filter".into(), Value::Array(filters));
    }
    insert_opt(&mut p, "group", a.group);
    insert_opt(&mut p, "parent", a.parent);
    Request::new("sessions.list", p)
}

pub fn sessions_watch(a: WatchArgs) -> Request {
    let mut p = with_session(a.session_id);
    if let Some(t) = a.timeout {
        p.insert("timeout".into(), json!(t.as_secs_f64()));
    }
    Request::new("sessions.watch", p)
}

pub fn sessions_events(a: EventsArgs) -> Request {
    let mut p = with_session(a.session_id);
    p.insert("since".into(), json!(a.since));
    if let Some(limit) = a.limit {
        p.insert("limit".into(), json!(limit));
    }
    Request::new("sessions.events", p)
}

pub fn sessions_declare_state(a: DeclareStateArgs) -> Request {
    let mut p = declaration(a.session_id, a.source);
    p.insert("state".into(), json!(a.state));
    insert_opt(&mut p, "message", a.message);
    Request::new("sessions.declare-state", p)
}

pub fn sessions_emit_event(a: EmitEventArgs) -> Built {
    let mut p = declaration(a.session_id, a.source);
    p.insert("event".into(), json!(a.event));
    if let Some(payload) = a.payload_json {
        p.insert("payload".into(), parse_json("--payload-json", &payload)?);
    }
    insert_opt(&mut p, "message", a.message);
    Ok(Request::new("sessions.emit-event", p))
}

pub fn sessions_set_metadata(a: SetMetadataArgs) -> Request {
    let mut p = declaration(a.session_id, a.source);
    p.insert("key".into(), json!(a.key));
    insert_opt(&mut p, "value", a.value);
    insert_opt(&mut p, "value_json", a.value_json);
    Request::new("sessions.set-metadata", p)
}

pub fn sessions_remove_metadata(a: RemoveMetadataArgs) -> Request {
    let mut p = declaration(a.session_id, a.source);
    p.insert("keys".into(), json!(a.keys));
    Request::new("sessions.remove-metadata", p)
}

pub fn sessions_clear_metadata(a: SourcedIdArgs) -> Request {
    Request::new(
        "sessions.clear-metadata",
        declaration(a.session_id, a.source),
    )
}

pub fn sessions_set_state(a: SetStateArgs) -> Request {
    let mut p = declaration(a.session_id, a.source);
    p.insert("state".into(), json!(a.state));
    insert_opt(&mut p, "message", a.message);
    Request::new("sessions.set-state", p)
}

pub fn sessions_set_summary(a: SetSummaryArgs) -> Request {
    let mut p = declaration(a.session_id, a.source);
    p.insert("summary".into(), json!(a.summary));
    Request::new("sessions.set-summary", p)
}

pub fn sessions_set_result(a: SetResultArgs) -> Request {
    let mut p = declaration(a.session_id, a.source);
    p.insert("result".into(), json!(a.result));
    Request::new("sessions.set-result", p)
}

pub fn sessions_clear_result(a: SourcedIdArgs) -> Request {
    Request::new("sessions.clear-result", declaration(a.session_id, a.source))
}

pub fn sessions_set_result_schema(a: SetResultSchemaArgs) -> Built {
    let mut p = declaration(a.session_id, a.source);
    p.insert(
        "result_schema".into(),
        parse_json("--result-schema", &a.result_schema)?,
    );
    Ok(Request::new("sessions.set-result-schema", p))
}

pub fn sessions_clear_result_schema(a: SourcedIdArgs) -> Request {
    Request::new(
        "sessions.clear-result-schema",
        declaration(a.session_id, a.source),
    )
}

pub fn sessions_set_agent_type(a: SetAgentTypeArgs) -> Request {
    let mut p = declaration(a.session_id, a.source);
    p.insert("agent_type".into(), json!(a.agent_type));
    Request::new("sessions.set-agent-type", p)
}

pub fn sessions_snapshot(a: SnapshotArgs) -> Request {
    let mut p = with_session(a.session_id);
    if let Some(n) = a.scrollback {
        p.insert("scrollback".into(), json!(n));
    }
    if a.cells {
        p.insert("cells".into(), json!(true));
    }
    if a.unwrap {
        p.insert("unwrap".into(), json!(true));
    }
    if let Some(t) = a.tail {
        p.insert("tail".into(), json!(t));
    }
    Request::new("sessions.snapshot", p)
}

pub fn sessions_dump(a: DumpArgs) -> Request {
    let mut p = with_session(a.session_id);
    if a.scrollback {
        p.insert("scrollback".into(), json!(true));
    }
    Request::new("sessions.dump", p)
}

pub fn sessions_inspect(a: IdArg) -> Request {
    Request::new("sessions.inspect", with_session(a.session_id))
}

pub fn sessions_run(a: RunArgs) -> Request {
    let mut p = with_session(a.session_id);
    p.insert("command".into(), json!(a.command));
    let t = a
        .timeout
        .unwrap_or(maxx_protocol::limits::RUN_DEFAULT_TIMEOUT);
    p.insert("timeout".into(), json!(t.as_secs_f64()));
    // `--timeout 0` is no limit: wait for the answer as long as the run takes.
    let wait = if t.is_zero() {
        Duration::MAX
    } else {
        t + WAIT_SLACK
    };
    Request::new("sessions.run", p).waiting(wait)
}

pub fn sessions_send_keys(a: SendKeysArgs) -> Built {
    // Refuse an unknown key or a bad chord before anything is sent, with its own remedy.
    maxx_protocol::keys::parse_keys(&a.keys, a.literal)?;
    let mut p = with_session(a.session_id);
    p.insert("keys".into(), json!(a.keys));
    if a.literal {
        p.insert("literal".into(), json!(true));
    }
    Ok(Request::new("sessions.send-keys", p))
}

pub fn sessions_paste(a: PasteArgs) -> Built {
    let text = if a.text == "-" {
        let mut buf = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf)
            .map_err(|e| usage(format!("cannot read stdin: {e}")))?;
        buf
    } else {
        a.text
    };
    let mut p = with_session(a.session_id);
    p.insert("text".into(), json!(text));
    Ok(Request::new("sessions.paste", p))
}

pub fn sessions_resize(a: ResizeArgs) -> Request {
    let mut p = with_session(a.session_id);
    p.insert("cols".into(), json!(a.cols));
    p.insert("rows".into(), json!(a.rows));
    Request::new("sessions.resize", p)
}

pub fn sessions_set_restart_policy(a: SetRestartPolicyArgs) -> Built {
    if a.restart.restart.is_none() {
        return Err(usage(
            "set-restart-policy needs --restart (never removes the policy)",
        ));
    }
    let mut p = with_session(a.session_id);
    restart_params(&mut p, a.restart);
    Ok(Request::new("sessions.set-restart-policy", p))
}

pub fn sessions_archive(a: ArchiveArgs) -> Request {
    let mut p = with_session(a.session_id);
    insert_opt(&mut p, "reason", a.reason);
    Request::new("sessions.archive", p)
}

pub fn sessions_restart(a: RestartArgs) -> Request {
    let mut p = with_session(a.session_id);
    insert_opt(&mut p, "command", a.command);
    if a.last_command {
        p.insert("last_command".into(), json!(true));
    }
    Request::new("sessions.restart", p)
}

pub fn sessions_set_group(a: SetGroupArgs) -> Request {
    let mut p = with_session(a.session_id);
    insert_opt(&mut p, "group", a.group);
    Request::new("sessions.set-group", p)
}

pub fn sessions_set_parent(a: SetParentArgs) -> Request {
    let mut p = with_session(a.session_id);
    p.insert("parent".into(), json!(a.parent));
    Request::new("sessions.set-parent", p)
}

pub fn sessions_update(a: UpdateArgs) -> Request {
    let mut p = with_session(a.session_id);
    if let Some(v) = a.status {
        p.insert("status".into(), json!(v));
    }
    if !a.metadata.is_empty() {
        p.insert("metadata".into(), Value::Object(metadata_map(a.metadata)));
    }
    Request::new("sessions.update", p)
}

pub fn sessions_action(a: ActionArgs) -> Request {
    let mut p = with_session(a.session_id);
    p.insert("action".into(), json!(value_name(a.action)));
    if let Some(v) = a.input {
        p.insert("input".into(), json!(v));
    }
    if let Some(v) = a.signal {
        p.insert("signal".into(), json!(v));
    }
    Request::new("sessions.action", p)
}

pub fn sessions_cancel(a: IdArg) -> Request {
    Request::new("sessions.cancel", with_session(a.session_id))
}

pub fn sessions_wait(a: WaitArgs) -> Built {
    let mut p = with_session(a.session_id);
    if let Some(l) = a.lifecycle {
        p.insert("lifecycle".into(), json!(value_name(l)));
    }
    insert_opt(&mut p, "state", a.state);
    insert_opt(&mut p, "event", a.event);
    if a.output_only {
        // A usage error before any wait, like an invalid regex.
        if a.until.is_none() && a.regex.is_none() {
            return Err(usage("--output-only needs --until or --regex"));
        }
        p.insert("output_only".into(), json!(true));
    }
    insert_opt(&mut p, "until", a.until);
    if let Some(re) = a.regex {
        // An invalid regex is a usage error before any wait.
        maxx_protocol::request::compile_regex(&re).map_err(|e| usage(e.message))?;
        p.insert("regex".into(), json!(re));
    }
    if let Some(since) = a.since {
        p.insert("since".into(), json!(since));
    }
    let t = a
        .timeout
        .unwrap_or(maxx_protocol::limits::WAIT_DEFAULT_TIMEOUT);
    p.insert("timeout".into(), json!(t.as_secs_f64()));
    Ok(Request::new("sessions.wait", p).waiting(t + WAIT_SLACK))
}

/// The proof comes from the environment maxx gave the session's programs.
pub fn sessions_register_current() -> Built {
    let surface = std::env::var("MAXX_SURFACE_ID").map_err(|_| {
        usage("MAXX_SURFACE_ID is not set: run this from inside a session maxx spawned")
    })?;
    let token = std::env::var("MAXX_REGISTRATION_TOKEN").map_err(|_| {
        usage("MAXX_REGISTRATION_TOKEN is not set: run this from inside a session maxx spawned")
    })?;
    let mut p = Map::new();
    p.insert("surface_id".into(), json!(surface));
    p.insert("registration_token".into(), json!(token));
    Ok(Request::new("sessions.register-current", p))
}

/// `maxx attach`: no session means the focused one; `size` is this terminal's (cols, rows).
pub fn sessions_attach(session_id: Option<String>, size: Option<(u16, u16)>) -> Request {
    let mut p = Map::new();
    if let Some(id) = session_id {
        p.insert("session_id".into(), json!(id));
    }
    if let Some((cols, rows)) = size {
        p.insert("cols".into(), json!(cols));
        p.insert("rows".into(), json!(rows));
    }
    Request::new("sessions.attach", p)
}

fn stream_filter(p: &mut Map<String, Value>, f: StreamFilterArgs) {
    insert_opt(p, "group", f.group);
    insert_opt(p, "session_id", f.session);
    insert_opt(p, "surface_id", f.tab);
}

pub fn stream_watch(a: StreamWatchArgs) -> Request {
    let mut p = Map::new();
    stream_filter(&mut p, a.filter);
    if let Some(s) = a.since {
        p.insert("since".into(), json!(s));
    }
    if let Some(t) = a.timeout {
        p.insert("timeout".into(), json!(t.as_secs_f64()));
    }
    Request::new("stream.watch", p)
}

pub fn stream_wait(a: StreamWaitArgs) -> Request {
    let mut p = Map::new();
    stream_filter(&mut p, a.filter);
    insert_opt(&mut p, "event", a.event);
    insert_opt(&mut p, "all", a.all);
    let t = a
        .timeout
        .unwrap_or(maxx_protocol::limits::WAIT_DEFAULT_TIMEOUT);
    p.insert("timeout".into(), json!(t.as_secs_f64()));
    Request::new("stream.wait", p).waiting(t + WAIT_SLACK)
}

pub fn event_emit(a: EmitArgs) -> Built {
    let mut p = with_session(a.session);
    p.insert("type".into(), json!(a.event_type));
    if let Some(text) = a.payload {
        p.insert("payload".into(), parse_json("--json", &text)?);
    }
    insert_opt(&mut p, "source", a.source);
    Ok(Request::new("event.emit", p))
}

pub fn profiles_list() -> Request {
    Request::new("profiles.list", Map::new())
}

pub fn policy_check(a: CheckArgs) -> Request {
    let mut p = Map::new();
    p.insert("capability".into(), json!(a.capability));
    insert_opt(&mut p, "target", a.target);
    Request::new("policy.check", p)
}

pub fn policy_sources() -> Request {
    Request::new("policy.sources", Map::new())
}

pub fn daemon_status() -> Request {
    Request::new("daemon.status", Map::new())
}
