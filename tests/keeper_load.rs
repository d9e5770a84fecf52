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
