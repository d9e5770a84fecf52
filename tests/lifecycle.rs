//! Lifecycle control and the durable registry (issue 6): interrupt, archive, restart,
//! profiles, clean shutdown, crash recovery.

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

fn exited(d: &Daemon, id: &str) -> Value {
    d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 10}),
    );
    d.get(id)
}

#[test]
fn interrupt_with_and_without_a_signal() {
    let d = Daemon::start();
    // Ctrl-C through the tty: the line discipline delivers SIGINT to the foreground job.
    let a = sid(&d.create(json!({"command": "exec sleep 30"})));
    let out = d.cli(&["sessions", "action", &a, "--action", "interrupt"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(exited(&d, &a)["exit_signal"], "SIGINT");
    for (sig, name) in [
        ("SIGTERM", "SIGTERM"),
        ("KILL", "SIGKILL"),
        ("sigquit", "SIGQUIT"),
    ] {
        let b = sid(&d.create(json!({"command": "exec sleep 30"})));
        d.cli_ok(&[
            "sessions",
            "action",
            &b,
            "--action",
            "interrupt",
            "--signal",
            sig,
        ]);
        assert_eq!(exited(&d, &b)["exit_signal"], name);
    }
    d.err(
        "sessions.action",
        json!({"session_id": a, "action": "interrupt"}),
        "already_ended",
    );
}

#[test]
fn archive_keeps_the_record_and_is_idempotent() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 30", "metadata": {"k": 1}})));
    d.ok(
        "sessions.emit-event",
        json!({"session_id": id, "event": "e"}),
    );
    let out = d.cli_ok(&["sessions", "archive", &id, "--reason", "run complete"]);
    let v = &out["result"]["session"];
    assert_eq!(v["lifecycle"], "archived");
    assert_eq!(v["archive_reason"], "run complete");
    assert!(v["pid"].is_null());
    d.cli_ok(&["sessions", "archive", &id]);
    let log = d.ok("sessions.events", json!({"session_id": id}))["events"].clone();
    let names: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["e", "archived"], "a second archive records nothing");
    assert_eq!(log[1]["kind"], "lifecycle");
    assert_eq!(log[1]["source"], "maxx");
    assert_eq!(d.get(&id)["metadata"], json!({"k": 1}));
    d.err(
        "sessions.action",
        json!({"session_id": id, "action": "input", "input": "x"}),
        "already_ended",
    );
}

#[test]
fn restart_keeps_identity_and_clears_the_previous_run() {
    let d = Daemon::start();
    let target = sid(&d.create(json!({"command": "sleep 30"})));
    let v0 = d.create(json!({
        "command": "exit 5", "location": "split", "split_target": target,
        "status": "building", "metadata": {"repo": "org/r"},
        "result_schema": {"type": "string"}, "group": "g"
    }));
    let id = sid(&v0);
    exited(&d, &id);
    d.ok(
        "sessions.set-state",
        json!({"session_id": id, "state": "failed"}),
    );
    d.ok(
        "sessions.set-summary",
        json!({"session_id": id, "summary": "broke"}),
    );
    d.ok(
        "sessions.set-result",
        json!({"session_id": id, "result": "\"no\""}),
    );
    let out = d.cli_ok(&["sessions", "restart", &id, "--command", "read x; exit 0"]);
    let v = out["result"]["session"].clone();
    assert_eq!(v["session_id"], id.as_str());
    assert_ne!(v["surface_id"], v0["surface_id"]);
    assert_eq!(v["restart_count"], 1);
    assert_eq!(v["lifecycle"], "running");
    assert_eq!(v["command"], "read x; exit 0");
    assert_eq!(v["location"], "tab", "a split comes back as a tab");
    assert!(v.get("split_target").is_none());
    for gone in ["workflow_state", "summary", "result", "exit_code"] {
        assert!(v.get(gone).is_none(), "{gone} should be cleared: {v}");
    }
    assert_eq!(v["status"], "building");
    assert_eq!(v["metadata"], json!({"repo": "org/r"}));
    assert_eq!(v["result_schema"], json!({"type": "string"}));
    assert_eq!(v["group"], "g");
    // The new run is real: it takes input and exits.
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    assert_eq!(exited(&d, &id)["exit_code"], 0);
    // --last-command replays it.
    let v = d.cli_ok(&["sessions", "restart", &id, "--last-command"])["result"]["session"].clone();
    assert_eq!(v["restart_count"], 2);
    let log = d.ok("sessions.events", json!({"session_id": id}))["events"].clone();
    assert!(log
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "restarted"));
    // An archived session revives too.
    d.ok("sessions.archive", json!({"session_id": id}));
    let v = d.ok(
        "sessions.restart",
        json!({"session_id": id, "last_command": true}),
    )["session"]
        .clone();
    assert_eq!(v["lifecycle"], "running");
    assert_eq!(v["restart_count"], 3);
}

