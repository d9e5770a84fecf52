//! Hostile screen reads (issue 18, item 4): `snapshot --cells` of a 1000x1000 session full
//! of coloured text. Before: one answer was a ~190 MiB line (over the CLI's own 64 MiB read
//! cap) with a peak of ~3 GB; four at once aborted the daemon. Now one answer is at most
//! `SCREEN_ANSWER_MAX_BYTES` (16 MiB), cut at a row with `truncated_reason: "size_limit"`
//! and `next_row` to continue from; the bytes of all answers in flight are charged to
//! `SCREEN_READ_TOTAL_MAX_BYTES` (64 MiB, `busy` past it); and a grid's cells
//! (`cols x (rows + scrollback_lines)`) are bounded at create and resize. Bounds are asserted
//! from `daemon.stats` and `/proc`, never from timings.

use crate::common::{Daemon, READER};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

const MIB: usize = 1024 * 1024;
/// `SCREEN_ANSWER_MAX_BYTES`.
const ANSWER_MAX: usize = 16 * MIB;
/// `SCREEN_READ_TOTAL_MAX_BYTES`.
const READ_TOTAL_MAX: i64 = 64 * MIB as i64;
/// `GRID_MAX_CELLS`.
const GRID_MAX_CELLS: u64 = 16 * 1024 * 1024;

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

fn proc_kib(pid: u32, field: &str) -> i64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

/// One request as the `reader` source; the answer line's length in bytes and the parsed
/// response.
fn read_raw(d: &Daemon, method: &str, params: Value) -> (usize, Value) {
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let req = json!({"token": d.token(), "method": method, "params": params, "caller": READER});
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut line = Vec::new();
    BufReader::new(s).read_until(b'\n', &mut line).unwrap();
    let parsed = serde_json::from_slice(&line)
        .unwrap_or_else(|e| panic!("the answer ({} bytes) does not parse: {e}", line.len()));
    (line.len(), parsed)
}

/// A file of `rows - 1` lines of `cols` cells, each cell in its own 256-colour foreground,
/// then `END-OF-SCREEN` on the last row: every row but the last is all styled cells.
fn coloured_screen(path: &std::path::Path, cols: usize, rows: usize) {
    let mut out = Vec::with_capacity(cols * rows * 12);
    for r in 0..rows - 1 {
        for c in 0..cols {
            write!(
                out,
                "\x1b[38;5;{}m{}",
                (r + c) % 200 + 16,
                (b'a' + ((r + c) % 26) as u8) as char
            )
            .unwrap();
        }
        out.extend_from_slice(b"\x1b[0m\r\n");
    }
    out.extend_from_slice(b"END-OF-SCREEN");
    std::fs::write(path, out).unwrap();
}

