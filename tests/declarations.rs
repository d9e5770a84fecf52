//! Agent declarations (issue 3): audit log, metadata, workflow state, results with a
//! schema, wait/watch/events. Everything is declared; nothing is inferred.

use crate::common::*;
use crate::maxx_snapshot;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn live(d: &Daemon) -> String {
    d.create(json!({"command": "sleep 60"}))["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn events(d: &Daemon, id: &str, since: u64) -> Vec<Value> {
    d.ok("sessions.events", json!({"session_id": id, "since": since}))["events"]
        .as_array()
        .unwrap()
        .clone()
}

/// Declare and expect success; returns the view.
fn declare(d: &Daemon, method: &str, id: &str, mut params: Value) -> Value {
    params["session_id"] = json!(id);
    d.ok(method, params)["session"].clone()
}

/// Declare and expect invalid_request with the view and the audit log unchanged.
fn rejected(d: &Daemon, method: &str, id: &str, mut params: Value) {
    let before = d.get(id);
    let log = events(d, id, 0).len();
    params["session_id"] = json!(id);
    d.err(method, params, "invalid_request");
    let mut after = d.get(id);
    after["updated_at"] = before["updated_at"].clone();
    assert_eq!(after, before, "{method} changed the record on rejection");
    assert_eq!(
        events(d, id, 0).len(),
        log,
        "{method} logged a rejected declaration"
    );
}

#[test]
fn every_verb_records_one_audit_entry() {
    let d = Daemon::start();
    let id = live(&d);
    declare(
        &d,
        "sessions.declare-state",
        &id,
        json!({"state": "tests:passed", "message": "all green", "source": "ci-agent"}),
    );
    declare(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "pr.opened", "payload": {"pr": 123}}),
    );
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "run", "value_json": "{\"id\":\"run_abc\",\"attempts\":[1,2]}"}),
    );
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "linear.issue", "value": "MAX-4"}),
    );
    declare(
        &d,
        "sessions.set-state",
        &id,
        json!({"state": "needsInput", "source": "release-agent"}),
    );
    declare(
        &d,
        "sessions.set-summary",
        &id,
        json!({"summary": "Waiting on user confirmation."}),
    );
    declare(
        &d,
        "sessions.set-result",
        &id,
        json!({"result": "Use parser branch B."}),
    );
    declare(
        &d,
        "sessions.set-agent-type",
        &id,
        json!({"agent_type": "claude-code"}),
    );
    declare(
        &d,
        "sessions.remove-metadata",
        &id,
        json!({"keys": ["run", "absent"]}),
    );
    declare(&d, "sessions.clear-result", &id, json!({}));
    declare(
        &d,
        "sessions.set-result-schema",
        &id,
        json!({"result_schema": {"type": "array"}}),
    );
    declare(&d, "sessions.clear-result-schema", &id, json!({}));
    declare(&d, "sessions.clear-metadata", &id, json!({}));
    let log = events(&d, &id, 0);
    let kinds: Vec<(&str, &str)> = log
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("state", "tests:passed"),
            ("event", "pr.opened"),
            ("metadata", "run"),
            ("metadata", "linear.issue"),
            ("workflow-state", "needsInput"),
            ("summary", ""),
            ("result", "result.set"),
            ("agent-type", "claude-code"),
            ("metadata", "run"),
            ("result", "result.cleared"),
            ("result-schema", "result_schema.set"),
            ("result-schema", "result_schema.cleared"),
            ("metadata", "*"),
        ]
    );
    let seqs: Vec<u64> = log.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=13).collect::<Vec<_>>());
    assert_eq!(log[0]["source"], "ci-agent");
    assert_eq!(log[0]["message"], "all green");
    assert_eq!(
        log[1]["source"], "local-cli",
        "default source is the caller"
    );
    assert_eq!(log[1]["payload"], json!({"pr": 123}));
    assert_eq!(
        log[2]["payload"],
        json!({"id": "run_abc", "attempts": [1, 2]})
    );
    assert_eq!(log[8]["message"], "removed");
    assert_eq!(log[12]["message"], "cleared");
    // The foreground pid is a kernel fact: the sleeping child's process group.
    let pid = d.get(&id)["pid"].as_i64().unwrap();
    assert!(log.iter().all(|e| e["pid"].as_i64() == Some(pid)));
    assert!(log.iter().all(|e| e["session_id"] == id.as_str()));
    // since filters.
    assert_eq!(events(&d, &id, 11).len(), 2);
    let view = d.get(&id);
    assert_eq!(view["status"], "tests:passed");
    assert_eq!(view["metadata"], json!({}));
    assert_eq!(view["workflow_state"], "needsInput");
    assert_eq!(view["workflow_state_source"], "release-agent");
    assert!(view.get("result").is_none());
    assert_eq!(view["agent_type"], "claude-code");
}

