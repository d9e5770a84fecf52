//! The daemon's spine (issue 2): control dir + token, bounded requests, core session verbs.

use crate::common::*;
use crate::maxx_snapshot;
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn id_of(view: &Value) -> String {
    view["session_id"].as_str().unwrap().to_string()
}

#[test]
fn submit_runs_a_line_in_a_real_shell() {
    let d = Daemon::start();
    let file = d.path("hi.txt");
    let out = d.cli_ok(&["sessions", "create", "--title", "shell", "--command", "sh"]);
    let id = out["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    d.cli_ok(&[
        "sessions",
        "action",
        &id,
        "--action",
        "submit",
        "--input",
        &format!("echo hi > {}", file.display()),
    ]);
    let text = wait_for("the file the shell writes", T, || {
        read(&file).filter(|s| s == "hi\n")
    });
    assert_eq!(text, "hi\n");
}

#[test]
fn exit_code_is_a_kernel_fact() {
    let d = Daemon::start();
    let view = d.create(json!({"command": "exit 3"}));
    let id = id_of(&view);
    let out = d.cli(&[
        "sessions",
        "wait",
        &id,
        "--lifecycle",
        "exited",
        "--timeout",
        "10s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let waited: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(waited["result"]["outcome"], "matched");
    let got = d.get(&id);
    assert_eq!(got["lifecycle"], "exited");
    assert_eq!(got["exit_code"], 3);
    assert!(got["pid"].is_null());
}

#[test]
fn a_signal_death_is_recorded_by_name() {
    let d = Daemon::start();
    let id = id_of(&d.create(json!({"command": "kill -KILL $$"})));
    d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 10}),
    );
    let got = d.get(&id);
    assert_eq!(got["exit_signal"], "SIGKILL");
    assert!(got.get("exit_code").is_none());
}

#[test]
fn wait_timeout_exits_124_and_ended_exits_1() {
    let d = Daemon::start();
    let id = id_of(&d.create(json!({"command": "sleep 30"})));
    let out = d.cli(&[
        "sessions",
        "wait",
        &id,
        "--lifecycle",
        "exited",
        "--timeout",
        "200ms",
    ]);
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    let waited: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(waited["result"]["outcome"], "timeout");

    // A wait for `exited` on a session that gets closed instead ends unmatched.
    let waiter = {
        let control = d.control.clone();
        let id = id.clone();
        std::thread::spawn(move || {
            std::process::Command::new(maxx_bin())
                .args([
                    "sessions",
                    "wait",
                    &id,
                    "--lifecycle",
                    "exited",
                    "--timeout",
                    "20s",
                ])
                .env("MAXX_CONTROL_DIR", control)
                .output()
                .unwrap()
        })
    };
    // Cancel only after the waiter is registered: wait_for the CLI to have connected is
    // not observable, so cancel and accept either order — both end unmatched.
    d.ok("sessions.cancel", json!({"session_id": id}));
    let out = waiter.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let waited: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(waited["result"]["outcome"], "ended");
}

