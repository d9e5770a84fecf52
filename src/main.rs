//! `maxx`: the CLI and the daemon entry.
//!
//! - [`cli`]: the clap grammar (`maxx [+control] <noun> <verb> [flags]`), one file per
//!   command family.
//! - [`request`]: every request the CLI sends: one function per method, flags to params.
//! - [`client`]: one request over the socket.
//! - [`report`]: what is printed: the raw JSON response, or one JSON error on stderr.
//! - [`exit`]: the exit codes, and which outcome gets which.
//! - [`human`]: `maxx ls`, `maxx status`, `maxx attach`; [`views`] renders the tables.
//! - [`top`]: the live dashboard; [`attach`]: the terminal side of `maxx attach`.
//! - [`daemon_cmd`]: `maxx daemon [--detach]`.
//! - [`mcp`]: `maxx mcp`, the MCP server on stdio (tools in `mcp/tools.rs`).
//! - [`keeper`]: the keeper process `maxx daemon` runs, with the daemon proper as its child.
//! - [`hook`]: `maxx hook <runtime>`, result capture from agent transcripts (adapter table).
//! - [`remote`]: `--host H`, a request carried by `ssh H maxx proxy`; [`proxy`]: `maxx
//!   proxy`, the far side; [`fleet`]: `--hosts`, one view over several hosts.
//!
//! A noun-verb runs as: [`cli`] parses, [`request`] builds, [`main`]'s `dispatch` sends
//! (starting a daemon first for `sessions create`), [`report`] prints and picks the exit code.

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
mod exit;
mod fleet;
mod hook;
mod human;
mod keeper;
mod mcp;
mod proxy;
mod record;
mod remote;
mod report;
mod request;
mod top;
mod views;

use cli::*;
use client::{ClientError, Target};
use maxx_protocol::Response;
use request::{Built, Request};

fn main() {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `maxx +control sessions list` is `maxx sessions list`: the seed's scripts run as is.
    if args.get(1).is_some_and(|a| a == "+control") {
        args.remove(1);
    }
    let cli = match cli::parse(args) {
        Ok(cli) => cli,
        Err(e) => std::process::exit(report::clap_error(e)),
    };
    std::process::exit(run(cli));
}

