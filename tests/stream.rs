//! The event bus, groups and parent edges (issue 5): stream watch / stream wait.

use crate::common::*;
use crate::maxx_snapshot;
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// A session that exits with `code` once a line is submitted to it.
fn gated(d: &Daemon, group: &str, code: i32) -> String {
    sid(&d.create(json!({"command": format!("read x; exit {code}"), "group": group})))
}

fn release(d: &Daemon, id: &str) {
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 10}),
    );
}

#[test]
fn all_exited_matches_only_after_the_last_member_exits() {
    let d = Daemon::start();
    let ids: Vec<String> = (0..3).map(|i| gated(&d, "batch-1", i)).collect();
    let waiter = d.cli_bg(&[
        "stream",
        "wait",
        "--group",
        "batch-1",
        "--all",
        "exited",
        "--timeout",
        "30s",
    ]);
    d.wait_stat("waiters", 1);
    release(&d, &ids[1]);
    release(&d, &ids[0]);
    assert!(!waiter.is_finished(), "matched before the last exit");
    assert_eq!(d.stat("waiters"), 1);
    release(&d, &ids[2]);
    let out = waiter.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["outcome"], "matched");
    let members = v["result"]["members"].as_array().unwrap();
    assert_eq!(members.len(), 3);
    assert!(members.iter().all(|m| m["lifecycle"] == "exited"));
    let mut codes: Vec<i64> = members
        .iter()
        .map(|m| m["exit_code"].as_i64().unwrap())
        .collect();
    codes.sort();
    assert_eq!(codes, [0, 1, 2]);
    maxx_snapshot!("stream_wait_all_exited", {
        let mut v = v.clone();
        let mut sorted = members.clone();
        sorted.sort_by_key(|m| m["exit_code"].as_i64());
        v["result"]["members"] = json!(sorted);
        v
    });
    // Already satisfied: answers at once. Empty group: matches vacuously.
    let out = d.cli(&["stream", "wait", "--group", "batch-1", "--all", "exited"]);
    assert_eq!(out.status.code(), Some(0));
    let empty = d.ok(
        "stream.wait",
        json!({"group": "nobody", "all": "exited", "timeout": 5}),
    );
    assert_eq!(empty["outcome"], "matched");
    assert_eq!(empty["group"], "nobody");
    assert_eq!(empty["member_count"], 0);
    assert_eq!(empty["members"], json!([]));
    assert!(empty["note"].is_string(), "an empty group says so: {empty}");
}

#[test]
fn declared_and_idle_are_defined_on_declarations_only() {
    let d = Daemon::start();
    let a = sid(&d.create(json!({"command": "sleep 60", "group": "g"})));
    let b = sid(&d.create(json!({"command": "sleep 60", "group": "g"})));
    let c = sid(&d.create(json!({"command": "sleep 60", "group": "g"})));
    // Nobody declared anything: idle holds, declared:complete does not.
    d.ok(
        "stream.wait",
        json!({"group": "g", "all": "idle", "timeout": 5}),
    );
    let r = d.ok(
        "stream.wait",
        json!({"group": "g", "all": "declared:complete", "timeout": 0.2}),
    );
    assert_eq!(r["outcome"], "timeout");
    d.ok(
        "sessions.set-state",
        json!({"session_id": a, "state": "running"}),
    );
    let r = d.ok(
        "stream.wait",
        json!({"group": "g", "all": "idle", "timeout": 0.2}),
    );
    assert_eq!(r["outcome"], "timeout", "a member declared running is busy");
    let waiter = d.cli_bg(&[
        "stream",
        "wait",
        "--group",
        "g",
        "--all",
        "declared:complete",
        "--timeout",
        "30s",
    ]);
    d.wait_stat("waiters", 1);
    d.ok(
        "sessions.set-state",
        json!({"session_id": a, "state": "complete"}),
    );
    d.ok(
        "sessions.set-state",
        json!({"session_id": b, "state": "complete"}),
    );
    assert!(!waiter.is_finished(), "c, undeclared, is not complete");
    d.ok(
        "sessions.set-state",
        json!({"session_id": c, "state": "complete"}),
    );
    assert_eq!(waiter.join().unwrap().status.code(), Some(0));
    d.ok(
        "stream.wait",
        json!({"group": "g", "all": "idle", "timeout": 5}),
    );
    // A member leaving the group no longer counts.
    d.ok(
        "sessions.set-state",
        json!({"session_id": c, "state": "failed"}),
    );
    let r = d.ok(
        "stream.wait",
        json!({"group": "g", "all": "declared:complete", "timeout": 0.2}),
    );
    assert_eq!(r["outcome"], "timeout");
    d.ok("sessions.set-group", json!({"session_id": c}));
    d.ok(
        "stream.wait",
        json!({"group": "g", "all": "declared:complete", "timeout": 5}),
    );
    d.err(
        "stream.wait",
        json!({"group": "g", "all": "declared:done"}),
        "invalid_request",
    );
    d.err("stream.wait", json!({"all": "exited"}), "invalid_request");
    d.err("stream.wait", json!({"group": "g"}), "invalid_request");
}

