//! `--hosts a,b,c` (or `--hosts-file F`): the fleet views, the same request on every host at
//! once (`crate::remote` for each remote one, the socket for `local`), merged.
//!
//! Every result carries `host` (null for this machine). A host that could not be reached,
//! or dropped mid-stream, is listed in `unreachable: [{host, code, message}]`, never left
//! out silently; the hosts that answered are still printed, and the exit code is 3 (a
//! partial answer: retrying may help) with one JSON error on stderr saying which hosts.
//! A host that answered with a refusal (`unauthorized`, `not_found`...) is listed the same
//! way; alone it exits as that refusal does (1 or 2).
//!
//! `stream watch` merges the hosts' streams: one hello with a cursor per host (`cursors`,
//! keyed by host, `local` for this machine; `--since a=12,b=40` resumes each), then every
//! line of every host with its `host`, a remote `reset` included, and a
//! `{"type":"unreachable",...}` line when one drops. `stream wait --all` matches when it
//! matched on every host.

use crate::cli::*;
use crate::client::{self, ClientError, Target};
use crate::request::{self, Request};
use crate::{exit, remote, report, views};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use serde_json::{json, Map, Value};
use std::io::Read;
use std::path::Path;

/// One host of a fleet: `None` is this machine.
pub type Host = Option<String>;

/// The commands that take `--hosts` (`maxx --capabilities`).
pub const COMMANDS: &[&str] = &[
    "ls",
    "status",
    "top --json",
    "sessions list",
    "stream watch",
    "stream wait --all",
];

/// Hosts one fleet command may name.
const HOSTS_MAX: usize = 256;
/// The largest hosts file read.
const HOSTS_FILE_MAX_BYTES: u64 = 64 * 1024;

/// The name a host has in cursor maps and messages (`local` for this machine).
fn label(host: &Host) -> &str {
    host.as_deref().unwrap_or("local")
}

/// `host` as results carry it: the name, or null for this machine.
fn host_value(host: &Host) -> Value {
    host.as_ref()
        .map_or(Value::Null, |h| Value::String(h.clone()))
}

