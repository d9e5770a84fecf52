//! Screen readback and input (issue 10): snapshot, dump, inspect, wait for text, run,
//! send-keys, paste, resize — on real programs in real PTYs.

use crate::common::*;
use crate::maxx_snapshot;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

fn snapshot(d: &Daemon, id: &str, extra: Value) -> Value {
    let mut p = json!({ "session_id": id });
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    d.ok_as(READER, "sessions.snapshot", p)
}

/// Wait until the screen shows `text` (through the daemon's own wait).
fn until(d: &Daemon, id: &str, text: &str) {
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": text, "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched", "{text:?} never appeared");
}

#[test]
fn snapshot_shows_printed_text_and_the_cursor() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({
        "command": "printf 'hello\\nworld\\033]2;snap\\007'; exec sleep 30", "cols": 20, "rows": 4
    })));
    until(&d, &id, "world");
    let s = snapshot(&d, &id, json!({}));
    assert_eq!(s["lines"], json!(["hello", "world", "", ""]));
    assert_eq!(s["cursor"], json!({"x": 5, "y": 1, "visible": true}));
    assert_eq!(s["title"], "snap");
    assert_eq!(s["cols"], 20);
    maxx_snapshot!("screen_state", s);
    let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": id}));
    assert_eq!(dump["text"], "hello\nworld");
}

#[test]
fn soft_wrap_unwrap_cells_and_scrollback() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({
        "command": "printf 'abcdefghijKLM\\n'; for i in 1 2 3 4 5 6; do echo line$i; done; printf '\\033[1;31mR\\033[0m'; exec sleep 30",
        "cols": 10, "rows": 4, "scrollback_lines": 3
    })));
    until(&d, &id, "line6");
    let s = snapshot(&d, &id, json!({"scrollback": 0}));
    // 9 rows of output (the first wraps) in a 4-row screen with 3 lines of history.
    assert_eq!(s["lines"], json!(["line4", "line5", "line6", "R"]));
    assert_eq!(
        s["scrollback"],
        json!(["line1", "line2", "line3"]),
        "history is bounded"
    );
    let s = snapshot(&d, &id, json!({"scrollback": 10}));
    assert_eq!(
        s["truncated"], true,
        "asked for more history than is retained"
    );
    let cells = snapshot(&d, &id, json!({"cells": true}))["cells"].clone();
    assert_eq!(cells.as_array().unwrap().len(), 1);
    assert_eq!(cells[0]["text"], "R");
    assert_eq!(cells[0]["style"]["bold"], true);
    assert_eq!(cells[0]["style"]["fg"], json!({"palette": {"index": 1}}));
    assert_eq!(cells[0]["row"], 3);
    let id2 = sid(&d.create(
        json!({"command": "printf 'abcdefghijKLM'; exec sleep 30", "cols": 10, "rows": 3}),
    ));
    until(&d, &id2, "KLM");
    let s = snapshot(&d, &id2, json!({}));
    assert_eq!(s["lines"], json!(["abcdefghij", "KLM", ""]));
    assert_eq!(s["soft_wrap"]["lines"], json!([0]));
    let s = snapshot(&d, &id2, json!({"unwrap": true}));
    assert_eq!(s["lines"], json!(["abcdefghijKLM", ""]));
    d.err(
        "sessions.snapshot",
        json!({"session_id": id2, "cells": true, "unwrap": true}),
        "invalid_request",
    );
}

#[test]
fn wait_until_returns_on_later_text_and_times_out_otherwise() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 1; echo READY-NOW; exec sleep 30"})));
    let t0 = Instant::now();
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--until",
        "READY-NOW",
        "--timeout",
        "10s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(t0.elapsed() >= Duration::from_millis(900));
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--regex",
        "^READY-[A-Z]+$",
        "--timeout",
        "5s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "already on screen: level-triggered"
    );
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--until",
        "NEVER",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(out.status.code(), Some(124));
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--regex",
        "(unclosed",
        "--timeout",
        "5s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an invalid regex is a usage error"
    );
    assert!(out.stdout.is_empty());
    let r = d.call_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "regex": "(unclosed"}),
    );
    assert_eq!(r["error"]["code"], "invalid_request");
    assert_eq!(d.stat("waiters"), 0);
}

