//! Reliability (issue 7): hostile input, load, faults, crash. Each test asserts the
//! property it names; long variants are `#[ignore]`d (see docs/reliability.md).

use crate::common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// The daemon answers, its state is what it was, and nothing leaked.
fn healthy(d: &mut Daemon, sessions: usize) {
    assert!(d.alive(), "the daemon died");
    assert_eq!(d.count(), sessions);
    let stats = d.ok("daemon.stats", json!({}));
    assert_eq!(stats["watchers"], 0, "{stats}");
    assert_eq!(stats["waiters"], 0, "{stats}");
}

#[test]
fn hostile_request_lines_get_typed_errors_and_change_nothing() {
    let mut d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60", "metadata": {"k": 1}})));
    let token = d.token();
    let before = d.get(&id);
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let with = |params: &str| {
        format!("{{\"token\":\"{token}\",\"method\":\"sessions.update\",\"params\":{params}}}\n")
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{\"token\":".to_vec(), "invalid_request"),
        (nested.clone().into_bytes(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":\"sessions.get\",\"params\":{{\"session_id\":{nested}}}}}\n").into_bytes(), "invalid_request"),
        (b"\xff\xfe\xfd\n".to_vec(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":\"sessions.list\\u0000\"}}\n").into_bytes(), "unknown_method"),
        (b"{\"token\":\"a\0b\",\"method\":\"sessions.list\"}\n".to_vec(), "invalid_request"),
        (with(&format!("{{\"session_id\":\"{id}\",\"status\":12}}")).into_bytes(), "invalid_request"),
        (with(&format!("{{\"session_id\":\"{id}\",\"metadata\":\"notamap\"}}")).into_bytes(), "invalid_request"),
        (with(&format!("{{\"session_id\":\"{id}\",\"metadata\":{{\"n\":1}},\"status\":[]}}")).into_bytes(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":\"sessions.create\",\"params\":{{\"cols\":70000}}}}\n").into_bytes(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":\"sessions.events\",\"params\":{{\"session_id\":\"{id}\",\"since\":-1}}}}\n").into_bytes(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":\"sessions.events\",\"params\":{{\"session_id\":\"{id}\",\"since\":18446744073709551616}}}}\n").into_bytes(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":\"sessions.wait\",\"params\":{{\"session_id\":\"{id}\",\"lifecycle\":\"exited\",\"timeout\":1e300}}}}\n").into_bytes(), "invalid_request"),
        // A duplicate key is ambiguous: refused whole rather than resolved either way.
        (format!("{{\"token\":\"{token}\",\"token\":\"wrong\",\"method\":\"sessions.list\"}}\n").into_bytes(), "invalid_request"),
        (with(&format!("{{\"session_id\":\"{id}\",\"status\":\"a\",\"status\":\"b\"}}")).into_bytes(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":42}}\n").into_bytes(), "invalid_request"),
        (format!("{{\"token\":\"{token}\",\"method\":\"sessions.list\",\"params\":{{\"metadata_filter\":[{{\"key\":\"a\",\"value\":{{\"x\":[1,2,{{}}]}}}}]}}}}\n").into_bytes(), "ok"),
    ];
    for (bytes, want) in cases {
        let r = d.raw(&bytes);
        let got = if r["ok"] == true {
            "ok"
        } else {
            r["error"]["code"].as_str().unwrap()
        };
        assert_eq!(
            got,
            want,
            "{}: {r}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(120)])
        );
    }
    // A 64 MiB line is refused after the first MiB, without reading the rest.
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0usize;
    while sent < 64 << 20 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.contains("too_large"), "{answer}");
    assert!(sent < 64 << 20, "the daemon stopped reading early");
    let mut after = d.get(&id);
    after["updated_at"] = before["updated_at"].clone();
    assert_eq!(after, before);
    healthy(&mut d, 1);
}

#[test]
fn a_silent_client_is_cut_off_by_the_read_timeout_and_idle_ones_do_not_block_others() {
    let mut d = Daemon::start();
    // 1,000 idle connections at once.
    let idle: Vec<UnixStream> = (0..1000)
        .map(|_| UnixStream::connect(d.socket()).unwrap())
        .collect();
    wait_for("the daemon to take them", T, || {
        (d.stat("connections") >= 1000).then_some(())
    });
    let t0 = Instant::now();
    assert_eq!(d.count(), 0);
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "served promptly despite 1,000 idle clients"
    );
    // Each is answered `invalid_request` when the read timeout passes, then closed.
    let mut first = idle.into_iter().next().unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = String::new();
    let _ = first.read_to_string(&mut answer);
    assert!(
        answer.contains("invalid_request") && answer.contains("within"),
        "{answer}"
    );
    wait_for(
        "the idle connections to be closed",
        Duration::from_secs(30),
        || (d.stat("connections") <= 1).then_some(()),
    );
    healthy(&mut d, 0);
}

#[test]
fn mixed_load_from_many_clients_has_no_unexpected_errors_and_leaks_nothing() {
    // Three rounds of 320 sessions, 50 closed records kept: most are dropped by retention.
    mixed_load(32, 60, 6, 50, 3);
}

