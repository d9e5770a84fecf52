//! Selectors and self-targeting (issue 22): a session is named by its id in any case, a
//! unique prefix of at least 4 hex digits (what `maxx ls` shows) or `%title`, resolved by
//! the daemon; inside a session, the declaration and read verbs default to that session.

use crate::common::{maxx_bin, wait_for, Daemon};
use serde_json::{json, Value};
use std::time::Duration;

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// Exit code, stdout JSON (or null) and stderr JSON (or null) of a CLI run.
fn run(d: &Daemon, args: &[&str]) -> (i32, Value, Value) {
    let out = d.cli(args);
    let parse = |b: &[u8]| serde_json::from_slice(b).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        parse(&out.stdout),
        parse(&out.stderr),
    )
}

#[test]
fn ids_prefixes_and_titles_name_one_session_or_fail_with_a_typed_error() {
    let d = Daemon::start();
    let alpha = sid(&d.create(json!({"command": "sleep 60", "title": "alpha"})));
    let beta1 = sid(&d.create(json!({"command": "sleep 60", "title": "beta"})));
    let beta2 = sid(&d.create(json!({"command": "sleep 60", "title": "beta"})));

    // The full id in lower case, the 8 characters `ls` shows, and the exact title.
    let short = alpha[..8].to_lowercase();
    for sel in [alpha.to_lowercase(), short.clone(), "%alpha".to_string()] {
        let (code, out, _) = run(&d, &["sessions", "get", &sel]);
        assert_eq!(code, 0, "{sel}");
        assert_eq!(out["result"]["session"]["session_id"], alpha.as_str());
    }
    // Over the socket too, and in every field that names a session.
    let r = d.ok("sessions.get", json!({"session_id": short}));
    assert_eq!(r["session"]["session_id"], alpha.as_str());
    let child = sid(&d.create(json!({"command": "sleep 60", "parent": "%alpha"})));
    assert_eq!(d.get(&child)["parent_id"], alpha.as_str());
    d.ok(
        "sessions.set-parent",
        json!({"session_id": &child[..6], "parent": ""}),
    );
    assert_eq!(d.get(&child)["parent_id"], Value::Null);

    // A write through a selector lands on that session.
    let (code, _, _) = run(&d, &["sessions", "set-result", &short, "--result", "done"]);
    assert_eq!(code, 0);
    assert_eq!(d.get(&alpha)["result"], "done");

    // Two sessions share the title: `ambiguous`, exit 2, both listed, nothing changed.
    let events_before = d.ok("sessions.events", json!({"session_id": beta1}))["events"]
        .as_array()
        .unwrap()
        .len();
    let (code, out, err) = run(&d, &["sessions", "set-result", "%beta", "--result", "x"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(out, Value::Null, "nothing on stdout");
    assert_eq!(err["error"]["code"], "ambiguous");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&beta1) && message.contains(&beta2),
        "{message}"
    );
    assert!(message.contains("running"), "{message}");
    assert!(err["error"]["remedy"].is_string());
    for id in [&beta1, &beta2] {
        assert_eq!(d.get(id)["result"], Value::Null);
    }
    let events_after = d.ok("sessions.events", json!({"session_id": beta1}))["events"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(events_before, events_after);

    // No match: `not_found`, exit 1. Too short to be a prefix: `invalid_request`.
    let (code, _, err) = run(&d, &["sessions", "get", "%gamma"]);
    assert_eq!(
        (code, err["error"]["code"].as_str()),
        (1, Some("not_found"))
    );
    assert!(err["error"]["remedy"].is_string());
    let r = d.call("sessions.get", json!({"session_id": "abc"}));
    assert_eq!(r["error"]["code"], "invalid_request", "{r}");
    assert!(r["error"]["remedy"].is_string());
    // A surface id is not a session selector.
    let r = d.call(
        "stream.wait",
        json!({"surface_id": &alpha[..8], "event": "x", "timeout": 1}),
    );
    assert_eq!(r["error"]["code"], "invalid_request", "{r}");
}

/// The policy decides before any selector is resolved: a caller it refuses learns nothing
/// about which sessions exist.
#[test]
fn a_refused_caller_learns_nothing_from_a_selector() {
    let d = Daemon::start();
    d.create(json!({"command": "sleep 60", "title": "secret"}));
    for sel in ["%secret", "%nothing"] {
        let r = d.call_as(
            "readonly-external",
            "sessions.set-result",
            json!({"session_id": sel, "result": "x"}),
        );
        assert_eq!(r["error"]["code"], "unauthorized", "{sel}: {r}");
    }
}

#[test]
fn inside_a_session_declarations_and_reads_default_to_it_and_ending_verbs_never_do() {
    let d = Daemon::start();
    let bin = maxx_bin();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let log = log.display();
    // The program inside declares its result and reads itself, naming no session; then it
    // tries to cancel itself without naming one, which must be refused as a usage error.
    let script = format!(
        "{{ {bin} sessions set-result --result from-inside >/dev/null; echo set=$?; \
         {bin} sessions get | grep -c from-inside; \
         {bin} sessions cancel >/dev/null 2>&1; echo cancel=$?; }} >{log}.tmp 2>&1; \
         mv {log}.tmp {log}; exec sleep 60"
    );
    let id = sid(&d.create(json!({"command": script})));
    let path = dir.path().join("log");
    let text = wait_for("the script to finish", Duration::from_secs(30), || {
        std::fs::read_to_string(&path).ok()
    });
    assert!(text.contains("set=0"), "{text}");
    assert!(text.lines().any(|l| l.trim() == "1"), "get saw it: {text}");
    assert!(text.contains("cancel=2"), "{text}");
    let v = d.get(&id);
    assert_eq!(v["result"], "from-inside");
    assert_eq!(
        v["lifecycle"], "running",
        "cancel never defaults to the caller"
    );
    // Outside a session the id is required: usage error, nothing sent.
    let (code, _, err) = run(&d, &["sessions", "set-result", "--result", "x"]);
    assert_eq!(code, 2, "{err}");
}
