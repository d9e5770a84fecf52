//! Hostile callers, output trust and policy gates (issue 18, items 11–17): each test drives
//! the real daemon the way the outside review attacked it, and fails on the code before the
//! fix.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// A daemon whose policy file is exactly `policy` (the harness's `reader` source is not
/// added).
fn daemon_with_policy(policy: &Value) -> Daemon {
    daemon_with_policy_text(&policy.to_string())
}

fn daemon_with_policy_text(text: &str) -> Daemon {
    let tmp = tempfile::Builder::new()
        .prefix("maxx-gates")
        .tempdir()
        .unwrap();
    let file = tmp.path().join("policy.json");
    std::fs::write(&file, text).unwrap();
    let d = Daemon::start_with_env(&[("MAXX_CONTROL_POLICY_FILE", file.display().to_string())]);
    // The file must outlive the daemon, which reads it once at start.
    std::mem::forget(tmp);
    d
}

fn source(id: &str, kind: &str, allow: &[&str], confirm: &[&str]) -> Value {
    json!({"id": id, "kind": kind, "allow": allow, "confirm": confirm, "confirm_scope": "always"})
}

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// A request as `caller`, with `confirm` set as given.
fn call_confirm(d: &Daemon, caller: &str, method: &str, params: Value, confirm: bool) -> Value {
    let req = json!({"token": d.token(), "method": method, "params": params,
                     "caller": caller, "confirm": confirm});
    let mut line = serde_json::to_vec(&req).unwrap();
    line.push(b'\n');
    d.raw(&line)
}

fn assert_refused(r: &Value, code: &str, naming: &str) {
    assert_eq!(r["ok"], false, "expected {code}, got {r}");
    assert_eq!(r["error"]["code"], code, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains(naming), "{naming} not in {message:?}");
    assert!(
        r["error"]["remedy"].as_str().is_some_and(|s| !s.is_empty()),
        "{r}"
    );
}

/// Every character a terminal would act on: C0 (newline aside), DEL, C1.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c != '\n' && (c.is_control()))
        .collect()
}

// ---- 11: terminal injection through the human views ----------------------------------

#[test]
fn human_views_escape_control_characters_and_json_keeps_them() {
    let d = Daemon::start();
    let title = "\x1b]0;PWNED\x07\x1b[2J";
    let summary = "ok \x1b]52;c;cHduZWQ=\x07 done";
    let command = "sleep 60 #\x1b[H\u{9b}2J";
    let a = sid(&d.create(json!({
        "title": title, "command": "sleep 60",
        "metadata": {"note": "x\u{9b}31mred\x7f", "k": "\x1bP+q\x1b\\"}
    })));
    d.ok(
        "sessions.set-summary",
        json!({"session_id": a, "summary": summary}),
    );
    // Without a title, the command is shown in its place.
    let b = sid(&d.create(json!({"command": command})));
    let run = |args: &[&str]| -> String {
        let out = std::process::Command::new(maxx_bin())
            .args(args)
            .env("MAXX_CONTROL_DIR", &d.control)
            .env("COLUMNS", "400")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "maxx {args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    for args in [&["ls"][..], &["ls", "--wide"], &["status"]] {
        let text = run(args);
        assert_eq!(
            raw_controls(&text),
            Vec::<char>::new(),
            "maxx {args:?} printed raw control characters:\n{text:?}"
        );
    }
    let wide = run(&["ls", "--wide"]);
    assert!(wide.contains(r"\x1b]0;PWNED\x07\x1b[2J"), "{wide}");
    assert!(wide.contains(r"\x1b]52;c;cHduZWQ=\x07"), "{wide}");
    assert!(wide.contains(r"[note=x\u{9b}31mred\x7f]"), "{wide}");
    assert!(wide.contains(r"sleep 60 #\x1b[H\u{9b}2J"), "{wide}");
    // --json and noun-verb JSON: verbatim once parsed, JSON-escaped on the wire.
    for args in [&["ls", "--json"][..], &["sessions", "list"]] {
        let text = run(args);
        assert_eq!(
            raw_controls(&text),
            Vec::<char>::new(),
            "{args:?}: {text:?}"
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        let list = v.as_array().or_else(|| v["result"]["sessions"].as_array());
        let list = list.unwrap_or_else(|| panic!("no session list in {v}"));
        let rec = list.iter().find(|s| s["session_id"] == a.as_str()).unwrap();
        assert_eq!(rec["title"], title);
        assert_eq!(rec["summary"], summary);
        assert_eq!(rec["metadata"]["note"], "x\u{9b}31mred\x7f");
        let rec = list.iter().find(|s| s["session_id"] == b.as_str()).unwrap();
        assert_eq!(rec["command"], command);
    }
    let got = run(&["sessions", "get", &a]);
    assert_eq!(raw_controls(&got), Vec::<char>::new());
    let v: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(v["result"]["session"]["title"], title);
}

// ---- 12: no secret echoed in an error --------------------------------------------------

#[test]
fn decode_errors_name_the_field_and_type_but_never_the_value() {
    let d = Daemon::start();
    let secret = "API_KEY=hunter2-very-secret";
    let cases = [
        (
            "sessions.create",
            json!({"command": "true", "env": secret}),
            "env",
        ),
        (
            "sessions.create",
            json!({"command": "true", "env": ["A=1", 7_345_113]}),
            "env",
        ),
        (
            "sessions.create",
            json!({"command": "true", "location": "hunter2-very-secret"}),
            "",
        ),
        (
            "sessions.register-current",
            json!({"surface_id": "x", "registration_token": ["hunter2-very-secret"]}),
            "",
        ),
        (
            "sessions.register-current",
            json!({"surface_id": "x", "registration_token": 7_345_113}),
            "registration_token",
        ),
        (
            "sessions.set-summary",
            json!({"session_id": true, "summary": 1.25}),
            "",
        ),
    ];
    for (method, params, field) in cases {
        let r = d.err(method, params.clone(), "invalid_request");
        let message = r["error"]["message"].as_str().unwrap();
        for leak in ["hunter2", "7345113", "1.25"] {
            assert!(
                !message.contains(leak),
                "{method} {params}: {message:?} echoes a value"
            );
        }
        assert!(message.contains(field), "{message:?} does not name {field}");
        assert!(r["error"]["remedy"].is_string(), "{r}");
    }
    let r = d.err(
        "sessions.create",
        json!({"command": "true", "env": secret}),
        "invalid_request",
    );
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("env") && message.contains("a string") && message.contains("sequence"),
        "field and expected type kept: {message:?}"
    );
    // The envelope too: a token of the wrong type is not quoted back.
    let r = d.raw(b"{\"token\": 7345113, \"method\": \"daemon.status\"}\n");
    assert_eq!(r["error"]["code"], "invalid_request", "{r}");
    assert!(!r.to_string().contains("7345113"), "{r}");
}