#[test]
fn envelopes_and_hello() {
    let d = Daemon::start();
    let mut s = d.open_stream("stream.watch", json!({"group": "rel"}));
    let hello = s.next();
    maxx_snapshot!("stream_hello", hello.clone());
    let id = sid(&d.create(json!({"command": "sleep 60", "group": "rel", "cwd": "/"})));
    let created = s.next();
    let joined = s.next();
    assert_eq!(created["event"]["name"], "created");
    assert_eq!(joined["event"]["name"], "group.joined");
    maxx_snapshot!("stream_event_maxx", created.clone());
    let out = d.cli_ok(&[
        "event",
        "emit",
        "--session",
        &id,
        "--type",
        "deploy.done",
        "--json",
        r#"{"version":"1.4.0"}"#,
        "--source",
        "release-agent",
    ]);
    assert_eq!(out["ok"], true);
    let agent = s.next();
    maxx_snapshot!("stream_event_agent", agent.clone());
    assert_eq!(agent["event"]["seq"], 1);
    assert_eq!(agent["event"]["source_kind"], "agent");
    assert_eq!(agent["event"]["group"], "rel");
    let c1 = created["event"]["cursor"].as_u64().unwrap();
    assert_eq!(joined["event"]["cursor"].as_u64().unwrap(), c1 + 1);
    assert_eq!(agent["event"]["cursor"].as_u64().unwrap(), c1 + 2);
    // The envelope carries exactly the seed's fields.
    let keys: Vec<&str> = agent["event"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "schema",
            "cursor",
            "seq",
            "source_kind",
            "kind",
            "name",
            "source",
            "message",
            "payload",
            "created_at",
            "resource_kind",
            "session_id",
            "surface_id",
            "group",
            "pid"
        ]
    );
}

#[test]
fn mechanical_events_cover_the_lifecycle() {
    let d = Daemon::start();
    let mut s = d.open_stream("stream.watch", json!({}));
    s.next();
    let a = sid(&d.create(json!({"command": "read x; exit 7", "group": "one"})));
    let b = sid(&d.create(json!({"command": "sleep 60", "location": "split", "split_target": a})));
    d.ok(
        "sessions.action",
        json!({"session_id": b, "action": "focus"}),
    );
    d.ok(
        "sessions.set-group",
        json!({"session_id": a, "group": "two"}),
    );
    d.ok("sessions.set-parent", json!({"session_id": b, "parent": a}));
    d.ok(
        "sessions.set-parent",
        json!({"session_id": b, "parent": ""}),
    );
    release(&d, &a);
    d.ok("sessions.cancel", json!({"session_id": b}));
    let mut seen = Vec::new();
    while seen.last().map(|(_, n): &(String, String)| n.as_str()) != Some("closed") {
        let e = s.next();
        seen.push((
            e["event"]["session_id"].as_str().unwrap()[..4].to_string(),
            e["event"]["name"].as_str().unwrap().to_string(),
        ));
    }
    let names: Vec<&str> = seen.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "created",
            "group.joined",
            "created",
            "focus",
            "group.left",
            "group.joined",
            "parent.set",
            "parent.cleared",
            "exited",
            "closed"
        ]
    );
}