/// The full size: 200 clients × 500 mixed requests (a session every 50 requests),
/// three rounds on one daemon (`MAXX_LOAD_ROUNDS=N` for a soak: 30 rounds is ~8 minutes and
/// 60,000 sessions). Run with
/// `cargo test --release --test main -- --ignored full_mixed_load --nocapture`.
#[test]
#[ignore]
fn full_mixed_load() {
    let rounds = std::env::var("MAXX_LOAD_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    mixed_load(200, 500, 50, 500, rounds);
}

/// `rounds` times: `clients` threads × `per_client` requests; every `create_every`-th
/// request creates a session, the others get, list, declare, wait briefly or emit against
/// it; then every session is closed. The daemon (`--retain-records retain`) must keep only
/// the newest `retain` closed records and give the rest of the memory back, and a round
/// must not leave more live heap behind than the one before it: what a long-running daemon
/// keeps is bounded, not cumulative.
fn mixed_load(
    clients: usize,
    per_client: usize,
    create_every: usize,
    retain: usize,
    rounds: usize,
) {
    // A bus ring small enough to be full after the first round, so rounds compare like with
    // like (the default ring of 10,000 fills only after many small rounds).
    let mut d = Daemon::start_with(&[
        "--retain-records",
        &retain.to_string(),
        "--bus-capacity",
        "1000",
    ]);
    let socket = d.socket();
    let token = d.token();
    let rss_before = rss(d.pid());
    let fds_before = open_fds(d.pid());
    let sessions = clients * per_client.div_ceil(create_every);
    // What stays after a round (docs/reliability.md, "Memory after load"): the kept
    // records (each its view, its encoded audit log — ~20 entries here — and its dormant
    // state: ~7 KiB of live heap, up to ~40 KiB resident with the allocator's slack around
    // them), the bus ring (1,000 encoded events here), runtime tables and allocator
    // metadata. Freed memory is handed back when the daemon goes idle (memory.rs),
    // asynchronously: poll with a deadline.
    const PER_RECORD_KIB: u64 = 48;
    const FIXED_KIB: u64 = 16 * 1024;
    // Live heap may differ by this much between rounds that keep the same records.
    const HEAP_SLACK: u64 = 1024 * 1024;
    let mut after = Vec::new();
    let mut heap_after = Vec::new();
    let mut threads_after = Vec::new();
    for round in 1..=rounds {
        let started = Instant::now();
        let kept_before = retain.min(sessions * (round - 1));
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let socket = socket.clone();
                let token = token.clone();
                std::thread::spawn(move || {
                    let call = |method: &str, params: Value| -> Value {
                        let mut s = UnixStream::connect(&socket).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                        let req = json!({"token": token, "method": method, "params": params});
                        s.write_all(format!("{req}\n").as_bytes()).unwrap();
                        let mut out = String::new();
                        s.read_to_string(&mut out).unwrap();
                        serde_json::from_str(&out).unwrap()
                    };
                    let mut errors = Vec::new();
                    let mut id = String::new();
                    for i in 0..per_client {
                        let r = match if i % create_every == 0 { 0 } else { 1 + i % 5 } {
                            0 => {
                                let r = call(
                                    "sessions.create",
                                    json!({"command": "sleep 30", "group": format!("g{c}")}),
                                );
                                if r["ok"] == true {
                                    id = r["result"]["session"]["session_id"]
                                        .as_str()
                                        .unwrap()
                                        .to_string();
                                }
                                r
                            }
                            1 => call("sessions.get", json!({"session_id": id})),
                            2 => call("sessions.list", json!({"group": format!("g{c}")})),
                            3 => call(
                                "sessions.set-metadata",
                                json!({"session_id": id, "key": format!("k{}", i % 30), "value": i}),
                            ),
                            4 => call(
                                "sessions.wait",
                                json!({"session_id": id, "lifecycle": "exited", "timeout": 0.05}),
                            ),
                            _ => call(
                                "sessions.emit-event",
                                json!({"session_id": id, "event": "tick", "payload": {"i": i}}),
                            ),
                        };
                        if r["ok"] != true {
                            errors.push(r);
                        }
                    }
                    errors
                })
            })
            .collect();
        let errors: Vec<Value> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let elapsed = started.elapsed();
        let rss_peak = rss(d.pid());
        assert!(
            errors.is_empty(),
            "unexpected errors: {:?}",
            &errors[..errors.len().min(5)]
        );
        eprintln!(
            "round {round}: {clients} clients x {per_client} requests in {elapsed:?} \
             ({:.0} req/s), {sessions} sessions, RSS {} KiB -> {rss_peak} KiB",
            (clients * per_client) as f64 / elapsed.as_secs_f64(),
            after.last().copied().unwrap_or(rss_before),
        );
        healthy(&mut d, sessions + kept_before);
        // A client sees EOF when the daemon closes its end; the connection's count drops
        // just after (a fold in between, with `block_in_place`, can delay it): poll.
        wait_for("only the asking connection to be left", T, || {
            (d.stat("connections") == 1 && d.stat("streams") == 0).then_some(())
        });
        for s in d.ok("sessions.list", json!({}))["sessions"]
            .as_array()
            .unwrap()
        {
            // `sleep 30` may have exited already: cancel closes an exited session too.
            if s["lifecycle"] != "closed" {
                d.ok("sessions.cancel", json!({"session_id": s["session_id"]}));
            }
        }
        // Their actors retire once idle (session/mod.rs, RETIRE_IDLE): only records remain.
        wait_for("the closed records' actors to retire", T, || {
            (d.stat("sessions") == 0).then_some(())
        });
        // Retention keeps the newest `retain` closed records and drops the rest. It runs as
        // the registry takes each retirement, which an actor sends just before it stops (and
        // leaves the `sessions` count): the last one may still be on its way, so wait for it.
        let kept = retain.min(sessions * round);
        wait_for("retention to take the last retirement", T, || {
            (d.stat("records") == kept as i64).then_some(())
        });
        assert_eq!(d.stat("records_dropped"), (sessions * round - kept) as i64);
        assert_eq!(d.count(), kept);
        let bound = rss_before + FIXED_KIB + kept as u64 * PER_RECORD_KIB;
        let deadline = Instant::now() + T;
        let rss_after = loop {
            let now = rss(d.pid());
            if now < bound || Instant::now() > deadline {
                break now;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stats = d.ok("daemon.stats", json!({}));
        let heap = stats["heap_allocated"].as_u64().unwrap();
        let fds = open_fds(d.pid());
        let threads = proc_status_kib(d.pid(), "Threads:");
        eprintln!(
            "round {round}, every session closed ({kept} records kept, {} dropped in all): \
             anonymous RSS {rss_after} KiB (start {rss_before} KiB), peak RSS {} KiB, \
             live heap {} KiB, allocator resident {} KiB, {} purges, {fds} fds \
             (start {fds_before}), {threads} threads",
            sessions * round - kept,
            hwm(d.pid()),
            heap / 1024,
            stats["heap_resident"].as_u64().unwrap() / 1024,
            stats["memory_trims"],
        );
        // Every session's PTY master, pidfd and connection is closed with it. A few come and
        // go on their own (the asking connection, the journal reopened after a fold, a file
        // being replaced): 13–15 here. A leak would add one or more per session, hundreds a
        // round.
        assert!(
            fds <= fds_before + 8,
            "round {round}: {fds} open descriptors, {fds_before} at the start"
        );
        assert!(
            rss_after < bound,
            "round {round}: RSS grew from {rss_before} KiB to {rss_after} KiB (bound {bound} KiB)"
        );
        after.push(rss_after);
        heap_after.push(heap);
        threads_after.push(threads);
    }
    // From the second round on the same records are kept and the ring is full: the live
    // heap must not grow with the sessions the daemon has had. A leak raises every later
    // round; noise (payload sizes in the bus ring and the kept records, allocator caches)
    // moves single rounds by up to ~1 MiB, and a long run steps up once by ~1.3 MiB around
    // round 10 and then stays level (a high-water mark, not identified yet;
    // docs/reliability.md, "Soak"). So a short run compares its last round with round 2
    // (1 MiB), a longer one the lowest of its last three rounds with the lowest of rounds
    // 2-4 (2 MiB: over 30 rounds that still catches ~40 bytes kept per session).
    if let Some(second) = heap_after.get(1) {
        let n = heap_after.len();
        let lowest = |rounds: &[u64]| *rounds.iter().min().unwrap();
        let (baseline, now, slack) = if n >= 5 {
            (
                lowest(&heap_after[1..4]),
                lowest(&heap_after[n - 3..]),
                2 * HEAP_SLACK,
            )
        } else {
            (*second, heap_after[n - 1], HEAP_SLACK)
        };
        assert!(
            now < baseline + slack,
            "live heap after each round grows: {heap_after:?} bytes (RSS {after:?} KiB)"
        );
        // A fold runs in `block_in_place`, which can leave one more runtime thread idling
        // for up to 10 s; a thread left per round would grow without bound.
        assert!(
            threads_after.iter().all(|t| *t <= threads_after[0] + 2),
            "threads after each round: {threads_after:?}"
        );
    }
}

/// Open descriptors of a process.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Resident anonymous memory of a process (its heap, stacks and allocator state; not the
/// binary's code pages, which are file-backed and shared), in KiB.
fn rss(pid: u32) -> u64 {
    proc_status_kib(pid, "RssAnon:")
}

/// Peak resident set size of a process, in KiB.
fn hwm(pid: u32) -> u64 {
    proc_status_kib(pid, "VmHWM:")
}

fn proc_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[test]
fn children_that_misbehave_are_reported_as_the_kernel_sees_them() {
    let d = Daemon::start();
    // Closes its PTY but keeps running: still running (the process exists).
    let a = sid(&d.create(json!({"command": "exec sleep 30 </dev/null >/dev/null 2>&1"})));
    // Forks a daemon that holds the PTY, then exits: exited with its own status.
    let b = sid(&d.create(json!({"command": "(sleep 30 &) ; exit 4"})));
    // Killed from outside maxx.
    let c = d.create(json!({"command": "exec sleep 30"}));
    // SAFETY: killing the test's own grandchild.
    unsafe { libc::kill(c["pid"].as_i64().unwrap() as i32, libc::SIGKILL) };
    let vb = d.ok(
        "sessions.wait",
        json!({"session_id": b, "lifecycle": "exited", "timeout": 10}),
    )["session"]
        .clone();
    assert_eq!(vb["exit_code"], 4);
    let vc = d.ok(
        "sessions.wait",
        json!({"session_id": sid(&c), "lifecycle": "exited", "timeout": 10}),
    )["session"]
        .clone();
    assert_eq!(vc["exit_signal"], "SIGKILL");
    let r = d.ok(
        "sessions.wait",
        json!({"session_id": a, "lifecycle": "exited", "timeout": 0.3}),
    );
    assert_eq!(
        r["outcome"], "timeout",
        "a child with no PTY is still running"
    );
    d.ok("sessions.cancel", json!({"session_id": a}));
    assert_eq!(d.get(&a)["lifecycle"], "closed");
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_mutation() {
    let mut d = Daemon::start();
    let ids: Vec<String> = (0..4)
        .map(|_| sid(&d.create(json!({"command": "sleep 60"}))))
        .collect();
    let socket = d.socket();
    let token = d.token();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let acks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handles: Vec<_> = (0..16)
        .map(|c| {
            let (socket, token, stop) = (socket.clone(), token.clone(), stop.clone());
            let acks = acks.clone();
            let id = ids[c % ids.len()].clone();
            std::thread::spawn(move || {
                let mut acked: Vec<(String, i64)> = Vec::new();
                let mut n = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let key = format!("c{c}");
                    let req = json!({"token": token, "method": "sessions.set-metadata",
                        "params": {"session_id": id, "key": key, "value": n}});
                    let Ok(mut s) = UnixStream::connect(&socket) else {
                        break;
                    };
                    if s.write_all(format!("{req}\n").as_bytes()).is_err() {
                        break;
                    }
                    let mut out = String::new();
                    let _ = s.read_to_string(&mut out);
                    match serde_json::from_str::<Value>(&out) {
                        Ok(r) if r["ok"] == true => {
                            acked.push((key, n));
                            acks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        _ => break,
                    }
                }
                (id, acked)
            })
        })
        .collect();
    // Crash in the middle of the load: once a thousand mutations are acknowledged.
    wait_for("a thousand acknowledged mutations", T, || {
        (acks.load(std::sync::atomic::Ordering::Relaxed) >= 1000).then_some(())
    });
    d.crash();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let results: Vec<(String, Vec<(String, i64)>)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let total: usize = results.iter().map(|(_, a)| a.len()).sum();
    assert!(total >= 1000, "the load ran ({total} acknowledged)");
    eprintln!("kill -9 after {total} acknowledged mutations from 16 clients");
    d.restart();
    for (id, acked) in results {
        if let Some((key, last)) = acked.last() {
            let got = d.get(&id)["metadata"][key].as_i64().unwrap_or(0);
            assert!(got >= *last, "{id} {key}: acknowledged {last}, found {got}");
        }
    }
    let journal = std::fs::read_to_string(d.control.join("registry.json")).unwrap();
    assert!(
        serde_json::from_str::<Value>(&journal).is_ok(),
        "the registry loads"
    );
}

#[test]
fn secrets_never_reach_logs_files_or_responses() {
    let tmp = tempfile::Builder::new()
        .prefix("maxx-sec")
        .tempdir()
        .unwrap();
    let control = tmp.path().join("ctl");
    let profiles = tmp.path().join("agent-profiles.json");
    std::fs::write(
        &profiles,
        json!({"version": 1, "profiles": {"agent": {
            "command": "sleep 30", "env": ["PROFILE_KEY=sk-very-secret-3"]
        }}})
        .to_string(),
    )
    .unwrap();
    // A detached daemon logs to daemon.log at the most verbose level.
    let out = std::process::Command::new(maxx_bin())
        .args(["daemon", "--detach", "--log-level", "trace"])
        .env("MAXX_CONTROL_DIR", &control)
        .env("MAXX_PROFILES_FILE", &profiles)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let run = |args: &[&str]| {
        std::process::Command::new(maxx_bin())
            .args(args)
            .env("MAXX_CONTROL_DIR", &control)
            .output()
            .unwrap()
    };
    let created = run(&[
        "sessions",
        "create",
        "--command",
        "sleep 30",
        "--env",
        "API_KEY=sk-very-secret-1",
    ]);
    assert_eq!(created.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&created.stdout).unwrap();
    let id = v["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let bad = run(&["sessions", "create", "--env", "BAD-KEY=sk-very-secret-2"]);
    assert_eq!(bad.status.code(), Some(2), "a bad env key is a usage error");
    let from_profile = run(&["sessions", "create", "--profile", "agent"]);
    assert_eq!(from_profile.status.code(), Some(0), "{from_profile:?}");
    let listed = run(&["profiles", "list"]);
    assert_eq!(listed.status.code(), Some(0));
    let session_of = |out: &std::process::Output| {
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["result"]["session"]["session_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let got = run(&["sessions", "get", &session_of(&from_profile)]);
    run(&["sessions", "cancel", &session_of(&from_profile)]);
    run(&[
        "sessions",
        "set-metadata",
        &id,
        "--key",
        "k",
        "--value",
        "v",
    ]);
    run(&["sessions", "cancel", &id]);
    let token = std::fs::read_to_string(control.join("token")).unwrap();
    let pid: i32 = std::fs::read_to_string(control.join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: stopping the daemon this test started (a clean stop folds the journal).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_for("the daemon to stop", T, || {
        (!control.join("control.sock").exists()).then_some(())
    });
    let mut haystack = String::new();
    for entry in std::fs::read_dir(&control).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "token" {
            haystack.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).unwrap_or_default(),
            ));
        }
    }
    for output in [&created, &bad, &from_profile, &listed, &got] {
        haystack.push_str(&String::from_utf8_lossy(&output.stdout));
        haystack.push_str(&String::from_utf8_lossy(&output.stderr));
    }
    assert!(
        haystack.contains("sessions.create") || haystack.contains("ready"),
        "the log has content"
    );
    assert!(
        haystack.contains("PROFILE_KEY"),
        "the profile's env key is listed"
    );
    for secret in [
        "sk-very-secret-1",
        "sk-very-secret-2",
        "sk-very-secret-3",
        token.trim(),
    ] {
        assert!(!haystack.contains(secret), "{secret} leaked");
    }
}

#[test]
fn another_user_cannot_connect() {
    if !nix::unistd::geteuid().is_root() {
        skip_or_fail("needs root to run a client as nobody");
        return;
    }
    let d = Daemon::start();
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a nobody user");
    let socket = d.socket();
    let status = unsafe {
        // SAFETY: fork a child that only switches uid, tries to connect, and exits.
        match libc::fork() {
            0 => {
                if libc::setgid(nobody.gid.as_raw()) != 0 || libc::setuid(nobody.uid.as_raw()) != 0
                {
                    libc::_exit(3);
                }
                let ok = UnixStream::connect(&socket).is_ok();
                libc::_exit(if ok { 1 } else { 0 });
            }
            pid => {
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                libc::WEXITSTATUS(status)
            }
        }
    };
    assert_eq!(
        status, 0,
        "nobody could connect (1) or could not drop privileges (3)"
    );
}

#[test]
fn a_panicking_session_actor_touches_nothing_else_and_keeps_its_record() {
    let d = Daemon::start();
    let a = sid(&d.create(json!({"command": "sleep 60", "metadata": {"k": "v"}, "group": "g"})));
    if !cfg!(debug_assertions) {
        // The daemon under test is a release build (same profile as this test): the fault
        // injection must not exist there.
        d.err("debug.panic", json!({"session_id": a}), "unknown_method");
        assert_eq!(d.get(&a)["lifecycle"], "running");
        return;
    }
    let b = sid(&d.create(json!({"command": "sh"})));
    d.ok(
        "sessions.emit-event",
        json!({"session_id": a, "event": "before"}),
    );
    let mut stream = d.open_stream("stream.watch", json!({"session_id": a}));
    stream.next();
    let a_pid = d.get(&a)["pid"].as_i64().unwrap() as i32;
    d.ok("debug.panic", json!({"session_id": a}));
    let failed = stream.next();
    assert_eq!(failed["event"]["name"], "failed", "{failed}");
    assert_eq!(failed["event"]["source_kind"], "maxx");
    wait_for("the record to be recovered", T, || {
        (d.get(&a)["lifecycle"] == "closed").then_some(())
    });
    // Its record and audit log are intact, and the child did not outlive the actor.
    let v = d.get(&a);
    assert_eq!(v["metadata"], json!({"k": "v"}));
    assert_eq!(v["group"], "g");
    let log = d.ok("sessions.events", json!({"session_id": a}))["events"].clone();
    assert_eq!(log[0]["name"], "before");
    wait_for("the child to be gone", T, || {
        // SAFETY: probing a pid with signal 0.
        (unsafe { libc::kill(a_pid, 0) } != 0).then_some(())
    });
    d.err(
        "sessions.action",
        json!({"session_id": a, "action": "input", "input": "x"}),
        "already_ended",
    );
    // The other session never noticed.
    let run = d.ok_as(
        READER,
        "sessions.run",
        json!({"session_id": b, "command": "echo alive", "timeout": 10}),
    );
    assert_eq!(run["output"], "alive");
    // The failed one is restartable under the same id, and can fail again.
    let v = d.ok(
        "sessions.restart",
        json!({"session_id": a, "last_command": true}),
    )["session"]
        .clone();
    assert_eq!(v["lifecycle"], "running");
    d.ok("debug.panic", json!({"session_id": a}));
    // Its group's counters stay exact: with it closed, the group has exited.
    let r = d.ok(
        "stream.wait",
        json!({"group": "g", "all": "exited", "timeout": 10}),
    );
    assert_eq!(r["outcome"], "matched");
    wait_for("the second recovery", T, || {
        (d.get(&a)["lifecycle"] == "closed").then_some(())
    });
    assert_eq!(d.get(&b)["lifecycle"], "running");
}

#[test]
fn deleting_the_control_dir_stops_the_daemon_and_its_sessions() {
    let mut d = Daemon::start();
    let pid = d.create(json!({"command": "sleep 60"}))["pid"]
        .as_i64()
        .unwrap() as i32;
    // The daemon may write a file while the tree is removed (ENOTEMPTY): retry.
    wait_for("the control dir to be removed", T, || {
        std::fs::remove_dir_all(&d.control).ok()
    });
    wait_for("the daemon to stop", T, || (!d.alive()).then_some(()));
    wait_for("its child to be hung up", T, || {
        // SAFETY: probing a pid with signal 0.
        (unsafe { libc::kill(pid, 0) } != 0).then_some(())
    });
}

#[test]
fn a_failing_journal_write_is_never_acknowledged_and_the_daemon_keeps_serving() {
    use std::os::unix::fs::PermissionsExt;
    let mut d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    d.ok(
        "sessions.set-metadata",
        json!({"session_id": id, "key": "a", "value": 1}),
    );
    // Make the journal unwritable: every write fails (EISDIR), as on a broken disk. See
    // a_full_disk_... for a real ENOSPC.
    let journal = d.control.join("registry.journal");
    std::fs::remove_file(&journal).unwrap();
    std::fs::create_dir(&journal).unwrap();
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o000)).unwrap();
    // The daemon notices the journal it holds open was removed and writes a snapshot
    // instead (so that change is acknowledged); the next write must open the path and fails.
    // No failing write is acknowledged, and from then on mutations are refused.
    let failed = (0..10)
        .find(|i| {
            let r = d.call(
                "sessions.set-metadata",
                json!({"session_id": id, "key": format!("k{i}"), "value": 2}),
            );
            r["ok"] != true && r["error"]["code"] == "persistence_failed"
        })
        .expect("a failing write is answered persistence_failed");
    assert!(failed <= 1, "{failed}");
    d.err(
        "sessions.set-metadata",
        json!({"session_id": id, "key": "refused", "value": 2}),
        "persistence_failed",
    );
    assert!(d.get(&id)["metadata"].get("refused").is_none());
    // Still serving reads.
    assert_eq!(d.get(&id)["lifecycle"], "running");
    assert!(d.alive());
    // Writable again: the next mutation goes through.
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::remove_dir(&journal).unwrap();
    d.ok(
        "sessions.set-metadata",
        json!({"session_id": id, "key": "d", "value": 3}),
    );
    assert_eq!(d.stat("journal_behind"), 0);
    let _ = &mut d;
}

