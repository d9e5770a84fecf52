//! Supervision policies (issue 11): opt-in automatic restart on a kernel-reported exit,
//! with backoff and give-up.

use crate::common::*;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};

const T: Duration = Duration::from_secs(20);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

fn events(d: &Daemon, id: &str) -> Vec<Value> {
    d.ok("sessions.events", json!({"session_id": id}))["events"]
        .as_array()
        .unwrap()
        .clone()
}

fn named<'a>(log: &'a [Value], name: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["name"] == name).collect()
}

fn time(e: &Value) -> SystemTime {
    humantime::parse_rfc3339(e["created_at"].as_str().unwrap()).unwrap()
}

#[test]
fn on_failure_restarts_until_the_budget_then_gives_up() {
    let d = Daemon::start();
    let out = d.cli_ok(&[
        "sessions",
        "create",
        "--command",
        "exit 1",
        "--restart",
        "on-failure",
        "--max-restarts",
        "3",
        "--backoff",
        "100ms..250ms",
    ]);
    let id = out["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        out["result"]["session"]["restart_policy"]["mode"],
        "on-failure"
    );
    let out = d.cli(&[
        "sessions",
        "wait",
        &id,
        "--lifecycle",
        "exited",
        "--timeout",
        "20s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = d.get(&id);
    assert_eq!(v["restart_count"], 3);
    assert_eq!(v["restart_gave_up"], true);
    assert_eq!(v["exit_code"], 1);
    let log = events(&d, &id);
    let restarts = named(&log, "restarted");
    assert_eq!(restarts.len(), 3);
    for (i, r) in restarts.iter().enumerate() {
        assert_eq!(r["source"], "maxx");
        assert_eq!(r["payload"]["automatic"], true);
        assert_eq!(r["payload"]["exit_code"], 1);
        assert_eq!(r["payload"]["attempt"], i as u64 + 1);
    }
    assert_eq!(named(&log, "restart.gave_up").len(), 1);
    // Backoff grows: 100ms, 200ms, then capped at 250ms (with generous tolerance).
    let gaps: Vec<Duration> = restarts
        .windows(2)
        .map(|w| time(w[1]).duration_since(time(w[0])).unwrap())
        .collect();
    assert!(gaps[0] >= Duration::from_millis(190), "{gaps:?}");
    assert!(gaps[1] >= Duration::from_millis(240), "{gaps:?}");
}

#[test]
fn success_codes_and_always() {
    let d = Daemon::start();
    let a = sid(&d.create(json!({"command": "exit 2", "restart": "on-failure", "restart_exit_codes": [0, 2], "backoff": "50ms..50ms"})));
    let v = d.ok(
        "sessions.wait",
        json!({"session_id": a, "lifecycle": "exited", "timeout": 10}),
    )["session"]
        .clone();
    assert_eq!(v["restart_count"], 0, "exit 2 counts as success");
    assert!(v.get("restart_gave_up").is_none());
    let b = sid(&d.create(json!({"command": "exit 0", "restart": "always", "max_restarts": 2, "backoff": "50ms..50ms"})));
    let v = d.ok(
        "sessions.wait",
        json!({"session_id": b, "lifecycle": "exited", "timeout": 10}),
    )["session"]
        .clone();
    assert_eq!(v["restart_count"], 2, "always restarts a clean exit");
    assert_eq!(v["restart_gave_up"], true);
    d.err(
        "sessions.create",
        json!({"command": "x", "restart": "sometimes"}),
        "invalid_request",
    );
    d.err(
        "sessions.create",
        json!({"command": "x", "max_restarts": 3}),
        "invalid_request",
    );
    d.err(
        "sessions.create",
        json!({"command": "x", "restart": "always", "backoff": "2s..1s"}),
        "invalid_request",
    );
    d.err(
        "sessions.create",
        json!({"restart": "always"}),
        "invalid_request",
    );
}

#[test]
fn a_member_in_backoff_has_not_exited() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "exit 1", "group": "sup", "restart": "on-failure", "max_restarts": 1, "backoff": "1s..1s"})));
    wait_for("backoff", T, || {
        (d.get(&id)["lifecycle"] == "backoff").then_some(())
    });
    let v = d.get(&id);
    assert!(v["next_restart_at"].is_string());
    let r = d.ok(
        "stream.wait",
        json!({"group": "sup", "all": "exited", "timeout": 0.2}),
    );
    assert_eq!(r["outcome"], "timeout");
    let r = d.ok(
        "stream.wait",
        json!({"group": "sup", "all": "exited", "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched");
    assert_eq!(d.get(&id)["restart_gave_up"], true);
}

#[test]
fn archive_during_backoff_cancels_the_restart() {
    let d = Daemon::start();
    let id = sid(
        &d.create(json!({"command": "exit 1", "restart": "always", "backoff": "300ms..300ms"}))
    );
    wait_for("backoff", T, || {
        (d.get(&id)["lifecycle"] == "backoff").then_some(())
    });
    d.ok(
        "sessions.archive",
        json!({"session_id": id, "reason": "stop it"}),
    );
    // Wait past the backoff through a real event: a marker emitted after it.
    let r = d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "running", "timeout": 1}),
    );
    assert_eq!(r["outcome"], "ended");
    assert_eq!(d.get(&id)["lifecycle"], "archived");
    assert_eq!(d.get(&id)["restart_count"], 0);
    assert!(named(&events(&d, &id), "restarted").is_empty());
}