/// The fleet `--hosts`/`--hosts-file` name (`None`: neither was given), checked and
/// without repeats, in order.
pub fn hosts(list: &[String], file: Option<&Path>) -> Result<Option<Vec<Host>>, ErrorBody> {
    let mut names: Vec<String> = list.to_vec();
    if let Some(path) = file {
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(HOSTS_FILE_MAX_BYTES).read_to_string(&mut text))
            .map_err(|e| {
                ErrorBody::invalid(format!("--hosts-file {}: {e}", path.display()))
                    .with_remedy("one host per line, # comments, at most 64 KiB")
            })?;
        names.extend(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    } else if list.is_empty() {
        return Ok(None);
    }
    let mut hosts: Vec<Host> = Vec::new();
    for name in names.iter().map(|n| n.trim()) {
        let host = match name {
            "local" | "-" => None,
            h => {
                remote::check_host(h)?;
                Some(h.to_string())
            }
        };
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    if hosts.is_empty() || hosts.len() > HOSTS_MAX {
        return Err(ErrorBody::invalid(format!(
            "--hosts names {} hosts; give 1 to {HOSTS_MAX}",
            hosts.len()
        ))
        .with_remedy("e.g. --hosts build-1,gpu-2,local"));
    }
    Ok(Some(hosts))
}

/// A host that did not answer (or refused), and the exit code its error has alone.
struct Missing {
    host: Host,
    error: ErrorBody,
    exit: i32,
}

impl Missing {
    fn from_client(host: &Host, method: &str, e: ClientError) -> Missing {
        let exit = exit::unanswered(method, &e);
        let error = match e {
            ClientError::NoDaemon(b) | ClientError::Failed(b) => b,
            ClientError::Usage(m) => ErrorBody::invalid(m),
        };
        Missing {
            host: host.clone(),
            error,
            exit,
        }
    }

    fn to_json(&self) -> Value {
        json!({"host": host_value(&self.host), "code": self.error.code, "message": self.error.message})
    }
}

fn unreachable_list(missing: &[Missing]) -> Value {
    Value::Array(missing.iter().map(Missing::to_json).collect())
}

/// The exit code of a fleet answer (`ok`: the code when every host answered), after saying
/// on stderr which hosts are missing: 3 if any could not be reached, else the refusal's.
fn finish(missing: &[Missing], ok: i32) -> i32 {
    if missing.is_empty() {
        return ok;
    }
    let exit = if missing.iter().any(|m| m.exit == exit::NO_DAEMON) {
        exit::NO_DAEMON
    } else {
        missing.iter().map(|m| m.exit).max().unwrap_or(exit::FAILED)
    };
    let code = if exit == exit::NO_DAEMON {
        ErrorCode::Unreachable
    } else {
        missing[0].error.code
    };
    let names: Vec<String> = missing
        .iter()
        .map(|m| format!("{} ({}: {})", label(&m.host), m.error.code, m.error.message))
        .collect();
    eprintln!(
        "{}",
        views::json_text(&json!({"ok": false, "error": {
            "code": code,
            "message": format!("partial answer: {} host(s) did not answer: {}", missing.len(), names.join("; ")),
            "remedy": "the hosts that answered are printed; retry for the others (exit 3), or see each host's error",
            "unreachable": unreachable_list(missing),
        }}))
    );
    exit
}

/// One request on every host at once: each host's `result`, or why it is missing.
fn gather(
    target: &Target,
    caller: &Option<String>,
    hosts: &[Host],
    req: &Request,
) -> (Vec<(Host, Value)>, Vec<Missing>) {
    let answers: Vec<(Host, Result<Value, Missing>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|host| {
                let target = target.on(host.clone());
                scope.spawn(move || {
                    let answer = match client::request(
                        &target,
                        req.method,
                        req.params.clone(),
                        caller.as_deref(),
                        false,
                        req.timeout,
                    ) {
                        Ok(r) if r.ok => Ok(r.result.unwrap_or(Value::Null)),
                        Ok(r) => {
                            let error = r.error.unwrap_or_else(|| {
                                ErrorBody::internal("ok:false without an error")
                            });
                            Err(Missing {
                                host: host.clone(),
                                exit: exit::refused(req.method, &error),
                                error,
                            })
                        }
                        Err(e) => Err(Missing::from_client(host, req.method, e)),
                    };
                    (host.clone(), answer)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a fleet request thread panicked"))
            .collect()
    });
    let mut ok = Vec::new();
    let mut missing = Vec::new();
    for (host, answer) in answers {
        match answer {
            Ok(v) => ok.push((host, v)),
            Err(m) => missing.push(m),
        }
    }
    (ok, missing)
}

/// Run a fleet command; the commands that take `--hosts` are listed in its help.
pub fn run(target: &Target, caller: &Option<String>, hosts: Vec<Host>, command: Command) -> i32 {
    match command {
        Command::Ls(a) => ls(target, caller, &hosts, a),
        Command::Top(a) if a.json => ls(
            target,
            caller,
            &hosts,
            LsArgs {
                wide: false,
                json: true,
                group: None,
            },
        ),
        Command::Status(a) => status(target, caller, &hosts, a.json),
        Command::Sessions(SessionsCmd { verb: None }) => {
            sessions_list(target, caller, &hosts, ListArgs::default())
        }
        Command::Sessions(SessionsCmd {
            verb: Some(SessionsVerb::List(a)),
        }) => sessions_list(target, caller, &hosts, a),
        Command::Stream(StreamCmd {
            verb: StreamVerb::Watch(a),
        }) => watch(target, caller, &hosts, a),
        Command::Stream(StreamCmd {
            verb: StreamVerb::Wait(a),
        }) if a.all.is_some() => wait(target, caller, &hosts, a),
        _ => report::usage_error(
            "--hosts works with ls, status, top --json, sessions list, stream watch and stream wait --all",
            "run other commands on one host with --host HOST (see docs/remote.md)",
        ),
    }
}

/// The sessions of every host, each with its `host`.
fn all_sessions(answers: &[(Host, Value)]) -> Vec<Value> {
    let mut sessions = Vec::new();
    for (host, result) in answers {
        for s in result["sessions"].as_array().into_iter().flatten() {
            let mut s = s.clone();
            if let Some(map) = s.as_object_mut() {
                map.insert("host".into(), host_value(host));
            }
            sessions.push(s);
        }
    }
    sessions
}

fn ls(target: &Target, caller: &Option<String>, hosts: &[Host], a: LsArgs) -> i32 {
    let req = request::sessions_list(ListArgs {
        group: a.group,
        ..ListArgs::default()
    });
    let (answers, missing) = gather(target, caller, hosts, &req);
    if a.json {
        println!(
            "{}",
            views::json_text(&Value::Array(all_sessions(&answers)))
        );
    } else {
        for (host, result) in &answers {
            let sessions = result["sessions"].as_array().cloned().unwrap_or_default();
            println!("== {} ==", views::escape_controls(label(host)));
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
        print_unreachable(&missing);
    }
    finish(&missing, exit::OK)
}

fn status(target: &Target, caller: &Option<String>, hosts: &[Host], json: bool) -> i32 {
    let (answers, missing) = gather(target, caller, hosts, &request::daemon_status());
    if json {
        let list: Vec<Value> = answers
            .iter()
            .map(|(host, s)| {
                let mut map = Map::new();
                map.insert("host".into(), host_value(host));
                if let Some(fields) = s.as_object() {
                    map.extend(fields.clone());
                }
                Value::Object(map)
            })
            .collect();
        println!(
            "{}",
            views::json_text(&json!({"hosts": list, "unreachable": unreachable_list(&missing)}))
        );
    } else {
        for (host, s) in &answers {
            println!("== {} ==", views::escape_controls(label(host)));
            print!("{}", views::render_status(s));
        }
        print_unreachable(&missing);
    }
    finish(&missing, exit::OK)
}

fn sessions_list(target: &Target, caller: &Option<String>, hosts: &[Host], a: ListArgs) -> i32 {
    let (answers, missing) = gather(target, caller, hosts, &request::sessions_list(a));
    println!(
        "{}",
        views::json_text(&json!({"ok": true, "result": {
            "sessions": all_sessions(&answers),
            "unreachable": unreachable_list(&missing),
        }}))
    );
    finish(&missing, exit::OK)
}

/// `stream wait --group G --all C --hosts ...`: the wait on every host at once; matched
/// when it matched on every host, else `timeout` if one timed out, else `ended`.
fn wait(target: &Target, caller: &Option<String>, hosts: &[Host], a: StreamWaitArgs) -> i32 {
    let req = request::stream_wait(a);
    let (answers, missing) = gather(target, caller, hosts, &req);
    let outcomes: Vec<&str> = answers
        .iter()
        .map(|(_, r)| r["outcome"].as_str().unwrap_or("ended"))
        .collect();
    let outcome = if !missing.is_empty() {
        "partial"
    } else if outcomes.iter().all(|o| *o == "matched") {
        "matched"
    } else if outcomes.contains(&"timeout") {
        "timeout"
    } else {
        "ended"
    };
    let per_host: Vec<Value> = answers
        .iter()
        .map(|(host, r)| {
            let mut map = Map::new();
            map.insert("host".into(), host_value(host));
            if let Some(fields) = r.as_object() {
                map.extend(fields.clone());
            }
            Value::Object(map)
        })
        .collect();
    let member_count: u64 = answers
        .iter()
        .filter_map(|(_, r)| r["member_count"].as_u64())
        .sum();
    println!(
        "{}",
        views::json_text(&json!({"ok": true, "result": {
            "outcome": outcome,
            "member_count": member_count,
            "hosts": per_host,
            "unreachable": unreachable_list(&missing),
        }}))
    );
    let ok = match outcome {
        "matched" => exit::OK,
        "timeout" => exit::TIMEOUT,
        _ => exit::FAILED,
    };
    finish(&missing, ok)
}

/// What a host's stream thread tells the merger.
enum Msg {
    Line(usize, Value),
    Done(usize, Result<(), ClientError>),
}

/// Where a host's stream is.
#[derive(PartialEq)]
enum Phase {
    /// No line yet.
    Opening,
    /// Its hello is in; lines follow.
    Open,
    /// Ended (with its end line, or listed as missing).
    Over,
}

/// `stream watch --hosts ...`: one merged stream (see the module doc).
fn watch(target: &Target, caller: &Option<String>, hosts: &[Host], a: StreamWatchArgs) -> i32 {
    use std::sync::mpsc;
    let per_host = match &a.since {
        Some(Since::PerHost(map)) => {
            if let Some((unknown, _)) = map
                .iter()
                .find(|(h, _)| !hosts.iter().any(|host| label(host) == h))
            {
                return report::usage_error(
                    format!("--since names {unknown:?}, which is not one of --hosts"),
                    "give a cursor per host of --hosts (local=N for this machine)",
                );
            }
            map.clone()
        }
        _ => Vec::new(),
    };
    let (tx, rx) = mpsc::channel::<Msg>();
    for (i, host) in hosts.iter().enumerate() {
        let mut args = StreamWatchArgs {
            filter: a.filter.clone(),
            since: None,
            timeout: a.timeout,
        };
        args.since = match &a.since {
            Some(Since::Cursor(n)) => Some(Since::Cursor(*n)),
            _ => per_host
                .iter()
                .find(|(h, _)| h == label(host))
                .map(|(_, n)| Since::Cursor(*n)),
        };
        let req = request::stream_watch(args).expect("one cursor per host");
        let (tx, target, caller) = (tx.clone(), target.on(host.clone()), caller.clone());
        std::thread::spawn(move || {
            let line_tx = tx.clone();
            let done = client::stream_lines(
                &target,
                req.method,
                req.params,
                caller.as_deref(),
                false,
                |line| {
                    let _ = line_tx.send(Msg::Line(i, line));
                },
            );
            let _ = tx.send(Msg::Done(i, done));
        });
    }
    drop(tx);
    let mut phase: Vec<Phase> = hosts.iter().map(|_| Phase::Opening).collect();
    let mut missing: Vec<Missing> = Vec::new();
    let mut hellos: Vec<Option<Value>> = hosts.iter().map(|_| None).collect();
    let mut held: Vec<Msg> = Vec::new();
    let mut code = exit::OK;
    // Until every host has said hello (or failed): the merged hello goes first.
    while phase.contains(&Phase::Opening) {
        let Ok(msg) = rx.recv() else { break };
        match msg {
            Msg::Line(i, line) if phase[i] == Phase::Opening && line["type"] == "hello" => {
                hellos[i] = Some(line);
                phase[i] = Phase::Open;
            }
            Msg::Line(i, line) if phase[i] == Phase::Opening => {
                missing.push(refusal(&hosts[i], &line));
                phase[i] = Phase::Over;
            }
            Msg::Done(i, result) if phase[i] == Phase::Opening => {
                let e = result.err().unwrap_or_else(|| {
                    ClientError::NoDaemon(ErrorBody::new(
                        ErrorCode::Unreachable,
                        format!("{}: the stream ended before its hello", label(&hosts[i])),
                    ))
                });
                missing.push(Missing::from_client(&hosts[i], "stream.watch", e));
                phase[i] = Phase::Over;
            }
            other => held.push(other),
        }
    }
    let mut cursors = Map::new();
    let mut resets = Map::new();
    for (host, hello) in hosts.iter().zip(&hellos) {
        let Some(hello) = hello else { continue };
        cursors.insert(label(host).into(), hello["cursor"].clone());
        if hello["reset"] == true {
            resets.insert(
                label(host).into(),
                json!({"dropped_through": hello["dropped_through"]}),
            );
        }
    }
    let mut hello = json!({"type": "hello", "schema": 1, "cursors": cursors,
        "unreachable": unreachable_list(&missing)});
    if !resets.is_empty() {
        hello["reset"] = Value::Object(resets);
    }
    report::stream_line(&hello);
    for msg in held.into_iter().chain(rx.iter()) {
        match msg {
            Msg::Line(i, line) if phase[i] == Phase::Open => {
                if line["ok"] == false {
                    let m = refusal(&hosts[i], &line);
                    report::stream_line(&unreachable_line(&m));
                    missing.push(m);
                    phase[i] = Phase::Over;
                    continue;
                }
                let ended = line["type"] == "end";
                let mut line = line;
                if let Some(map) = line.as_object_mut() {
                    map.insert("host".into(), host_value(&hosts[i]));
                }
                if let Some(c) = report::stream_line(&line) {
                    code = code.max(c);
                }
                if ended {
                    phase[i] = Phase::Over;
                }
            }
            // Open still: it ended without its end line (the daemon went away).
            Msg::Done(i, result) if phase[i] == Phase::Open => {
                let e = result.err().unwrap_or_else(|| {
                    ClientError::NoDaemon(ErrorBody::new(
                        ErrorCode::NoDaemon,
                        format!(
                            "{}: the daemon ended the stream without its end line",
                            label(&hosts[i])
                        ),
                    ))
                });
                let m = Missing::from_client(&hosts[i], "stream.watch", e);
                report::stream_line(&unreachable_line(&m));
                missing.push(m);
                phase[i] = Phase::Over;
            }
            _ => {}
        }
        if phase.iter().all(|p| *p == Phase::Over) {
            break;
        }
    }
    finish(&missing, code)
}

/// A stream's refusal line (`ok:false`) from a host, as a missing host.
fn refusal(host: &Host, line: &Value) -> Missing {
    let error = serde_json::from_value::<ErrorBody>(line["error"].clone())
        .unwrap_or_else(|_| ErrorBody::internal("a refusal without an error"));
    Missing {
        host: host.clone(),
        exit: exit::refused("stream.watch", &error),
        error,
    }
}

/// The line a merged stream prints when a host drops out.
/// One `== host == unreachable: why` line per host that did not answer (human views).
fn print_unreachable(missing: &[Missing]) {
    for m in missing {
        println!(
            "== {} == unreachable: {}",
            views::escape_controls(label(&m.host)),
            views::escape_controls(&m.error.message)
        );
    }
}

fn unreachable_line(m: &Missing) -> Value {
    json!({"type": "unreachable", "host": host_value(&m.host), "code": m.error.code,
        "message": m.error.message})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_come_from_the_flag_and_the_file_without_repeats() {
        let dir = std::env::temp_dir().join(format!("maxx-hosts-{}", std::process::id()));
        std::fs::write(&dir, "# fleet\nbuild-1\n\n  gpu-2  # the big one\nlocal\n").unwrap();
        let hosts = hosts(&["build-1".into(), "-".into()], Some(&dir)).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(
            hosts,
            Some(vec![Some("build-1".into()), None, Some("gpu-2".into())])
        );
        assert_eq!(super::hosts(&[], None).unwrap(), None);
        assert!(super::hosts(&["-oProxyCommand=x".into()], None).is_err());
        assert!(super::hosts(&["".into()], None).is_err());
    }
}