#[test]
fn bad_duration_is_a_usage_error() {
    let d = Daemon::start();
    let out = d.cli(&[
        "sessions",
        "wait",
        "2B0E0000-0000-4000-8000-000000000000",
        "--lifecycle",
        "exited",
        "--timeout",
        "soon",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // Every usage error, clap's own included, is one JSON error object on stderr.
    for args in [
        &[
            "sessions",
            "wait",
            "2B0E0000-0000-4000-8000-000000000000",
            "--timeout",
            "soon",
        ][..],
        &["sessions", "wait", "2B0E0000-0000-4000-8000-000000000000"],
        &["sessions", "no-such-verb"],
        &["sessions", "create", "--no-such-flag"],
    ] {
        let out = d.cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        let err: Value = serde_json::from_slice(&out.stderr)
            .unwrap_or_else(|e| panic!("{args:?}: stderr is not one JSON object ({e}): {out:?}"));
        assert_eq!(err["ok"], false);
        assert_eq!(err["error"]["code"], "invalid_request", "{err}");
        assert!(err["error"]["remedy"].as_str().unwrap().contains("--help"));
    }
    // Help is not an error.
    let help = d.cli(&["sessions", "wait", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage"));
}

#[test]
fn every_seed_limit_is_rejected_and_nothing_is_created() {
    let d = Daemon::start();
    let many_keys: serde_json::Map<String, Value> =
        (0..33).map(|i| (format!("k{i}"), json!(i))).collect();
    let big_map: serde_json::Map<String, Value> = (0..9)
        .map(|i| (format!("k{i}"), json!("x".repeat(2000))))
        .collect();
    let many_env: Vec<String> = (0..257).map(|i| format!("K{i}=v")).collect();
    let cases = [
        json!({"title": "x".repeat(257)}),
        json!({"status": "x".repeat(129)}),
        json!({"command": "x".repeat(4097)}),
        json!({"metadata": many_keys}),
        json!({"metadata": {"bad key": 1}}),
        json!({"metadata": {"k".repeat(65): 1}}),
        json!({"metadata": {"k": "x".repeat(2047)}}),
        json!({"metadata": big_map}),
        json!({"env": many_env}),
        json!({"env": ["BAD-KEY=1"]}),
        json!({"env": ["NOVALUE"]}),
        json!({"location": "split"}),
        json!({"location": "tab", "split_target": "2B0E0000-0000-4000-8000-000000000000"}),
        json!({"split_direction": "down"}),
        json!({"location": "sideways"}),
        json!({"cwd": "relative/path"}),
        json!({"cwd": d.path("missing").display().to_string()}),
        json!({"title": 5}),
    ];
    for params in cases {
        d.err("sessions.create", params, "invalid_request");
    }
    assert_eq!(d.count(), 0);
    // The boundary values themselves are accepted.
    let ok_map: serde_json::Map<String, Value> =
        (0..32).map(|i| (format!("k{i}"), json!(i))).collect();
    d.create(json!({
        "title": "x".repeat(256),
        "status": "x".repeat(128),
        "command": format!("true {}", "x".repeat(4091)),
        "metadata": ok_map,
    }));
    assert_eq!(d.count(), 1);
}

#[test]
fn bad_requests_get_typed_errors_and_the_daemon_keeps_serving() {
    let mut d = Daemon::start();
    let no_token = d.raw(b"{\"method\":\"sessions.list\"}\n");
    assert_eq!(no_token["error"]["code"], "unauthenticated");
    let wrong = d.raw(b"{\"token\":\"nope\",\"method\":\"sessions.create\",\"params\":{}}\n");
    assert_eq!(wrong["error"]["code"], "unauthenticated");
    assert_eq!(d.count(), 0, "an unauthenticated create must not create");
    assert_eq!(d.raw(b"{not json\n")["error"]["code"], "invalid_request");
    assert_eq!(d.raw(b"\n")["error"]["code"], "invalid_request");
    assert_eq!(d.raw(b"[1,2]\n")["error"]["code"], "invalid_request");
    assert_eq!(d.raw(b"\xff\xfe\n")["error"]["code"], "invalid_request");
    let mut huge = vec![b'x'; 2 * 1024 * 1024];
    huge.push(b'\n');
    assert_eq!(d.raw(&huge)["error"]["code"], "too_large");
    let unknown = d.call("sessions.frobnicate", json!({}));
    assert_eq!(unknown["error"]["code"], "unknown_method");
    let token = d.token();
    let bad_params = d.raw(
        format!("{{\"token\":\"{token}\",\"method\":\"sessions.get\",\"params\":[]}}\n").as_bytes(),
    );
    assert_eq!(bad_params["error"]["code"], "invalid_request");
    // Half-closing without a newline is a complete request.
    let half = d
        .raw(format!("{{\"token\":\"{token}\",\"method\":\"sessions.list\",\"id\":7}}").as_bytes());
    assert_eq!(half["ok"], true);
    assert_eq!(half["id"], 7);
    assert!(d.alive());
    assert_eq!(d.count(), 0);
}

/// A param this daemon does not know is ignored, never refused (a newer client works
/// against an older daemon), and never silently: the answer names it in `warnings`.
#[test]
fn unknown_params_are_ignored_and_reported_as_warnings() {
    let d = Daemon::start();
    let r = d.call(
        "sessions.create",
        json!({"command": "sleep 60", "title": "t", "titel": "typo", "future": {"x": 1}}),
    );
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["result"]["session"]["title"], "t");
    let params: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["code"], "unknown_param");
            assert!(w["message"].is_string());
            w["param"].as_str().unwrap()
        })
        .collect();
    assert_eq!(params, ["future", "titel"]);
    let id = r["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    // A well-formed request carries no warnings at all.
    let r = d.call("sessions.get", json!({"session_id": id}));
    assert!(r.get("warnings").is_none(), "{r}");
    // Nested, and on a wait's answer.
    let r = d.call(
        "sessions.list",
        json!({"metadata_filter": [{"key": "k", "valu": "v"}]}),
    );
    assert_eq!(r["warnings"][0]["param"], "metadata_filter.0.valu", "{r}");
    let r = d.call(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "running", "timout": 5}),
    );
    assert_eq!(r["result"]["outcome"], "matched", "{r}");
    assert_eq!(r["warnings"][0]["param"], "timout", "{r}");
    // A stream names them on its first line: a mistyped filter must not go unseen.
    let mut lines = d.open_stream("stream.watch", json!({"grup": "g", "timeout": 1}));
    let hello = lines.next();
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(hello["warnings"][0]["param"], "grup", "{hello}");
    // A bad value is still refused, unknown params or not; nothing is created.
    let before = d.count();
    d.err(
        "sessions.create",
        json!({"cols": "wide", "zzz": 1}),
        "invalid_request",
    );
    assert_eq!(d.count(), before);
}