#[test]
fn restart_without_any_command_is_unsupported() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({})));
    d.ok("sessions.cancel", json!({"session_id": id}));
    let out = d.cli(&["sessions", "restart", &id, "--last-command"]);
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "unsupported");
    assert_eq!(d.get(&id)["restart_count"], 0);
    d.err(
        "sessions.restart",
        json!({"session_id": id, "command": "x", "last_command": true}),
        "invalid_request",
    );
}

#[test]
fn records_survive_a_clean_restart_detached() {
    let mut d = Daemon::start();
    let id = sid(&d.create(json!({
        "title": "job", "command": "sleep 30", "metadata": {"big": 9007199254740993i64},
        "env": ["SECRET_TOKEN=hunter2-secret"], "agent_type": "codex", "group": "g"
    })));
    d.ok(
        "sessions.set-state",
        json!({"session_id": id, "state": "blocked"}),
    );
    d.ok(
        "sessions.emit-event",
        json!({"session_id": id, "event": "pr.opened", "payload": {"pr": 1}}),
    );
    let before = d.get(&id);
    let status = d.stop_with(libc::SIGTERM);
    assert!(status.success(), "clean shutdown exits 0: {status:?}");
    assert!(!d.socket().exists(), "the socket is removed on shutdown");
    let registry = std::fs::read_to_string(d.control.join("registry.json")).unwrap();
    assert!(
        !registry.contains("hunter2-secret"),
        "env values never reach disk"
    );
    d.restart();
    let after = d.get(&id);
    assert_eq!(after["restored"], true);
    assert_eq!(after["lifecycle"], "closed");
    assert!(after["pid"].is_null());
    for field in [
        "title",
        "metadata",
        "workflow_state",
        "agent_type",
        "group",
        "created_at",
        "status",
    ] {
        assert_eq!(after[field], before[field], "{field} survives");
    }
    assert_eq!(after["metadata"]["big"].as_i64(), Some(9007199254740993));
    let log = d.ok("sessions.events", json!({"session_id": id}))["events"].clone();
    assert_eq!(
        log.as_array().unwrap().len(),
        3,
        "agent-type, workflow-state, event"
    );
    assert_eq!(log[2]["payload"], json!({"pr": 1}));
    d.err(
        "sessions.action",
        json!({"session_id": id, "action": "input", "input": "x"}),
        "already_ended",
    );
    d.err(
        "sessions.action",
        json!({"session_id": id, "action": "interrupt"}),
        "already_ended",
    );
    // Restart revives it under the same id.
    let v = d.ok(
        "sessions.restart",
        json!({"session_id": id, "last_command": true}),
    )["session"]
        .clone();
    assert_eq!(v["lifecycle"], "running");
    assert!(v.get("restored").is_none());
    assert_eq!(v["restart_count"], 1);
    assert!(v.get("workflow_state").is_none());
    // The restart of a restored record runs with the ambient env, not the old --env.
    let file = d.path("env.txt");
    d.ok("sessions.restart", json!({"session_id": id, "command": format!("echo \"[$SECRET_TOKEN]\" > {}", file.display())}));
    let text = wait_for("the child's output", T, || {
        read(&file).filter(|s| s.ends_with('\n'))
    });
    assert_eq!(text.trim(), "[]");
}

