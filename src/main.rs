//! `maxx`: the CLI and the daemon entry.
//!
//! - [`cli`]: the clap grammar (`maxx [+control] <noun> <verb> [flags]`).
//! - [`client`]: one request over the socket.
//! - [`daemon_cmd`]: `maxx daemon [--detach]`.

/// jemalloc, not glibc's malloc: after a load burst glibc kept 79 MiB resident with 16 MiB
/// in use (its arenas fragment around long-lived records); jemalloc with freed pages
/// purged returns most of it. See `maxx_actors::memory`.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings: purge pages straight to the system (`MADV_DONTNEED`), never through
/// the lazy `MADV_FREE` state that still counts as resident until the kernel is short.
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"muzzy_decay_ms:0\0";

mod attach;
mod cli;
mod client;
mod daemon_cmd;
mod top;
mod views;

use clap::Parser;
use cli::*;
use client::{ClientError, Target};
use maxx_protocol::error::ErrorBody;
use maxx_protocol::Response;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Exit codes (see the README): a wait timed out.
const EXIT_TIMEOUT: i32 = 124;
/// `run` gave up (its budget was spent).
const EXIT_RUN_GAVE_UP: i32 = 125;
/// No daemon reachable.
const EXIT_NO_DAEMON: i32 = 3;
/// The daemon answered ok:false, or a wait ended unmatched.
const EXIT_FAILED: i32 = 1;
/// Default time the CLI waits for an answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

fn main() {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `maxx +control sessions list` is `maxx sessions list`: the seed's scripts run as is.
    if args.get(1).is_some_and(|a| a == "+control") {
        args.remove(1);
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => std::process::exit(clap_error(e)),
    };
    std::process::exit(run(cli));
}

/// Help and version go to stdout as clap prints them; a bad command line is a usage error:
/// one JSON error object on stderr, exit 2.
fn clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return e.exit_code();
    }
    let rendered = e.render().to_string();
    let lines: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    // What went wrong (with the missing arguments, if any), then what would be accepted.
    let usage_at = lines
        .iter()
        .position(|l| l.starts_with("Usage:"))
        .unwrap_or(lines.len());
    let message = lines[..usage_at]
        .join(" ")
        .trim_start_matches("error: ")
        .to_string();
    let remedy = match lines.get(usage_at) {
        Some(usage) => format!("{usage}; see --help"),
        None => "see --help".to_string(),
    };
    usage_error(message, remedy)
}

/// Report a usage error (nothing was sent) and return its exit code.
fn usage_error(message: impl Into<String>, remedy: impl Into<String>) -> i32 {
    print_error(&ErrorBody::invalid(message).with_remedy(remedy));
    2
}

