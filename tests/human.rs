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

/// A terminal the test owns with `maxx ARGS` running in it: what it printed so far, and
/// its keyboard.
struct Outer {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    seen: Arc<Mutex<Vec<u8>>>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Outer {
    fn spawn(d: &Daemon, args: &[&str]) -> Outer {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(maxx_bin());
        cmd.args(args);
        cmd.env("MAXX_CONTROL_DIR", &d.control);
        cmd.env("TERM", "xterm-256color");
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
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
        Outer {
            child,
            writer,
            seen,
            _master: pair.master,
        }
    }

    /// How much has been printed: a mark for [`Outer::wait_after`].
    fn mark(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Wait until `text` is printed after `mark`.
    fn wait_after(&self, mark: usize, text: &str) {
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(&format!("{text:?} on the outer terminal"), T, || {
                let seen = self.seen.lock().unwrap();
                String::from_utf8_lossy(&seen[mark.min(seen.len())..])
                    .contains(text)
                    .then_some(())
            })
        }));
        if found.is_err() {
            panic!(
                "{text:?} never printed; the terminal got {:?}",
                self.printed()
            );
        }
    }

    fn printed(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }

    fn type_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    fn exit(&mut self) -> portable_pty::ExitStatus {
        wait_for("the CLI to exit", T, || {
            self.child.try_wait().ok().flatten()
        })
    }
}

/// Wait until a session's screen shows `text` (the daemon's own wait).
fn screen_shows(d: &Daemon, id: &str, text: &str) {
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": text, "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched", "{text:?} never appeared");
}

/// Issue 22: the prefix twice sends exactly one prefix byte and stays attached; prefix then
/// another key sends both; prefix d detaches. The status is in the terminal's title, and
/// `--no-status` leaves the title alone.
#[test]
fn attach_prefix_twice_sends_one_byte_and_the_title_says_who_is_attached() {
    let d = Daemon::start();
    // The program reads raw bytes (no ISIG: a Ctrl-\ is a byte, not SIGQUIT) and dumps them.
    let id = sid(&d.create(json!({
        "title": "dumper",
        "command": "stty raw -echo; echo READY; head -c 4 | od -An -tx1; stty sane; exec sleep 60",
    })));
    screen_shows(&d, &id, "READY");
    let mut outer = Outer::spawn(&d, &["attach", "--as", READER, &id]);
    let short = id[..8].to_lowercase();
    outer.wait_after(
        0,
        &format!("\x1b]2;[maxx {short} dumper · C-\\ d detaches]"),
    );
    // Typed one key at a time: prefix prefix (one 0x1c), a, prefix b (0x1c b).
    for key in [b"\x1c", b"\x1c", b"a", b"\x1c", b"b"] {
        outer.type_bytes(key);
    }
    screen_shows(&d, &id, "1c 61 1c 62");
    assert_eq!(
        d.get(&id)["lifecycle"],
        "running",
        "still attached, nothing ended"
    );
    outer.type_bytes(b"\x1c");
    outer.type_bytes(b"d");
    assert!(outer.exit().success());
    // The person's title is given back (the last bytes attach writes; read after it exits).
    outer.wait_after(0, "\x1b]2;\x07\x1b[23;0t");

    let mut quiet = Outer::spawn(&d, &["attach", "--no-status", "--as", READER, &id]);
    quiet.wait_after(0, "1c 61 1c 62");
    quiet.type_bytes(b"\x1cd");
    assert!(quiet.exit().success());
    // Everything it wrote, up to the terminal reset it ends with, and no title in it.
    quiet.wait_after(0, "\x1b[?1049l");
    assert!(
        !quiet.printed().contains("\x1b]2;"),
        "{:?}",
        quiet.printed()
    );
}

/// Issue 22: `maxx top` hands the terminal to attach (one reader at a time): keys typed one
/// at a time all reach the program in order, none is acted on by top after detach, and
/// archive happens only on a `y` typed after its prompt was drawn.
#[test]
fn top_attach_delivers_every_key_and_archives_only_when_asked() {
    let tmp = tempfile::Builder::new()
        .prefix("maxx-top")
        .tempdir()
        .unwrap();
    let policy = tmp.path().join("policy.json");
    let all = [
        "tabs:list",
        "surface:attach",
        "output:read",
        "input:send",
        "keys:press",
        "tabs:focus",
        "tabs:close",
        "tabs:restart",
    ];
    std::fs::write(
        &policy,
        json!({"version": 1, "sources": [
            {"id": "person", "kind": "local", "allow": all},
            {"id": READER, "kind": "local", "allow": ["output:read", "tabs:list"]},
        ]})
        .to_string(),
    )
    .unwrap();
    let d = Daemon::start_with_env(&[("MAXX_CONTROL_POLICY_FILE", policy.display().to_string())]);
    let id = sid(&d.create(json!({"title": "shell", "command": "PS1='$ ' exec sh"})));
    screen_shows(&d, &id, "$");
    let mut top = Outer::spawn(&d, &["top", "--as", "person"]);
    top.wait_after(0, "LIFECYCLE");
    // Enter attaches to the only (selected) session.
    let m = top.mark();
    top.type_bytes(b"\r");
    top.wait_after(m, "\x1b]2;[maxx");
    // Every key of the line, one write each; it holds all of top's keys (a y j k q i r).
    for b in b"echo 123456 ayayay qjk fir | tr a-z A-Z\r" {
        top.type_bytes(&[*b]);
    }
    screen_shows(&d, &id, "123456 AYAYAY QJK FIR");
    screen_shows(&d, &id, "$ echo 123456 ayayay qjk fir | tr a-z A-Z");
    // Detach with one try, typed one key at a time.
    let m = top.mark();
    top.type_bytes(b"\x1c");
    top.type_bytes(b"d");
    // ("back from attach": ratatui skips the blank cells, so the words arrive apart.)
    top.wait_after(m, "back");
    assert_eq!(d.get(&id)["lifecycle"], "running");
    assert!(top.child.try_wait().unwrap().is_none(), "top is still up");

    // `a` and its `y`s typed ahead in one go: the prompt appears, the `y`s answer nothing.
    let m = top.mark();
    top.type_bytes(b"ayyyy");
    top.wait_after(m, "[y/N]");
    let m = top.mark();
    top.type_bytes(b"n");
    top.wait_after(m, "cancel");
    assert_eq!(d.get(&id)["lifecycle"], "running", "nothing was archived");
    // A `y` typed once the prompt is on screen archives.
    let m = top.mark();
    top.type_bytes(b"a");
    top.wait_after(m, "[y/N]");
    top.type_bytes(b"y");
    wait_for("the archive", T, || {
        (d.get(&id)["lifecycle"] == "archived").then_some(())
    });
    top.type_bytes(b"q");
    assert!(top.exit().success());
}
