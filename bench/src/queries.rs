//! Scenario — Terminal query round trips: a program in a session writes a query (CPR
//! `ESC [ 6 n`, DA1 `ESC [ c`) and reads the answer, N times back to back, in a maxx session
//! nobody reads (no attach, no snapshot, no wait) and in a detached tmux pane, in the same run.
//!
//! The program is this binary (`maxx-bench child-query OUT N`): it puts its tty in raw mode,
//! and for each query discards pending input, writes the query, reads until the answer's
//! final byte (`R` / `c`) and records the time from the write to that byte. An answer that
//! does not come within [`DEADLINE`] counts as "no answer" and ends that query's series (the
//! rest would only wait out the same deadline). The samples go to OUT as JSON, written
//! atomically; the harness waits for the file (inotify), so nothing is read from the session.

use crate::maxx::Daemon;
use crate::tmux::Tmux;
use crate::util::{percentile, Inotify, Summary, TempDir, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How long the child waits for one answer before it says "no answer".
pub const DEADLINE: Duration = Duration::from_secs(1);

/// (name, query bytes, the answer's final byte)
const QUERIES: [(&str, &[u8], u8); 2] = [("CPR", b"\x1b[6n", b'R'), ("DA1", b"\x1b[c", b'c')];

/// The child: `child-query OUT N`. Never returns.
pub fn child_query(out: &str, n: &str) -> ! {
    let n: usize = n.parse().unwrap_or(200);
    let doc = match measure(n) {
        Ok(v) => v,
        Err(e) => json!({"error": e.to_string()}),
    };
    let tmp = format!("{out}.tmp");
    let ok = std::fs::write(&tmp, doc.to_string()).and_then(|_| std::fs::rename(&tmp, out));
    std::process::exit(if ok.is_ok() { 0 } else { 1 })
}

fn measure(n: usize) -> R<Value> {
    let fd = std::io::stdin().as_raw_fd();
    // SAFETY: termios calls on our own stdin with locals.
    let mut old: libc::termios = unsafe { std::mem::zeroed() };
    if unsafe { libc::tcgetattr(fd, &mut old) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let mut raw = old;
    unsafe { libc::cfmakeraw(&mut raw) };
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) };
    let mut res = serde_json::Map::new();
    for (name, q, fin) in QUERIES {
        let mut samples_us = Vec::with_capacity(n);
        let mut answer = String::new();
        let mut answered = true;
        for _ in 0..n {
            unsafe { libc::tcflush(fd, libc::TCIFLUSH) };
            let t0 = Instant::now();
            let w = unsafe { libc::write(fd, q.as_ptr() as *const libc::c_void, q.len()) };
            if w != q.len() as isize {
                return Err(std::io::Error::last_os_error().into());
            }
            match read_answer(fd, fin, t0 + DEADLINE) {
                Some(bytes) => {
                    samples_us.push(t0.elapsed().as_secs_f64() * 1e6);
                    if answer.is_empty() {
                        answer = String::from_utf8_lossy(&bytes).into_owned();
                    }
                }
                None => {
                    answered = false;
                    break;
                }
            }
        }
        res.insert(
            name.to_string(),
            json!({"answered": answered, "answer": answer, "samples_us": samples_us}),
        );
    }
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &old) };
    Ok(Value::Object(res))
}

/// Read until a byte equal to `fin` arrives (after an ESC), or the deadline passes.
fn read_answer(fd: i32, fin: u8, deadline: Instant) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            continue;
        }
        let k = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if k <= 0 {
            return None;
        }
        got.extend_from_slice(&buf[..k as usize]);
        if let Some(esc) = got.iter().position(|b| *b == 0x1b) {
            if got[esc + 1..].iter().skip(1).any(|b| *b == fin) {
                return Some(got);
            }
        }
    }
}

/// One side's result for one query in one run.
struct Series {
    answered: bool,
    answer: String,
    samples_ms: Vec<f64>,
}