fn run(cli: Cli) -> i32 {
    let Cli {
        globals: cli,
        command,
    } = cli;
    let mut target = Target::resolve(cli.socket.as_ref());
    if cli.capabilities {
        println!("{}", views::json_text(&capabilities()));
        return exit::OK;
    }
    let Some(command) = command else {
        // Bare `maxx`: its help, on stdout.
        let _ = cli::command().print_help();
        return exit::OK;
    };
    // The far side of `--host`: always this machine's daemon.
    if let Command::Proxy = command {
        return proxy::run(&target, cli.caller);
    }
    match fleet::hosts(&cli.hosts, cli.hosts_file.as_deref()) {
        Ok(Some(hosts)) => return fleet::run(&target, &cli.caller, hosts, command),
        Ok(None) => {}
        Err(e) => {
            report::print_error(&e);
            return exit::USAGE;
        }
    }
    match cli.host.as_deref() {
        None | Some("local") | Some("-") => {}
        Some(host) => {
            if let Err(e) = remote::check_host(host) {
                report::print_error(&e);
                return exit::USAGE;
            }
            if let Some(what) = local_only(&command) {
                return report::usage_error(
                    format!("{what} does not run with --host {host}"),
                    format!(
                        "run it on the host itself: `ssh {host} maxx ...` (see docs/remote.md)"
                    ),
                );
            }
            // attach's connection carries raw terminal bytes: refused before it asks for a
            // terminal, with the same `unsupported` its connection would get.
            if let Command::Attach(_) = command {
                return report::response(
                    "sessions.attach",
                    Err(ClientError::Failed(remote::local_only(
                        host,
                        "sessions.attach",
                    ))),
                );
            }
            target.host = Some(host.to_string());
        }
    }
    let built = match command {
        Command::Daemon(DaemonArgs {
            action: Some(action),
            ..
        }) => return daemon_cmd::manage(&target, &cli.caller, cli.confirm, action),
        Command::Daemon(d) => return daemon_cmd::command(&target, d),
        Command::Sessions(SessionsCmd {
            verb: Some(SessionsVerb::Rec(a)),
        }) => return record::rec(&target, &cli.caller, cli.confirm, a),
        Command::Sessions(s) => {
            request::sessions(s.verb.unwrap_or(SessionsVerb::List(ListArgs::default())))
        }
        Command::Policy(p) => match p.verb {
            PolicyVerb::Check(a) => Ok(request::policy_check(a)),
            PolicyVerb::Sources => Ok(request::policy_sources()),
            PolicyVerb::Validate(a) => {
                let outcome = maxx_actors::policy::validate_config_file(&a.config);
                return report::policy_validation(&a.config, outcome);
            }
        },
        Command::Completions(a) => return generated(Generated::Completions(a.shell)),
        Command::Man => return generated(Generated::Man),
        Command::Whoami => Ok(request::daemon_whoami()),
        Command::Hook(h) => {
            let (name, args) = match h.verb {
                HookVerb::Install(a) => {
                    let adapter = hook::adapters::adapter(&a.runtime).expect("a listed runtime");
                    return hook::install::command(&adapter.install, adapter.name, a.print);
                }
                HookVerb::ClaudeCode(a) => ("claude-code", a),
                HookVerb::Codex(a) => ("codex", a),
            };
            let adapter = hook::adapters::adapter(name).expect("a listed runtime");
            return hook::run(
                &target,
                &cli.caller,
                adapter,
                args.payload.as_deref(),
                args.strict,
            );
        }
        Command::Play(a) => return record::play(&target, &cli.caller, cli.confirm, a),
        Command::Ls(a) => return human::ls(&target, &cli.caller, a),
        Command::Top(a) if a.json => {
            let ls = LsArgs {
                wide: false,
                json: true,
                group: None,
            };
            return human::ls(&target, &cli.caller, ls);
        }
        Command::Top(_) => return top::run(&target, &cli.caller),
        Command::Attach(a) if a.json => return report::usage_error(
            "attach joins this terminal to a session; it has no JSON output",
            "read a session as JSON with `maxx sessions snapshot ID` or `maxx sessions watch ID`",
        ),
        Command::Mcp(a) => return mcp::command(&target, &cli.caller, cli.confirm, a),
        Command::Status(a) => return human::status(&target, &cli.caller, a),
        Command::Attach(a) => return human::attach(&target, &cli.caller, cli.confirm, a),
        Command::Profiles(_) => Ok(request::profiles_list()),
        Command::Stream(s) => match s.verb {
            StreamVerb::Watch(a) => request::stream_watch(a),
            StreamVerb::Wait(a) => Ok(request::stream_wait(a)),
        },
        Command::Event(e) => match e.verb {
            EventVerb::Emit(a) => request::event_emit(a),
        },
        Command::Proxy => unreachable!("served above"),
    };
    dispatch(&target, &cli.caller, cli.confirm, built)
}

/// The commands that act on this machine only, refused with `--host` (attach and rec are
/// refused when they connect, as `unsupported`): `--host` never starts or manages a daemon.
fn local_only(command: &Command) -> Option<&'static str> {
    match command {
        Command::Daemon(_) => Some("maxx daemon"),
        Command::Play(_) => Some("maxx play"),
        Command::Hook(_) => Some("maxx hook"),
        Command::Mcp(_) => Some("maxx mcp"),
        Command::Top(a) if !a.json => Some("maxx top (the dashboard; `top --json` works)"),
        _ => None,
    }
}

/// Send a built request (or report why it could not be built) and pick the exit code.
fn dispatch(target: &Target, caller: &Option<String>, confirm: bool, built: Built) -> i32 {
    let req = match built {
        Ok(r) => r,
        Err(usage) => {
            report::print_error(&usage);
            return exit::USAGE;
        }
    };
    if req.is_stream() {
        return watch(target, req, caller, confirm);
    }
    if req.method == "sessions.events" && req.params.get("limit").is_none() {
        return events_all(target, req, caller, confirm);
    }
    let method = req.method;
    let response = send(target, req, caller, confirm);
    report::response(method, response)
}