#[test]
fn wait_until_sees_text_that_scrolled_past_in_one_burst() {
    let d = Daemon::start();
    let id = sid(
        &d.create(json!({"command": "read x; echo NEEDLE; seq 1 500; exec sleep 30", "rows": 5}))
    );
    let waiter = d.cli_bg(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--until",
        "NEEDLE",
        "--timeout",
        "10s",
    ]);
    d.wait_stat("waiters", 1);
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    assert_eq!(waiter.join().unwrap().status.code(), Some(0));
}

#[test]
fn run_mirrors_the_exit_code_and_captures_output() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sh"})));
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "run",
        &id,
        "echo captured; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["output"], "captured");
    assert_eq!(v["result"]["exit_code"], 7);
    assert_eq!(v["result"]["truncated"], false);
    maxx_snapshot!("run_result", {
        let mut r = v["result"].clone();
        r["duration_ms"] = json!("[ms]");
        r
    });
    // A command that mentions the marker words cannot confuse it.
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "run",
        &id,
        "echo __MAXX_END __MAXX_BEGIN; true",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["output"], "__MAXX_END __MAXX_BEGIN");
    // Past its budget: 125, no JSON on stdout.
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "run",
        "--timeout",
        "500ms",
        &id,
        "sleep 3",
    ]);
    assert_eq!(out.status.code(), Some(125));
    assert!(out.stdout.is_empty());
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "timeout");
}

#[test]
fn send_keys_honours_application_cursor_mode() {
    let d = Daemon::start();
    let file = d.path("keys.hex");
    // Turn on DECCKM, announce readiness, then record the raw bytes of the next 6 keys.
    let script = format!(
        "stty raw -echo; printf '\\033[?1h\\033]2;ready\\007'; dd bs=1 count=6 2>/dev/null | od -An -tx1 > {}",
        file.display()
    );
    let id = sid(&d.create(json!({ "command": script })));
    until_title(&d, &id, "ready");
    let out = d.cli(&["sessions", "send-keys", &id, "Up", "C-c", "M-x"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let hex = wait_for("the recorded bytes", T, || {
        read(&file).filter(|s| s.contains("78"))
    });
    assert_eq!(
        hex.split_whitespace().collect::<Vec<_>>(),
        ["1b", "4f", "41", "03", "1b", "78"]
    );
    // Unknown key names are refused before anything is written.
    let out = d.cli(&["sessions", "send-keys", &id, "Up", "Entr"]);
    assert_eq!(out.status.code(), Some(2));
    d.err(
        "sessions.send-keys",
        json!({"session_id": id, "keys": ["F13"]}),
        "invalid_request",
    );
}

fn until_title(d: &Daemon, id: &str, title: &str) {
    wait_for("the title escape", T, || {
        (d.get(id)["terminal_title"] == title).then_some(())
    });
}

#[test]
fn paste_brackets_only_when_the_program_asked() {
    let d = Daemon::start();
    let plain = d.path("plain.bin");
    let bracketed = d.path("bracketed.bin");
    let a = sid(&d.create(json!({"command": format!("stty raw -echo; printf '\\033]2;ready\\007'; dd bs=1 count=2 of={} 2>/dev/null", plain.display())})));
    let b = sid(&d.create(json!({"command": format!("stty raw -echo; printf '\\033[?2004h\\033]2;ready\\007'; dd bs=1 count=14 of={} 2>/dev/null", bracketed.display())})));
    until_title(&d, &a, "ready");
    until_title(&d, &b, "ready");
    d.ok("sessions.paste", json!({"session_id": a, "text": "hi"}));
    d.ok("sessions.paste", json!({"session_id": b, "text": "hi"}));
    let p = wait_for("plain bytes", T, || {
        std::fs::read(&plain).ok().filter(|b| b.len() == 2)
    });
    assert_eq!(p, b"hi");
    let q = wait_for("bracketed bytes", T, || {
        std::fs::read(&bracketed).ok().filter(|b| b.len() == 14)
    });
    assert_eq!(q, b"\x1b[200~hi\x1b[201~");
}

#[test]
fn resize_is_seen_by_the_child() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sh", "cols": 80, "rows": 24})));
    let r = d.cli_ok(&["sessions", "resize", &id, "--cols", "100", "--rows", "30"]);
    assert_eq!(r["result"]["applied"], json!({"cols": 100, "rows": 30}));
    assert_eq!(r["result"]["held"], true);
    let run = d.ok_as(
        READER,
        "sessions.run",
        json!({"session_id": id, "command": "stty size", "timeout": 10}),
    );
    assert_eq!(run["output"], "30 100");
    assert_eq!(d.get(&id)["cols"], 100);
    let s = snapshot(&d, &id, json!({}));
    assert_eq!(s["rows"], 30);
    d.err(
        "sessions.resize",
        json!({"session_id": id, "cols": 0, "rows": 5}),
        "invalid_request",
    );
}

#[test]
fn inspect_reports_modes_and_the_foreground_job() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "printf '\\033[?1049h\\033[?2004h\\033]2;tui\\007'; exec sleep 30", "cols": 30, "rows": 6})));
    until_title(&d, &id, "tui");
    let doc = d.ok_as(READER, "sessions.inspect", json!({"session_id": id}));
    assert_eq!(doc["alt_screen"], true);
    assert_eq!(doc["bracketed_paste"], true);
    assert_eq!(doc["app_cursor"], false);
    assert_eq!(doc["grid"], json!({"cols": 30, "rows": 6}));
    assert_eq!(doc["foreground"]["command"], "sleep 30");
    assert_eq!(doc["exited"], false);
    maxx_snapshot!("inspect", {
        let mut doc = doc.clone();
        doc["foreground"]["pid"] = json!("[pid]");
        doc["backlog_bytes"] = json!("[bytes]");
        doc
    });
}