#[test]
fn declared_view_and_events_shapes() {
    let d = Daemon::start();
    let id = d.create(json!({
        "title": "reviewer", "command": "sleep 60", "cwd": "/", "agent_type": "codex",
        "metadata": {"repo": "org/repo"}
    }))["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    declare(
        &d,
        "sessions.set-state",
        &id,
        json!({"state": "complete", "source": "agent-a"}),
    );
    declare(
        &d,
        "sessions.set-summary",
        &id,
        json!({"summary": "Reviewed 3 files.", "source": "agent-a"}),
    );
    declare(
        &d,
        "sessions.set-result-schema",
        &id,
        json!({"result_schema": {"type": "object", "required": ["verdict"], "properties": {"verdict": {"type": "string"}}}}),
    );
    declare(
        &d,
        "sessions.set-result",
        &id,
        json!({"result": "{\"verdict\":\"ship\"}", "source": "agent-a"}),
    );
    declare(
        &d,
        "sessions.declare-state",
        &id,
        json!({"state": "reviewed"}),
    );
    maxx_snapshot!(
        "declared_view",
        d.call("sessions.get", json!({"session_id": id}))
    );
    maxx_snapshot!(
        "events",
        d.call("sessions.events", json!({"session_id": id, "since": 0}))
    );
}

#[test]
fn create_time_agent_type_is_an_audit_entry_and_metadata_is_not() {
    let d = Daemon::start();
    let out = d.cli_ok(&[
        "sessions",
        "create",
        "--command",
        "sleep 60",
        "--agent-type",
        "codex",
        "--metadata",
        "connector.id=42",
    ]);
    let id = out["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(out["result"]["session"]["agent_type"], "codex");
    let log = events(&d, &id, 0);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["kind"], "agent-type");
    assert_eq!(log[0]["name"], "codex");
}