/// `maxx --capabilities`: what this build offers, for a program to probe: the socket
/// methods (with their base capabilities and how they are served), every CLI command, the
/// MCP tools and the selector forms. Built from the same tables the daemon and the CLI use.
fn capabilities() -> serde_json::Value {
    use maxx_protocol::request::{all_specs, Serve};
    let methods: Vec<serde_json::Value> = all_specs()
        .map(|s| {
            serde_json::json!({
                "method": s.name,
                "capabilities": s.capabilities.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
                "changes_records": s.changes_records,
                "served": match s.serve {
                    Serve::Session { .. } => "session",
                    Serve::Daemon => "daemon",
                    Serve::Held => "held",
                },
            })
        })
        .collect();
    let mut commands = Vec::new();
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{path} {}", sub.get_name()).trim().to_string();
            out.push(path.clone());
            walk(sub, &path, out);
        }
    }
    walk(&cli::command(), "", &mut commands);
    serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": maxx_protocol::PROTOCOL_VERSION,
        "methods": methods,
        "commands": commands,
        "mcp_tools": mcp::tool_names(),
        "hook_adapters": hook::capabilities(),
        "selectors": ["session id (any case)", "id prefix (4+ hex digits)", "%title"],
        "remote": {
            "transport": "ssh HOST maxx proxy",
            "flags": ["--host", "--hosts", "--hosts-file"],
            "env": [remote::SSH_ENV, remote::REMOTE_MAXX_ENV, "MAXX_HOST"],
            "fleet_commands": fleet::COMMANDS,
            "local_only": ["attach", "sessions rec", "top (without --json)", "daemon", "play", "hook", "mcp"],
        },
    })
}

/// What `maxx completions` and `maxx man` print, generated from the clap definition.
enum Generated {
    Completions(clap_complete::Shell),
    Man,
}

fn generated(what: Generated) -> i32 {
    use std::io::Write;
    let mut cmd = cli::command();
    // Built in memory, then written: a reader that stops early (`| head`) is not an error.
    let mut text = Vec::new();
    match what {
        Generated::Completions(shell) => {
            clap_complete::generate(shell, &mut cmd, "maxx", &mut text)
        }
        Generated::Man => clap_mangen::Man::new(cmd)
            .render(&mut text)
            .expect("rendering into memory cannot fail"),
    }
    let _ = std::io::stdout().lock().write_all(&text);
    exit::OK
}

/// One request; a session-creating one starts a daemon first when none answers.
fn send(
    target: &Target,
    req: Request,
    caller: &Option<String>,
    confirm: bool,
) -> Result<Response, ClientError> {
    let attempt = || {
        client::request(
            target,
            req.method,
            req.params.clone(),
            caller.as_deref(),
            confirm,
            req.timeout,
        )
    };
    match attempt() {
        // Never on a --host: starting a daemon there is the host owner's decision.
        Err(ClientError::NoDaemon(_)) if req.starts_daemon() && target.host.is_none() => {
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
fn watch(target: &Target, req: Request, caller: &Option<String>, confirm: bool) -> i32 {
    let mut code = exit::OK;
    let result = client::stream_lines(
        target,
        req.method,
        req.params,
        caller.as_deref(),
        confirm,
        |line| {
            if let Some(c) = report::stream_line(&line) {
                code = c;
            }
        },
    );
    match result {
        Ok(()) => code,
        Err(e) => report::client_error(req.method, e),
    }
}

/// Pages `sessions events` follows without `--limit` before it prints what it has (with
/// `more: true` and the `next_since` to go on from).
const EVENTS_FOLLOW_MAX_PAGES: usize = 64;

/// `sessions events` without `--limit`: fetch page after page (each `since` the previous
/// `next_since`) and print them as one answer: the events in order, the last page's
/// `next_since` and `more`, and `reset`/`dropped_through` if any page reported a gap (the
/// highest dropped seq). Bounded by [`EVENTS_FOLLOW_MAX_PAGES`] and by a cursor that stops
/// advancing.
fn events_all(target: &Target, mut req: Request, caller: &Option<String>, confirm: bool) -> i32 {
    use serde_json::json;
    let method = req.method;
    let mut merged: Option<Response> = None;
    for _ in 0..EVENTS_FOLLOW_MAX_PAGES {
        let page = match client::request(
            target,
            method,
            req.params.clone(),
            caller.as_deref(),
            confirm,
            req.timeout,
        ) {
            Ok(r) if r.ok && r.result.is_some() => r,
            other => return report::response(method, other),
        };
        let result = page.result.as_ref().expect("checked above");
        let next = result["next_since"].as_u64();
        let more = result["more"].as_bool() == Some(true);
        let advanced = next.is_some() && next != req.params["since"].as_u64();
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
        req.params["since"] = json!(next);
    }
    report::response(method, Ok(merged.expect("at least one page")))
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