#[test]
fn input_to_a_program_that_never_reads_is_bounded() {
    let d = Daemon::start();
    // Raw mode: the tty takes ~4 KiB and then pushes back (in canonical mode it would
    // silently discard the overflow instead).
    let id = sid(&d.create(json!({
        "command": "stty raw -echo; printf '\\033]2;ready\\007'; exec sleep 60"
    })));
    wait_for("raw mode", T, || {
        (d.get(&id)["terminal_title"] == "ready").then_some(())
    });
    let chunk = "x".repeat(200 * 1024);
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..8 {
        let (socket, token, id, chunk, tx) =
            (d.socket(), d.token(), id.clone(), chunk.clone(), tx.clone());
        std::thread::spawn(move || {
            let mut s = UnixStream::connect(socket).unwrap();
            let req = json!({"token": token, "method": "sessions.paste", "params": {"session_id": id, "text": chunk}});
            s.write_all(format!("{req}\n").as_bytes()).unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            let _ = tx.send(serde_json::from_str::<Value>(&out).unwrap_or(Value::Null));
        });
    }
    // Some writes are refused at once, with nothing written, instead of queueing forever.
    let refused = rx.recv_timeout(T).unwrap();
    assert_eq!(refused["error"]["code"], "unsupported", "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not reading"));
    // Closing the session answers whatever was still queued (the tty may also have taken —
    // and, in canonical mode, discarded — some of it): nobody is left hanging.
    d.ok("sessions.cancel", json!({"session_id": id}));
    for _ in 1..8 {
        rx.recv_timeout(T).unwrap();
    }
}