#[test]
fn limits_accept_the_bound_and_reject_one_past_changing_nothing() {
    let d = Daemon::start();
    let id = live(&d);
    // summary ≤ 1024 chars
    declare(
        &d,
        "sessions.set-summary",
        &id,
        json!({"summary": "é".repeat(1024)}),
    );
    rejected(
        &d,
        "sessions.set-summary",
        &id,
        json!({"summary": "é".repeat(1025)}),
    );
    // result ≤ 16384 bytes (UTF-8 bytes, not chars)
    declare(
        &d,
        "sessions.set-result",
        &id,
        json!({"result": "x".repeat(16384)}),
    );
    rejected(
        &d,
        "sessions.set-result",
        &id,
        json!({"result": "é".repeat(8193)}),
    );
    // state (status) ≤ 128 chars
    declare(
        &d,
        "sessions.declare-state",
        &id,
        json!({"state": "s".repeat(128)}),
    );
    rejected(
        &d,
        "sessions.declare-state",
        &id,
        json!({"state": "s".repeat(129)}),
    );
    // metadata key ≤ 64 chars of [A-Za-z0-9_.-]
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "k".repeat(64), "value": "v"}),
    );
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "k".repeat(65), "value": "v"}),
    );
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "a b", "value": "v"}),
    );
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "", "value": "v"}),
    );
    // value ≤ 2048 bytes of compact JSON: a string of n chars encodes to n + 2 bytes.
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "big", "value": "x".repeat(2046)}),
    );
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "big", "value": "x".repeat(2047)}),
    );
    // Int64 preserved exactly, both ends.
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "max", "value": i64::MAX}),
    );
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "min", "value": i64::MIN}),
    );
    let md = d.get(&id)["metadata"].clone();
    assert_eq!(md["max"].as_i64(), Some(i64::MAX));
    assert_eq!(md["min"].as_i64(), Some(i64::MIN));
    d.ok("sessions.clear-metadata", json!({"session_id": id}));
    // ≤ 32 keys: the 32nd is accepted, the 33rd rejected.
    for i in 0..32 {
        declare(
            &d,
            "sessions.set-metadata",
            &id,
            json!({"key": format!("k{i}"), "value": i}),
        );
    }
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "k32", "value": 32}),
    );
    // Overwriting an existing key at the cap is fine.
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "k0", "value": "again"}),
    );
    d.ok("sessions.clear-metadata", json!({"session_id": id}));
    // map ≤ 16384 bytes: 8 values of 2046 chars fit, a 9th does not.
    for i in 0..7 {
        declare(
            &d,
            "sessions.set-metadata",
            &id,
            json!({"key": format!("b{i}"), "value": "x".repeat(2040)}),
        );
    }
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "b8", "value": "x".repeat(2040)}),
    );
    // set-state vocabulary.
    for s in ["running", "needsInput", "blocked", "complete", "failed"] {
        declare(&d, "sessions.set-state", &id, json!({"state": s}));
    }
    for s in ["done", "Running", "needs_input", ""] {
        rejected(&d, "sessions.set-state", &id, json!({"state": s}));
    }
    // Event names, payload size, source, agent type, remove-metadata needs a key.
    rejected(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "has space"}),
    );
    rejected(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "e".repeat(129)}),
    );
    declare(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "e".repeat(128)}),
    );
    rejected(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "x", "payload": "p".repeat(16384)}),
    );
    rejected(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "x", "source": "s".repeat(129)}),
    );
    rejected(
        &d,
        "sessions.set-agent-type",
        &id,
        json!({"agent_type": "has space"}),
    );
    rejected(&d, "sessions.remove-metadata", &id, json!({}));
    rejected(&d, "sessions.set-metadata", &id, json!({"key": "k"}));
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "k", "value": 1, "value_json": "1"}),
    );
    rejected(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "k", "value_json": "{nope"}),
    );
    rejected(
        &d,
        "sessions.set-summary",
        &id,
        json!({"summary": "x", "state": "running"}),
    );
    rejected(
        &d,
        "sessions.set-result-schema",
        &id,
        json!({"result_schema": {"type": "text"}}),
    );
}

