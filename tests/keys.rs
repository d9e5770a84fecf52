//! Keys and safe input (issue 17): every chord seen as bytes by a hex-dumping program in a
//! real PTY, chords refused before anything is written, `--literal`, the kitty keyboard
//! protocol once the program enabled it, IUTF8 in cooked mode, and `run` refusing to type
//! into a program that is not the session's shell.

use crate::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// A program that puts the terminal in raw mode (output processing kept, so lines read
/// back cleanly), prints `setup`, sets the title `ready`, then prints every read's bytes
/// as hex.
fn hex_reader(d: &Daemon, setup: &str) -> String {
    let script = format!(
        "stty raw -echo opost; printf '{setup}\\033]2;ready\\007'; \
         while :; do dd bs=512 count=1 2>/dev/null | od -An -tx1 -v | tr -d '\\n'; echo; done"
    );
    let id = sid(&d.create(json!({"command": script, "cols": 120, "rows": 40})));
    wait_for("the reader's title", T, || {
        (d.get(&id)["terminal_title"] == "ready").then_some(())
    });
    id
}

/// Every byte the reader has printed so far, in order.
fn bytes_seen(d: &Daemon, id: &str) -> Vec<String> {
    let dump = d.ok_as(
        READER,
        "sessions.dump",
        json!({"session_id": id, "scrollback": true}),
    );
    dump["text"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn hex(bytes: &[u8]) -> Vec<String> {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Wait (with a deadline) until the reader has seen exactly `expected`.
fn until_seen(d: &Daemon, id: &str, expected: &[String], what: &str) {
    let deadline = Instant::now() + T;
    let mut backoff = Duration::from_millis(2);
    loop {
        let seen = bytes_seen(d, id);
        if seen == expected {
            return;
        }
        if Instant::now() > deadline {
            panic!("{what}: the reader saw {seen:?}, expected {expected:?}");
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_millis(50));
    }
}

/// Press each word alone through the CLI and check the bytes the program read.
fn press_all(d: &Daemon, id: &str, cases: &[(&str, &[u8])]) {
    let mut expected = Vec::new();
    for (word, bytes) in cases {
        let out = d.cli(&["sessions", "send-keys", id, word]);
        assert_eq!(out.status.code(), Some(0), "send-keys {word}: {out:?}");
        expected.extend(hex(bytes));
        until_seen(d, id, &expected, word);
    }
}

#[test]
fn every_chord_reaches_the_program_as_xterm_encodes_it() {
    let d = Daemon::start();
    let id = hex_reader(&d, "");
    press_all(
        &d,
        &id,
        &[
            ("C-Up", b"\x1b[1;5A"),
            ("M-Up", b"\x1b[1;3A"),
            ("S-Up", b"\x1b[1;2A"),
            ("C-Left", b"\x1b[1;5D"),
            ("C-M-S-Right", b"\x1b[1;8C"),
            ("S-Home", b"\x1b[1;2H"),
            ("C-End", b"\x1b[1;5F"),
            ("M-Insert", b"\x1b[2;3~"),
            ("C-Delete", b"\x1b[3;5~"),
            ("S-PageUp", b"\x1b[5;2~"),
            ("C-PageDown", b"\x1b[6;5~"),
            ("S-F1", b"\x1b[1;2P"),
            ("C-F5", b"\x1b[15;5~"),
            ("alt+F12", b"\x1b[24;3~"),
            ("S-Tab", b"\x1b[Z"),
            ("BTab", b"\x1b[Z"),
            ("shift+tab", b"\x1b[Z"),
            ("C-Enter", b"\x1b[27;5;13~"),
            ("S-Enter", b"\x1b[27;2;13~"),
            ("C-Tab", b"\x1b[27;5;9~"),
            ("M-BSpace", b"\x1b\x7f"),
            ("C-Escape", b"\x1b[27;5;27~"),
            ("M-x", b"\x1bx"),
            ("ctrl+c", b"\x03"),
            ("Up", b"\x1b[A"),
            ("F1", b"\x1bOP"),
            ("Enter", b"\r"),
        ],
    );
}

#[test]
fn application_cursor_mode_only_changes_unmodified_cursor_keys() {
    let d = Daemon::start();
    let id = hex_reader(&d, "\\033[?1h");
    press_all(
        &d,
        &id,
        &[
            ("Up", b"\x1bOA"),
            ("Home", b"\x1bOH"),
            ("C-Up", b"\x1b[1;5A"),
            ("S-End", b"\x1b[1;2F"),
        ],
    );
}

#[test]
fn a_refused_chord_writes_nothing_and_literal_types_words() {
    let d = Daemon::start();
    let id = hex_reader(&d, "");
    // CLI: exit 2, a typed error with a remedy, and not even the valid word before it.
    for bad in ["S-Upp", "C-é", "shift+1", "M-", "ctrl+nothing"] {
        let out = d.cli(&["sessions", "send-keys", &id, "x", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        assert!(out.stdout.is_empty());
        let err: Value = serde_json::from_slice(&out.stderr).unwrap();
        assert_eq!(err["error"]["code"], "invalid_request", "{bad}");
        assert!(err["error"]["remedy"].is_string(), "{bad}: {err}");
    }
    // The wire refuses them too (a client that skips the CLI's check).
    let r = d.err(
        "sessions.send-keys",
        json!({"session_id": id, "keys": ["x", "S-Upp"]}),
        "invalid_request",
    );
    assert!(r["error"]["remedy"].is_string());
    // --literal and -l: every word is text.
    let out = d.cli(&["sessions", "send-keys", "--literal", &id, "S-Up", "Enter"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut expected = hex(b"S-UpEnter");
    until_seen(&d, &id, &expected, "--literal");
    let out = d.cli(&["sessions", "send-keys", "-l", &id, "C-c"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    expected.extend(hex(b"C-c"));
    until_seen(&d, &id, &expected, "-l");
    d.ok(
        "sessions.send-keys",
        json!({"session_id": id, "keys": ["M-"], "literal": true}),
    );
    // Nothing from the refused batches arrived: the reader saw only the literal words.
    expected.extend(hex(b"M-"));
    until_seen(&d, &id, &expected, "literal on the wire");
}

/// Needs the light pass to track `CSI > f u` (the screen model's kitty flags).
#[test]
fn kitty_keyboard_protocol_once_the_program_enables_it() {
    let d = Daemon::start();
    let id = hex_reader(&d, "\\033[>1u");
    press_all(
        &d,
        &id,
        &[
            ("Escape", b"\x1b[27u"),
            ("C-c", b"\x1b[99;5u"),
            ("M-x", b"\x1b[120;3u"),
            ("S-Tab", b"\x1b[9;2u"),
            ("C-Enter", b"\x1b[13;5u"),
            ("Enter", b"\r"),
            ("C-Up", b"\x1b[1;5A"),
            ("F3", b"\x1b[13~"),
            ("x", b"x"),
        ],
    );
}

#[test]
fn backspace_erases_a_whole_utf8_character_in_cooked_mode() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({
        "command": "printf '\\033]2;ready\\007'; read x; printf 'GOT:'; printf '%s' \"$x\" | od -An -tx1 -v; echo END; exec sleep 30"
    })));
    wait_for("the reader's title", T, || {
        (d.get(&id)["terminal_title"] == "ready").then_some(())
    });
    let out = d.cli(&[
        "sessions",
        "send-keys",
        &id,
        "aé",
        "BSpace",
        "日",
        "BSpace",
        "b",
        "Enter",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": "END", "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched");
    let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": id}))["text"]
        .as_str()
        .unwrap()
        .to_string();
    let got = dump
        .lines()
        .find_map(|l| l.strip_prefix("GOT:"))
        .unwrap_or_else(|| panic!("no GOT line in {dump:?}"));
    assert_eq!(
        got.split_whitespace().collect::<Vec<_>>(),
        ["61", "62"],
        "the shell read exactly \"ab\""
    );
}

/// `vim`, else `vi` (CI installs vim-tiny for it).
fn editor() -> String {
    ["vim", "vi"]
        .into_iter()
        .find(|e| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {e}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("vim or vi is installed (see .ci/run)")
        .to_string()
}

fn foreground(d: &Daemon, id: &str) -> String {
    let doc = d.ok_as(READER, "sessions.inspect", json!({"session_id": id}));
    doc["foreground"]["command"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// `run` through the CLI; returns (exit code, stderr error, time taken).
fn run(d: &Daemon, id: &str, timeout: &str, command: &str) -> (Option<i32>, Value, Duration) {
    let t0 = Instant::now();
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "run",
        "--timeout",
        timeout,
        id,
        command,
    ]);
    let took = t0.elapsed();
    let err = if out.stderr.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&out.stderr).unwrap_or(Value::Null)
    };
    if out.status.code() != Some(0) {
        assert!(out.stdout.is_empty(), "{out:?}");
    }
    (out.status.code(), err, took)
}

fn assert_busy(code: Option<i32>, err: &Value, took: Duration) {
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err["error"]["code"], "foreground_busy", "{err}");
    assert!(err["error"]["remedy"].is_string(), "{err}");
    // Refused at once, not after the budget (30 s).
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn run_refuses_to_type_into_an_editor_in_front() {
    let d = Daemon::start();
    let file = d.path("notes.txt");
    std::fs::write(&file, "original\n").unwrap();
    let editor = editor();
    let id = sid(&d.create(json!({"command": "sh", "cols": 80, "rows": 24})));
    let out = d.cli(&[
        "sessions",
        "send-keys",
        &id,
        &format!("{editor} -u NONE -N -n {}", file.display()),
        "Enter",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    wait_for("the editor in the foreground", T, || {
        foreground(&d, &id).contains(&editor).then_some(())
    });
    // Drawn, so it reads its keys raw from now on.
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": "original", "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched");
    let (code, err, took) = run(&d, &id, "30s", "echo typed > /dev/null");
    assert_busy(code, &err, took);
    // Leave the editor saving whatever its buffer holds: had anything been typed into it,
    // the file would change.
    let out = d.cli(&["sessions", "send-keys", &id, "Escape", ":wq", "Enter"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The exited editor still leads the foreground group, as a zombie with no command line,
    // until the shell takes the terminal back: wait for a named program that is not it.
    wait_for("the shell back in front", T, || {
        let front = foreground(&d, &id);
        (!front.is_empty() && !front.contains(&editor)).then_some(())
    });
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n");
    // At the prompt again, run works.
    let (code, err, _) = run(&d, &id, "30s", "echo back");
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn run_refuses_to_type_into_a_waiting_read_and_timeout_zero_means_no_limit() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sh", "cols": 80, "rows": 24})));
    let out = d.cli(&[
        "sessions",
        "send-keys",
        &id,
        "sh -c 'read x; echo \"GOT:[$x]\"'",
        "Enter",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    wait_for("the read in the foreground", T, || {
        foreground(&d, &id).contains("read x").then_some(())
    });
    let (code, err, took) = run(&d, &id, "30s", "echo typed");
    assert_busy(code, &err, took);
    // The wire answers the same typed error.
    let r = d.call_as(
        READER,
        "sessions.run",
        json!({"session_id": id, "command": "true", "timeout": 0}),
    );
    assert_eq!(r["error"]["code"], "foreground_busy", "{r}");
    // The read got nothing from run: what it reads now is exactly what is typed now.
    d.cli(&["sessions", "send-keys", &id, "hello", "Enter"]);
    let r = d.ok_as(
        READER,
        "sessions.wait",
        // Not `GOT:[` alone: the echoed command line holds that, so the wait would match
        // before the shell has read anything.
        json!({"session_id": id, "until": "GOT:[hello]", "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched");
    let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": id}))["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(dump.contains("GOT:[hello]"), "{dump}");
    assert!(!dump.contains("__MAXX"), "{dump}");
    // `--timeout 0` is no limit, not "give up at once".
    // An exited `read` that is not reaped yet still leads the foreground group, with an
    // empty command line: wait for a live program that is not it (the shell).
    wait_for("the shell back in front", T, || {
        let front = foreground(&d, &id);
        (!front.is_empty() && !front.contains("read x")).then_some(())
    });
    let (code, err, _) = run(&d, &id, "0", "sleep 1; echo slept");
    assert_eq!(code, Some(0), "{err}");
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "run",
        "--timeout",
        "0",
        &id,
        "echo unlimited; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["output"], "unlimited");
    // A run with no limit still ends when the program does (the shell killed mid-run: its
    // end marker can never appear).
    let r = d.call_as(
        READER,
        "sessions.run",
        json!({"session_id": id, "command": "kill -9 $$", "timeout": 0}),
    );
    assert_eq!(r["error"]["code"], "already_ended", "{r}");
    assert!(r["error"]["remedy"].is_string(), "{r}");
}