#[test]
fn title_and_osc133_are_mechanical_events() {
    let d = Daemon::start();
    let mut s = d.open_stream("stream.watch", json!({}));
    s.next();
    let id = sid(&d.create(json!({"command": "read x; printf '\\033]2;building\\007\\033]133;C\\007\\033]133;D;3\\007'; exec sleep 30"})));
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    let mut names = Vec::new();
    while names.len() < 4 {
        let e = s.next();
        names.push((
            e["event"]["name"].as_str().unwrap().to_string(),
            e["event"]["payload"].clone(),
        ));
    }
    assert_eq!(names[0].0, "created");
    assert_eq!(
        names[1],
        ("title".to_string(), json!({"title": "building"}))
    );
    assert_eq!(names[2], ("command.started".to_string(), Value::Null));
    assert_eq!(
        names[3],
        ("command.finished".to_string(), json!({"exit_code": 3}))
    );
}

#[test]
fn every_read_is_denied_without_output_read() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sh"})));
    let reads = [
        ("sessions.snapshot", json!({"session_id": id})),
        ("sessions.dump", json!({"session_id": id})),
        ("sessions.inspect", json!({"session_id": id})),
        (
            "sessions.wait",
            json!({"session_id": id, "until": "x", "timeout": 1}),
        ),
        (
            "sessions.run",
            json!({"session_id": id, "command": "true", "timeout": 1}),
        ),
    ];
    for (method, params) in reads {
        for caller in ["local-cli", "readonly-external"] {
            let r = d.call_as(caller, method, params.clone());
            assert_eq!(
                r["error"]["code"], "unauthorized",
                "{method} as {caller}: {r}"
            );
        }
        d.err(method, params.clone(), "unauthorized");
    }
    let out = d.cli(&["sessions", "snapshot", &id]);
    assert_eq!(out.status.code(), Some(1));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "unauthorized");
}