#[test]
fn an_acknowledged_mutation_survives_kill_9() {
    let mut d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 30"})));
    d.cli_ok(&[
        "sessions",
        "set-metadata",
        &id,
        "--key",
        "run.id",
        "--value",
        "r-42",
    ]);
    d.cli_ok(&["sessions", "declare-state", &id, "--state", "tests:passed"]);
    d.crash();
    d.restart();
    let v = d.get(&id);
    assert_eq!(v["metadata"]["run.id"], "r-42");
    assert_eq!(v["status"], "tests:passed");
    let log = d.ok("sessions.events", json!({"session_id": id}))["events"].clone();
    assert_eq!(log.as_array().unwrap().len(), 2);
    // And the folded snapshot holds it for the next run too.
    d.stop_with(libc::SIGTERM);
    d.restart();
    assert_eq!(d.get(&id)["metadata"]["run.id"], "r-42");
}

#[test]
fn a_corrupt_registry_is_preserved_and_never_overwritten() {
    let mut d = Daemon::start();
    d.create(json!({"command": "sleep 30"}));
    d.stop_with(libc::SIGTERM);
    let path = d.control.join("registry.json");
    std::fs::write(&path, b"{ this is not the registry").unwrap();
    d.restart();
    assert_eq!(d.count(), 0);
    // A create it could not save is refused, never acknowledged (issue 18 item 2).
    d.err(
        "sessions.create",
        json!({"command": "sleep 30"}),
        "registry_unreadable",
    );
    d.stop_with(libc::SIGTERM);
    assert_eq!(std::fs::read(&path).unwrap(), b"{ this is not the registry");
}

#[test]
fn a_planted_registry_in_a_loose_dir_is_never_read() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
    let dir = tmp.path().join("ctl");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("registry.json"), b"planted").unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = std::process::Command::new(maxx_bin())
        .arg("daemon")
        .env("MAXX_CONTROL_DIR", &dir)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read(dir.join("registry.json")).unwrap(),
        b"planted"
    );
    assert!(!dir.join("registry.journal").exists());
}

#[test]
fn profiles_fill_create_and_never_reveal_env_values() {
    let tmp = tempfile::Builder::new().prefix("maxx-p").tempdir().unwrap();
    let file = tmp.path().join("agent-profiles.json");
    let out = tmp.path().join("out.txt");
    std::fs::write(
        &file,
        json!({
            "version": 1,
            "profiles": {
                "reviewer": {
                    "command": format!("echo \"$API_KEY $MODE\" > {}; sleep 30", out.display()),
                    "agent_type": "kimi",
                    "env": ["API_KEY=sk-profile-secret", "MODE=profile"],
                    "metadata": {"role": "reviewer", "tier": 1}
                }
            }
        })
        .to_string(),
    )
    .unwrap();
    let d = Daemon::start_with_env(&[("MAXX_PROFILES_FILE", file.display().to_string())]);
    let listed = d.cli_ok(&["profiles", "list"]);
    let text = listed.to_string();
    assert!(!text.contains("sk-profile-secret"));
    assert_eq!(listed["result"]["profiles"][0]["name"], "reviewer");
    assert_eq!(
        listed["result"]["profiles"][0]["env_keys"],
        json!(["API_KEY", "MODE"])
    );
    let v = d.cli_ok(&[
        "sessions",
        "create",
        "--profile",
        "reviewer",
        "--env",
        "MODE=caller",
        "--metadata",
        "tier=2",
    ]);
    let v = &v["result"]["session"];
    assert_eq!(v["agent_type"], "kimi");
    assert_eq!(
        v["metadata"],
        json!({"role": "reviewer", "tier": "2"}),
        "caller metadata wins by key"
    );
    let got = wait_for("the profile command's output", T, || {
        read(&out).filter(|s| s.ends_with('\n'))
    });
    assert_eq!(
        got.trim(),
        "sk-profile-secret caller",
        "env merged by key, caller wins"
    );
    // Explicit fields override the profile's.
    let v = d.ok(
        "sessions.create",
        json!({"profile": "reviewer", "command": "sleep 31", "agent_type": "other"}),
    )["session"]
        .clone();
    assert_eq!(v["command"], "sleep 31");
    assert_eq!(v["agent_type"], "other");
    let before = d.count();
    d.err(
        "sessions.create",
        json!({"profile": "nope"}),
        "invalid_request",
    );
    assert_eq!(d.count(), before);
    let registry_files: String = ["registry.journal", "registry.json"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(d.control.join(f)).ok())
        .collect();
    assert!(!registry_files.contains("sk-profile-secret"));
}