/// A tmpfs mounted for one test; unmounted (lazily, so an open fd cannot block it) on drop,
/// also when the test fails.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    /// Mount a tmpfs of `size` (mount(8) syntax) with mode 0700 at `at`, or say why not.
    fn mount(at: &std::path::Path, size: &str) -> Result<Tmpfs, String> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let target = CString::new(at.as_os_str().as_bytes()).unwrap();
        let opts = CString::new(format!("size={size},mode=0700")).unwrap();
        // SAFETY: mount(2) with valid NUL-terminated strings.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                opts.as_ptr() as *const libc::c_void,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        Ok(Tmpfs(at.to_path_buf()))
    }

    /// Fill the filesystem with `filler`, writing until it refuses (ENOSPC).
    fn fill(&self) -> std::path::PathBuf {
        let path = self.0.join("filler");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let page = [0u8; 4096];
        loop {
            if let Err(e) = f.write_all(&page) {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                return path;
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        use std::os::unix::ffi::OsStrExt;
        let target = std::ffi::CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: umount2(2) on the path we mounted.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// A control dir on a 1 MiB tmpfs (in a temp dir kept by the first value), or `None` when
/// this process may not mount one (the test is skipped, or fails under CI).
fn small_tmpfs(prefix: &str) -> Option<(tempfile::TempDir, Tmpfs, std::path::PathBuf)> {
    let base = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    let ctl = base.path().join("ctl");
    std::fs::create_dir(&ctl).unwrap();
    match Tmpfs::mount(&ctl, "1m") {
        Ok(fs) => Some((base, fs, ctl)),
        Err(why) => {
            skip_or_fail(&format!(
                "needs root (CAP_SYS_ADMIN) to mount a tmpfs: {why}"
            ));
            None
        }
    }
}

/// Issue 7: a real full disk, not an injected failure. The control dir is a 1 MiB tmpfs;
/// filling it makes journal writes fail with ENOSPC.
#[test]
fn a_full_disk_refuses_mutations_loses_nothing_acknowledged_and_recovers() {
    let Some((_base, fs, ctl)) = small_tmpfs("maxx-full") else {
        return;
    };
    let mut d = Daemon::start_at(ctl.clone());
    let id = sid(&d.create(json!({"command": "sleep 600"})));
    let set = |d: &Daemon, n: u64| {
        d.call(
            "sessions.set-metadata",
            json!({"session_id": id, "key": "n", "value": n}),
        )
    };
    assert_eq!(set(&d, 0)["ok"], true);
    let mut acked = vec![0u64];

    // Disk full. The journal's last page may still have room for a few lines: mutate until
    // one fails, which must be the typed error, never a silent `ok`.
    let filler = fs.fill();
    let failed = (1..=10_000u64)
        .find(|&n| {
            let r = set(&d, n);
            if r["ok"] == true {
                acked.push(n);
                return false;
            }
            assert_eq!(r["error"]["code"], "persistence_failed", "{r}");
            true
        })
        .expect("a journal write failed on a full disk");
    eprintln!(
        "full disk: {} mutations acknowledged after filling, #{failed} refused",
        acked.len() - 1
    );
    assert_eq!(d.stat("journal_behind"), 1);
    assert!(d.stat("journal_write_errors") >= 1);
    // While it is full: mutations are refused before they change anything...
    let r = d.call(
        "sessions.set-metadata",
        json!({"session_id": id, "key": "refused", "value": 1}),
    );
    assert_eq!(r["error"]["code"], "persistence_failed", "{r}");
    assert!(d.get(&id)["metadata"].get("refused").is_none());
    let r = d.call("sessions.create", json!({"command": "sleep 600"}));
    assert_eq!(r["error"]["code"], "persistence_failed", "{r}");
    assert_eq!(d.count(), 1, "a refused create starts nothing");
    // ...and everything else keeps being served.
    assert_eq!(d.get(&id)["lifecycle"], "running");
    d.ok("sessions.events", json!({"session_id": id}));
    d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 0.01}),
    );
    assert!(d.alive());
    // A failed write never leaves a torn line in the journal: every line parses.
    let journal = std::fs::read_to_string(ctl.join("registry.journal")).unwrap();
    for line in journal.lines().filter(|l| !l.is_empty()) {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("torn line {line:?}: {e}"));
    }

    // Space again: the next mutation goes through (after the held-back lines are written).
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(set(&d, failed + 1)["ok"], true);
    acked.push(failed + 1);
    assert_eq!(d.stat("journal_behind"), 0);

    // Full again at shutdown: the final snapshot cannot be written. registry.json must stay
    // whole (temp file + rename), and no temp file may be left behind.
    let filler = fs.fill();
    d.stop_with(libc::SIGTERM);
    let snapshot = std::fs::read(ctl.join("registry.json")).unwrap();
    serde_json::from_slice::<Value>(&snapshot).expect("registry.json is whole");
    let leftovers: Vec<_> = std::fs::read_dir(&ctl)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Restart with room: nothing acknowledged is lost.
    std::fs::remove_file(&filler).unwrap();
    d.restart();
    let v = d.get(&id);
    assert_eq!(v["restored"], true);
    assert_eq!(v["metadata"]["n"], failed + 1, "{v}");
    let events = d.ok("sessions.events", json!({"session_id": id}))["events"].clone();
    let logged: Vec<u64> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "n")
        .filter_map(|e| e["payload"].as_u64())
        .collect();
    for n in &acked {
        assert!(logged.contains(n), "acknowledged n={n} lost: {logged:?}");
    }
    // And the snapshot written at this start is valid.
    serde_json::from_slice::<Value>(&std::fs::read(ctl.join("registry.json")).unwrap())
        .expect("registry.json parses");
    drop(d);
    drop(fs);
}