#[test]
fn unknown_and_malformed_ids() {
    let d = Daemon::start();
    d.err(
        "sessions.get",
        json!({"session_id": "2B0E0000-0000-4000-8000-000000000000"}),
        "not_found",
    );
    d.err(
        "sessions.get",
        json!({"session_id": "nope"}),
        "invalid_request",
    );
    d.err(
        "sessions.create",
        json!({"location": "split", "split_target": "2B0E0000-0000-4000-8000-000000000000"}),
        "not_found",
    );
    let out = d.cli(&["sessions", "get", "2B0E0000-0000-4000-8000-000000000000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "not_found");
}

#[test]
fn update_merges_metadata_and_refuses_server_fields() {
    let d = Daemon::start();
    let id = id_of(&d.create(json!({"command": "sleep 30", "metadata": {"a": 1, "b": "x"}})));
    let big = json!(9_223_372_036_854_775_807i64);
    let v = d.ok(
        "sessions.update",
        json!({"session_id": id, "status": "reviewing", "metadata": {"b": "y", "c": big}}),
    )["session"]
        .clone();
    assert_eq!(v["status"], "reviewing");
    assert_eq!(
        v["metadata"],
        json!({"a": 1, "b": "y", "c": 9_223_372_036_854_775_807i64})
    );
    for field in ["lifecycle", "pid", "title", "session_id_x", "created_at"] {
        let mut p = json!({"session_id": id});
        p[field] = json!("x");
        d.err("sessions.update", p, "invalid_request");
    }
    // A merge that would exceed the map's limits changes nothing.
    let many: serde_json::Map<String, Value> =
        (0..31).map(|i| (format!("n{i}"), json!(i))).collect();
    d.err(
        "sessions.update",
        json!({"session_id": id, "metadata": many}),
        "invalid_request",
    );
    assert_eq!(d.get(&id)["metadata"], v["metadata"]);
    // The CLI form.
    let out = d.cli_ok(&["sessions", "update", &id, "--metadata", "repo=org/app"]);
    assert_eq!(out["result"]["session"]["metadata"]["repo"], "org/app");
}

#[test]
fn cancel_is_idempotent_and_ends_the_surface() {
    let d = Daemon::start();
    let id = id_of(&d.create(json!({"command": "sleep 30"})));
    let pid = d.get(&id)["pid"].as_u64().unwrap() as i32;
    for _ in 0..2 {
        let v = d.ok("sessions.cancel", json!({"session_id": id}))["session"].clone();
        assert_eq!(v["lifecycle"], "closed");
        assert!(v["pid"].is_null());
    }
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "close"}),
    );
    // The child is really gone (hung up, then reaped).
    wait_for("the child to be gone", T, || {
        // SAFETY: probing a pid with signal 0.
        (unsafe { libc::kill(pid, 0) } != 0).then_some(())
    });
    d.err(
        "sessions.action",
        json!({"session_id": id, "action": "input", "input": "x"}),
        "already_ended",
    );
    d.err(
        "sessions.action",
        json!({"session_id": id, "action": "focus"}),
        "already_ended",
    );
    d.err(
        "sessions.create",
        json!({"location": "split", "split_target": id}),
        "already_ended",
    );
    assert_eq!(d.get(&id)["lifecycle"], "closed");
}

