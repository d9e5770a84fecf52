//! Hostile callers holding connection slots (issue 18, item 7): waits whose callers hang
//! up, clients that never read their answer, and long-lived requests crowding out short
//! ones. Each test drives the real daemon over its socket and checks `daemon.stats`.

use crate::common::Daemon;
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// Open a connection, send one request and keep the connection without reading.
/// `half_close` shuts the write side as the CLI does after its request.
fn send(d: &Daemon, method: &str, params: Value, half_close: bool) -> UnixStream {
    let mut s = UnixStream::connect(d.socket()).unwrap();
    let req = json!({"token": d.token(), "method": method, "params": params});
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    if half_close {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    s
}

fn stats(d: &Daemon) -> Value {
    d.ok("daemon.stats", json!({}))
}

/// Wait until `daemon.stats` shows exactly these counters; the panic shows the last ones.
fn wait_stats(d: &Daemon, what: &str, timeout: Duration, want: &[(&str, i64)]) {
    let deadline = Instant::now() + timeout;
    loop {
        let last = stats(d);
        if want.iter().all(|(k, v)| last[*k].as_i64() == Some(*v)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: wanted {want:?} within {timeout:?}; daemon.stats said {last}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn abandoned_waits_end_when_their_callers_hang_up() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 600", "group": "g"})));
    // Baseline: only the asking connection (the create's may still be closing).
    wait_stats(
        &d,
        "baseline",
        Duration::from_secs(10),
        &[("connections", 1), ("waiters", 0), ("streams", 0)],
    );
    const N: usize = 40;
    let mut clients = Vec::new();
    for i in 0..N {
        let half = i % 2 == 0;
        clients.push(send(
            &d,
            "sessions.wait",
            json!({"session_id": id, "lifecycle": "exited", "timeout": 3600}),
            half,
        ));
        clients.push(send(
            &d,
            "stream.wait",
            json!({"group": "g", "all": "exited", "timeout": 3600}),
            half,
        ));
        clients.push(send(
            &d,
            "stream.wait",
            json!({"group": "g", "event": "never", "timeout": 3600}),
            half,
        ));
    }
    let n = N as i64;
    wait_stats(
        &d,
        "every wait registered",
        Duration::from_secs(20),
        &[
            ("waiters", 2 * n),
            ("streams", n),
            ("connections", 3 * n + 1),
            ("long_lived", 3 * n),
        ],
    );
    // Fire and forget: the callers go away, their hour-long waits must not stay.
    drop(clients);
    wait_stats(
        &d,
        "abandoned waits ended",
        Duration::from_secs(10),
        &[
            ("waiters", 0),
            ("streams", 0),
            ("connections", 1),
            ("long_lived", 0),
        ],
    );
    // The daemon serves new requests, and a wait still answers its caller.
    assert_eq!(d.get(&id)["lifecycle"], "running");
    let r = d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 0.1}),
    );
    assert_eq!(r["outcome"], "timeout");
}

#[test]
fn a_client_that_never_reads_its_answer_is_cut_off_by_the_write_timeout() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 600"})));
    // ~3 MiB of events: far more than a socket's buffers hold.
    let blob = "x".repeat(15_000);
    for i in 0..200 {
        d.ok(
            "sessions.emit-event",
            json!({"session_id": id, "event": format!("e{i}"), "payload": {"blob": blob}}),
        );
    }
    // A stream client that stops reading, and a one-shot answer nobody reads.
    let watcher = send(&d, "stream.watch", json!({"since": 0}), false);
    let events = send(&d, "sessions.events", json!({"session_id": id}), true);
    wait_stats(
        &d,
        "the stream subscribed",
        Duration::from_secs(10),
        &[("streams", 1)],
    );
    // RESPONSE_WRITE_TIMEOUT is 10 s; both connections are closed once it passes.
    wait_stats(
        &d,
        "non-reading clients cut off",
        Duration::from_secs(30),
        &[("streams", 0), ("connections", 1), ("long_lived", 0)],
    );
    drop((watcher, events));
    assert_eq!(d.get(&id)["lifecycle"], "running");
}

#[test]
fn long_lived_requests_cannot_starve_short_ones() {
    let d = Daemon::start_with(&["--max-long-lived", "6"]);
    let id = sid(&d.create(json!({"command": "sleep 600", "group": "g"})));
    let mut held = vec![
        send(&d, "stream.watch", json!({}), false),
        send(&d, "sessions.watch", json!({"session_id": id}), false),
    ];
    for _ in 0..4 {
        held.push(send(
            &d,
            "sessions.wait",
            json!({"session_id": id, "lifecycle": "exited", "timeout": 3600}),
            true,
        ));
    }
    wait_stats(
        &d,
        "the long-lived cap filled",
        Duration::from_secs(10),
        &[("long_lived", 6), ("connections", 7)],
    );
    // Over the cap: a typed refusal with a remedy, nothing started.
    for (method, params) in [
        ("stream.watch", json!({})),
        (
            "sessions.wait",
            json!({"session_id": id, "lifecycle": "exited", "timeout": 3600}),
        ),
        (
            "stream.wait",
            json!({"group": "g", "all": "exited", "timeout": 3600}),
        ),
        ("sessions.watch", json!({"session_id": id})),
    ] {
        let r = d.err(method, params, "busy");
        assert!(
            r["error"]["remedy"].as_str().is_some_and(|s| !s.is_empty()),
            "{r}"
        );
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("long-lived"),
            "{r}"
        );
    }
    let s = stats(&d);
    assert_eq!(s["waiters"], 4, "{s}");
    assert_eq!(s["streams"], 1, "{s}");
    assert_eq!(s["watchers"], 1, "{s}");
    // Short requests are served meanwhile.
    assert_eq!(d.get(&id)["lifecycle"], "running");
    assert_eq!(d.count(), 1);
    let out = d.cli(&["sessions", "wait", &id, "--lifecycle", "exited"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err: Value = serde_json::from_slice(
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(err["error"]["code"], "busy", "{err}");
    // Once they go, the slots are free again.
    drop(held);
    wait_stats(
        &d,
        "long-lived slots released",
        Duration::from_secs(10),
        &[("long_lived", 0), ("connections", 1), ("waiters", 0)],
    );
    let r = d.ok(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": 0.1}),
    );
    assert_eq!(r["outcome"], "timeout");
}

/// The review's case at full size: more fire-and-forget waits than the daemon has slots.
#[test]
fn more_waits_than_slots_still_leave_room_for_short_requests() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 600"})));
    let cap = maxx_protocol::limits::MAX_LONG_LIVED_CONNECTIONS as i64;
    let total = maxx_protocol::limits::MAX_CONNECTIONS + 304;
    let clients: Vec<UnixStream> = (0..total)
        .map(|_| {
            send(
                &d,
                "sessions.wait",
                json!({"session_id": id, "lifecycle": "exited", "timeout": 3600}),
                true,
            )
        })
        .collect();
    // Those over the cap were answered `busy` and closed; the rest hold their slots, and a
    // short request is still served (before: it waited for a slot for the waits' hour).
    wait_stats(
        &d,
        "the long-lived cap filled",
        Duration::from_secs(120),
        &[("long_lived", cap), ("waiters", cap)],
    );
    assert_eq!(d.get(&id)["lifecycle"], "running");
    drop(clients);
    wait_stats(
        &d,
        "every wait ended with its caller",
        Duration::from_secs(60),
        &[("long_lived", 0), ("waiters", 0), ("connections", 1)],
    );
}
