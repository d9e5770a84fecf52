//! Recording (issue 22): `sessions rec` writes asciicast v2 from the live output without
//! resizing or typing, the `asciinema` CLI reads it, and `maxx play` plays it into a new
//! session whose screen ends equal to the recorded one's.

use crate::common::{skip_or_fail, wait_for, Daemon, READER};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

fn screen_text(d: &Daemon, id: &str) -> Vec<String> {
    let s = d.ok_as(READER, "sessions.snapshot", json!({"session_id": id}));
    s["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().trim_end().to_string())
        .collect()
}

fn asciinema() -> Option<PathBuf> {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ci-venv/bin/asciinema");
    venv.exists().then_some(venv)
}

#[test]
fn a_recording_reads_in_asciinema_and_plays_back_to_the_same_screen() {
    let d = Daemon::start();
    // The program waits for a line, then prints plain, styled and wide text, and exits.
    let script = "read x; printf 'hello\\n\\033[1mbold\\033[0m world\\n'; \
                  printf '\\342\\224\\200 caf\\303\\251 \\346\\227\\245\\346\\234\\254\\n'; sleep 0.2; exit 0";
    let v = d.create(json!({"command": script, "cols": 60, "rows": 12}));
    let id = v["session_id"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("run.cast");
    let cast_arg = cast.display().to_string();
    let rec = d.cli_bg(&["--as", READER, "sessions", "rec", &id, "--out", &cast_arg]);
    // Recording has started once the header is written.
    wait_for("the recording's header", Duration::from_secs(10), || {
        std::fs::read_to_string(&cast)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    let out = rec.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["result"]["ended"], "session_ended", "{summary}");
    // Read-only: the session kept its size.
    assert_eq!(d.get(&id)["cols"], 60);

    let text = std::fs::read_to_string(&cast).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        (
            header["version"].as_u64(),
            header["width"].as_u64(),
            header["height"].as_u64()
        ),
        (Some(2), Some(60), Some(12))
    );
    let mut output = String::new();
    let mut previous = 0.0;
    for line in lines {
        let e: Value = serde_json::from_str(line).unwrap();
        let t = e[0].as_f64().unwrap();
        assert!(t >= previous, "times never go back");
        previous = t;
        assert_eq!(e[1], "o");
        output.push_str(e[2].as_str().unwrap());
    }
    assert!(output.contains("hello"), "{output:?}");
    assert!(output.contains("\u{1b}[1mbold"), "{output:?}");
    assert!(output.contains("café 日本"), "whole characters: {output:?}");

    // The asciicast tools people use read it.
    match asciinema() {
        Some(bin) => {
            let cat = std::process::Command::new(bin)
                .arg("cat")
                .arg(&cast)
                .output()
                .unwrap();
            assert!(
                cat.status.success(),
                "{}",
                String::from_utf8_lossy(&cat.stderr)
            );
            let shown = String::from_utf8_lossy(&cat.stdout);
            assert!(
                shown.contains("hello") && shown.contains("world"),
                "{shown}"
            );
        }
        None => skip_or_fail("target/ci-venv has no asciinema (.ci/run installs it)"),
    }

    // Played into a new session, the screen ends the same.
    let recorded = screen_text(&d, &id);
    let out = d.cli(&["play", &cast_arg, "--speed", "10", "--title", "replay"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let played: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pid = played["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(played["result"]["session"]["cols"], 60);
    assert_eq!(played["result"]["session"]["rows"], 12);
    d.ok(
        "sessions.wait",
        json!({"session_id": pid, "lifecycle": "exited", "timeout": 20}),
    );
    assert_eq!(d.get(&pid)["exit_code"], 0);
    assert_eq!(screen_text(&d, &pid), recorded);

    // `asciinema play` (it needs a terminal: a maxx session of the recording's size) draws
    // the same screen.
    if let Some(bin) = asciinema() {
        let command = format!(
            "'{}' play --speed 10 '{}' >/dev/tty && exit 0",
            bin.display(),
            cast.display()
        );
        let v = d.create(json!({"command": command, "cols": 60, "rows": 12}));
        let aid = v["session_id"].as_str().unwrap().to_string();
        d.ok(
            "sessions.wait",
            json!({"session_id": aid, "lifecycle": "exited", "timeout": 30}),
        );
        assert_eq!(d.get(&aid)["exit_code"], 0, "{:?}", screen_text(&d, &aid));
        assert_eq!(screen_text(&d, &aid), recorded);
    }

    // Not a recording: a usage error, nothing created.
    let before = d.count();
    let bad = dir.path().join("bad.cast");
    std::fs::write(&bad, "{\"version\": 1}\n").unwrap();
    let out = d.cli(&["play", &bad.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(d.count(), before);
    // An existing file is never overwritten.
    let out = d.cli(&["--as", READER, "sessions", "rec", &id, "--out", &cast_arg]);
    assert_ne!(out.status.code(), Some(0));
}

/// A resize while recording is an `r` event, in time order with the output.
#[test]
fn a_resize_while_recording_is_an_r_event() {
    let d = Daemon::start();
    let v =
        d.create(json!({"command": "read x; printf 'after\\n'; exit 0", "cols": 60, "rows": 12}));
    let id = v["session_id"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("resize.cast");
    let cast_arg = cast.display().to_string();
    let rec = d.cli_bg(&["--as", READER, "sessions", "rec", &id, "--out", &cast_arg]);
    wait_for("the recording's header", Duration::from_secs(10), || {
        std::fs::read_to_string(&cast)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    d.ok_as(
        READER,
        "sessions.resize",
        json!({"session_id": id, "cols": 70, "rows": 14}),
    );
    wait_for("the r event", Duration::from_secs(10), || {
        std::fs::read_to_string(&cast)
            .ok()
            .filter(|t| t.contains("\"r\",\"70x14\""))
    });
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    let out = rec.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&cast).unwrap();
    let events: Vec<Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let r = events.iter().position(|e| e[1] == "r").expect("an r event");
    // The first event by which the output holds "after" (a read may split it).
    let mut output = String::new();
    let after = events
        .iter()
        .position(|e| {
            if e[1] == "o" {
                output.push_str(e[2].as_str().unwrap());
            }
            output.contains("after")
        })
        .expect("the output after the resize");
    assert!(r < after, "{text}");
    let times: Vec<f64> = events.iter().map(|e| e[0].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{text}");
}