#[test]
fn focus_and_split_placement() {
    let d = Daemon::start();
    let a = id_of(&d.create(json!({"command": "sleep 30"})));
    assert_eq!(d.get(&a)["focused"], true);
    let split = d.create(json!({
        "command": "sleep 30", "location": "split", "split_target": a.to_lowercase()
    }));
    assert_eq!(split["location"], "split");
    assert_eq!(split["split_target"], a.as_str());
    assert_eq!(split["split_direction"], "right");
    assert_eq!(split["focused"], false, "a split keeps focus on its target");
    assert_eq!(d.get(&a)["focused"], true);
    let b = id_of(&split);
    d.ok(
        "sessions.action",
        json!({"session_id": b, "action": "focus"}),
    );
    assert_eq!(d.get(&b)["focused"], true);
    assert_eq!(d.get(&a)["focused"], false);
}

#[test]
fn input_is_bracketed_when_the_app_asked_for_it() {
    let d = Daemon::start();
    let file = d.path("paste.bin");
    // The program turns on bracketed paste, announces itself in the title, then records
    // exactly the bytes it receives.
    let script = format!(
        "stty raw -echo; printf '\\033[?2004h\\033]2;ready\\007'; \
         dd bs=1 count=16 of={} 2>/dev/null",
        file.display()
    );
    let id = id_of(&d.create(json!({ "command": script })));
    wait_for("the title escape", T, || {
        (d.get(&id)["terminal_title"] == "ready").then_some(())
    });
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": "ab\n"}),
    );
    let got = wait_for("the pasted bytes", T, || {
        std::fs::read(&file).ok().filter(|b| b.len() == 16)
    });
    assert_eq!(got, b"\x1b[200~ab\r\x1b[201~\r");
}

#[test]
fn interrupt_reaches_the_foreground_job() {
    let d = Daemon::start();
    let id = id_of(&d.create(json!({"command": "sleep 30"})));
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "interrupt", "signal": "SIGTERM"}),
    );
    d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 10}),
    );
    assert_eq!(d.get(&id)["exit_signal"], "SIGTERM");
    d.err(
        "sessions.action",
        json!({"session_id": id, "action": "interrupt", "signal": "SIGSTOP"}),
        "invalid_request",
    );
}

