//! A terminal programs can talk to (issue 17): real programs in real sessions — query answers
//! (`examples/term_probe.rs`), a crossterm program, a ratatui inline viewport, fzf, `maxx
//! attach` in a terminal the test owns — and screens that are a function of the bytes: a
//! resize before any read against tmux, the alternate screen after more output than any ring,
//! tabs, scrollback under a flood, a 1-column session printing wide characters.
//!
//! The expected answers are `docs/terminal.md`'s table. Waits are on conditions with
//! deadlines; "nobody reads" means the test only looks at files the program writes and at
//! `sessions.get` (title, size, lifecycle), never at the screen, until the point under test.

use crate::common::*;
use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The examples' shared code: query names, escaping, the escape-sequence splitter.
#[path = "../examples/shared/mod.rs"]
mod shared;

const T: Duration = Duration::from_secs(10);

/// XTVERSION's answer names maxx and its version.
const XTVERSION: &str = concat!("\\eP>|maxx(", env!("CARGO_PKG_VERSION"), ")\\e\\\\");
const DA1: &str = "\\e[?62;22c";
const DA2: &str = "\\e[>0;10;1c";

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// Wait until the session's title (OSC 2, from `sessions.get`: not a screen read) is `title`.
fn until_title(d: &Daemon, id: &str, title: &str) {
    wait_for(&format!("the title {title:?}"), T, || {
        (d.get(id)["terminal_title"] == title).then_some(())
    });
}

/// Wait until the screen shows `text` (the daemon's own wait; this reads the screen).
fn until_text(d: &Daemon, id: &str, text: &str, timeout: u64) -> bool {
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": text, "timeout": timeout}),
    );
    r["outcome"] == "matched"
}

fn snapshot(d: &Daemon, id: &str, extra: Value) -> Value {
    let mut p = json!({ "session_id": id });
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    d.ok_as(READER, "sessions.snapshot", p)
}