#[test]
fn resume_with_since_sees_every_event_exactly_once() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let mut s = d.open_stream("stream.watch", json!({"session_id": id}));
    let hello = s.next();
    let start = hello["cursor"].as_u64().unwrap();
    for i in 0..5 {
        d.ok(
            "sessions.emit-event",
            json!({"session_id": id, "event": format!("e{i}")}),
        );
    }
    let mut got: Vec<u64> = (0..2)
        .map(|_| s.next()["event"]["cursor"].as_u64().unwrap())
        .collect();
    drop(s); // the connection drops mid-stream
    d.wait_stat("streams", 0);
    for i in 5..8 {
        d.ok(
            "sessions.emit-event",
            json!({"session_id": id, "event": format!("e{i}")}),
        );
    }
    let mut s = d.open_stream("stream.watch", json!({"session_id": id, "since": got[1]}));
    let hello = s.next();
    assert!(hello.get("reset").is_none());
    for _ in 0..6 {
        got.push(s.next()["event"]["cursor"].as_u64().unwrap());
    }
    let expected: Vec<u64> = (start + 1..=start + 8).collect();
    assert_eq!(got, expected);
}

#[test]
fn a_cursor_outside_the_window_is_reported_as_a_reset() {
    let d = Daemon::start_with(&["--bus-capacity", "5"]);
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    for i in 0..10 {
        d.ok(
            "sessions.emit-event",
            json!({"session_id": id, "event": format!("e{i}")}),
        );
    }
    // 11 events so far (created + 10); the ring keeps cursors 7..=11.
    let mut s = d.open_stream("stream.watch", json!({"since": 2}));
    let hello = s.next();
    assert_eq!(
        hello,
        json!({"type": "hello", "schema": 1, "cursor": 11, "reset": true, "dropped_through": 6})
    );
    assert_eq!(s.next()["event"]["cursor"], 7);
    // A cursor from a previous run (beyond the current one) replays what is retained.
    let mut s = d.open_stream("stream.watch", json!({"since": 500}));
    let hello = s.next();
    assert_eq!(hello["reset"], true);
    assert_eq!(s.next()["event"]["cursor"], 7);
    // Inside the window: no reset.
    let mut s = d.open_stream("stream.watch", json!({"since": 9}));
    assert!(s.next().get("reset").is_none());
    assert_eq!(s.next()["event"]["cursor"], 10);
}

#[test]
fn single_session_stream_ends_with_the_session() {
    let d = Daemon::start();
    let id = gated(&d, "g", 0);
    let mut s = d.open_stream("stream.watch", json!({"session_id": id}));
    s.next();
    release(&d, &id);
    let e = s.next();
    assert_eq!(e["event"]["name"], "exited");
    assert_eq!(e["event"]["payload"], json!({"exit_code": 0}));
    // The session leader is gone, and with it the terminal's foreground group.
    assert_eq!(e["event"]["pid"], Value::Null, "{e}");
    assert_eq!(s.next(), json!({"type": "end"}));
    // Already ended: replay then end.
    let mut s = d.open_stream("stream.watch", json!({"session_id": id, "since": 0}));
    s.next();
    let mut last = s.next();
    while last["type"] == "event" {
        last = s.next();
    }
    assert_eq!(last, json!({"type": "end"}));
    d.err(
        "stream.watch",
        json!({"session_id": "2B0E0000-0000-4000-8000-000000000000"}),
        "not_found",
    );
}