#[test]
fn the_child_starts_as_a_terminal_would_start_it() {
    // Session leader with the PTY as its controlling terminal, every signal at its default
    // (the daemon ignores SIGPIPE; the child must not inherit that), nothing blocked, only
    // stdio open, in the requested directory.
    let d = Daemon::start();
    let dir = d.path("work");
    std::fs::create_dir(&dir).unwrap();
    let out = d.path("facts.txt");
    let cmd = format!(
        "t=$(readlink /proc/$$/fd/0 /proc/$$/fd/1 /proc/$$/fd/2 | sort -u); \
         {{ ps -o sid= -o tty= -p $$; grep -E '^Sig(Ign|Blk)' /proc/self/status; \
           ls /proc/self/fd | wc -l; pwd; echo \"$t\"; \
           echo $$; }} > {o}.tmp && mv {o}.tmp {o}",
        o = out.display()
    );
    let id = id_of(&d.create(json!({"command": cmd, "cwd": dir.display().to_string()})));
    let pid = d.get(&id)["pid"].as_u64().unwrap();
    let facts = wait_for("the child's facts", T, || read(&out));
    let lines: Vec<&str> = facts.lines().collect();
    let sid_tty: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(sid_tty[0], pid.to_string(), "session leader: {facts}");
    assert!(sid_tty[1].starts_with("pts/"), "controlling tty: {facts}");
    let mask = |line: &str| u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16);
    assert_eq!(mask(lines[1]), Ok(0), "nothing blocked: {facts}");
    // glibc's posix_spawn leaves its two internal signals (32, 33: bits 31 and 32) ignored
    // across exec; no program can use them, and one that installs a handler replaces that.
    let glibc_internal = (1u64 << 31) | (1u64 << 32);
    assert_eq!(
        mask(lines[2]).map(|m| m & !glibc_internal),
        Ok(0),
        "nothing ignored: {facts}"
    );
    // ls's own listing fd makes 4: 0, 1, 2 and the directory it reads.
    assert_eq!(lines[3].trim(), "4", "only stdio crosses exec: {facts}");
    assert_eq!(lines[4], dir.display().to_string());
    assert_eq!(
        lines[5],
        format!("/dev/{}", sid_tty[1]),
        "stdio is the tty: {facts}"
    );
    assert_eq!(lines[6], pid.to_string());
}

#[test]
fn env_reaches_the_child_and_register_current_proves_identity() {
    let d = Daemon::start();
    let out = d.path("who.json");
    let env_out = d.path("env.txt");
    let cmd = format!(
        "echo \"$SECRET_X $MAXX_SESSION_ID $MAXX_CONTROL_DIR\" > {env}; \
         maxx sessions register-current > {out}.tmp && mv {out}.tmp {out}",
        env = env_out.display(),
        out = out.display()
    );
    let view = d.create(json!({"command": cmd, "env": ["SECRET_X=s3cr3t-value"]}));
    let id = id_of(&view);
    let who: Value = wait_for("register-current output", T, || {
        read(&out).and_then(|s| serde_json::from_str(&s).ok())
    });
    assert_eq!(who["result"]["session"]["session_id"], id.as_str());
    let env_line = read(&env_out).unwrap();
    assert_eq!(
        env_line.trim(),
        format!("s3cr3t-value {id} {}", d.control.display())
    );
    // The env value is nowhere in what the daemon reports or wrote.
    let listed = d.ok("sessions.list", json!({})).to_string();
    assert!(!listed.contains("s3cr3t-value"));
    for entry in std::fs::read_dir(&d.control).unwrap() {
        let path = entry.unwrap().path();
        if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains("s3cr3t-value"),
                "{path:?} holds the env value"
            );
        }
    }
    // A guessed surface id without the per-surface token is refused, and so is a wrong token.
    let surface = view["surface_id"].as_str().unwrap();
    d.err(
        "sessions.register-current",
        json!({"surface_id": surface, "registration_token": "guess"}),
        "unauthenticated",
    );
    d.err(
        "sessions.register-current",
        json!({"surface_id": "2B0E0000-0000-4000-8000-000000000000", "registration_token": "x"}),
        "unauthenticated",
    );
    let cli = d.cli(&["sessions", "register-current"]);
    assert_eq!(
        cli.status.code(),
        Some(2),
        "outside a session it is a usage error"
    );
}

