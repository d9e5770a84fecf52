//! Human views (issue 9): `maxx ls`, `maxx status`, `maxx attach` in a terminal the test owns.

use crate::common::*;
use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

#[test]
fn ls_and_status_tables() {
    let d = Daemon::start();
    let out = d.cli(&["ls"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no sessions\n");
    let a = sid(&d.create(json!({"title": "build", "command": "exit 3", "group": "ci"})));
    d.ok(
        "sessions.wait",
        json!({"session_id": a, "lifecycle": "exited", "timeout": 10}),
    );
    let b = sid(&d.create(json!({"title": "agent", "command": "sleep 60", "parent": a, "metadata": {"repo": "org/r"}})));
    d.ok(
        "sessions.set-state",
        json!({"session_id": b, "state": "needsInput"}),
    );
    d.ok("sessions.set-summary", json!({"session_id": b, "summary": "Waiting on the user to confirm the release notes wording"}));
    let run = |args: &[&str]| {
        let out = std::process::Command::new(maxx_bin())
            .args(args)
            .env("MAXX_CONTROL_DIR", &d.control)
            .env("COLUMNS", "90")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run(&["ls"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("ID"));
    assert!(
        lines[1].contains("build") && lines[1].contains("exited(3)") && lines[1].contains("ci")
    );
    assert!(lines[2].contains("needsInput") && lines[2].contains(&a[..8].to_lowercase()));
    assert!(
        lines.iter().all(|l| l.chars().count() <= 90),
        "fits the width:\n{table}"
    );
    assert!(!table.contains('\x1b'), "no colour with NO_COLOR / a pipe");
    let wide = run(&["ls", "--wide"]);
    assert!(wide.contains("[repo=org/r]"));
    let json: Value = serde_json::from_str(&run(&["ls", "--json"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
    let status = run(&["status"]);
    assert!(
        status.contains("sessions: 2 (1 exited, 1 running)"),
        "{status}"
    );
    let status: Value = serde_json::from_str(&run(&["status", "--json"])).unwrap();
    assert_eq!(status["by_lifecycle"], json!({"exited": 1, "running": 1}));
}

#[test]
fn attach_types_shows_resizes_and_detaches() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sh", "cols": 80, "rows": 24})));
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 30,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let cooked = pair.master.get_termios().unwrap();
    let mut cmd = CommandBuilder::new(maxx_bin());
    cmd.args(["attach", "--as", READER, id.as_str()]);
    cmd.env("MAXX_CONTROL_DIR", &d.control);
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let mut writer = pair.master.take_writer().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
    }
    // The attaching terminal's size is applied to the session.
    wait_for("the attach size", T, || {
        (d.get(&id)["cols"] == 100).then_some(())
    });
    assert_eq!(d.get(&id)["rows"], 30);
    // Typed text reaches the session and its output comes back.
    writer.write_all(b"echo attached-$((6*7))\r").unwrap();
    wait_for("the session's output on the outer terminal", T, || {
        String::from_utf8_lossy(&seen.lock().unwrap())
            .contains("attached-42")
            .then_some(())
    });
    // A resize of the outer terminal propagates (SIGWINCH → the PTY → stty in the child).
    pair.master
        .resize(PtySize {
            rows: 40,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    wait_for("the resize", T, || {
        (d.get(&id)["cols"] == 120).then_some(())
    });
    let size_file = d.path("size.txt");
    writer
        .write_all(format!("stty size > {}\r", size_file.display()).as_bytes())
        .unwrap();
    let size = wait_for("stty size", T, || {
        read(&size_file).filter(|s| s.ends_with('\n'))
    });
    assert_eq!(size.trim(), "40 120");
    // Raw mode while attached; Ctrl-\ d detaches and restores the terminal exactly.
    let raw = pair.master.get_termios().unwrap();
    assert_ne!(raw.local_flags, cooked.local_flags);
    writer.write_all(b"\x1cd").unwrap();
    let status = wait_for("attach to exit", T, || child.try_wait().ok().flatten());
    assert!(status.success(), "{status:?}");
    let restored = pair.master.get_termios().unwrap();
    assert_eq!(restored.local_flags, cooked.local_flags);
    assert_eq!(restored.input_flags, cooked.input_flags);
    assert_eq!(restored.output_flags, cooked.output_flags);
    // The session is still running.
    assert_eq!(d.get(&id)["lifecycle"], "running");
    let err = d.cli(&[
        "attach",
        "--as",
        READER,
        "2B0E0000-0000-4000-8000-000000000000",
    ]);
    assert_ne!(err.status.code(), Some(0));
}