#[test]
fn stream_wait_event_is_edge_triggered_and_filtered() {
    let d = Daemon::start();
    let a = sid(&d.create(json!({"command": "sleep 60", "group": "rel"})));
    let b = sid(&d.create(json!({"command": "sleep 60"})));
    d.ok(
        "sessions.emit-event",
        json!({"session_id": a, "event": "deploy.done"}),
    );
    let r = d.ok(
        "stream.wait",
        json!({"group": "rel", "event": "deploy.done", "timeout": 0.2}),
    );
    assert_eq!(
        r["outcome"], "timeout",
        "an event before the wait does not count"
    );
    let waiter = d.cli_bg(&[
        "stream",
        "wait",
        "--group",
        "rel",
        "--event",
        "deploy.done",
        "--timeout",
        "30s",
    ]);
    d.wait_stat("streams", 1);
    d.ok(
        "sessions.emit-event",
        json!({"session_id": b, "event": "deploy.done"}),
    );
    d.ok(
        "sessions.emit-event",
        json!({"session_id": a, "event": "deploy.done", "payload": {"v": 2}}),
    );
    let out = waiter.join().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["stream_event"]["session_id"], a.as_str());
    assert_eq!(v["result"]["stream_event"]["payload"], json!({"v": 2}));
    // Timeout exits 124.
    let out = d.cli(&[
        "stream",
        "wait",
        "--session",
        &b,
        "--event",
        "x",
        "--timeout",
        "100ms",
    ]);
    assert_eq!(out.status.code(), Some(124));
    d.wait_stat("streams", 0);
}

#[test]
fn parent_edges_are_validated_and_durable_history() {
    let d = Daemon::start();
    let p = sid(&d.create(json!({"command": "sleep 60"})));
    let c =
        sid(&d.create(json!({"command": "sleep 60", "parent": p, "metadata": {"role": "worker"}})));
    let g = sid(&d.create(json!({"command": "sleep 60", "parent": c})));
    assert_eq!(d.get(&c)["parent_id"], p.as_str());
    d.err(
        "sessions.create",
        json!({"parent": "2B0E0000-0000-4000-8000-000000000000"}),
        "not_found",
    );
    d.err(
        "sessions.create",
        json!({"parent": "nope"}),
        "invalid_request",
    );
    d.err(
        "sessions.set-parent",
        json!({"session_id": c, "parent": c}),
        "invalid_request",
    );
    d.err(
        "sessions.set-parent",
        json!({"session_id": p, "parent": g}),
        "invalid_request",
    );
    d.err(
        "sessions.set-parent",
        json!({"session_id": p, "parent": "2B0E0000-0000-4000-8000-000000000000"}),
        "not_found",
    );
    d.err(
        "sessions.set-parent",
        json!({"session_id": p, "parent": "x"}),
        "invalid_request",
    );
    assert!(
        d.get(&p).get("parent_id").is_none(),
        "a rejected edge changes nothing"
    );
    // Same parent again: no event, no updated_at bump.
    let before = d.get(&c);
    let mut s = d.open_stream("stream.watch", json!({"session_id": c}));
    s.next();
    d.ok("sessions.set-parent", json!({"session_id": c, "parent": p}));
    assert_eq!(d.get(&c)["updated_at"], before["updated_at"]);
    d.ok(
        "sessions.emit-event",
        json!({"session_id": c, "event": "marker"}),
    );
    assert_eq!(
        s.next()["event"]["name"],
        "marker",
        "no parent.set event for a no-op"
    );
    // Closing the parent does not rewrite its children.
    d.ok("sessions.cancel", json!({"session_id": p}));
    let kids = d.ok("sessions.list", json!({"parent": p}))["sessions"].clone();
    assert_eq!(kids.as_array().unwrap().len(), 1);
    assert_eq!(kids[0]["parent_id"], p.as_str());
    // Composable with group and metadata filters.
    d.ok("sessions.set-group", json!({"session_id": c, "group": "w"}));
    let out = d.cli_ok(&[
        "sessions",
        "list",
        "--parent",
        &p,
        "--group",
        "w",
        "--filter",
        "role=worker",
    ]);
    assert_eq!(out["result"]["sessions"].as_array().unwrap().len(), 1);
    let out = d.cli_ok(&["sessions", "list", "--parent", &p, "--filter", "role=boss"]);
    assert!(out["result"]["sessions"].as_array().unwrap().is_empty());
    // Detach through the CLI.
    let out = d.cli_ok(&["sessions", "set-parent", &c, "--parent", ""]);
    assert!(out["result"]["session"].get("parent_id").is_none());
    d.err(
        "sessions.set-group",
        json!({"session_id": c, "group": "bad group"}),
        "invalid_request",
    );
}