/// A 1000x1000 screen of coloured text read with `cells`: one answer at a time, four at
/// once, and paged through to the end with `next_row`. Every answer parses and stays under
/// the cap, the pages add up to every styled cell exactly once, the reads' memory is
/// charged and returned, RSS grows by a bounded amount, and the daemon serves throughout.
#[test]
fn a_huge_coloured_screen_is_read_in_bounded_pages() {
    let d = Daemon::start();
    let file = d.path("screen.txt");
    coloured_screen(&file, 1000, 1000);
    let command = format!("cat {}; exec sleep 600", file.display());
    let id = sid(&d.create(json!({
        "command": command, "cols": 1000, "rows": 1000, "scrollback_lines": 100
    })));
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": "END-OF-SCREEN", "timeout": 60}),
    );
    assert_eq!(r["outcome"], "matched", "{r}");
    // The grid exists and is parsed up to date: what follows measures the reads alone.
    let pid = d.pid();
    let baseline = proc_kib(pid, "VmRSS:");
    // Reset the peak (VmHWM) to the current RSS.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();

    let started = std::time::Instant::now();
    let (len, first) = read_raw(
        &d,
        "sessions.snapshot",
        json!({"session_id": id, "cells": true}),
    );
    let peak_one = proc_kib(pid, "VmHWM:") - baseline;
    eprintln!(
        "figures: one snapshot --cells of 1000x1000: answer {len} bytes, peak RSS +{peak_one} \
         KiB, {:?}",
        started.elapsed()
    );
    assert!(
        len <= ANSWER_MAX,
        "one answer is {len} bytes, over the {ANSWER_MAX}-byte cap"
    );
    assert_eq!(first["ok"], true, "{}", first["error"]);
    let page = &first["result"];
    assert_eq!(page["truncated"], true);
    assert_eq!(page["truncated_reason"], "size_limit");
    let next = page["next_row"].as_u64().expect("next_row on a cut answer");
    assert!(next > 0 && next < 1000, "next_row {next}");
    assert_eq!(
        page["lines"].as_array().unwrap().len() as u64,
        next,
        "a page holds whole rows, text and cells together"
    );

    // Four at once: each answer is bounded and parses, or is refused `busy` with a remedy
    // when the reads in flight hold the whole budget.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let answers: Vec<(usize, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (d, id) = (&d, &id);
                s.spawn(move || {
                    read_raw(
                        d,
                        "sessions.snapshot",
                        json!({"session_id": id, "cells": true}),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let peak_four = proc_kib(pid, "VmHWM:") - baseline;
    let mut served = 0;
    for (len, answer) in &answers {
        assert!(*len <= ANSWER_MAX, "an answer of {len} bytes");
        if answer["ok"] == true {
            served += 1;
            assert_eq!(answer["result"]["truncated_reason"], "size_limit");
        } else {
            assert_eq!(answer["error"]["code"], "busy", "{answer}");
            assert!(answer["error"]["remedy"].is_string(), "{answer}");
        }
    }
    eprintln!(
        "figures: four at once: {served} served, peak RSS +{peak_four} KiB over {baseline} KiB"
    );
    assert!(served >= 1, "no read was served: {answers:?}");
    // Four answers of at most 16 MiB, each held once: far below the ~3 GB one read took.
    assert!(
        peak_four <= 256 * 1024,
        "RSS grew {peak_four} KiB for four bounded reads"
    );

    // Paged to the end: every styled cell exactly once (999 rows of 1000), the last row's
    // text, and no cut on the last page. (Pages are parsed into just the fields checked.)
    #[derive(serde::Deserialize)]
    struct Cell {
        row: u64,
        col: u64,
    }
    #[derive(serde::Deserialize)]
    struct Page {
        lines: Vec<String>,
        cells: Vec<Cell>,
        truncated: bool,
        next_row: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        ok: bool,
        result: Page,
    }
    let mut seen = vec![false; 1000 * 1000];
    let mut start = 0u64;
    let mut pages = 0;
    loop {
        let mut s = UnixStream::connect(d.socket()).unwrap();
        let req = json!({"token": d.token(), "method": "sessions.snapshot", "caller": READER,
                         "params": {"session_id": id, "cells": true, "start_row": start}});
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        let mut line = Vec::new();
        BufReader::new(s).read_until(b'\n', &mut line).unwrap();
        assert!(line.len() <= ANSWER_MAX, "page of {} bytes", line.len());
        let answer: Answer = serde_json::from_slice(&line).unwrap();
        assert!(answer.ok);
        let page = answer.result;
        pages += 1;
        for cell in &page.cells {
            let row = start + cell.row;
            let slot = &mut seen[(row * 1000 + cell.col) as usize];
            assert!(!*slot, "cell ({row}, {}) listed twice", cell.col);
            *slot = true;
        }
        match page.next_row {
            Some(next) => {
                assert!(page.truncated);
                assert_eq!(next, start + page.lines.len() as u64);
                start = next;
            }
            None => {
                assert_eq!(page.lines.last().unwrap(), "END-OF-SCREEN");
                assert_eq!(start + page.lines.len() as u64, 1000);
                break;
            }
        }
        assert!(pages < 100, "paging does not end");
    }
    let listed = seen.iter().filter(|s| **s).count();
    // Row 999 holds END-OF-SCREEN in default colours: not listed.
    assert_eq!(listed, 999 * 1000, "in {pages} pages");
    eprintln!("figures: {pages} pages of at most {ANSWER_MAX} bytes");

    // The CLI reads a cut answer (it is under its own 64 MiB cap) and pages with
    // --start-row.
    let out = d.cli_ok(&["--as", READER, "sessions", "snapshot", &id, "--cells"]);
    assert_eq!(out["result"]["truncated_reason"], "size_limit");
    let last = d.cli_ok(&[
        "--as",
        READER,
        "sessions",
        "snapshot",
        &id,
        "--cells",
        "--start-row",
        &start.to_string(),
    ]);
    let last = &last["result"];
    assert_eq!(last["lines"].as_array().unwrap().len() as u64, 1000 - start);
    assert!(last.get("next_row").is_none(), "{}", last["truncated"]);

    // An attach's repaint is a screen read too: charged while it is written, returned once
    // the attached client has taken it (while it stays attached).
    let mut attach = UnixStream::connect(d.socket()).unwrap();
    let req = json!({"token": d.token(), "method": "sessions.attach",
                     "params": {"session_id": id}, "caller": READER});
    attach.write_all(format!("{req}\n").as_bytes()).unwrap();
    let reader = attach.try_clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let drain = std::thread::spawn(move || {
        let mut r = BufReader::new(reader);
        let mut first = String::new();
        r.read_line(&mut first).unwrap();
        tx.send(first).unwrap();
        std::io::copy(&mut r, &mut std::io::sink()).unwrap_or(0)
    });
    let first = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&first).unwrap()["ok"],
        true,
        "{first}"
    );
    d.wait_stat("screen_read_bytes", 0);
    let _ = attach.shutdown(std::net::Shutdown::Both);
    let taken = drain.join().unwrap();
    assert!(taken > 1_000_000, "a repaint of {taken} bytes");

    // Every read's charge was returned; the daemon still serves.
    let stats = d.ok("daemon.stats", json!({}));
    assert_eq!(stats["screen_read_bytes"], 0, "{stats}");
    assert_eq!(stats["screen_read_max_bytes"], READ_TOTAL_MAX, "{stats}");
    let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": id}));
    assert!(dump["text"].as_str().unwrap().ends_with("END-OF-SCREEN"));
    assert!(d.create(json!({"command": "sleep 60"}))["pid"].is_number());
}