fn lines(s: &Value) -> Vec<String> {
    s["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

/// Wait up to `timeout` for `cond`, without failing: for states a correct daemon reaches at
/// once, so the test can go on and fail on the full picture instead of on the first symptom.
fn settle(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The JSON lines `term_probe --out` wrote, once its `done` marker is there.
fn probe_report(path: &std::path::Path, timeout: Duration) -> Vec<Value> {
    wait_for("term_probe's report", timeout, || {
        let text = read(path)?;
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        lines.last().filter(|l| l["done"] == true)?;
        Some(lines)
    })
}

/// Compare a probe report with `(query, expected answer)` pairs; every mismatch, with the
/// whole report, in one message. Answers are compared as escaped text (`\e`, `\a`, `\\`).
fn check_answers(report: &[Value], expected: &[(&str, &str)], max_latency_us: u64) {
    let mut bad = Vec::new();
    for (i, (query, answer)) in expected.iter().enumerate() {
        let got = &report[i];
        assert_eq!(got["query"], *query, "report order: {report:#?}");
        let ok = got["answer"]
            .as_str()
            .is_some_and(|a| a.eq_ignore_ascii_case(answer));
        if !ok {
            bad.push(format!("{query}: expected {answer}, got {}", got["answer"]));
        } else if got["latency_us"].as_u64().unwrap() > max_latency_us {
            bad.push(format!(
                "{query}: answered after {} us (> {max_latency_us})",
                got["latency_us"]
            ));
        }
    }
    let done = report.last().unwrap();
    if done["extra"] != "" {
        bad.push(format!(
            "unasked-for input after the answers: {}",
            done["extra"]
        ));
    }
    assert!(
        bad.is_empty(),
        "{} of {} queries wrong:\n  {}\nreport:\n{}",
        bad.len(),
        expected.len(),
        bad.join("\n  "),
        report
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Done means: a raw-mode reader gets CPR, DA1, DA2 and XTVERSION answers within 50 ms each
/// in a session nobody reads.
#[test]
fn queries_are_answered_in_a_session_nobody_reads() {
    let d = Daemon::start();
    let out = d.path("probe.jsonl");
    let cmd = format!(
        "{} --out {} --timeout-ms 1000 cpr da1 da2 xtversion; exec sleep 30",
        example_bin("term_probe"),
        out.display()
    );
    let id = sid(&d.create(json!({"command": cmd, "cols": 80, "rows": 24})));
    let report = probe_report(&out, Duration::from_secs(20));
    check_answers(
        &report,
        &[
            ("cpr", "\\e[1;1R"),
            ("da1", DA1),
            ("da2", DA2),
            ("xtversion", XTVERSION),
        ],
        50_000,
    );
    assert_eq!(d.get(&id)["lifecycle"], "running");
}

/// Every query of the table, sent in one write (answers in order), then again after the
/// program changed the state the answers report (cursor, scroll region, cursor style, a mode,
/// kitty keyboard flags).
#[test]
fn every_documented_query_is_answered_in_order() {
    let d = Daemon::start();
    let first = d.path("first.jsonl");
    let second = d.path("second.jsonl");
    let probe = example_bin("term_probe");
    let cmd = format!(
        "{probe} --out {first} --burst --linger-ms 100 --timeout-ms 1000 \
           cpr decxcpr dsr5 da1 da1-0 da2 da2-0 da3 xtversion xtversion-0 \
           decrqm-2004 decrqm-1049 decrqm-9999 decrqm-irm \
           decrqss-sgr decrqss-stbm decrqss-decscusr decrqss-other \
           osc10 osc10-st osc11 osc12 osc4-1 \
           xtwinops14 xtwinops16 xtwinops18 xtwinops19 \
           xtgettcap-tn xtgettcap-co xtgettcap-unknown kitty; \
         printf '\\033[3;10r\\033[4 q\\033[?2004h\\033[>1u\\033[5;7H'; \
         {probe} --out {second} --timeout-ms 500 cpr decrqss-stbm decrqss-decscusr decrqm-2004 kitty; \
         exec sleep 30",
        first = first.display(),
        second = second.display(),
    );
    d.create(json!({"command": cmd, "cols": 80, "rows": 24}));
    let hex = |s: &str| -> String { s.bytes().map(|b| format!("{b:02X}")).collect() };
    let tn = format!("\\eP1+r544E={}\\e\\\\", hex("xterm-256color"));
    let co = format!("\\eP1+r436F={}\\e\\\\", hex("256"));
    let report = probe_report(&first, Duration::from_secs(20));
    check_answers(
        &report,
        &[
            ("cpr", "\\e[1;1R"),
            ("decxcpr", "\\e[?1;1;1R"),
            ("dsr5", "\\e[0n"),
            ("da1", DA1),
            ("da1-0", DA1),
            ("da2", DA2),
            ("da2-0", DA2),
            ("da3", "\\eP!|00000000\\e\\\\"),
            ("xtversion", XTVERSION),
            ("xtversion-0", XTVERSION),
            ("decrqm-2004", "\\e[?2004;2$y"),
            ("decrqm-1049", "\\e[?1049;2$y"),
            ("decrqm-9999", "\\e[?9999;0$y"),
            ("decrqm-irm", "\\e[4;2$y"),
            ("decrqss-sgr", "\\eP1$r0m\\e\\\\"),
            ("decrqss-stbm", "\\eP1$r1;24r\\e\\\\"),
            ("decrqss-decscusr", "\\eP1$r0 q\\e\\\\"),
            ("decrqss-other", "\\eP0$r\\e\\\\"),
            ("osc10", "\\e]10;rgb:e5e5/e5e5/e5e5\\a"),
            ("osc10-st", "\\e]10;rgb:e5e5/e5e5/e5e5\\e\\\\"),
            ("osc11", "\\e]11;rgb:0000/0000/0000\\a"),
            ("osc12", "\\e]12;rgb:e5e5/e5e5/e5e5\\a"),
            ("osc4-1", "\\e]4;1;rgb:cdcd/0000/0000\\a"),
            ("xtwinops14", "\\e[4;384;640t"),
            ("xtwinops16", "\\e[6;16;8t"),
            ("xtwinops18", "\\e[8;24;80t"),
            ("xtwinops19", "\\e[9;24;80t"),
            ("xtgettcap-tn", &tn),
            ("xtgettcap-co", &co),
            ("xtgettcap-unknown", "\\eP0+r7A7A\\e\\\\"),
            ("kitty", "\\e[?0u"),
        ],
        u64::MAX,
    );
    let report = probe_report(&second, Duration::from_secs(20));
    check_answers(
        &report,
        &[
            ("cpr", "\\e[5;7R"),
            ("decrqss-stbm", "\\eP1$r3;10r\\e\\\\"),
            ("decrqss-decscusr", "\\eP1$r4 q\\e\\\\"),
            ("decrqm-2004", "\\e[?2004;1$y"),
            ("kitty", "\\e[?1u"),
        ],
        u64::MAX,
    );
}

/// Done means: a crossterm program's `cursor::position()` and a ratatui inline viewport start
/// without error.
#[test]
fn crossterm_position_and_ratatui_inline_viewport_start() {
    let d = Daemon::start();
    let cmd = format!(
        "{}; echo \"cpr-exit=$?\"; {}; echo \"inline-exit=$?\"; exec sleep 30",
        example_bin("cpr_position"),
        example_bin("inline_viewport")
    );
    let id = sid(&d.create(json!({"command": cmd, "cols": 80, "rows": 24})));
    // Without answers each program gives up after crossterm's 2 s.
    assert!(
        until_text(&d, &id, "inline-exit=", 15),
        "the programs never finished"
    );
    let s = lines(&snapshot(&d, &id, json!({})));
    let screen = s.join("\n");
    assert_eq!(
        s[0], "position 0 0",
        "crossterm's cursor::position():\n{screen}"
    );
    assert_eq!(s[1], "cpr-exit=0", "{screen}");
    assert!(
        s.iter().any(|l| l.contains("inline-viewport-ok")),
        "the inline viewport drew:\n{screen}"
    );
    assert!(s.iter().any(|l| l == "inline-exit=0"), "{screen}");
}

/// Done means: `fzf --height 10` draws (it asks where the cursor is before drawing).
#[test]
fn fzf_with_a_height_draws_without_a_key_press() {
    let fzf = Command::new("fzf").arg("--version").output();
    assert!(
        fzf.is_ok_and(|o| o.status.success()),
        "fzf is not installed (Debian's `fzf`; .ci/run installs it)"
    );
    let d = Daemon::start();
    let id = sid(&d.create(json!({
        "command": "printf 'alpha\\nbeta\\ngamma\\n' | fzf --height 10 --no-mouse; exec sleep 30",
        "env": ["FZF_DEFAULT_OPTS="],
        "cols": 80, "rows": 24,
    })));
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "regex": "^  3/3", "timeout": 5}),
    );
    let s = lines(&snapshot(&d, &id, json!({})));
    assert_eq!(
        r["outcome"],
        "matched",
        "fzf drew nothing within 5 s (no key pressed):\n{}",
        s.join("\n")
    );
    for item in ["  gamma", "  beta", "> alpha"] {
        assert!(
            s.iter().any(|l| l == item),
            "{item:?} in:\n{}",
            s.join("\n")
        );
    }
    // It also takes input: filtering narrows the list.
    d.cli(&["sessions", "send-keys", &id, "gam"]);
    assert!(until_text(&d, &id, "1/3", 5), "fzf filtered");
    d.cli(&["sessions", "send-keys", &id, "Escape"]);
}

/// The reply a real terminal (here: a distinctive one) gives to `seq`, if it is a query.
/// The numbers are chosen so none equals what maxx answers for the session.
fn outer_reply(seq: &[u8]) -> Option<Vec<u8>> {
    let s = std::str::from_utf8(seq).ok()?;
    let reply = if let Some(csi) = s.strip_prefix("\x1b[") {
        let (params, fin) = csi.split_at(csi.len() - 1);
        match (params, fin) {
            ("6", "n") => "\x1b[77;77R".to_string(),
            ("?6", "n") => "\x1b[?77;77;1R".to_string(),
            ("5", "n") => "\x1b[0n".to_string(),
            ("" | "0", "c") => "\x1b[?65;1;9c".to_string(),
            (">" | ">0", "c") => "\x1b[>41;390;0c".to_string(),
            ("=" | "=0", "c") => "\x1bP!|4F555452\x1b\\".to_string(),
            (p, "q") if p.starts_with('>') => "\x1bP>|outer-terminal(1.0)\x1b\\".to_string(),
            ("14", "t") => "\x1b[4;777;777t".to_string(),
            ("16", "t") => "\x1b[6;17;9t".to_string(),
            ("18", "t") => "\x1b[8;77;77t".to_string(),
            ("19", "t") => "\x1b[9;77;77t".to_string(),
            (p, "p") if p.ends_with('$') => format!("\x1b[{};4$y", &p[..p.len() - 1]),
            ("?", "u") => "\x1b[?31u".to_string(),
            _ => return None,
        }
    } else if let Some(osc) = s.strip_prefix("\x1b]") {
        let body = osc.trim_end_matches('\x07').trim_end_matches("\x1b\\");
        let (num, rest) = body.split_once(';')?;
        match num {
            "10" | "11" | "12" if rest == "?" => format!("\x1b]{num};rgb:7777/7777/7777\x07"),
            "4" if rest.ends_with(";?") => {
                format!("\x1b]4;{};rgb:7777/7777/7777\x07", &rest[..rest.len() - 2])
            }
            _ => return None,
        }
    } else if let Some(dcs) = s.strip_prefix("\x1bP") {
        if dcs.starts_with("$q") {
            "\x1bP0$r\x1b\\".to_string()
        } else if dcs.starts_with("+q") {
            "\x1bP0+r\x1b\\".to_string()
        } else {
            return None;
        }
    } else {
        return None;
    };
    Some(reply.into_bytes())
}

/// Done means: attach while a program queries — the program gets exactly one answer per
/// query (the daemon's) and none of the attaching terminal's replies, whether to a repaint
/// or to live output.
#[test]
fn attach_while_a_program_queries_gets_one_answer_and_no_outer_replies() {
    let d = Daemon::start();
    let log = d.path("input.bin");
    let cmd = format!(
        "exec {} --log {} cpr da1 da2 xtversion",
        example_bin("input_recorder"),
        log.display()
    );
    let id = sid(&d.create(json!({"command": cmd, "cols": 80, "rows": 24})));
    // Round 0 (before anyone attaches): the queries went out (the title follows them).
    until_title(&d, &id, "recorder-0");
    let answers = format!("\\e[1;1R{DA1}{DA2}{XTVERSION}");
    let logged = || shared::escape(&std::fs::read(&log).unwrap_or_default());
    settle(Duration::from_secs(2), || logged() == answers);

    // A terminal the test owns, answering every query it sees as a real terminal would.
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 30,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(maxx_bin());
    cmd.args(["attach", "--as", READER, id.as_str()]);
    cmd.env("MAXX_CONTROL_DIR", &d.control);
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let writer = Arc::new(Mutex::new(pair.master.take_writer().unwrap()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let replied = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let (seen, replied, writer) = (seen.clone(), replied.clone(), writer.clone());
        std::thread::spawn(move || {
            let mut split = shared::Splitter::default();
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                for &c in &buf[..n] {
                    let Some(unit) = split.push(c) else { continue };
                    // Reply before recording the unit: once the test sees later output, every
                    // reply to what came before it has been written.
                    if let Some(reply) = outer_reply(&unit) {
                        let _ = writer.lock().unwrap().write_all(&reply);
                        replied.lock().unwrap().push(shared::escape(&unit));
                    }
                    seen.lock().unwrap().extend_from_slice(&unit);
                }
            }
        });
    }
    let type_outer = |bytes: &[u8]| writer.lock().unwrap().write_all(bytes).unwrap();
    wait_for("the attach size", T, || {
        (d.get(&id)["cols"] == 100).then_some(())
    });
    // Round 1, while attached: the program queries again and prints `round-1` after.
    type_outer(b"q");
    wait_for("round 1's output on the outer terminal", T, || {
        String::from_utf8_lossy(&seen.lock().unwrap())
            .contains("round-1")
            .then_some(())
    });
    let expected_before_z = format!("{answers}q{answers}");
    settle(Duration::from_secs(2), || logged() == expected_before_z);
    // A barrier: anything the outer terminal said before this byte reached the program first.
    type_outer(b"z");
    let got = wait_for("the barrier byte in the program's input", T, || {
        Some(logged()).filter(|l| l.ends_with('z'))
    });
    let replied = replied.lock().unwrap().clone();
    assert_eq!(
        got,
        format!("{expected_before_z}z"),
        "the program's input (expected: the daemon's answers to round 0, `q`, round 1, `z`); \
         the outer terminal answered these queries it was sent: {replied:?}"
    );
    type_outer(b"\x1cd");
    let status = wait_for("attach to exit", T, || child.try_wait().ok().flatten());
    assert!(status.success(), "{status:?}");
}

/// A tmux server of our own on a private socket, killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new() -> Tmux {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Tmux {
            socket: format!("maxx-test-{}-{n}", std::process::id()),
        }
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux (Debian's tmux 3.3a) is installed");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The visible pane, as `capture-pane -p` prints it.
    fn capture(&self) -> Vec<String> {
        self.run(&["capture-pane", "-p", "-t", "t"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn wait_text(&self, text: &str) {
        wait_for(&format!("{text:?} in tmux"), T, || {
            self.capture()
                .iter()
                .any(|l| l.contains(text))
                .then_some(())
        });
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
        // kill-server leaves the socket file behind.
        let dir = std::env::var("TMUX_TMPDIR").unwrap_or_else(|_| "/tmp".into());
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_file(format!("{dir}/tmux-{uid}/{}", self.socket));
    }
}

/// Rows with trailing blanks trimmed, trailing empty rows dropped.
fn normalised(rows: &[String]) -> Vec<String> {
    let mut rows: Vec<String> = rows.iter().map(|r| r.trim_end().to_string()).collect();
    while rows.last().is_some_and(String::is_empty) {
        rows.pop();
    }
    rows
}

/// A vim-like program: alternate screen, a scroll region of all rows but the status line,
/// 40 lines scrolled through it, a status line; after Enter it redraws for the current size
/// by clearing and printing (relying on the terminal having reset the region on resize, as
/// xterm, tmux and alacritty do).
const VIM_LIKE: &str = r#"stty -echo
set -- $(stty size); rows=$1; cols=$2
printf '\033[?1049h\033[H\033[2J\033[1;%dr' $((rows - 1))
i=1; while [ $i -le 40 ]; do printf 'buffer line %02d at %sx%s\n' $i $cols $rows; i=$((i + 1)); done
printf '\033[%d;1H-- status %sx%s --' $rows $cols $rows
printf '\033]2;drawn\007'
read x
set -- $(stty size); rows=$1; cols=$2
printf '\033[H\033[2J'
i=1; while [ $i -lt $rows ]; do printf 'redraw line %02d at %sx%s\n' $i $cols $rows; i=$((i + 1)); done
printf '\033[%d;1H-- status %sx%s --' $rows $cols $rows
printf '\033]2;redrawn\007'
exec sleep 30
"#;

/// Done means: resize-before-read of a vim-like scroll-region program matches tmux's screen.
#[test]
fn resize_before_any_read_matches_tmux() {
    let d = Daemon::start();
    let script = d.path("vim-like.sh");
    std::fs::write(&script, VIM_LIKE).unwrap();
    let cmd = format!("sh {}", script.display());

    // tmux: the same program, the same resize, the same key.
    let tmux = Tmux::new();
    tmux.run(&["new-session", "-d", "-s", "t", "-x", "80", "-y", "24", &cmd]);
    tmux.wait_text("-- status 80x24 --");
    tmux.run(&["resize-window", "-t", "t", "-x", "120", "-y", "40"]);
    tmux.run(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_text("-- status 120x40 --");
    let reference = normalised(&tmux.capture());
    let info = tmux.run(&[
        "display",
        "-p",
        "-t",
        "t",
        "#{pane_width}x#{pane_height} #{cursor_x},#{cursor_y} #{alternate_on}",
    ]);
    drop(tmux);
    assert_eq!(reference.len(), 40, "tmux drew 40 rows: {reference:#?}");

    // maxx: nothing reads the screen until after the resize and the redraw.
    let id = sid(&d.create(json!({"command": cmd, "cols": 80, "rows": 24})));
    until_title(&d, &id, "drawn");
    let r = d.ok(
        "sessions.resize",
        json!({"session_id": id, "cols": 120, "rows": 40}),
    );
    assert_eq!(r["applied"], json!({"cols": 120, "rows": 40}));
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    until_title(&d, &id, "redrawn");
    let s = snapshot(&d, &id, json!({}));
    let screen = normalised(&lines(&s));
    assert_eq!(
        screen.join("\n"),
        reference.join("\n"),
        "maxx's screen (left) vs tmux's (right) after 80x24 -> 120x40"
    );
    let inspect = d.ok_as(READER, "sessions.inspect", json!({"session_id": id}));
    let mine = format!(
        "{}x{} {},{} {}",
        s["cols"],
        s["rows"],
        s["cursor"]["x"],
        s["cursor"]["y"],
        inspect["alt_screen"] == true
    );
    let theirs: Vec<&str> = info.split_whitespace().collect();
    let theirs = format!("{} {} {}", theirs[0], theirs[1], theirs[2] == "1");
    assert_eq!(mine, theirs, "size, cursor, alternate screen");
}

/// The programs themselves, in tmux 3.3a (a terminal that answers): the probe reads whole
/// answers, crossterm finds its cursor, the inline viewport starts. A failure of the tests
/// above is then maxx's, not the programs'.
#[test]
fn the_programs_work_in_tmux() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("probe.jsonl");
    let cmd = format!(
        "{} --out {} cpr da1 da2 xtversion; {}; echo \"cpr-exit=$?\"; {}; echo \"inline-exit=$?\"; exec sleep 30",
        example_bin("term_probe"),
        out.display(),
        example_bin("cpr_position"),
        example_bin("inline_viewport"),
    );
    let tmux = Tmux::new();
    let version = tmux.run(&["-V"]);
    tmux.run(&["new-session", "-d", "-s", "t", "-x", "80", "-y", "24", &cmd]);
    tmux.wait_text("inline-exit=");
    let report = probe_report(&out, T);
    check_answers(
        &report,
        &[
            ("cpr", "\\e[1;1R"),
            ("da1", "\\e[?1;2c"),
            ("da2", "\\e[>84;0;0c"),
            ("xtversion", &format!("\\eP>|{}\\e\\\\", version.trim())),
        ],
        u64::MAX,
    );
    let screen = normalised(&tmux.capture());
    let text = screen.join("\n");
    assert_eq!(screen[0], "term_probe done 4/4", "{text}");
    assert_eq!(screen[1..3], ["position 0 1", "cpr-exit=0"], "{text}");
    assert!(
        screen.iter().any(|l| l.contains("inline-viewport-ok")),
        "{text}"
    );
    assert_eq!(screen.last().unwrap(), "inline-exit=0", "{text}");
}

/// Done means: the alternate-screen-then-2-MiB case reads back `alt_screen: true` and
/// restores the main screen on exit.
#[test]
fn alternate_screen_after_two_mib_is_still_the_alternate_screen() {
    let d = Daemon::start();
    // 120,000 lines of 21 bytes (with the tty's CR) ≈ 2.5 MB on the alternate screen.
    let cmd = "printf 'main row 1\\nmain row 2\\nmain row 3\\n'; stty -echo; \
               printf '\\033[?1049h\\033[H\\033[2J'; seq -f 'alt filler %08g' 1 120000; \
               printf '\\033]2;filled\\007'; read x; \
               printf '\\033[?1049l\\033]2;left\\007'; exec sleep 30";
    let id = sid(&d.create(json!({"command": cmd, "cols": 80, "rows": 24})));
    until_title(&d, &id, "filled");
    let inspect = d.ok_as(READER, "sessions.inspect", json!({"session_id": id}));
    let s = snapshot(&d, &id, json!({"scrollback": true}));
    let rows = lines(&s);
    let expected: Vec<String> = (119_978..=120_000)
        .map(|n| format!("alt filler {n:08}"))
        .chain([String::new()])
        .collect();
    let history = s["scrollback"].as_array().unwrap();
    let summary = |alt: &Value, rows: &[String], history: &[Value]| {
        format!(
            "alt_screen {alt}, rows {:?}..{:?}, {} history rows (first {:?})",
            rows.first(),
            rows.last(),
            history.len(),
            history.first()
        )
    };
    assert_eq!(
        summary(&inspect["alt_screen"], &rows, history),
        summary(&json!(true), &expected, &[]),
        "on the alternate screen after 2.5 MB: alt_screen, its last rows, no history \
         (the alternate screen keeps none); inspect: {inspect}"
    );
    assert_eq!(rows, expected);
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    until_title(&d, &id, "left");
    let inspect = d.ok_as(READER, "sessions.inspect", json!({"session_id": id}));
    assert_eq!(inspect["alt_screen"], false);
    let s = snapshot(&d, &id, json!({"scrollback": true}));
    assert_eq!(
        normalised(&lines(&s)),
        ["main row 1", "main row 2", "main row 3"],
        "the main screen as it was before the alternate screen"
    );
    assert_eq!(s["cursor"], json!({"x": 0, "y": 3, "visible": true}));
    assert_eq!(s["scrollback"], json!([]));
}

/// Done means: tab readback — a TAB reads back as the spaces it covers in `lines`, `dump`,
/// `run` output, and `wait --until` matches them.
#[test]
fn tabs_read_back_as_the_spaces_they_cover() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "printf 'a\\tb\\n'; exec sleep 30"})));
    let out = d.cli(&[
        "--as",
        READER,
        "sessions",
        "wait",
        &id,
        "--until",
        "a       b",
        "--timeout",
        "3s",
    ]);
    let s = snapshot(&d, &id, json!({}));
    let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": id}));
    assert_eq!(
        (s["lines"][0].clone(), dump["text"].clone()),
        (json!("a       b"), json!("a       b")),
        "lines[0] and dump"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "wait --until 'a       b': {out:?}"
    );

    let sh = sid(&d.create(json!({"command": "sh"})));
    let run = d.ok_as(
        READER,
        "sessions.run",
        json!({"session_id": sh, "command": "printf 'x\\ty\\n'", "timeout": 10}),
    );
    assert_eq!(run["output"], "x       y");
}