#[test]
fn an_interrupt_is_not_a_crash() {
    let d = Daemon::start();
    let id = sid(&d.create(
        json!({"command": "exec sleep 30", "restart": "on-failure", "backoff": "50ms..50ms"}),
    ));
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "interrupt", "signal": "SIGTERM"}),
    );
    let v = d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 10}),
    )["session"]
        .clone();
    assert_eq!(v["exit_signal"], "SIGTERM");
    assert_eq!(v["restart_count"], 0);
    // A signal from outside (not through maxx) is a crash and restarts.
    let pid = d.ok(
        "sessions.restart",
        json!({"session_id": id, "last_command": true}),
    )["session"]["pid"]
        .as_i64()
        .unwrap();
    // SAFETY: killing the test's own grandchild.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    wait_for("the automatic restart", T, || {
        (d.get(&id)["restart_count"] == 2).then_some(())
    });
    let log = events(&d, &id);
    let last = named(&log, "restarted").last().cloned().unwrap().clone();
    assert_eq!(last["payload"]["automatic"], true);
    assert_eq!(last["payload"]["exit_signal"], "SIGKILL");
}

#[test]
fn the_policy_survives_a_daemon_restart_without_resurrecting() {
    let mut d = Daemon::start();
    let id =
        sid(&d.create(json!({"command": "sleep 30", "restart": "on-failure", "max_restarts": 7})));
    d.cli_ok(&[
        "sessions",
        "set-restart-policy",
        &id,
        "--restart",
        "always",
        "--max-restarts",
        "4",
    ]);
    d.stop_with(libc::SIGTERM);
    d.restart();
    let v = d.get(&id);
    assert_eq!(v["lifecycle"], "closed");
    assert_eq!(v["restored"], true);
    assert_eq!(v["restart_policy"]["mode"], "always");
    assert_eq!(v["restart_policy"]["max_restarts"], 4);
    // Turning it off.
    let v = d.cli_ok(&["sessions", "set-restart-policy", &id, "--restart", "never"]);
    assert!(v["result"]["session"].get("restart_policy").is_none());
}

#[test]
fn close_during_backoff_cancels_the_restart_and_streams_do_not_end_on_it() {
    let d = Daemon::start();
    let id = sid(
        &d.create(json!({"command": "exit 1", "restart": "always", "backoff": "300ms..300ms"}))
    );
    // A single-session stream sees `exited` with restart_pending and keeps going.
    let mut s = d.open_stream("stream.watch", json!({"session_id": id, "since": 0}));
    s.next();
    let mut exited = Value::Null;
    while exited.is_null() {
        let e = s.next();
        if e["event"]["name"] == "exited" {
            exited = e;
        }
    }
    assert_eq!(exited["event"]["payload"]["restart_pending"], true);
    wait_for("backoff", T, || {
        (d.get(&id)["lifecycle"] == "backoff").then_some(())
    });
    d.ok("sessions.cancel", json!({"session_id": id}));
    // The stream did not end on the pending-restart exit: the next line is the close.
    let next = s.next();
    assert_eq!(next["event"]["name"], "closed", "{next}");
    assert_eq!(s.next(), json!({"type": "end"}));
    let r = d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "running", "timeout": 1}),
    );
    assert_eq!(r["outcome"], "ended");
    let v = d.get(&id);
    assert_eq!(v["lifecycle"], "closed");
    assert!(v.get("next_restart_at").is_none());
    // Let the cancelled backoff's deadline pass (a wait that times out, not a sleep).
    let r = d.ok(
        "stream.wait",
        json!({"session_id": id, "event": "never", "timeout": 0.6}),
    );
    assert_eq!(r["outcome"], "ended");
    let r = d.ok(
        "stream.wait",
        json!({"group": "no-such-group-x", "event": "never", "timeout": 0.6}),
    );
    assert_eq!(r["outcome"], "timeout");
    assert_eq!(d.get(&id)["restart_count"], 0);
    assert!(named(&events(&d, &id), "restarted").is_empty());
    d.err(
        "sessions.set-restart-policy",
        json!({"session_id": id}),
        "invalid_request",
    );
}
