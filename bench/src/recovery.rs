//! Scenario 8 — Daemon death → sessions back (issue 20). N sessions (`exec cat`) under a
//! daemon started as `maxx daemon` (the keeper with the daemon as its child); `kill -9` of
//! the daemon; the clock runs until a new daemon lists all N sessions `running` with their
//! old pids, and until an input to the last session is acknowledged. Also the keeper's
//! resident memory (anonymous: its file pages are the binary's, shared with the daemon) with
//! N masters held. tmux has no counterpart: its panes die with its server.
//!
//! At 100 and 1,000 sessions (the brief's row): retention never drops a live record
//! (docs/persistence.md, Retention), so every survivor has its record and is re-adopted.

use crate::maxx::Daemon;
use crate::util::{ms, Summary, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `RssAnon` of a process, KiB.
fn rss_anon_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("RssAnon:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let sizes: &[usize] = if cfg.quick { &[100] } else { &[100, 1000] };
    let runs = cfg.runs.unwrap_or(if cfg.quick { 1 } else { 3 });
    let mut rows = Vec::new();
    let mut detail = serde_json::Map::new();
    for &n in sizes {
        let (mut listable, mut input, mut keeper_kib) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let daemon = Daemon::start(&cfg.maxx, &[])?;
            let c = daemon.client.clone();
            let mut ids = Vec::with_capacity(n);
            for _ in 0..n {
                ids.push(c.create(json!({"command": "exec cat", "focus": false}))?);
            }
            let pids: Vec<Value> = ids
                .iter()
                .map(|id| {
                    c.call("sessions.get", json!({"session_id": id}))
                        .map(|g| g["session"]["pid"].clone())
                })
                .collect::<R<_>>()?;
            keeper_kib.push(rss_anon_kib(daemon.keeper_pid()).unwrap_or(0) as f64);
            let old = daemon.pid();
            let t0 = Instant::now();
            unsafe { libc::kill(old as i32, libc::SIGKILL) };
            let deadline = t0 + Duration::from_secs(60);
            loop {
                if daemon.pid() != old {
                    if let Ok(list) = c.call("sessions.list", json!({})) {
                        let sessions = list["sessions"].as_array().cloned().unwrap_or_default();
                        let running = sessions
                            .iter()
                            .filter(|s| s["lifecycle"] == "running" && pids.contains(&s["pid"]))
                            .count();
                        if running == n {
                            break;
                        }
                    }
                }
                if Instant::now() > deadline {
                    return Err(format!("{n} sessions were not all back within 60 s").into());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            listable.push(ms(t0.elapsed()));
            let r = c.call(
                "sessions.action",
                json!({"session_id": ids[n - 1], "action": "input", "input": "x"}),
            )?;
            if r["session"].is_null() {
                return Err(format!("input after recovery refused: {r}").into());
            }
            input.push(ms(t0.elapsed()));
        }
        eprintln!("  recovery x{n}: listable {listable:?} ms, input {input:?} ms, keeper {keeper_kib:?} KiB");
        let l = Summary::of(&listable);
        rows.push(
            Row::new(
                "recovery",
                &format!("kill -9 of the daemon → all {n} sessions listed running"),
                "ms",
            )
            .maxx(l)
            .target("≤ 1,000 ms", l.map(|x| x.max <= 1000.0)),
        );
        rows.push(
            Row::new(
                "recovery",
                &format!("kill -9 of the daemon → input to a session acknowledged ({n} sessions)"),
                "ms",
            )
            .maxx(Summary::of(&input)),
        );
        rows.push(
            Row::new(
                "recovery",
                &format!("keeper anonymous RSS holding {n} masters"),
                "KiB",
            )
            .maxx(Summary::of(&keeper_kib)),
        );
        detail.insert(
            format!("n{n}"),
            json!({
                "listable_ms": Summary::of(&listable).map(|s| s.json()),
                "input_ms": Summary::of(&input).map(|s| s.json()),
                "keeper_rss_anon_kib": Summary::of(&keeper_kib).map(|s| s.json()),
            }),
        );
    }
    Ok((rows, Value::Object(detail)))
}