fn run(cli: Cli) -> i32 {
    let target = Target::resolve(cli.socket.as_ref());
    match cli.command {
        Command::Daemon(d) => daemon(&target, d),
        Command::Sessions(s) => {
            let verb = s.verb.unwrap_or(SessionsVerb::List(ListArgs::default()));
            if let SessionsVerb::SendKeys(a) = &verb {
                // Refuse an unknown key or a bad chord before anything is sent, with its own
                // remedy.
                if let Err(e) = maxx_protocol::keys::parse_keys(&a.keys, a.literal) {
                    print_error(&e);
                    return 2;
                }
            }
            let built = sessions_request(verb);
            dispatch(&target, &cli.caller, cli.confirm, built)
        }
        Command::Policy(p) => match p.verb {
            PolicyVerb::Check {
                capability,
                target: on,
            } => {
                let mut params = Map::new();
                params.insert("capability".into(), json!(capability));
                insert_opt(&mut params, "target", on);
                dispatch(
                    &target,
                    &cli.caller,
                    cli.confirm,
                    Ok(("policy.check", Value::Object(params), CLIENT_TIMEOUT)),
                )
            }
            PolicyVerb::Sources => dispatch(
                &target,
                &cli.caller,
                cli.confirm,
                Ok(("policy.sources", json!({}), CLIENT_TIMEOUT)),
            ),
            PolicyVerb::Validate { config } => {
                match maxx_actors::policy::validate_config_file(&config) {
                    Ok(summary) => {
                        println!(
                            "{}",
                            views::json_text(&json!({"ok": true, "result": summary}))
                        );
                        0
                    }
                    Err(reasons) => {
                        eprintln!(
                            "{}",
                            json!({"ok": false, "error": {
                                "code": "invalid_request",
                                "message": format!("{} is not a valid policy", config.display()),
                                "reasons": reasons,
                            }})
                        );
                        EXIT_FAILED
                    }
                }
            }
        },
        Command::Ls(a) => ls(&target, &cli.caller, a),
        Command::Top => top::run(&target, &cli.caller),
        Command::Status(a) => status(&target, &cli.caller, a),
        Command::Attach(a) => {
            let key = match attach::parse_detach_key(&a.detach_key) {
                Ok(k) => k,
                Err(e) => return usage_error(e, "e.g. --detach-key C-a; see --help"),
            };
            match attach::run(
                &target,
                a.session_id,
                cli.caller.as_deref(),
                cli.confirm,
                key,
            ) {
                Ok(attach::Outcome::Detached(id)) => {
                    eprintln!("[detached from {id}]");
                    0
                }
                Ok(attach::Outcome::Ended(id)) => {
                    eprintln!("[session {id} ended or the daemon went away]");
                    0
                }
                Err(e) => client_error(e),
            }
        }
        Command::Profiles(_) => dispatch(
            &target,
            &cli.caller,
            cli.confirm,
            Ok(("profiles.list", json!({}), CLIENT_TIMEOUT)),
        ),
        Command::Stream(s) => dispatch(
            &target,
            &cli.caller,
            cli.confirm,
            Ok(stream_request(s.verb)),
        ),
        Command::Event(e) => {
            let EventVerb::Emit {
                session,
                event_type,
                payload,
                source,
            } = e.verb;
            let built = (|| {
                let mut p = Map::new();
                p.insert("session_id".into(), json!(session));
                p.insert("type".into(), json!(event_type));
                if let Some(text) = payload {
                    p.insert("payload".into(), parse_json("--json", &text)?);
                }
                insert_opt(&mut p, "source", source);
                Ok(("event.emit", Value::Object(p), CLIENT_TIMEOUT))
            })();
            dispatch(&target, &cli.caller, cli.confirm, built)
        }
    }
}

/// Print a client error and return its exit code.
fn client_error(e: ClientError) -> i32 {
    match e {
        ClientError::NoDaemon(e) => {
            print_error(&e);
            EXIT_NO_DAEMON
        }
        ClientError::Failed(e) => {
            print_error(&e);
            EXIT_FAILED
        }
        ClientError::Usage(msg) => usage_error(msg, "see --help"),
    }
}

/// One request whose `ok` result a human view renders.
fn fetch(
    target: &Target,
    caller: &Option<String>,
    method: &str,
    params: Value,
) -> Result<Value, i32> {
    match client::request(
        target,
        method,
        params,
        caller.as_deref(),
        false,
        CLIENT_TIMEOUT,
    ) {
        Ok(r) if r.ok => Ok(r.result.unwrap_or(Value::Null)),
        Ok(r) => {
            print_error(&r.error.unwrap_or_else(|| ErrorBody::internal("ok:false")));
            Err(EXIT_FAILED)
        }
        Err(e) => Err(client_error(e)),
    }
}

fn ls(target: &Target, caller: &Option<String>, a: LsArgs) -> i32 {
    let mut p = Map::new();
    insert_opt(&mut p, "group", a.group);
    let result = match fetch(target, caller, "sessions.list", Value::Object(p)) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let sessions = result["sessions"].as_array().cloned().unwrap_or_default();
    if a.json {
        println!("{}", views::json_text(&Value::Array(sessions)));
    } else {
        print!(
            "{}",
            views::render_table(
                &sessions,
                views::width(),
                a.wide,
                views::use_color(),
                std::time::SystemTime::now()
            )
        );
    }
    0
}