/// The OSC 133 semantic of each column of `row` in a sparse cells array: `P` prompt, `I`
/// input, `.` none (trailing columns without one trimmed).
fn semantics(cells: &Value, row: usize) -> String {
    let mut out = Vec::new();
    for c in cells.as_array().unwrap() {
        if c["row"] != row {
            continue;
        }
        let col = c["col"].as_u64().unwrap() as usize;
        if out.len() <= col {
            out.resize(col + 1, '.');
        }
        out[col] = match c["semantic"].as_str() {
            Some("Prompt") => 'P',
            Some("Input") => 'I',
            None => '.',
            Some(other) => panic!("unexpected semantic {other:?}"),
        };
    }
    let s: String = out.into_iter().collect();
    s.trim_end_matches('.').to_string()
}

/// Issue 10: `--cells` reports the OSC 133 regions the program marked (A prompt, B input,
/// C output), and the marks stay with their cells once they scroll into history.
#[test]
fn cells_carry_osc133_prompt_and_input_into_history() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({
        "command": "printf '\\033]133;A\\007$ \\033]133;B\\007ls\\033]133;C\\007\\nout\\n\\033]133;D;0\\007'; \
                    read x; seq 1 30; echo DONE; exec sleep 30",
        "cols": 12, "rows": 4
    })));
    until(&d, &id, "out");
    let s = snapshot(&d, &id, json!({"cells": true}));
    assert_eq!(s["lines"][0], "$ ls");
    assert_eq!(semantics(&s["cells"], 0), "PPII", "{}", s["cells"]);
    assert_eq!(semantics(&s["cells"], 1), "", "output has no semantic");
    // A cell with a semantic is listed even in the default style.
    assert_eq!(s["cells"][2]["text"], "l");
    assert_eq!(s["cells"][2]["style"]["fg"], "default");
    assert_eq!(s["scrollback_cells"], json!([]));
    maxx_snapshot!("screen_cells_semantic", s);

    // Push the marked row far into history.
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    until(&d, &id, "DONE");
    let s = snapshot(&d, &id, json!({"cells": true, "scrollback": 0}));
    let history = s["scrollback"].as_array().unwrap();
    let at = history
        .iter()
        .position(|l| l == "$ ls")
        .unwrap_or_else(|| panic!("the prompt row is in history: {history:?}"));
    assert!(history.len() - at > 20, "scrolled well past: {history:?}");
    assert_eq!(semantics(&s["scrollback_cells"], at), "PPII");
    let rows: Vec<&Value> = s["scrollback_cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["row"])
        .collect();
    assert!(rows.iter().all(|r| **r == at), "only that row: {rows:?}");
    assert_eq!(s["cells"], json!([]), "nothing marked in the viewport");
    // Without `cells`, neither key carries cells.
    let s = snapshot(&d, &id, json!({"scrollback": 0}));
    assert_eq!(s["cells"], Value::Null);
    assert!(s.get("scrollback_cells").is_none());
}

/// A program that prints a marked prompt, "types" `echo NEEDLE` into its input region, and
/// prints NEEDLE as output only once it reads a line.
const TYPED_NEEDLE: &str =
    "printf '\\033]133;A\\007$ \\033]133;B\\007echo NEEDLE\\033]133;C\\007\\n'; \
                            read x; echo NEEDLE; exec sleep 30";

/// Issue 10: `wait --output-only` does not match text that is only in an input region, and
/// does once it is output.
#[test]
fn wait_output_only_ignores_input_lines() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({ "command": TYPED_NEEDLE })));
    // Without --output-only the input line matches: the text is on the screen.
    until(&d, &id, "$ echo NEEDLE");
    let wait = |timeout: &str, extra: &[&str]| {
        let mut args = vec![
            "--as",
            READER,
            "sessions",
            "wait",
            &id,
            "--until",
            "NEEDLE",
            "--timeout",
            timeout,
        ];
        args.extend(extra);
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let args = wait("300ms", &["--output-only"]);
    let out = d.cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["outcome"], "timeout");
    assert_eq!(v["result"]["output_only_filtered"], true);
    assert!(out.stderr.is_empty(), "no note when marks exist: {out:?}");

    let args = wait("10s", &["--output-only"]);
    let waiter = d.cli_bg(&args.iter().map(String::as_str).collect::<Vec<_>>());
    d.wait_stat("waiters", 1);
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    let out = waiter.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["outcome"], "matched");
    assert_eq!(v["result"]["output_only_filtered"], true);
    // Level-triggered on the wire too, and for a regex.
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "regex": "^NEEDLE$", "output_only": true, "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched");
    assert_eq!(r["output_only_filtered"], true);
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": "NEEDLE", "timeout": 10}),
    );
    assert!(
        r.get("output_only_filtered").is_none(),
        "only when asked: {r}"
    );
    assert_eq!(d.stat("waiters"), 0);
}

