//! Issue 20 under load: the daemon replaced (`maxx daemon upgrade`) or killed (-9) while
//! clients keep sending requests through the CLI. Every request either succeeds or ends
//! with the documented `daemon_restarted` (exit 3: it was in flight when the daemon went;
//! the CLI never retries it because it may have been applied); a request that found no
//! daemon waits for the new one. Nothing hangs, every session keeps running, and every
//! acknowledged declaration is there afterwards.

use crate::common::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

/// What one client thread saw: (ok count, exit 3 `daemon_restarted` count, the last value
/// acknowledged per key, any other failure).
#[derive(Default)]
struct Seen {
    ok: usize,
    restarted: usize,
    acked: Vec<(String, u64)>,
    other: Vec<String>,
}

/// `clients` threads, each alternating `set-metadata` (a counter of its own) and `get` on
/// its session through the CLI until `stop`.
fn load(d: &Daemon, ids: &[String], stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<Seen>> {
    ids.iter()
        .enumerate()
        .map(|(c, id)| {
            let (id, stop) = (id.clone(), stop.clone());
            let control = d.control.clone();
            std::thread::spawn(move || {
                let mut seen = Seen::default();
                let key = format!("c{c}");
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let value = n.to_string();
                    let args: Vec<&str> = if n % 2 == 0 {
                        vec!["sessions", "get", &id]
                    } else {
                        vec![
                            "sessions",
                            "set-metadata",
                            &id,
                            "--key",
                            &key,
                            "--value",
                            &value,
                        ]
                    };
                    let out = std::process::Command::new(maxx_bin())
                        .args(&args)
                        .env("MAXX_CONTROL_DIR", &control)
                        .output()
                        .unwrap();
                    match out.status.code() {
                        Some(0) => {
                            seen.ok += 1;
                            if n % 2 == 1 {
                                seen.acked.push((key.clone(), n));
                            }
                        }
                        Some(3)
                            if serde_json::from_slice::<Value>(&out.stderr)
                                .is_ok_and(|e| e["error"]["code"] == "daemon_restarted") =>
                        {
                            seen.restarted += 1
                        }
                        code => seen.other.push(format!(
                            "{args:?}: {code:?} {}",
                            String::from_utf8_lossy(&out.stderr)
                        )),
                    }
                }
                seen
            })
        })
        .collect()
}

/// `sessions.get` over the socket, or `None` while no daemon answers (the harness's own
/// call expects one).
fn try_get(d: &Daemon, id: &str) -> Option<Value> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(d.socket()).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let req = json!({"token": d.token(), "method": "sessions.get", "params": {"session_id": id}});
    s.write_all(format!("{req}\n").as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    serde_json::from_str::<Value>(&out)
        .ok()
        .filter(|v| v["ok"] == true)
}