fn status(target: &Target, caller: &Option<String>, a: StatusArgs) -> i32 {
    match fetch(target, caller, "daemon.status", json!({})) {
        Ok(s) if a.json => {
            println!("{}", views::json_text(&s));
            0
        }
        Ok(s) => {
            print!("{}", views::render_status(&s));
            0
        }
        Err(code) => code,
    }
}

fn stream_filter(p: &mut Map<String, Value>, f: StreamFilterArgs) {
    insert_opt(p, "group", f.group);
    insert_opt(p, "session_id", f.session);
    insert_opt(p, "surface_id", f.tab);
}

fn stream_request(verb: StreamVerb) -> (&'static str, Value, Duration) {
    let mut p = Map::new();
    match verb {
        StreamVerb::Watch {
            filter,
            since,
            timeout,
        } => {
            stream_filter(&mut p, filter);
            if let Some(s) = since {
                p.insert("since".into(), json!(s));
            }
            if let Some(t) = timeout {
                p.insert("timeout".into(), json!(t.as_secs_f64()));
            }
            ("stream.watch", Value::Object(p), CLIENT_TIMEOUT)
        }
        StreamVerb::Wait {
            filter,
            event,
            all,
            timeout,
        } => {
            stream_filter(&mut p, filter);
            insert_opt(&mut p, "event", event);
            insert_opt(&mut p, "all", all);
            let t = timeout.unwrap_or(maxx_protocol::limits::WAIT_DEFAULT_TIMEOUT);
            p.insert("timeout".into(), json!(t.as_secs_f64()));
            ("stream.wait", Value::Object(p), t + Duration::from_secs(15))
        }
    }
}