/// Retention in memory (`--retain-records N`): every live record stays; of the closed ones
/// whose actors retired, the newest N stay and older ones are dropped — out of `list`,
/// `get`, their group (a group wait re-checks), announced on the bus, forgotten on disk.
#[test]
fn retention_keeps_live_records_and_the_newest_closed_ones() {
    let mut d = Daemon::start_with(&["--retain-records", "2"]);
    let create = |d: &Daemon| sid(&d.create(json!({"command": "sleep 300", "group": "g"})));
    let live: Vec<String> = (0..2).map(|_| create(&d)).collect();
    let closed: Vec<String> = (0..4).map(|_| create(&d)).collect();
    let mut watch = d.open_stream("stream.watch", json!({"group": "g"}));
    assert_eq!(watch.next()["type"], "hello");
    // The two oldest closed records declared `running`: while kept, `idle` cannot hold.
    for id in &closed[..2] {
        d.ok(
            "sessions.set-state",
            json!({"session_id": id, "state": "running"}),
        );
        d.ok("sessions.cancel", json!({"session_id": id}));
    }
    // Their actors retire (live ones and the two still running keep theirs): two dormant
    // records, within the cap, so nothing is dropped yet.
    d.wait_stat("sessions", 4);
    assert_eq!(d.stat("records"), 6);
    assert_eq!(d.stat("records_dropped"), 0);
    let idle = d.ok(
        "stream.wait",
        json!({"group": "g", "all": "idle", "timeout": 0.2}),
    );
    assert_eq!(idle["outcome"], "timeout");
    let waiting = d.cli_bg(&[
        "stream",
        "wait",
        "--group",
        "g",
        "--all",
        "idle",
        "--timeout",
        "30",
    ]);
    // Two newer closed records push the oldest two out.
    for id in &closed[2..] {
        d.ok("sessions.cancel", json!({"session_id": id}));
    }
    d.wait_stat("records_dropped", 2);
    assert_eq!(d.stat("records"), 4);
    let out = waiting.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    let answer = serde_json::from_slice::<Value>(&out.stdout).unwrap()["result"].clone();
    assert_eq!(answer["outcome"], "matched", "the dropped members left g");
    let members: Vec<&str> = answer["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(members.len(), 4);
    for id in &closed[..2] {
        assert!(!members.contains(&id.as_str()));
        d.err("sessions.get", json!({"session_id": id}), "not_found");
        d.err("sessions.events", json!({"session_id": id}), "not_found");
    }
    let listed: Vec<String> = d.ok("sessions.list", json!({}))["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_string())
        .collect();
    let mut expected = live.clone();
    expected.extend_from_slice(&closed[2..]);
    assert_eq!(listed, expected, "creation order, the dropped ones gone");
    let in_group: Vec<String> = d.ok("sessions.list", json!({"group": "g"}))["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(in_group, expected, "a group list is in creation order too");
    // Each drop is announced once, as a mechanical event.
    let mut dropped = Vec::new();
    while dropped.len() < 2 {
        let e = watch.next();
        if e["event"]["name"] == "dropped" {
            assert_eq!(e["event"]["source_kind"], "maxx");
            assert_eq!(e["event"]["payload"], json!({"reason": "count"}));
            dropped.push(e["event"]["session_id"].as_str().unwrap().to_string());
        }
    }
    dropped.sort();
    let mut oldest = closed[..2].to_vec();
    oldest.sort();
    assert_eq!(dropped, oldest);
    // A kept record woken by a request retires again without being dropped.
    d.ok(
        "sessions.emit-event",
        json!({"session_id": closed[2], "event": "late"}),
    );
    d.wait_stat("sessions", 2);
    assert_eq!(d.stat("records_dropped"), 2);
    // A restart shows what the live daemon showed: the dropped records are not on disk.
    for id in &live {
        d.ok("sessions.cancel", json!({"session_id": id}));
    }
    d.wait_stat("records_dropped", 4);
    d.crash();
    d.restart();
    let mut after: Vec<String> = d.ok("sessions.list", json!({}))["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_string())
        .collect();
    after.sort();
    let mut newest = live.clone();
    newest.sort();
    assert_eq!(after, newest, "the two most recently closed");
}