fn parse(doc: &Value, name: &str) -> R<Series> {
    if let Some(e) = doc.get("error") {
        return Err(format!("child-query failed: {e}").into());
    }
    let q = &doc[name];
    Ok(Series {
        answered: q["answered"] == true,
        answer: q["answer"].as_str().unwrap_or("").to_string(),
        samples_ms: q["samples_us"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_f64())
                    .map(|x| x / 1e3)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let (runs, n) = if cfg.quick { (1, 100) } else { (3, 200) };
    let runs = cfg.runs.unwrap_or(runs);
    let dir = TempDir::new("maxx-bench-q-")?;
    let mut ino = Inotify::new(dir.path())?;
    let daemon = Daemon::start(&cfg.maxx, &[])?;
    let c = daemon.client.clone();
    let tmux = Tmux::start("keep", 80, 24)?;
    let me = cfg.me.display().to_string();
    // Answered round trips take well under a millisecond; unanswered ones one DEADLINE each.
    let wait_for = Duration::from_secs(60);

    // [query][side] -> per-run (min, p50, p99); side 0 maxx, 1 tmux
    let mut figs: Vec<[[Vec<f64>; 3]; 2]> =
        (0..QUERIES.len()).map(|_| Default::default()).collect();
    let mut answered = vec![[true; 2]; QUERIES.len()];
    let mut answers = vec![[String::new(), String::new()]; QUERIES.len()];
    for run in 0..runs {
        // maxx: a session nobody reads.
        let name = format!("maxx-{run}");
        let out = dir.join(&name);
        let id = c.create(json!({
            "command": format!("exec {me} child-query {} {n}", out.display()),
            "cols": 80, "rows": 24, "focus": false,
        }))?;
        ino.wait(&name, wait_for)?;
        c.close(&id).ok();
        let maxx_doc: Value = serde_json::from_slice(&std::fs::read(&out)?)?;

        // tmux: a detached pane.
        let name = format!("tmux-{run}");
        let out = dir.join(&name);
        tmux.run(&[
            "new-window",
            "-d",
            &format!("exec {me} child-query {} {n}", out.display()),
        ])?;
        ino.wait(&name, wait_for)?;
        let tmux_doc: Value = serde_json::from_slice(&std::fs::read(&out)?)?;

        for (qi, (qname, _, _)) in QUERIES.iter().enumerate() {
            for (side, doc) in [&maxx_doc, &tmux_doc].into_iter().enumerate() {
                let s = parse(doc, qname)?;
                answered[qi][side] &= s.answered;
                if answers[qi][side].is_empty() {
                    answers[qi][side] = s.answer.clone();
                }
                if s.answered {
                    let v = &s.samples_ms;
                    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
                    figs[qi][side][0].push(min);
                    figs[qi][side][1].push(percentile(v, 50.0));
                    figs[qi][side][2].push(percentile(v, 99.0));
                }
            }
            eprintln!(
                "  queries run {run} {qname}: maxx {}, tmux {}",
                describe(answered[qi][0], figs[qi][0][1].last()),
                describe(answered[qi][1], figs[qi][1][1].last())
            );
        }
    }

    let mut rows = Vec::new();
    let mut detail = serde_json::Map::new();
    for (qi, (qname, q, _)) in QUERIES.iter().enumerate() {
        let no_answer = |side: usize| {
            if answered[qi][side] {
                String::new()
            } else {
                format!(
                    "{}: no answer within {} ms",
                    ["maxx", "tmux"][side],
                    DEADLINE.as_millis()
                )
            }
        };
        let note = [no_answer(0), no_answer(1)]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        for (i, stat) in ["min", "p50", "p99"].iter().enumerate() {
            let m = if answered[qi][0] {
                Summary::of(&figs[qi][0][i])
            } else {
                None
            };
            let t = if answered[qi][1] {
                Summary::of(&figs[qi][1][i])
            } else {
                None
            };
            let mut row = Row::new(
                "queries",
                &format!("{qname} round trip, session nobody reads ({stat} of {n})"),
                "ms",
            )
            .maxx(m)
            .tmux(t);
            if !answered[qi][0] {
                row = row.maxx_missing("no answer");
            }
            if *stat == "p50" {
                row = row.note(note.clone());
                let met = match (answered[qi][0], m, t) {
                    (false, _, _) => Some(false),
                    (true, Some(m), Some(t)) => Some(m.med <= t.med),
                    _ => None,
                };
                row = row.target("≤ tmux, answered", met);
            }
            rows.push(row);
        }
        let side = |s: usize| {
            json!({
                "answered": answered[qi][s],
                "answer": answers[qi][s],
                "min_ms": Summary::of(&figs[qi][s][0]).map(|x| x.json()),
                "p50_ms": Summary::of(&figs[qi][s][1]).map(|x| x.json()),
                "p99_ms": Summary::of(&figs[qi][s][2]).map(|x| x.json()),
            })
        };
        detail.insert(
            qname.to_string(),
            json!({
                "query": String::from_utf8_lossy(q),
                "maxx": side(0),
                "tmux": side(1),
            }),
        );
    }
    detail.insert("round_trips_per_run".into(), json!(n));
    detail.insert("runs".into(), json!(runs));
    detail.insert("deadline_ms".into(), json!(DEADLINE.as_millis() as u64));
    detail.insert(
        "method".into(),
        json!("the child writes the query and reads the answer in raw mode, back to back; maxx: a session with no attach, snapshot or wait; tmux: a detached window"),
    );
    drop(daemon);
    Ok((rows, Value::Object(detail)))
}

fn describe(answered: bool, p50: Option<&f64>) -> String {
    match (answered, p50) {
        (true, Some(p)) => format!("p50 {p:.3} ms"),
        _ => "no answer".into(),
    }
}