#[test]
fn result_schema_is_a_contract_on_declared_results() {
    let d = Daemon::start();
    let schema = r#"{"type":"object","required":["verdict"],"properties":{"verdict":{"type":"string"},"confidence":{"type":"number"}}}"#;
    let out = d.cli_ok(&[
        "sessions",
        "create",
        "--command",
        "sleep 60",
        "--result-schema",
        schema,
    ]);
    let id = out["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ok = d.cli_ok(&[
        "sessions",
        "set-result",
        &id,
        "--result",
        r#"{"verdict":"ship","confidence":0.9}"#,
    ]);
    assert_eq!(
        ok["result"]["session"]["result"],
        r#"{"verdict":"ship","confidence":0.9}"#
    );
    for bad in ["looks good", r#"{"confidence":0.9}"#, r#"{"verdict":1}"#] {
        let out = d.cli(&["sessions", "set-result", &id, "--result", bad]);
        // What the caller typed is wrong: a usage error (exit 2), with the daemon's code.
        assert_eq!(out.status.code(), Some(2));
        let err: Value = serde_json::from_slice(&out.stderr).unwrap();
        assert_eq!(err["error"]["code"], "invalid_request");
        assert_eq!(
            d.get(&id)["result"],
            r#"{"verdict":"ship","confidence":0.9}"#,
            "the previous result is kept"
        );
    }
    // The schema survives clear-result; clearing the schema lifts the contract.
    d.cli_ok(&["sessions", "clear-result", &id]);
    assert!(d.get(&id).get("result_schema").is_some());
    d.cli_ok(&["sessions", "clear-result-schema", &id]);
    d.cli_ok(&["sessions", "set-result", &id, "--result", "looks good"]);
    // An invalid schema is refused when declared.
    let out = d.cli(&[
        "sessions",
        "set-result-schema",
        &id,
        "--result-schema",
        r#"{"type":"text"}"#,
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the daemon's invalid_request: a usage error"
    );
    let out = d.cli(&[
        "sessions",
        "set-result-schema",
        &id,
        "--result-schema",
        "{nope",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "unparseable JSON is a usage error"
    );
}

#[test]
fn update_merge_records_one_entry_per_key() {
    let d = Daemon::start();
    let id = live(&d);
    d.ok(
        "sessions.update",
        json!({"session_id": id, "status": "x", "metadata": {"a": 1, "b": [2]}}),
    );
    let log = events(&d, &id, 0);
    assert_eq!(log.len(), 2);
    assert_eq!(
        (log[0]["name"].as_str(), &log[0]["payload"]),
        (Some("a"), &json!(1))
    );
    assert_eq!(
        (log[1]["name"].as_str(), &log[1]["payload"]),
        (Some("b"), &json!([2]))
    );
}

#[test]
fn list_filters_by_metadata() {
    let d = Daemon::start();
    let a = d.create(
        json!({"command": "sleep 60", "metadata": {"repo": "org/repo", "n": 3, "flag": true}}),
    );
    let b = d.create(
        json!({"command": "sleep 60", "metadata": {"repo": "org/other", "linear.issue": "MAX-1"}}),
    );
    let ids = |filters: Value| -> Vec<String> {
        d.ok("sessions.list", json!({"metadata_filter": filters}))["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["session_id"].as_str().unwrap().to_string())
            .collect()
    };
    let (a, b) = (
        a["session_id"].as_str().unwrap(),
        b["session_id"].as_str().unwrap(),
    );
    assert_eq!(ids(json!([{"key": "repo", "value": "org/repo"}])), [a]);
    assert_eq!(ids(json!([{"key": "repo"}])), [a, b]);
    assert_eq!(ids(json!([{"key": "repo"}, {"key": "linear.issue"}])), [b]);
    assert_eq!(
        ids(json!([{"key": "n", "value": "3"}])),
        [a],
        "non-strings compare as compact JSON"
    );
    assert_eq!(ids(json!([{"key": "n", "value": 3}])), [a]);
    assert_eq!(ids(json!([{"key": "flag", "value": "true"}])), [a]);
    assert!(ids(json!([{"key": "missing"}])).is_empty());
    let out = d.cli_ok(&[
        "sessions",
        "list",
        "--filter",
        "repo=org/other",
        "--filter",
        "linear.issue",
    ]);
    assert_eq!(out["result"]["sessions"].as_array().unwrap().len(), 1);
    d.err(
        "sessions.list",
        json!({"metadata_filter": [{"key": "bad key"}]}),
        "invalid_request",
    );
}

#[test]
fn wait_state_is_level_triggered_and_event_is_edge_triggered() {
    let d = Daemon::start();
    let id = live(&d);
    declare(
        &d,
        "sessions.declare-state",
        &id,
        json!({"state": "tests:passed"}),
    );
    // Level: already in the state → matched at once.
    let out = d.cli(&[
        "sessions",
        "wait",
        &id,
        "--state",
        "tests:passed",
        "--timeout",
        "5s",
    ]);
    assert_eq!(out.status.code(), Some(0));
    // Edge: an event emitted before the wait does not match...
    declare(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "pr.merged"}),
    );
    let out = d.cli(&[
        "sessions",
        "wait",
        &id,
        "--event",
        "pr.merged",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(out.status.code(), Some(124));
    // ...unless --since anchors the baseline before it.
    let out = d.cli(&[
        "sessions",
        "wait",
        &id,
        "--event",
        "pr.merged",
        "--since",
        "1",
        "--timeout",
        "5s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["event"]["seq"], 2);
    // One emitted during the wait matches.
    let control = d.control.clone();
    let id2 = id.clone();
    let waiter = std::thread::spawn(move || {
        std::process::Command::new(maxx_bin())
            .args([
                "sessions",
                "wait",
                &id2,
                "--event",
                "deploy.done",
                "--timeout",
                "20s",
            ])
            .env("MAXX_CONTROL_DIR", control)
            .output()
            .unwrap()
    });
    wait_for("the waiter to register", T, || {
        (d.ok("daemon.stats", json!({}))["waiters"] == 1).then_some(())
    });
    declare(&d, "sessions.emit-event", &id, json!({"event": "other"}));
    declare(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "deploy.done", "payload": {"v": "1.4.0"}}),
    );
    let out = waiter.join().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["outcome"], "matched");
    assert_eq!(v["result"]["event"]["payload"], json!({"v": "1.4.0"}));
    assert_eq!(d.ok("daemon.stats", json!({}))["waiters"], 0);
    // Exactly one condition.
    d.err(
        "sessions.wait",
        json!({"session_id": id, "state": "a", "event": "b"}),
        "invalid_request",
    );
    d.err(
        "sessions.wait",
        json!({"session_id": id}),
        "invalid_request",
    );
    d.err(
        "sessions.wait",
        json!({"session_id": id, "state": "a", "since": 1}),
        "invalid_request",
    );
}

#[test]
fn waits_on_declarations_end_when_the_run_ends() {
    let d = Daemon::start();
    let id = d.create(json!({"command": "sleep 0.3"}))["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = d.cli(&[
        "sessions",
        "wait",
        &id,
        "--event",
        "never",
        "--timeout",
        "20s",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["outcome"], "ended");
}

/// Open a raw watch stream and read lines from it.
struct Watch {
    reader: BufReader<UnixStream>,
}

impl Watch {
    fn open(d: &Daemon, params: Value) -> Watch {
        let mut s = UnixStream::connect(d.socket()).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        let req = json!({"token": d.token(), "method": "sessions.watch", "params": params});
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        Watch {
            reader: BufReader::new(s),
        }
    }

    fn next(&mut self) -> Value {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }
}

#[test]
fn watch_streams_snapshot_events_lifecycle_end_in_order() {
    let d = Daemon::start();
    let id = d.create(json!({"command": "read x; exit 4", "title": "w", "cwd": "/"}))["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut w = Watch::open(&d, json!({"session_id": id}));
    let mut lines = vec![w.next()];
    declare(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "step", "payload": {"n": 1}}),
    );
    declare(
        &d,
        "sessions.set-metadata",
        &id,
        json!({"key": "k", "value": "v"}),
    );
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    loop {
        let line = w.next();
        let end = line["type"] == "end";
        lines.push(line);
        if end {
            break;
        }
    }
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["snapshot", "event", "event", "lifecycle", "end"]);
    assert_eq!(lines[3]["session"]["exit_code"], 4);
    maxx_snapshot!("watch_lines", Value::Array(lines));
    assert_eq!(d.ok("daemon.stats", json!({}))["watchers"], 0);
}