// ---- 13: literal text through send-keys is input -------------------------------------

#[test]
fn send_keys_with_text_needs_input_send() {
    let d = daemon_with_policy(&json!({"version": 1, "sources": [
        source("keys-only", "token", &["keys:press", "tabs:list"], &[]),
        source("typist", "token", &["keys:press", "input:send", "tabs:list"], &[]),
    ]}));
    // An interactive shell: C-c does not end it.
    let id = sid(&d.create(json!({"command": "sh"})));
    let send = |caller: &str, keys: Value, literal: bool| {
        d.call_as(
            caller,
            "sessions.send-keys",
            json!({"session_id": id, "keys": keys, "literal": literal}),
        )
    };
    // Text, a single character, and --literal (even of a key name) are input.
    for (keys, literal) in [
        (json!(["echo pwned", "Enter"]), false),
        (json!(["l", "s", "Enter"]), false),
        (json!(["S-x"]), false),
        (json!(["Enter"]), true),
    ] {
        let r = send("keys-only", keys.clone(), literal);
        assert_refused(&r, "unauthorized", "input:send");
        let r = send("typist", keys.clone(), literal);
        assert_eq!(r["ok"], true, "{keys}: {r}");
    }
    // Key presses alone still need only keys:press.
    for keys in [
        json!(["C-c"]),
        json!(["Enter", "Up", "Escape", "M-x", "Tab"]),
    ] {
        let r = send("keys-only", keys.clone(), false);
        assert_eq!(r["ok"], true, "{keys}: {r}");
    }
}

// ---- 14: restart with another command starts a new program ---------------------------