/// Done means: scrollback count after a 150,000-line flood with `--scrollback-lines 100000`:
/// exactly 100,000 whole rows, `truncated` when more was asked for than survives.
#[test]
fn scrollback_keeps_exactly_its_lines_under_a_flood() {
    let d = Daemon::start();
    // 150,000 lines of 13 bytes ≈ 2 MB, nobody reading while it floods.
    let cmd = "seq -f 'flood %06g' 1 150000; printf '\\033]2;flooded\\007'; exec sleep 30";
    let v = d.cli_ok(&[
        "sessions",
        "create",
        "--command",
        cmd,
        "--scrollback-lines",
        "100000",
        "--cols",
        "80",
        "--rows",
        "24",
    ]);
    let id = sid(&v["result"]["session"]);
    until_title(&d, &id, "flooded");
    let line = |n: usize| format!("flood {n:06}");
    let s = snapshot(&d, &id, json!({"scrollback": true}));
    // 150,000 lines and the cursor's empty row: the viewport holds 149,978..150,000 and "".
    let view = lines(&s);
    assert_eq!(view[0], line(149_978));
    assert_eq!(view[22], line(150_000));
    let history: Vec<&str> = s["scrollback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let first = history.first().copied().unwrap_or_default();
    let broken = (0..history.len()).find(|&i| history[i] != line(49_978 + i));
    assert!(
        history.len() == 100_000 && broken.is_none(),
        "expected exactly the 100,000 newest history rows ({}..{}), got {} rows, first {first:?}, \
         first unexpected row at {broken:?}",
        line(49_978),
        line(149_977),
        history.len(),
    );
    assert_eq!(
        s["truncated"], true,
        "all history was asked for and 49,977 rows are gone"
    );
    let s = snapshot(&d, &id, json!({"scrollback": 99_999}));
    let history = s["scrollback"].as_array().unwrap();
    assert_eq!(history.len(), 99_999);
    assert_eq!(history[0], line(49_979));
    assert_eq!(s["truncated"], false, "every row asked for is there");
}

/// Done means: a 1-column session printing CJK text keeps running and answers reads.
#[test]
fn one_column_session_printing_cjk_keeps_running() {
    let d = Daemon::start();
    let cmd = "stty -echo; printf '日本語のテキスト\\n'; read x; printf '漢字かな混じり\\n'; \
               printf '\\033]2;after-cjk\\007'; read y; echo still-alive; \
               printf '\\033]2;alive\\007'; exec sleep 30";
    let id = sid(&d.create(json!({"command": cmd, "cols": 20, "rows": 6})));
    assert!(until_text(&d, &id, "日本語のテキスト", 10));
    let pid = d.get(&id)["pid"].clone();
    assert!(pid.is_u64(), "the program runs: {pid}");
    // Resize to one column: clamped to a size the grid supports, or refused with a typed
    // error; either way the session lives on.
    let r = d.call(
        "sessions.resize",
        json!({"session_id": id, "cols": 1, "rows": 6}),
    );
    let cols = if r["ok"] == true {
        let applied = r["result"]["applied"].clone();
        assert_eq!(applied["rows"], 6, "{r}");
        applied["cols"].as_u64().unwrap()
    } else {
        assert_eq!(
            r["error"]["code"], "invalid_request",
            "a typed refusal: {r}"
        );
        20
    };
    let s = snapshot(&d, &id, json!({}));
    assert_eq!(
        s["cols"], cols,
        "the snapshot reports the size in force: {s}"
    );
    // More wide characters at that width, then plain text.
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    until_title(&d, &id, "after-cjk");
    snapshot(&d, &id, json!({}));
    d.ok(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    );
    until_title(&d, &id, "alive");
    let view = d.get(&id);
    assert_eq!(view["lifecycle"], "running", "{view}");
    assert_eq!(view["pid"], pid, "the same program");
    let s = snapshot(&d, &id, json!({"unwrap": true}));
    assert!(
        lines(&s).iter().any(|l| l.contains("still-alive")),
        "the read shows the program's output: {s}"
    );
}