#[test]
fn watch_cli_and_timeout() {
    let d = Daemon::start();
    let id = live(&d);
    let out = d.cli(&["sessions", "watch", &id, "--timeout", "200ms"]);
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.first().unwrap()["type"], "snapshot");
    assert_eq!(
        lines.last().unwrap(),
        &json!({"type": "end", "reason": "timeout"})
    );
    let out = d.cli(&["sessions", "watch", "2B0E0000-0000-4000-8000-000000000000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_watcher_that_disconnects_leaves_no_subscription() {
    let d = Daemon::start();
    let id = live(&d);
    for _ in 0..3 {
        let mut w = Watch::open(&d, json!({"session_id": id}));
        assert_eq!(w.next()["type"], "snapshot");
        assert_eq!(d.ok("daemon.stats", json!({}))["watchers"], 1);
        drop(w);
        // No further event is needed for the daemon to notice.
        wait_for("the subscription to go", T, || {
            (d.ok("daemon.stats", json!({}))["watchers"] == 0).then_some(())
        });
    }
    // A client that half-closes after its request keeps its stream.
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let req = json!({"token": d.token(), "method": "sessions.watch", "params": {"session_id": id}});
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    declare(
        &d,
        "sessions.emit-event",
        &id,
        json!({"event": "after.half.close"}),
    );
    line.clear();
    r.read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["event"]["name"], "after.half.close");
}