/// Issue 7: a closed session keeps its record, not its terminal. Its screen is released with
/// its surface, so reads say so instead of showing an empty screen; an exited one keeps it.
#[test]
fn a_closed_session_releases_its_screen_and_keeps_its_record() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "echo released; exec sleep 60"})));
    let exited = sid(&d.create(json!({"command": "echo kept"})));
    wait_for("output", T, || {
        let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": id}));
        dump["text"].as_str()?.contains("released").then_some(())
    });
    d.ok(
        "sessions.emit-event",
        json!({"session_id": id, "event": "before-close"}),
    );
    d.ok("sessions.cancel", json!({"session_id": id}));
    for method in ["sessions.snapshot", "sessions.dump", "sessions.inspect"] {
        let r = d.call_as(READER, method, json!({"session_id": id}));
        assert_eq!(r["error"]["code"], "already_ended", "{method}: {r}");
    }
    let r = d.ok_as(
        READER,
        "sessions.wait",
        json!({"session_id": id, "until": "released", "timeout": 5}),
    );
    assert_eq!(r["outcome"], "ended", "{r}");
    // The record and its audit log stay.
    assert_eq!(d.get(&id)["lifecycle"], "closed");
    let events = d.ok("sessions.events", json!({"session_id": id}))["events"].clone();
    assert_eq!(events[0]["name"], "before-close");
    // An exited session's surface is still there, and so is its screen.
    wait_for("the child to exit", T, || {
        (d.get(&exited)["lifecycle"] == "exited").then_some(())
    });
    let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": exited}));
    assert!(dump["text"].as_str().unwrap().contains("kept"), "{dump}");
    // A restart builds a fresh screen.
    d.ok(
        "sessions.restart",
        json!({"session_id": id, "last_command": true}),
    );
    wait_for("output after the restart", T, || {
        let dump = d.ok_as(READER, "sessions.dump", json!({"session_id": id}));
        dump["text"].as_str()?.contains("released").then_some(())
    });
}