#[test]
fn a_stalled_watcher_is_reset_without_slowing_anyone() {
    let d = Daemon::start_with(&["--bus-capacity", "64"]);
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    // Subscribe and never read.
    let mut stalled = d.open_stream("stream.watch", json!({}));
    d.wait_stat("streams", 1);
    let payload = json!({"pad": "x".repeat(1500)});
    let mut n = 0;
    while d.stat("streams") == 1 {
        for _ in 0..100 {
            d.ok(
                "sessions.emit-event",
                json!({"session_id": id, "event": "tick", "payload": payload}),
            );
            n += 1;
        }
        assert!(n < 20_000, "the stalled watcher was never dropped");
        // Others are served meanwhile.
        assert_eq!(d.get(&id)["lifecycle"], "running");
    }
    // Draining it now ends in a reset marker with a resume cursor.
    let mut last = stalled.next();
    while last["type"] == "hello" || last["type"] == "event" {
        last = stalled.next();
    }
    assert_eq!(last["type"], "reset");
    assert_eq!(last["reason"], "slow_consumer");
    assert!(last["resume_since"].as_u64().unwrap() > 0);
    assert_eq!(stalled.next(), json!({"type": "end"}));
}

/// 1,000 members; run by the bench harness: `cargo test --release -- --ignored thousand`.
#[test]
#[ignore]
fn thousand_member_group_wait_returns_after_the_last_exit() {
    let d = Daemon::start();
    let ids: Vec<String> = (0..1000).map(|_| gated(&d, "big", 0)).collect();
    let waiter = d.cli_bg(&[
        "stream",
        "wait",
        "--group",
        "big",
        "--all",
        "exited",
        "--timeout",
        "5m",
    ]);
    d.wait_stat("waiters", 1);
    for id in &ids[..999] {
        d.ok(
            "sessions.action",
            json!({"session_id": id, "action": "submit", "input": ""}),
        );
    }
    wait_for("999 exits", Duration::from_secs(60), || {
        let exited = d.ok("sessions.list", json!({"group": "big"}))["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["lifecycle"] == "exited")
            .count();
        (exited == 999).then_some(())
    });
    assert!(!waiter.is_finished());
    release(&d, &ids[999]);
    let out = waiter.join().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let _ = T;
}

/// Issue 22: a group wait on a group with no members says so, and `--require-members`
/// refuses it (not_found, exit 1) instead of matching at once.
#[test]
fn group_wait_on_an_empty_group_says_so_or_fails_when_members_are_required() {
    let d = Daemon::start();
    let out = d.cli(&["stream", "wait", "--group", "nobody", "--all", "exited"]);
    assert_eq!(out.status.code(), Some(0));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["result"]["outcome"], "matched");
    assert_eq!(answer["result"]["member_count"], 0);
    assert!(answer["result"]["note"]
        .as_str()
        .unwrap()
        .contains("no members"));

    let out = d.cli(&[
        "stream",
        "wait",
        "--group",
        "nobody",
        "--all",
        "exited",
        "--require-members",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "not_found");
    assert!(err["error"]["remedy"].is_string());

    // A group with a member: required and present, the wait works as before.
    d.create(json!({"command": "exit 0", "group": "some"}));
    let out = d.cli(&[
        "stream",
        "wait",
        "--group",
        "some",
        "--all",
        "exited",
        "--require-members",
        "--timeout",
        "10s",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["result"]["member_count"], 1);
    assert!(answer["result"].get("note").is_none());
    // --require-members belongs to --all.
    let out = d.cli(&["stream", "wait", "--event", "e", "--require-members"]);
    assert_eq!(out.status.code(), Some(2));
}