/// More reads in flight than the budget holds: the ones past it are refused `busy` with a
/// remedy (never queued without bound), `screen_reads_refused` counts them, short requests
/// are served meanwhile, and the charge returns to 0. The daemon's budget is set to 20 MiB
/// (`--screen-read-bytes`) so that one ~16 MiB answer its client does not read (it stays
/// charged while its write is blocked) leaves no room for a second.
#[test]
fn reads_past_the_shared_budget_are_refused_busy() {
    let d = Daemon::start_with(&["--screen-read-bytes", "20971520"]);
    assert_eq!(d.stat("screen_read_max_bytes"), 20 * MIB as i64);
    let file = d.path("screen.txt");
    coloured_screen(&file, 1000, 1000);
    let command = format!("cat {}; exec sleep 600", file.display());
    let id = sid(&d.create(json!({
        "command": command, "cols": 1000, "rows": 1000, "scrollback_lines": 100
    })));
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": "END-OF-SCREEN", "timeout": 60}),
    );
    assert_eq!(r["outcome"], "matched", "{r}");
    // Three reads at once, none read past its first bytes.
    let mut conns: Vec<UnixStream> = (0..3)
        .map(|_| {
            let mut s = UnixStream::connect(d.socket()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let req = json!({"token": d.token(), "method": "sessions.snapshot",
                             "params": {"session_id": id, "cells": true}, "caller": READER});
            s.write_all(format!("{req}\n").as_bytes()).unwrap();
            s
        })
        .collect();
    let mut refused = 0;
    let mut served = 0;
    for s in &mut conns {
        let mut head = [0u8; 11];
        std::io::Read::read_exact(s, &mut head).unwrap();
        if &head == b"{\"ok\":false" {
            refused += 1;
            let mut line = head.to_vec();
            BufReader::new(&*s).read_until(b'\n', &mut line).unwrap();
            let answer: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(answer["error"]["code"], "busy", "{answer}");
            assert!(
                answer["error"]["remedy"]
                    .as_str()
                    .unwrap()
                    .contains("retry"),
                "{answer}"
            );
        } else {
            assert_eq!(&head[..10], b"{\"ok\":true");
            served += 1;
        }
    }
    let charged = d.stat("screen_read_bytes");
    eprintln!("figures: three unread reads, 20 MiB budget: {served} served, {refused} refused, {charged} bytes charged");
    assert_eq!(
        (served, refused),
        (1, 2),
        "one ~16 MiB answer fills a 20 MiB budget"
    );
    assert!(
        charged > 15 * MIB as i64 && charged <= 20 * MIB as i64,
        "{charged}"
    );
    assert_eq!(d.stat("screen_reads_refused"), 2);
    // Short requests are served while the budget is spent.
    d.ok("sessions.get", json!({"session_id": id}));
    drop(conns);
    d.wait_stat("screen_read_bytes", 0);
    // With the budget free again a read is served.
    let (len, answer) = read_raw(&d, "sessions.inspect", json!({"session_id": id}));
    assert!(len < 4096 && answer["ok"] == true, "{answer}");
}