#[test]
fn read_verbs_never_start_a_daemon_but_create_does() {
    let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
    let control = tmp.path().join("ctl");
    let run = |args: &[&str]| {
        std::process::Command::new(maxx_bin())
            .args(args)
            .env("MAXX_CONTROL_DIR", &control)
            .current_dir(tmp.path())
            .output()
            .unwrap()
    };
    let out = run(&["sessions", "list"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "no_daemon");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("control.sock"));
    assert!(!control.exists(), "a read verb must not create anything");

    let out = run(&["+control", "sessions", "create", "--command", "sleep 30"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let listed = run(&["sessions"]);
    assert_eq!(listed.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(v["result"]["sessions"].as_array().unwrap().len(), 1);
    // Stop the auto-started daemon.
    let pid = std::fs::read_to_string(control.join("daemon.pid"))
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    if let Some(pid) = pid {
        // SAFETY: signalling the daemon this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}

#[test]
fn control_dir_must_be_ours_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
    let loose = tmp.path().join("loose");
    std::fs::create_dir(&loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&loose, &link).unwrap();
    for dir in [&loose, &link] {
        let out = std::process::Command::new(maxx_bin())
            .args(["daemon"])
            .env("MAXX_CONTROL_DIR", dir)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("refusing control dir"), "{stderr}");
        assert!(!loose.join("token").exists());
    }
    // A private (0700) dir that belongs to somebody else.
    if !nix::unistd::geteuid().is_root() {
        skip_or_fail("the other-owner case needs root to chown a dir to nobody");
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a nobody user");
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    nix::unistd::chown(&theirs, Some(nobody.uid), Some(nobody.gid)).unwrap();
    let out = std::process::Command::new(maxx_bin())
        .args(["daemon"])
        .env("MAXX_CONTROL_DIR", &theirs)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing control dir")
            && stderr.contains(&format!("owned by uid {}", nobody.uid)),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&theirs).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn a_second_daemon_on_the_same_dir_is_refused() {
    let d = Daemon::start();
    let out = std::process::Command::new(maxx_bin())
        .args(["daemon"])
        .env("MAXX_CONTROL_DIR", &d.control)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already running"));
    assert_eq!(d.count(), 0);
}

#[test]
fn files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let d = Daemon::start();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.control), 0o700);
    assert_eq!(mode(&d.socket()), 0o600);
    assert_eq!(mode(&d.control.join("token")), 0o600);
    assert!(d.token().len() >= 32);
}

#[test]
fn response_shapes() {
    let d = Daemon::start();
    let created = d.call(
        "sessions.create",
        json!({
            "title": "Run release checks",
            "command": "sleep 30",
            "cwd": "/",
            "metadata": {"workflow": "release-checks", "request_id": "abc123"},
            "status": "created",
            "location": "tab"
        }),
    );
    maxx_snapshot!("create", created.clone());
    let id = created["result"]["session"]["session_id"].as_str().unwrap();
    maxx_snapshot!("get", d.call("sessions.get", json!({"session_id": id})));
    maxx_snapshot!("list", d.call("sessions.list", json!({})));
    maxx_snapshot!(
        "error_not_found",
        d.call(
            "sessions.get",
            json!({"session_id": "2B0E0000-0000-4000-8000-000000000000"})
        )
    );
    maxx_snapshot!(
        "error_invalid_request",
        d.call("sessions.create", json!({"title": "x".repeat(257)}))
    );
    maxx_snapshot!(
        "error_unauthenticated",
        d.raw(b"{\"method\":\"sessions.list\"}\n")
    );
}