/// Issue 7: a closed record's actor retires between requests and is woken by the next one.
/// Requests racing that hand-over (one routed to an actor as it stops) are routed again:
/// every one is answered, none is lost or applied twice.
#[test]
fn requests_racing_a_closed_sessions_retirement_are_all_answered() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 60"})));
    d.ok("sessions.cancel", json!({"session_id": id}));
    let (threads, each, rounds) = (8, 40, 2);
    for round in 0..rounds {
        if round > 0 {
            // The burst again, now against a retired (dormant) record: the first requests
            // race to wake it.
            wait_for("the closed record's actor to retire", T, || {
                (d.stat("sessions") == 0).then_some(())
            });
        }
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (socket, token, id) = (d.socket(), d.token(), id.clone());
                std::thread::spawn(move || {
                    let call = |method: &str, params: Value| -> Value {
                        let mut s = UnixStream::connect(&socket).unwrap();
                        let req = json!({"token": token, "method": method, "params": params});
                        s.write_all(format!("{req}\n").as_bytes()).unwrap();
                        let mut out = String::new();
                        s.read_to_string(&mut out).unwrap();
                        serde_json::from_str::<Value>(&out).unwrap()
                    };
                    for i in 0..each {
                        let r = match i % 4 {
                            0 => call(
                                "sessions.emit-event",
                                json!({"session_id": id, "event": format!("t{t}")}),
                            ),
                            1 => call("sessions.events", json!({"session_id": id})),
                            2 => call(
                                "sessions.wait",
                                json!({"session_id": id, "lifecycle": "exited", "timeout": 1}),
                            ),
                            _ => call(
                                "sessions.set-metadata",
                                json!({"session_id": id, "key": format!("k{t}"), "value": i}),
                            ),
                        };
                        assert_eq!(r["ok"], true, "{r}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
    // Exactly one audit entry per accepted emit and set-metadata.
    let events = d.ok("sessions.events", json!({"session_id": id}))["events"].clone();
    assert_eq!(
        events.as_array().unwrap().len(),
        rounds * threads * each / 2
    );
    let v = d.get(&id);
    assert_eq!(v["lifecycle"], "closed");
    assert_eq!(v["metadata"].as_object().unwrap().len(), threads);
    // Nothing left behind: the record's actor retired again once idle.
    wait_for("the closed record's actor to retire", T, || {
        (d.stat("sessions") == 0).then_some(())
    });
    assert_eq!(d.stat("waiters"), 0);
}

/// A dormant record (its actor retired) takes a declaration exactly as a live one: the
/// woken actor starts from the record as the session last had it, not from the registry's
/// copy (which holds a parent edge reserved by the request itself).
#[test]
fn a_dormant_record_takes_declarations_and_they_persist() {
    let mut d = Daemon::start();
    let parent = sid(&d.create(json!({"command": "sleep 60"})));
    let child = sid(&d.create(json!({"command": "sleep 60"})));
    d.ok("sessions.cancel", json!({"session_id": child}));
    wait_for("the closed child's actor to retire", T, || {
        (d.stat("sessions") == 1).then_some(())
    });
    d.ok(
        "sessions.set-parent",
        json!({"session_id": child, "parent": parent}),
    );
    // Acknowledged means journaled: it survives kill -9 with nothing written after it.
    d.crash();
    d.restart();
    assert_eq!(d.get(&child)["parent_id"], parent.as_str());
    // And again on the restored (dormant at once) record.
    d.ok(
        "sessions.set-metadata",
        json!({"session_id": child, "key": "k", "value": "v"}),
    );
    d.ok(
        "sessions.set-parent",
        json!({"session_id": child, "parent": ""}),
    );
    d.crash();
    d.restart();
    let v = d.get(&child);
    assert!(v["parent_id"].is_null(), "{v}");
    assert_eq!(v["metadata"]["k"], "v", "{v}");
}

/// A create is acknowledged only once its record is on disk: on a full disk the create whose
/// own journal line fails is answered `persistence_failed` (its program is stopped, since
/// the caller never learns its id), never `ok`, so a crash right after loses no
/// acknowledged session. (Its answer used to be sent without the journal's verdict.)
#[test]
fn a_create_whose_record_cannot_be_written_is_never_acknowledged() {
    let Some((_base, fs, ctl)) = small_tmpfs("maxx-full-create") else {
        return;
    };
    let mut d = Daemon::start_at(ctl.clone());
    let filler = fs.fill();
    let mut acked = Vec::new();
    let refused = (0..5_000)
        .find_map(|i| {
            let r = d.call(
                "sessions.create",
                json!({"command": "sleep 600", "title": format!("c{i}")}),
            );
            if r["ok"] == true {
                acked.push(sid(&r["result"]["session"]));
                return None;
            }
            Some(r)
        })
        .expect("a create failed on a full disk");
    assert_eq!(refused["error"]["code"], "persistence_failed", "{refused}");
    // The refused create's program does not run on: every running session is acknowledged.
    let list = d.ok("sessions.list", json!({}));
    for s in list["sessions"].as_array().unwrap() {
        if s["lifecycle"] == "running" {
            let id = s["session_id"].as_str().unwrap().to_string();
            assert!(
                acked.contains(&id),
                "a running session nobody was told of: {s}"
            );
        }
    }
    // A crash now, then room: every acknowledged create is back.
    d.crash();
    std::fs::remove_file(&filler).unwrap();
    d.restart();
    for id in &acked {
        let v = d.get(id);
        assert_eq!(
            v["session_id"],
            id.as_str(),
            "acknowledged create {id} lost: {v}"
        );
    }
}