#[test]
fn restart_with_a_new_command_needs_tabs_spawn() {
    let d = daemon_with_policy(&json!({"version": 1, "sources": [
        source("restarter", "token", &["tabs:restart", "tabs:list"], &[]),
        source("spawner", "token", &["tabs:restart", "tabs:spawn", "tabs:list"], &[]),
    ]}));
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let restart = |caller: &str, params: Value| {
        let mut p = json!({"session_id": id});
        p.as_object_mut()
            .unwrap()
            .extend(params.as_object().unwrap().clone());
        d.call_as(caller, "sessions.restart", p)
    };
    let r = restart("restarter", json!({"command": "echo pwned; sleep 60"}));
    assert_refused(&r, "unauthorized", "tabs:spawn");
    assert_eq!(d.get(&id)["command"], "sleep 60", "nothing changed");
    // The recorded command, or none (the last one), is a restart.
    for params in [
        json!({}),
        json!({"command": "sleep 60"}),
        json!({"last_command": true}),
    ] {
        let r = restart("restarter", params.clone());
        assert_eq!(r["ok"], true, "{params}: {r}");
    }
    let r = restart("spawner", json!({"command": "sleep 61"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(d.get(&id)["command"], "sleep 61");
    // An unknown id is still not_found for a caller that may restart.
    let r = d.call_as(
        "restarter",
        "sessions.restart",
        json!({"session_id": "2B0E0000-0000-4000-8000-000000000000", "command": "true"}),
    );
    assert_eq!(r["error"]["code"], "not_found", "{r}");
}

// ---- 15: attach shows the screen -----------------------------------------------------

fn attach_first_line(d: &Daemon, caller: Option<&str>, id: &str) -> Value {
    let mut req = json!({"token": d.token(), "method": "sessions.attach",
                         "params": {"session_id": id}});
    if let Some(c) = caller {
        req["caller"] = json!(c);
    }
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let mut line = serde_json::to_vec(&req).unwrap();
    line.push(b'\n');
    s.write_all(&line).unwrap();
    let mut first = String::new();
    BufReader::new(&s).read_line(&mut first).unwrap();
    serde_json::from_str(&first).unwrap_or_else(|e| panic!("{first:?}: {e}"))
}

#[test]
fn attach_needs_output_read_and_the_remedy_is_one_policy_line() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    // The default local source may not read the screen, so it may not attach.
    let r = attach_first_line(&d, None, &id);
    assert_refused(&r, "unauthorized", "output:read");
    let remedy = r["error"]["remedy"].as_str().unwrap();
    let snippet = r#"{"id":"local-attach","kind":"local","allow":["surface:attach","output:read","tabs:list"]}"#;
    assert!(remedy.contains(snippet), "{remedy}");
    assert!(remedy.contains("--as local-attach"), "{remedy}");
    // The policy table says it too.
    let check = d.ok(
        "policy.check",
        json!({"capability": "surface:attach", "target": id}),
    );
    assert_eq!(check["decision"], "allow");

    // Following the remedy works: that one line, then --as local-attach.
    let snippet: Value = serde_json::from_str(snippet).unwrap();
    let d = daemon_with_policy(&json!({"version": 1, "sources": [snippet]}));
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let r = attach_first_line(&d, Some("local-attach"), &id);
    assert_eq!(r["ok"], true, "{r}");
    // A source with surface:attach but not output:read is refused.
    let d = daemon_with_policy(&json!({"version": 1, "sources": [
        source("blind", "local", &["surface:attach", "tabs:list"], &[]),
    ]}));
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let r = attach_first_line(&d, Some("blind"), &id);
    assert_refused(&r, "unauthorized", "output:read");
}

// ---- 16: a signal that ends the program is a close -----------------------------------

#[test]
fn interrupt_with_an_ending_signal_needs_tabs_close() {
    let d = daemon_with_policy(&json!({"version": 1, "sources": [
        source("keys-only", "token", &["keys:press", "tabs:list"], &[]),
        source("careful", "local", &["keys:press", "tabs:list"], &["tabs:close"]),
    ]}));
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    let interrupt = |caller: &str, signal: Option<&str>, confirm: bool| {
        let mut p = json!({"session_id": id, "action": "interrupt"});
        if let Some(s) = signal {
            p["signal"] = json!(s);
        }
        call_confirm(&d, caller, "sessions.action", p, confirm)
    };
    for signal in ["SIGKILL", "SIGTERM", "SIGHUP", "SIGQUIT", "KILL"] {
        let r = interrupt("keys-only", Some(signal), false);
        assert_refused(&r, "unauthorized", "tabs:close");
        let r = interrupt("careful", Some(signal), false);
        assert_eq!(r["error"]["code"], "confirmation_required", "{r}");
        assert!(r["error"]["remedy"].is_string());
    }
    assert_eq!(d.get(&id)["lifecycle"], "running", "nothing was signalled");
    // Ctrl-C and SIGINT remain key presses.
    for signal in [None, Some("SIGINT")] {
        let id2 = sid(&d.create(json!({"command": "sleep 60"})));
        let mut p = json!({"session_id": id2, "action": "interrupt"});
        if let Some(s) = signal {
            p["signal"] = json!(s);
        }
        let r = d.call_as("keys-only", "sessions.action", p);
        assert_eq!(r["ok"], true, "{signal:?}: {r}");
    }
    // Confirmed, the close goes through and the program ends.
    let r = interrupt("careful", Some("SIGKILL"), true);
    assert_eq!(r["ok"], true, "{r}");
    wait_for("the program to end", T, || {
        (d.get(&id)["lifecycle"] == "exited").then_some(())
    });
}

// ---- 17: a rejected policy file shows in `maxx status` -------------------------------

#[test]
fn a_rejected_policy_file_is_visible_in_status() {
    let d = daemon_with_policy_text(
        r#"{"version": 1, "sources": [{"id": "x", "kind": "local", "allow": ["tabs:explode"]}]}"#,
    );
    let out = d.cli(&["status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("policy: REJECTED"), "{text}");
    assert!(text.contains("policy.json"), "{text}");
    assert!(text.contains("tabs:explode"), "names why: {text}");
    let status = d.cli_ok(&["status", "--json"]);
    assert_eq!(status["policy"]["status"], "rejected", "{status}");
    assert!(!status["policy"]["reasons"].as_array().unwrap().is_empty());
    // The noun-verb answer carries it as well.
    let status = d.ok("daemon.status", json!({}));
    assert_eq!(status["policy"]["status"], "rejected", "{status}");
    // A loaded file is reported as loaded, and the human view stays quiet about it.
    let d = Daemon::start();
    assert_eq!(
        d.ok("daemon.status", json!({}))["policy"]["status"],
        "loaded"
    );
    let text = String::from_utf8(d.cli(&["status"]).stdout).unwrap();
    assert!(!text.contains("REJECTED"), "{text}");
}