/// Send a built request (or report its usage error) and pick the exit code.
fn dispatch(
    target: &Target,
    caller: &Option<String>,
    confirm: bool,
    built: Result<(&'static str, Value, Duration), String>,
) -> i32 {
    let (method, params, timeout) = match built {
        Ok(r) => r,
        Err(usage) => return usage_error(usage, "see --help"),
    };
    if method == "sessions.watch" || method == "stream.watch" {
        return watch(target, method, params, caller, confirm);
    }
    if method == "sessions.events" && params.get("limit").is_none() {
        return events_all(target, params, caller, confirm, timeout);
    }
    let autostart = method == "sessions.create";
    let response = send(target, method, params, caller, confirm, timeout, autostart);
    report(method, response)
}

fn daemon(target: &Target, d: DaemonArgs) -> i32 {
    if d.detach {
        let mut extra = vec![
            "--bus-capacity".to_string(),
            d.bus_capacity.to_string(),
            "--retain-records".to_string(),
            d.retain_records.to_string(),
            "--max-long-lived".to_string(),
            d.max_long_lived.to_string(),
            "--audit-session-bytes".to_string(),
            d.audit_session_bytes.to_string(),
            "--audit-total-bytes".to_string(),
            d.audit_total_bytes.to_string(),
        ];
        if d.fsync {
            extra.push("--fsync".into());
        }
        return match daemon_cmd::spawn_detached(&target.control_dir, &d.log_level, &extra) {
            Ok(()) => 0,
            Err(e) => {
                print_error(&e);
                1
            }
        };
    }
    daemon_cmd::run_foreground(
        target.control_dir.clone(),
        &d.log_level,
        d.detached_child,
        daemon_cmd::Tuning {
            bus_capacity: d.bus_capacity,
            fsync: d.fsync,
            retain_records: d.retain_records,
            max_long_lived: d.max_long_lived,
            audit: maxx_actors::audit_log::AuditLimits {
                session_max: d.audit_session_bytes,
                total_max: d.audit_total_bytes,
            },
        },
    )
}

/// Pages `sessions events` follows without `--limit` before it prints what it has (with
/// `more: true` and the `next_since` to go on from).
const EVENTS_FOLLOW_MAX_PAGES: usize = 64;

/// `sessions events` without `--limit`: fetch page after page (each `since` the previous
/// `next_since`) and print them as one answer: the events in order, the last page's
/// `next_since` and `more`, and `reset`/`dropped_through` if any page reported a gap (the
/// highest dropped seq). Bounded by [`EVENTS_FOLLOW_MAX_PAGES`] and by a cursor that stops
/// advancing.
fn events_all(
    target: &Target,
    mut params: Value,
    caller: &Option<String>,
    confirm: bool,
    timeout: Duration,
) -> i32 {
    let method = "sessions.events";
    let mut merged: Option<Response> = None;
    for _ in 0..EVENTS_FOLLOW_MAX_PAGES {
        let page = match send(
            target,
            method,
            params.clone(),
            caller,
            confirm,
            timeout,
            false,
        ) {
            Ok(r) if r.ok && r.result.is_some() => r,
            other => return report(method, other),
        };
        let result = page.result.as_ref().expect("checked above");
        let next = result["next_since"].as_u64();
        let more = result["more"].as_bool() == Some(true);
        let advanced = next.is_some() && next != params["since"].as_u64();
        match merged.as_mut().and_then(|m| m.result.as_mut()) {
            None => merged = Some(page.clone()),
            Some(all) => {
                if let (Some(list), Some(new)) =
                    (all["events"].as_array_mut(), result["events"].as_array())
                {
                    list.extend(new.iter().cloned());
                }
                all["next_since"] = result["next_since"].clone();
                all["more"] = result["more"].clone();
                if result["reset"] == json!(true) {
                    all["reset"] = json!(true);
                    all["dropped_through"] = result["dropped_through"].clone();
                }
            }
        }
        if !more || !advanced {
            break;
        }
        params["since"] = json!(next);
    }
    report(method, Ok(merged.expect("at least one page")))
}

fn send(
    target: &Target,
    method: &str,
    params: Value,
    caller: &Option<String>,
    confirm: bool,
    timeout: Duration,
    autostart: bool,
) -> Result<Response, ClientError> {
    let attempt = || {
        client::request(
            target,
            method,
            params.clone(),
            caller.as_deref(),
            confirm,
            timeout,
        )
    };
    match attempt() {
        Err(ClientError::NoDaemon(_)) if autostart => {
            match daemon_cmd::spawn_detached(&target.control_dir, "info", &[]) {
                Ok(()) => {}
                // Another caller started one first: use it.
                Err(e) if e.code == maxx_protocol::ErrorCode::AlreadyRunning => {}
                Err(mut e) => {
                    e.message = format!(
                        "no daemon was running and starting one failed: {}",
                        e.message
                    );
                    return Err(ClientError::Failed(e));
                }
            }
            attempt()
        }
        other => other,
    }
}

/// Print a stream's lines as they arrive. Exit 0 when it ended or hit its timeout, 1 if
/// the daemon refused it or dropped a watcher that fell behind.
fn watch(
    target: &Target,
    method: &str,
    params: Value,
    caller: &Option<String>,
    confirm: bool,
) -> i32 {
    use std::io::Write;
    let mut code = 0;
    let result = client::stream_lines(target, method, params, caller.as_deref(), confirm, |line| {
        if line.get("ok") == Some(&Value::Bool(false)) {
            eprintln!("{}", views::json_text(&line));
            code = EXIT_FAILED;
            return;
        }
        if (line["type"] == "end" && line["reason"] == "dropped") || line["type"] == "reset" {
            code = EXIT_FAILED;
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", views::json_text(&line));
        let _ = out.flush();
    });
    match result {
        Ok(()) => code,
        Err(e) => client_error(e),
    }
}

fn print_error(error: &ErrorBody) {
    eprintln!(
        "{}",
        views::json_text(&json!({ "ok": false, "error": error }))
    );
}

/// Print the response and pick the exit code.
fn report(method: &str, response: Result<Response, ClientError>) -> i32 {
    let response = match response {
        Ok(r) => r,
        Err(ClientError::NoDaemon(e)) => {
            print_error(&e);
            return EXIT_NO_DAEMON;
        }
        Err(ClientError::Failed(e)) => {
            print_error(&e);
            if method == "sessions.run" && e.code == maxx_protocol::ErrorCode::Timeout {
                return EXIT_RUN_GAVE_UP;
            }
            return EXIT_FAILED;
        }
        Err(e) => return client_error(e),
    };
    if !response.ok {
        let error = response
            .error
            .unwrap_or_else(|| ErrorBody::internal("ok:false without an error"));
        print_error(&error);
        if method == "sessions.run" && error.code == maxx_protocol::ErrorCode::Timeout {
            return EXIT_RUN_GAVE_UP;
        }
        return EXIT_FAILED;
    }
    println!("{}", views::json_text(&response));
    if method == "sessions.run" {
        // Mirror the child's exit code.
        return response
            .result
            .as_ref()
            .and_then(|r| r.get("exit_code"))
            .and_then(Value::as_i64)
            .map_or(EXIT_FAILED, |c| (c & 0xff) as i32);
    }
    if method == "sessions.wait" || method == "stream.wait" {
        let result = response.result.as_ref();
        if result.and_then(|r| r.get("output_only_filtered")) == Some(&Value::Bool(false)) {
            eprintln!(
                "maxx: --output-only filtered nothing: this session has not marked input \
                 with OSC 133 (no B mark seen)"
            );
        }
        let outcome = result
            .and_then(|r| r.get("outcome"))
            .and_then(Value::as_str);
        return match outcome {
            Some("matched") => 0,
            Some("timeout") => EXIT_TIMEOUT,
            _ => EXIT_FAILED,
        };
    }
    0
}

fn metadata_map(pairs: Vec<(String, String)>) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect()
}

fn value_name<T: clap::ValueEnum>(v: T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

fn insert_opt(p: &mut Map<String, Value>, key: &str, value: Option<String>) {
    if let Some(v) = value {
        p.insert(key.into(), Value::String(v));
    }
}

/// The params every declaration verb shares.
fn declare(p: &mut Map<String, Value>, session_id: String, source: Option<String>) {
    p.insert("session_id".into(), json!(session_id));
    insert_opt(p, "source", source);
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

fn parse_json(flag: &str, text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{flag} is not valid JSON: {e}"))
}

/// Build `(method, params, client timeout)` for a sessions verb.
fn sessions_request(verb: SessionsVerb) -> Result<(&'static str, Value, Duration), String> {
    let mut p = Map::new();
    let mut timeout = CLIENT_TIMEOUT;
    let method = match verb {
        SessionsVerb::Create(a) => {
            let cwd = match a.cwd {
                Some(c) => Some(c),
                None => std::env::current_dir().ok(),
            };
            if let Some(cwd) = cwd {
                let abs = if cwd.is_absolute() {
                    cwd
                } else {
                    std::env::current_dir()
                        .map_err(|e| format!("cannot resolve --cwd: {e}"))?
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
            "sessions.create"
        }
        SessionsVerb::Get(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            "sessions.get"
        }
        SessionsVerb::List(a) => {
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
            "sessions.list"
        }
        SessionsVerb::Watch(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            if let Some(t) = a.timeout {
                p.insert("timeout".into(), json!(t.as_secs_f64()));
            }
            "sessions.watch"
        }
        SessionsVerb::Events(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            p.insert("since".into(), json!(a.since));
            if let Some(limit) = a.limit {
                p.insert("limit".into(), json!(limit));
            }
            "sessions.events"
        }
        SessionsVerb::DeclareState(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("state".into(), json!(a.state));
            insert_opt(&mut p, "message", a.message);
            "sessions.declare-state"
        }
        SessionsVerb::EmitEvent(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("event".into(), json!(a.event));
            if let Some(payload) = a.payload_json {
                let v: Value = serde_json::from_str(&payload)
                    .map_err(|e| format!("--payload-json is not valid JSON: {e}"))?;
                p.insert("payload".into(), v);
            }
            insert_opt(&mut p, "message", a.message);
            "sessions.emit-event"
        }
        SessionsVerb::SetMetadata(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("key".into(), json!(a.key));
            insert_opt(&mut p, "value", a.value);
            insert_opt(&mut p, "value_json", a.value_json);
            "sessions.set-metadata"
        }
        SessionsVerb::RemoveMetadata(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("keys".into(), json!(a.keys));
            "sessions.remove-metadata"
        }
        SessionsVerb::ClearMetadata(a) => {
            declare(&mut p, a.session_id, a.source);
            "sessions.clear-metadata"
        }
        SessionsVerb::SetState(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("state".into(), json!(a.state));
            insert_opt(&mut p, "message", a.message);
            "sessions.set-state"
        }
        SessionsVerb::SetSummary(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("summary".into(), json!(a.summary));
            "sessions.set-summary"
        }
        SessionsVerb::SetResult(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("result".into(), json!(a.result));
            "sessions.set-result"
        }
        SessionsVerb::ClearResult(a) => {
            declare(&mut p, a.session_id, a.source);
            "sessions.clear-result"
        }
        SessionsVerb::SetResultSchema(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert(
                "result_schema".into(),
                parse_json("--result-schema", &a.result_schema)?,
            );
            "sessions.set-result-schema"
        }
        SessionsVerb::ClearResultSchema(a) => {
            declare(&mut p, a.session_id, a.source);
            "sessions.clear-result-schema"
        }
        SessionsVerb::Snapshot(a) => {
            p.insert("session_id".into(), json!(a.session_id));
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
            "sessions.snapshot"
        }
        SessionsVerb::Dump(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            if a.scrollback {
                p.insert("scrollback".into(), json!(true));
            }
            "sessions.dump"
        }
        SessionsVerb::Inspect(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            "sessions.inspect"
        }
        SessionsVerb::Run(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            p.insert("command".into(), json!(a.command));
            let t = a
                .timeout
                .unwrap_or(maxx_protocol::limits::RUN_DEFAULT_TIMEOUT);
            p.insert("timeout".into(), json!(t.as_secs_f64()));
            // `--timeout 0` is no limit: wait for the answer as long as the run takes.
            timeout = if t.is_zero() {
                Duration::MAX
            } else {
                t + Duration::from_secs(15)
            };
            "sessions.run"
        }
        SessionsVerb::SendKeys(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            p.insert("keys".into(), json!(a.keys));
            if a.literal {
                p.insert("literal".into(), json!(true));
            }
            "sessions.send-keys"
        }
        SessionsVerb::Paste(a) => {
            let text = if a.text == "-" {
                let mut buf = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf)
                    .map_err(|e| format!("cannot read stdin: {e}"))?;
                buf
            } else {
                a.text
            };
            p.insert("session_id".into(), json!(a.session_id));
            p.insert("text".into(), json!(text));
            "sessions.paste"
        }
        SessionsVerb::Resize(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            p.insert("cols".into(), json!(a.cols));
            p.insert("rows".into(), json!(a.rows));
            "sessions.resize"
        }
        SessionsVerb::SetRestartPolicy(a) => {
            if a.restart.restart.is_none() {
                return Err("set-restart-policy needs --restart (never removes the policy)".into());
            }
            p.insert("session_id".into(), json!(a.session_id));
            restart_params(&mut p, a.restart);
            "sessions.set-restart-policy"
        }
        SessionsVerb::Archive(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            insert_opt(&mut p, "reason", a.reason);
            "sessions.archive"
        }
        SessionsVerb::Restart(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            insert_opt(&mut p, "command", a.command);
            if a.last_command {
                p.insert("last_command".into(), json!(true));
            }
            "sessions.restart"
        }
        SessionsVerb::SetGroup(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            insert_opt(&mut p, "group", a.group);
            "sessions.set-group"
        }
        SessionsVerb::SetParent(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            p.insert("parent".into(), json!(a.parent));
            "sessions.set-parent"
        }
        SessionsVerb::SetAgentType(a) => {
            declare(&mut p, a.session_id, a.source);
            p.insert("agent_type".into(), json!(a.agent_type));
            "sessions.set-agent-type"
        }
        SessionsVerb::Update(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            if let Some(v) = a.status {
                p.insert("status".into(), json!(v));
            }
            if !a.metadata.is_empty() {
                p.insert("metadata".into(), Value::Object(metadata_map(a.metadata)));
            }
            "sessions.update"
        }
        SessionsVerb::Action(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            p.insert("action".into(), json!(value_name(a.action)));
            if let Some(v) = a.input {
                p.insert("input".into(), json!(v));
            }
            if let Some(v) = a.signal {
                p.insert("signal".into(), json!(v));
            }
            "sessions.action"
        }
        SessionsVerb::Cancel(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            "sessions.cancel"
        }
        SessionsVerb::Wait(a) => {
            p.insert("session_id".into(), json!(a.session_id));
            if let Some(l) = a.lifecycle {
                p.insert("lifecycle".into(), json!(value_name(l)));
            }
            insert_opt(&mut p, "state", a.state);
            insert_opt(&mut p, "event", a.event);
            if a.output_only {
                // A usage error before any wait, like an invalid regex.
                if a.until.is_none() && a.regex.is_none() {
                    return Err("--output-only needs --until or --regex".into());
                }
                p.insert("output_only".into(), json!(true));
            }
            insert_opt(&mut p, "until", a.until);
            if let Some(re) = a.regex {
                // An invalid regex is a usage error before any wait.
                maxx_protocol::request::compile_regex(&re).map_err(|e| e.message)?;
                p.insert("regex".into(), json!(re));
            }
            if let Some(since) = a.since {
                p.insert("since".into(), json!(since));
            }
            let t = a
                .timeout
                .unwrap_or(maxx_protocol::limits::WAIT_DEFAULT_TIMEOUT);
            p.insert("timeout".into(), json!(t.as_secs_f64()));
            timeout = t + Duration::from_secs(15);
            "sessions.wait"
        }
        SessionsVerb::RegisterCurrent => {
            let surface = std::env::var("MAXX_SURFACE_ID").map_err(|_| {
                "MAXX_SURFACE_ID is not set: run this from inside a session maxx spawned"
                    .to_string()
            })?;
            let token = std::env::var("MAXX_REGISTRATION_TOKEN").map_err(|_| {
                "MAXX_REGISTRATION_TOKEN is not set: run this from inside a session maxx spawned"
                    .to_string()
            })?;
            p.insert("surface_id".into(), json!(surface));
            p.insert("registration_token".into(), json!(token));
            "sessions.register-current"
        }
    };
    Ok((method, Value::Object(p), timeout))
}

#[cfg(test)]
mod allocator_tests {
    /// The `_rjem_malloc_conf` symbol is the one jemalloc reads: a misspelt symbol would
    /// silently leave the lazy defaults (freed pages stay resident).
    #[test]
    fn jemalloc_reads_our_settings() {
        std::hint::black_box(Box::new(0u64));
        assert_eq!(
            maxx_actors::memory::allocator_option("opt.muzzy_decay_ms"),
            Some(0)
        );
    }
}
