//! Every request the CLI sends, built in one place: one function per method, from the parsed
//! flags to the method name, its params and how long the CLI waits for the answer.
//!
//! Params are the protocol's own wire types (`maxx_protocol::request::wire`, and
//! `ListParams`/`RegisterParams`): the structs the daemon's decoders read, serialized here. A
//! function that refuses its flags (bad JSON, a bad chord, an invalid regex) returns the error
//! to print; nothing has been sent then, and the exit code is 2.
//!
//! `sessions.*` functions are named after their verb (`sessions_set_metadata` sends
//! `sessions.set-metadata`); [`sessions`] picks one per `maxx sessions` verb.

use crate::cli::*;
use maxx_protocol::error::ErrorBody;
use maxx_protocol::request::wire;
use maxx_protocol::request::{ListParams, MetadataFilter, RegisterParams};
use serde::Serialize;
use serde_json::{Map, Value};
use std::time::Duration;

/// How long the CLI waits for an answer to a request that does not wait on purpose.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a wait or a run is given on top of its own budget before the CLI stops listening:
/// the daemon answers `timeout` itself, and that answer must arrive.
pub const WAIT_SLACK: Duration = Duration::from_secs(15);

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
    /// `params` is a wire type (or an empty map for the methods that take `{}`).
    fn new(method: &'static str, params: impl Serialize) -> Request {
        Request {
            method,
            // Wire types are structs of strings, numbers, lists and string-keyed maps.
            params: serde_json::to_value(params).expect("wire params serialize"),
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

/// `--metadata k=v` pairs as the wire's metadata object (values are strings); none is absent.
fn metadata(pairs: Vec<(String, String)>) -> Option<Map<String, Value>> {
    (!pairs.is_empty()).then(|| pairs.into_iter().map(|(k, v)| (k, v.into())).collect())
}

/// A duration as the wire's seconds.
fn seconds(d: Duration) -> Value {
    d.as_secs_f64().into()
}

/// A session id alone.
fn session(session_id: String) -> wire::Session {
    wire::Session { session_id }
}

/// The params every declaration verb starts with; each verb sets its own fields.
fn declaration(session_id: String, source: Option<String>) -> wire::Declare {
    wire::Declare {
        session_id,
        source,
        ..Default::default()
    }
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
        // A read-only attach the CLI follows itself (`record.rs`).
        SessionsVerb::Rec(a) => Ok(sessions_attach(Some(a.session_id), None)),
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
        SessionsVerb::Ask(a) => Ok(sessions_ask(a)),
        SessionsVerb::Answer(a) => Ok(sessions_answer(a)),
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
    let cwd = match a.cwd {
        Some(c) => Some(c),
        None => std::env::current_dir().ok(),
    };
    let cwd = match cwd {
        Some(cwd) if cwd.is_absolute() => Some(cwd),
        Some(cwd) => Some(
            std::env::current_dir()
                .map_err(|e| usage(format!("cannot resolve --cwd: {e}")))?
                .join(cwd),
        ),
        None => None,
    };
    let result_schema = match a.result_schema {
        Some(schema) => Some(parse_json("--result-schema", &schema)?),
        None => None,
    };
    let r = a.restart;
    let p = wire::Create {
        title: a.title,
        cwd: cwd.map(|c| c.to_string_lossy().into_owned()),
        command: a.command,
        env: a.env,
        metadata: metadata(a.metadata),
        status: a.status,
        location: a.location,
        split_target: a.split_target,
        split_direction: a.split_direction,
        focus: if a.focus {
            Some(true)
        } else if a.no_focus {
            Some(false)
        } else {
            None
        },
        cols: a.cols,
        rows: a.rows,
        agent_type: a.agent_type,
        result_schema,
        group: a.group,
        parent: a.parent,
        profile: a.profile,
        scrollback_lines: a.scrollback_lines,
        restart: r.restart,
        restart_exit_codes: r.restart_exit_codes,
        max_restarts: r.max_restarts,
        restart_window: r.restart_window.map(Value::String),
        backoff: r.backoff,
    };
    Ok(Request::new("sessions.create", p))
}

pub fn sessions_get(a: SelfIdArg) -> Request {
    Request::new("sessions.get", session(a.session_id))
}

pub fn sessions_list(a: ListArgs) -> Request {
    let metadata_filter = a
        .filters
        .into_iter()
        .map(|f| match f.split_once('=') {
            Some((k, v)) => MetadataFilter {
                key: k.to_string(),
                value: Some(v.into()),
            },
            None => MetadataFilter {
                key: f,
                value: None,
            },
        })
        .collect();
    let p = ListParams {
        metadata_filter,
        group: a.group,
        parent: a.parent,
    };
    Request::new("sessions.list", p)
}

pub fn sessions_watch(a: WatchArgs) -> Request {
    let p = wire::Watch {
        session_id: a.session_id,
        timeout: a.timeout.map(seconds),
    };
    Request::new("sessions.watch", p)
}

pub fn sessions_events(a: EventsArgs) -> Request {
    let p = wire::Events {
        session_id: a.session_id,
        since: a.since,
        limit: a.limit,
    };
    Request::new("sessions.events", p)
}

pub fn sessions_declare_state(a: DeclareStateArgs) -> Request {
    let p = wire::Declare {
        state: Some(a.state),
        message: a.message,
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.declare-state", p)
}

pub fn sessions_emit_event(a: EmitEventArgs) -> Built {
    let payload = match a.payload_json {
        Some(payload) => Some(parse_json("--payload-json", &payload)?),
        None => None,
    };
    let p = wire::Declare {
        event: Some(a.event),
        payload,
        message: a.message,
        ..declaration(a.session_id, a.source)
    };
    Ok(Request::new("sessions.emit-event", p))
}

pub fn sessions_set_metadata(a: SetMetadataArgs) -> Request {
    let p = wire::Declare {
        key: Some(a.key),
        value: a.value.map(Value::String),
        value_json: a.value_json,
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.set-metadata", p)
}

pub fn sessions_remove_metadata(a: RemoveMetadataArgs) -> Request {
    let p = wire::Declare {
        keys: Some(a.keys),
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.remove-metadata", p)
}

pub fn sessions_clear_metadata(a: SourcedIdArgs) -> Request {
    Request::new(
        "sessions.clear-metadata",
        declaration(a.session_id, a.source),
    )
}

pub fn sessions_set_state(a: SetStateArgs) -> Request {
    let p = wire::Declare {
        state: Some(a.state),
        message: a.message,
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.set-state", p)
}

pub fn sessions_set_summary(a: SetSummaryArgs) -> Request {
    let p = wire::Declare {
        summary: Some(a.summary),
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.set-summary", p)
}

pub fn sessions_set_result(a: SetResultArgs) -> Request {
    let p = wire::Declare {
        result: Some(a.result),
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.set-result", p)
}

pub fn sessions_clear_result(a: SourcedIdArgs) -> Request {
    Request::new("sessions.clear-result", declaration(a.session_id, a.source))
}

pub fn sessions_set_result_schema(a: SetResultSchemaArgs) -> Built {
    let p = wire::Declare {
        result_schema: Some(parse_json("--result-schema", &a.result_schema)?),
        ..declaration(a.session_id, a.source)
    };
    Ok(Request::new("sessions.set-result-schema", p))
}

pub fn sessions_clear_result_schema(a: SourcedIdArgs) -> Request {
    Request::new(
        "sessions.clear-result-schema",
        declaration(a.session_id, a.source),
    )
}

pub fn sessions_set_agent_type(a: SetAgentTypeArgs) -> Request {
    let p = wire::Declare {
        agent_type: Some(a.agent_type),
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.set-agent-type", p)
}

pub fn daemon_whoami() -> Request {
    Request::new("daemon.whoami", serde_json::Map::new())
}

pub fn sessions_ask(a: AskArgs) -> Request {
    let p = wire::Declare {
        question: Some(a.question),
        suggestions: (!a.suggestions.is_empty()).then_some(a.suggestions),
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.ask", p)
}

pub fn sessions_answer(a: AnswerArgs) -> Request {
    let p = wire::Declare {
        answer: a.text,
        choice: a.choice,
        ask_id: a.ask_id,
        ..declaration(a.session_id, a.source)
    };
    Request::new("sessions.answer", p)
}

pub fn sessions_snapshot(a: SnapshotArgs) -> Request {
    let p = wire::Read {
        session_id: a.session_id,
        scrollback: a.scrollback.map(Value::from),
        cells: a.cells,
        unwrap: a.unwrap,
        tail: a.tail,
        start_row: a.start_row,
    };
    Request::new("sessions.snapshot", p)
}

pub fn sessions_dump(a: DumpArgs) -> Request {
    let p = wire::Read {
        session_id: a.session_id,
        scrollback: a.scrollback.then_some(Value::Bool(true)),
        start_row: a.start_row,
        ..Default::default()
    };
    Request::new("sessions.dump", p)
}

pub fn sessions_inspect(a: SelfIdArg) -> Request {
    Request::new("sessions.inspect", session(a.session_id))
}

pub fn sessions_run(a: RunArgs) -> Request {
    let t = a
        .timeout
        .unwrap_or(maxx_protocol::limits::RUN_DEFAULT_TIMEOUT);
    let p = wire::Run {
        session_id: a.session_id,
        command: a.command,
        timeout: Some(seconds(t)),
    };
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
    let p = wire::SendKeys {
        session_id: a.session_id,
        keys: a.keys,
        literal: a.literal,
    };
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
    let p = wire::Paste {
        session_id: a.session_id,
        text,
    };
    Ok(Request::new("sessions.paste", p))
}

pub fn sessions_resize(a: ResizeArgs) -> Request {
    let p = wire::Resize {
        session_id: a.session_id,
        cols: a.cols,
        rows: a.rows,
    };
    Request::new("sessions.resize", p)
}

pub fn sessions_set_restart_policy(a: SetRestartPolicyArgs) -> Built {
    let r = a.restart;
    if r.restart.is_none() {
        return Err(usage(
            "set-restart-policy needs --restart (never removes the policy)",
        ));
    }
    let p = wire::SetRestartPolicy {
        session_id: a.session_id,
        policy: wire::RestartFields {
            restart: r.restart,
            restart_exit_codes: r.restart_exit_codes,
            max_restarts: r.max_restarts,
            restart_window: r.restart_window.map(Value::String),
            backoff: r.backoff,
        },
    };
    Ok(Request::new("sessions.set-restart-policy", p))
}

pub fn sessions_archive(a: ArchiveArgs) -> Request {
    let p = wire::Archive {
        session_id: a.session_id,
        reason: a.reason,
    };
    Request::new("sessions.archive", p)
}

pub fn sessions_restart(a: RestartArgs) -> Request {
    let p = wire::Restart {
        session_id: a.session_id,
        command: a.command,
        last_command: a.last_command,
    };
    Request::new("sessions.restart", p)
}

pub fn sessions_set_group(a: SetGroupArgs) -> Request {
    let p = wire::SetGroup {
        session_id: a.session_id,
        group: a.group,
    };
    Request::new("sessions.set-group", p)
}

pub fn sessions_set_parent(a: SetParentArgs) -> Request {
    // `--parent ""` detaches: the empty string is sent, not omitted.
    let p = wire::SetParent {
        session_id: a.session_id,
        parent: Some(a.parent),
    };
    Request::new("sessions.set-parent", p)
}

pub fn sessions_update(a: UpdateArgs) -> Request {
    let p = wire::Update {
        session_id: a.session_id,
        status: a.status,
        metadata: metadata(a.metadata),
    };
    Request::new("sessions.update", p)
}

pub fn sessions_action(a: ActionArgs) -> Request {
    let p = wire::Action {
        session_id: a.session_id,
        action: a.action,
        input: a.input,
        signal: a.signal,
    };
    Request::new("sessions.action", p)
}

pub fn sessions_cancel(a: IdArg) -> Request {
    Request::new("sessions.cancel", session(a.session_id))
}

pub fn sessions_wait(a: WaitArgs) -> Built {
    // Usage errors before any wait: --output-only with nothing to filter, an invalid regex.
    if a.output_only && a.until.is_none() && a.regex.is_none() {
        return Err(usage("--output-only needs --until or --regex"));
    }
    if let Some(re) = &a.regex {
        maxx_protocol::request::compile_regex(re).map_err(|e| usage(e.message))?;
    }
    let t = a
        .timeout
        .unwrap_or(maxx_protocol::limits::WAIT_DEFAULT_TIMEOUT);
    let p = wire::Wait {
        session_id: a.session_id,
        lifecycle: a.lifecycle,
        state: a.state,
        event: a.event,
        since: a.since,
        timeout: Some(seconds(t)),
        until: a.until,
        regex: a.regex,
        output_only: a.output_only,
    };
    Ok(Request::new("sessions.wait", p).waiting(t + WAIT_SLACK))
}

/// The proof comes from the environment maxx gave the session's programs.
pub fn sessions_register_current() -> Built {
    let surface_id = std::env::var("MAXX_SURFACE_ID").map_err(|_| {
        usage("MAXX_SURFACE_ID is not set: run this from inside a session maxx spawned")
    })?;
    let registration_token = std::env::var("MAXX_REGISTRATION_TOKEN").map_err(|_| {
        usage("MAXX_REGISTRATION_TOKEN is not set: run this from inside a session maxx spawned")
    })?;
    let p = RegisterParams {
        surface_id,
        registration_token,
    };
    Ok(Request::new("sessions.register-current", p))
}

/// `maxx attach`: no session means the focused one; `size` is this terminal's (cols, rows).
pub fn sessions_attach(session_id: Option<String>, size: Option<(u16, u16)>) -> Request {
    let p = wire::Attach {
        session_id,
        cols: size.map(|(cols, _)| cols),
        rows: size.map(|(_, rows)| rows),
    };
    Request::new("sessions.attach", p)
}

/// `stream.watch`/`stream.wait` params with only the filter flags set.
fn stream_filter(f: StreamFilterArgs) -> wire::Stream {
    wire::Stream {
        group: f.group,
        session_id: f.session,
        surface_id: f.tab,
        ..Default::default()
    }
}

/// `stream.watch`; a per-host `--since` needs `--hosts` (`crate::fleet`, which sends each
/// host its own cursor).
pub fn stream_watch(a: StreamWatchArgs) -> Built {
    let since = match a.since {
        None => None,
        Some(Since::Cursor(n)) => Some(n),
        Some(Since::PerHost(_)) => {
            return Err(usage("a per-host --since (HOST=CURSOR,...) needs --hosts"))
        }
    };
    let p = wire::Stream {
        since,
        timeout: a.timeout.map(seconds),
        ..stream_filter(a.filter)
    };
    Ok(Request::new("stream.watch", p))
}

pub fn stream_wait(a: StreamWaitArgs) -> Request {
    let t = a
        .timeout
        .unwrap_or(maxx_protocol::limits::WAIT_DEFAULT_TIMEOUT);
    let p = wire::Stream {
        event: a.event,
        all: a.all,
        require_members: a.require_members.then_some(true),
        timeout: Some(seconds(t)),
        ..stream_filter(a.filter)
    };
    Request::new("stream.wait", p).waiting(t + WAIT_SLACK)
}

/// `event.emit` is `sessions.emit-event` with the event's name under `type`.
pub fn event_emit(a: EmitArgs) -> Built {
    let payload = match a.payload {
        Some(text) => Some(parse_json("--json", &text)?),
        None => None,
    };
    let p = wire::Declare {
        event: Some(a.event_type),
        payload,
        ..declaration(a.session, a.source)
    };
    let mut req = Request::new("event.emit", p);
    if let Value::Object(params) = &mut req.params {
        if let Some(name) = params.remove("event") {
            params.insert("type".into(), name);
        }
    }
    Ok(req)
}

pub fn profiles_list() -> Request {
    Request::new("profiles.list", Map::new())
}

pub fn policy_check(a: CheckArgs) -> Request {
    let p = wire::PolicyCheck {
        capability: a.capability,
        target: a.target,
    };
    Request::new("policy.check", p)
}

pub fn policy_sources() -> Request {
    Request::new("policy.sources", Map::new())
}

pub fn daemon_status() -> Request {
    Request::new("daemon.status", Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use maxx_protocol::request::Call;

    const ID: &str = "00000001-0000-4000-8000-000000000000";

    /// The request `maxx ARGS` sends (for the noun-verbs that send one).
    fn build(args: &str) -> Request {
        let words = shell_words(&args.replace("ID", ID));
        let cli = Cli::try_parse_from(std::iter::once("maxx".to_string()).chain(words))
            .unwrap_or_else(|e| panic!("{args}: {e}"));
        let built = match cli.command.expect("a command") {
            Command::Sessions(s) => sessions(s.verb.expect("a verb")),
            Command::Stream(s) => match s.verb {
                StreamVerb::Watch(a) => stream_watch(a),
                StreamVerb::Wait(a) => Ok(stream_wait(a)),
            },
            Command::Event(e) => match e.verb {
                EventVerb::Emit(a) => event_emit(a),
            },
            Command::Policy(p) => match p.verb {
                PolicyVerb::Check(a) => Ok(policy_check(a)),
                PolicyVerb::Sources => Ok(policy_sources()),
                PolicyVerb::Validate(_) => unreachable!("sends nothing"),
            },
            Command::Profiles(_) => Ok(profiles_list()),
            other => unreachable!("{other:?} is not built here"),
        };
        built.unwrap_or_else(|e| panic!("{args}: {e:?}"))
    }

    /// Words split on spaces, with '...' quoting (enough for the commands below).
    fn shell_words(text: &str) -> Vec<String> {
        let mut words = Vec::new();
        for (i, part) in text.split('\'').enumerate() {
            if i % 2 == 1 {
                words.push(part.to_string());
            } else {
                words.extend(part.split_whitespace().map(str::to_string));
            }
        }
        words
    }

    /// Every request the CLI builds is one the daemon's decoder accepts, as the same method.
    #[test]
    fn every_built_request_decodes() {
        let commands = [
            "sessions create",
            "sessions create --title t --cwd /tmp --command 'echo hi' --env A=1 --metadata k=v \
             --status s --location split --split-target ID --split-direction up --focus \
             --cols 100 --rows 30 --agent-type at --result-schema '{\"type\":\"string\"}' \
             --group g --parent ID --scrollback-lines 5 --restart on-failure \
             --restart-exit-codes 0,2 --max-restarts 3 --restart-window 5m --backoff 1s..2s",
            "sessions create --no-focus --location window",
            "sessions get ID",
            "sessions list --filter a --filter b=c --group g --parent ID",
            "sessions update ID --status s --metadata a=b",
            "sessions action ID --action submit --input 'echo hi'",
            "sessions action ID --action interrupt --signal SIGTERM",
            "sessions cancel ID",
            "sessions wait ID --lifecycle exited --timeout 10m",
            "sessions wait ID --event e --since 12",
            "sessions wait ID --regex 'a.*b' --output-only",
            "sessions watch ID --timeout 5s",
            "sessions events ID --since 5",
            "sessions declare-state ID --state s --message m --source src",
            "sessions emit-event ID --event e --payload-json '{\"a\":1}' --message m",
            "sessions set-metadata ID --key k --value v",
            "sessions set-metadata ID --key k --value-json '[1]'",
            "sessions remove-metadata ID --key a --key b",
            "sessions clear-metadata ID --source s",
            "sessions set-state ID --state running --message m",
            "sessions set-summary ID --summary sum",
            "sessions set-result ID --result r",
            "sessions clear-result ID",
            "sessions set-result-schema ID --result-schema '{\"type\":\"object\"}'",
            "sessions clear-result-schema ID",
            "sessions set-agent-type ID --agent-type claude",
            "sessions set-group ID --group g",
            "sessions set-group ID",
            "sessions set-parent ID --parent ''",
            "sessions archive ID --reason done",
            "sessions snapshot ID --scrollback 50 --unwrap --tail 3",
            "sessions snapshot ID --cells",
            "sessions dump ID --scrollback",
            "sessions inspect ID",
            "sessions run ID --timeout 2m 'x'",
            "sessions send-keys ID 'ls -la' Enter",
            "sessions send-keys --literal ID 'S-Up'",
            "sessions paste ID 'text'",
            "sessions resize ID --cols 100 --rows 40",
            "sessions ask ID --question q --suggest a --suggest b --source s",
            "sessions answer ID --text t --ask-id 3",
            "sessions answer ID --choice 2",
            "sessions set-restart-policy ID --restart on-failure --restart-exit-codes 1 \
             --max-restarts 2 --restart-window 1m --backoff 1s..3s",
            "sessions restart ID --last-command",
            "sessions restart ID --command make",
            "stream watch --group g --session ID --since 4 --timeout 10m",
            "stream wait --group g --all exited --timeout 1h",
            "stream wait --group g --all exited --require-members",
            "stream wait --session ID --event e",
            "event emit --session ID --type declared.status --json '{\"step\":3}' --source s",
            "profiles list",
            "policy check --capability tabs:close --target ID",
            "policy sources",
        ];
        for args in commands {
            let req = build(args);
            let (call, ignored) = Call::decode_reporting(req.method, Some(req.params.clone()))
                .unwrap_or_else(|e| panic!("{args}: {} refused {}: {e:?}", req.method, req.params));
            // Every param the CLI sends is one the daemon reads: nothing is ignored.
            assert!(ignored.is_empty(), "{args}: the daemon ignores {ignored:?}");
            // `event.emit` is decoded as the `sessions.emit-event` it is.
            let expect = match req.method {
                "event.emit" => "sessions.emit-event",
                m => m,
            };
            assert_eq!(call.method(), expect, "{args}");
        }
        // Not from flags: attach's terminal size, register-current's environment.
        let attach = sessions_attach(Some(ID.into()), Some((80, 24)));
        Call::decode(attach.method, Some(attach.params)).expect("attach decodes");
        let register = Request::new(
            "sessions.register-current",
            RegisterParams {
                surface_id: ID.into(),
                registration_token: "secret".into(),
            },
        );
        Call::decode(register.method, Some(register.params)).expect("register decodes");
    }
}