/// Run the load, do `what` in the middle of it, keep the load going past it, then check.
fn survives_under_load(d: &Daemon, what: impl FnOnce(&Daemon)) {
    let ids: Vec<String> = (0..4)
        .map(|i| {
            d.create(json!({"command": "exec sleep 600", "title": format!("load{i}")}))
                ["session_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let pids: Vec<Value> = ids.iter().map(|id| d.get(id)["pid"].clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let threads = load(d, &ids, &stop);
    // Load before...
    wait_for("requests under way", T, || {
        let v = d.get(&ids[0]);
        v["metadata"]["c0"]
            .as_str()?
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 20)
    });
    let old = d.pid();
    what(d);
    // ...and after: requests keep succeeding against the new daemon.
    let after = Instant::now();
    wait_for("requests served by the new daemon", T, || {
        let answered = try_get(d, &ids[0]).is_some();
        let new = d.daemon_pid().is_some_and(|p| p != old);
        (answered && new && after.elapsed() > Duration::from_millis(300)).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let (ok, restarted): (usize, usize) = seen
        .iter()
        .fold((0, 0), |(o, r), s| (o + s.ok, r + s.restarted));
    eprintln!("{ok} requests ok, {restarted} daemon_restarted");
    for s in &seen {
        assert!(
            s.other.is_empty(),
            "failures beyond daemon_restarted: {:?}",
            s.other
        );
    }
    assert!(ok > 0);
    // Every session kept its program; every acknowledged declaration is there (the last
    // acknowledged value of each key, or a later one that was applied but cut).
    for ((id, pid), s) in ids.iter().zip(&pids).zip(&seen) {
        let v = d.get(id);
        assert_eq!(v["lifecycle"], "running", "{v}");
        assert_eq!(&v["pid"], pid, "{v}");
        if let Some((key, n)) = s.acked.last() {
            let now: u64 = v["metadata"][key].as_str().unwrap().parse().unwrap();
            assert!(now >= *n, "{key}: {now} < acknowledged {n}");
        }
    }
}

#[test]
fn an_upgrade_under_load_fails_no_request_beyond_daemon_restarted() {
    let d = Daemon::start_linked();
    wait_for("keeper.pid", T, || read(&d.control.join("keeper.pid")));
    survives_under_load(&d, |d| {
        let out = d.cli(&["daemon", "upgrade"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    });
}

#[test]
fn a_kill_9_of_the_daemon_under_load_fails_no_request_beyond_daemon_restarted() {
    let d = Daemon::start();
    wait_for("keeper.pid", T, || read(&d.control.join("keeper.pid")));
    survives_under_load(&d, |d| {
        // SAFETY: signalling the daemon our keeper started.
        unsafe { libc::kill(d.pid() as i32, libc::SIGKILL) };
    });
}

/// Issue 20's "50 live sessions" case: shells at a prompt, a full-screen program, a program
/// with a restart policy and one that exits 7 while no daemon runs. After kill -9 of the
/// daemon every program that was running still runs under the same pid and takes input typed
/// after the recovery, the one that exited reads `exited` 7, and the restart policy acts on
/// the exit it missed.
#[test]
fn fifty_live_sessions_survive_a_kill_9_and_take_input_after_it() {
    let d = Daemon::start();
    wait_for("keeper.pid", T, || read(&d.control.join("keeper.pid")));
    let go = d.path("go");
    let sid = |v: Value| v["session_id"].as_str().unwrap().to_string();
    let shells: Vec<String> = (0..46)
        .map(|i| {
            sid(d.create(json!({"command": "PS1='ready> ' exec sh -i", "title": format!("sh{i}")})))
        })
        .collect();
    let text = d.path("pages.txt");
    let lines: String = (1..=200).map(|n| format!("page line {n}\n")).collect();
    std::fs::write(&text, lines).unwrap();
    let pager = sid(
        d.create(json!({"command": format!("exec less {}", text.display()), "title": "pager"}))
    );
    // First run: waits for `go`, exits 1 (restarted on failure); the second sees its marker
    // and stays.
    let marker = d.path("restarted-once");
    let restarting = sid(d.create(json!({
        "command": format!(
            "if [ -e {m} ]; then exec sleep 600; fi; touch {m}; while [ ! -e {g} ]; do sleep 0.01; done; exit 1",
            m = marker.display(), g = go.display()
        ),
        "restart": "on-failure", "backoff": "50ms..100ms", "title": "restarts"
    })));
    let exiter = sid(d.create(json!({
        "command": format!("while [ ! -e {} ]; do sleep 0.01; done; exit 7", go.display()),
        "title": "exits 7"
    })));
    // A numbered line every millisecond, through the kill and the recovery.
    let writer = sid(d.create(json!({
        "command": "exec python3 -u -c 'import time, itertools\nfor i in itertools.count(1):\n    print(\"n\", i)\n    time.sleep(0.001)'",
        "scrollback_lines": 100000, "title": "writer"
    })));
    assert_eq!(shells.len() + 4, 50);
    let numbers = |id: &str| -> Vec<u64> {
        d.ok_as(
            READER,
            "sessions.dump",
            json!({"session_id": id, "scrollback": true}),
        )["text"]
            .as_str()
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("n ")?.trim().parse().ok())
            .collect()
    };
    let snapshot = |id: &str| -> Value {
        d.ok_as(
            READER,
            "sessions.snapshot",
            json!({"session_id": id, "cells": true, "scrollback": true}),
        )
    };
    let screen = |id: &str| -> String {
        d.ok_as(READER, "sessions.dump", json!({"session_id": id}))["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for id in &shells {
        wait_for("a prompt", T, || {
            screen(id).contains("ready>").then_some(())
        });
    }
    wait_for("the pager's first page", T, || {
        screen(&pager).contains("page line 1\n").then_some(())
    });
    wait_for("the restarting program's first run", T, || {
        marker.exists().then_some(())
    });
    wait_for("the writer's first lines", T, || {
        (numbers(&writer).len() > 100).then_some(())
    });
    // An acknowledged declaration on every session.
    for (i, id) in shells.iter().chain([&pager, &writer]).enumerate() {
        d.ok(
            "sessions.set-metadata",
            json!({"session_id": id, "key": "n", "value": i}),
        );
    }
    let running: Vec<(&String, Value, Value)> = shells
        .iter()
        .chain([&pager])
        .map(|id| (id, d.get(id)["pid"].clone(), snapshot(id)))
        .collect();
    let writer_pid = d.get(&writer)["pid"].clone();
    let first_run = d.get(&restarting)["pid"].clone();

    let old = d.pid();
    // SAFETY: signalling the daemon our keeper started.
    unsafe { libc::kill(old as i32, libc::SIGKILL) };
    std::fs::write(&go, b"").unwrap();
    wait_for("a new daemon to answer", T, || {
        let new = d.daemon_pid().filter(|p| *p != old && process_alive(*p))?;
        (d.call("sessions.list", json!({}))["ok"] == true).then_some(new)
    });

    for (id, pid, screen) in &running {
        let v = d.get(id);
        assert_eq!(v["lifecycle"], "running", "{v}");
        assert_eq!(&v["pid"], pid, "{v}");
        assert_eq!(&snapshot(id), screen, "the screen of {}", v["title"]);
    }
    for (i, id) in shells.iter().chain([&pager, &writer]).enumerate() {
        assert_eq!(d.get(id)["metadata"]["n"], i, "the declaration on {id}");
    }
    // The writer kept running through it: every number once, in order, from the first.
    assert_eq!(d.get(&writer)["pid"], writer_pid);
    let at_recovery = numbers(&writer).len() as u64;
    wait_for("the writer to go on", T, || {
        let seen = numbers(&writer);
        (seen.len() as u64 > at_recovery + 200).then_some(seen)
    });
    let seen = numbers(&writer);
    assert_eq!(
        seen,
        (1..=seen.len() as u64).collect::<Vec<_>>(),
        "a gap or a duplicate in the writer's lines"
    );
    wait_for("the exit while down", T, || {
        (d.get(&exiter)["lifecycle"] == "exited").then_some(())
    });
    assert_eq!(d.get(&exiter)["exit_code"], 7);
    wait_for("the restart policy to restart it", T, || {
        let v = d.get(&restarting);
        (v["lifecycle"] == "running" && v["restart_count"] == 1).then_some(())
    });
    assert_ne!(d.get(&restarting)["pid"], first_run);

    // Input typed after the recovery reaches every program.
    for (i, id) in shells.iter().enumerate() {
        let out = d.path(&format!("typed{i}"));
        d.ok(
            "sessions.action",
            json!({"session_id": id, "action": "submit",
                   "input": format!("echo after > {}", out.display())}),
        );
    }
    for i in 0..shells.len() {
        let out = d.path(&format!("typed{i}"));
        wait_for("typed input to run", T, || read(&out));
    }
    d.ok(
        "sessions.send-keys",
        json!({"session_id": pager, "keys": ["G"]}),
    );
    wait_for("the pager at its last page", T, || {
        screen(&pager).contains("page line 200").then_some(())
    });
    d.ok(
        "sessions.send-keys",
        json!({"session_id": pager, "keys": ["q"]}),
    );
    wait_for("the pager to quit", T, || {
        (d.get(&pager)["lifecycle"] == "exited").then_some(())
    });
}