/// The same with a real shell whose prompt carries the marks: what the user types is echoed
/// by readline inside the input region, and the command's output is not. The wait is pending
/// while the typing arrives, so this is the path that scans each new chunk.
#[test]
fn wait_output_only_with_a_real_shell_prompt() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({
        "command": "exec bash --norc --noprofile",
        "env": [
            "PS1=\\[\\e]133;A\\a\\]$ \\[\\e]133;B\\a\\]",
            "PS0=\\e]133;C\\a",
        ],
    })));
    until(&d, &id, "$");
    let waiter = d.cli_bg(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--regex",
        "NEE.*DLE-2",
        "--output-only",
        "--timeout",
        "10s",
    ]);
    d.wait_stat("waiters", 1);
    let out = d.cli(&["sessions", "send-keys", &id, "echo NEE''DLE-2"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    until(&d, &id, "$ echo NEE''DLE-2");
    assert_eq!(d.stat("waiters"), 1, "typed input did not satisfy the wait");
    let s = snapshot(&d, &id, json!({"cells": true}));
    let row = s["lines"]
        .as_array()
        .unwrap()
        .iter()
        .position(|l| l == "$ echo NEE''DLE-2")
        .unwrap();
    assert_eq!(semantics(&s["cells"], row), format!("PP{}", "I".repeat(15)));
    d.cli(&["sessions", "send-keys", &id, "Enter"]);
    let out = waiter.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = snapshot(&d, &id, json!({"cells": true}));
    let lines = s["lines"].as_array().unwrap();
    assert_eq!(lines[row + 1], "NEEDLE-2");
    assert_eq!(semantics(&s["cells"], row + 1), "", "output");
    assert_eq!(semantics(&s["cells"], row + 2), "PP", "the next prompt");
}

/// With no OSC 133 marks, `--output-only` filters nothing, and the CLI says so on stderr.
#[test]
fn wait_output_only_without_marks_filters_nothing_and_says_so() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "echo PLAIN-TEXT; exec sleep 30"})));
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--until",
        "PLAIN-TEXT",
        "--output-only",
        "--timeout",
        "10s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["outcome"], "matched");
    assert_eq!(v["result"]["output_only_filtered"], false);
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.contains("--output-only filtered nothing"),
        "the note: {note:?}"
    );
}

/// `--output-only` needs a text condition: refused before any wait, on the CLI (usage, exit
/// 2) and on the wire (`invalid_request`).
#[test]
fn output_only_without_a_text_condition_is_refused() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "exec sleep 30"})));
    for cond in [["--lifecycle", "exited"], ["--event", "done"]] {
        let out = d.cli(&[
            "--as",
            READER,
            "sessions",
            "wait",
            &id,
            cond[0],
            cond[1],
            "--output-only",
            "--timeout",
            "30s",
        ]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty());
        assert!(String::from_utf8_lossy(&out.stderr).contains("--output-only"));
    }
    for cond in [json!({"lifecycle": "exited"}), json!({"state": "s"})] {
        let mut p = cond.clone();
        p["session_id"] = json!(id);
        p["output_only"] = json!(true);
        p["timeout"] = json!(30);
        let r = d.call_as(READER, "sessions.wait", p);
        assert_eq!(r["error"]["code"], "invalid_request", "{r}");
    }
    assert_eq!(d.stat("waiters"), 0, "no wait was ever started");
}