/// A grid's size is bounded at create and resize: `cols x (rows + scrollback_lines)` over
/// `GRID_MAX_CELLS` is refused `invalid_request` with a remedy naming the limit, and
/// nothing changes.
#[test]
fn grid_size_is_bounded_at_create_and_resize() {
    let d = Daemon::start();
    let before = d.count();
    let r = d.err(
        "sessions.create",
        json!({"command": "sleep 60", "cols": 1000, "rows": 1000, "scrollback_lines": 100000}),
        "invalid_request",
    );
    let remedy = r["error"]["remedy"].as_str().unwrap();
    assert!(remedy.contains("16777216"), "{r}");
    assert_eq!(d.count(), before, "nothing was created");
    // The largest scrollback still goes with an ordinary width, and 1000x1000 with the
    // default scrollback.
    d.create(json!({"command": "sleep 60", "cols": 160, "rows": 50, "scrollback_lines": 100000}));
    let id = sid(&d.create(json!({"command": "sleep 60", "cols": 1000, "rows": 1000})));
    let wide = sid(&d.create(
        json!({"command": "sleep 60", "cols": 80, "rows": 24, "scrollback_lines": 100000}),
    ));
    let r = d.err(
        "sessions.resize",
        json!({"session_id": wide, "cols": 1000, "rows": 1000}),
        "invalid_request",
    );
    assert!(
        r["error"]["remedy"].as_str().unwrap().contains("16777216"),
        "{r}"
    );
    let view = d.get(&wide);
    assert_eq!(
        (view["cols"].as_u64(), view["rows"].as_u64()),
        (Some(80), Some(24))
    );
    let cells = 1000 * (1000 + 10_000u64);
    assert!(cells <= GRID_MAX_CELLS);
    d.ok_as(
        READER,
        "sessions.resize",
        json!({"session_id": id, "cols": 500, "rows": 500}),
    );
}

/// A screen read's answer is written as the session's actor encoded it, inside the same
/// envelope every response has: the request's `id` echoed, unknown params warned about.
#[test]
fn a_read_answer_keeps_the_envelope() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "printf 'hello'; exec sleep 60"})));
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": "hello", "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched", "{r}");
    for method in ["sessions.snapshot", "sessions.dump", "sessions.inspect"] {
        let req = json!({"token": d.token(), "method": method, "caller": READER, "id": 7,
                         "params": {"session_id": id, "bogus": 1}});
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        let answer = d.raw(&line);
        assert_eq!(answer["ok"], true, "{answer}");
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["warnings"][0]["code"], "unknown_param", "{answer}");
        assert_eq!(answer["warnings"][0]["param"], "bogus", "{answer}");
        let keys: Vec<&str> = answer
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["ok", "result", "id", "warnings"], "{answer}");
    }
}
