//! Hostile stream readers (issue 18, item 6): clients of `stream.watch --since 0`,
//! `sessions.watch` and `sessions.attach` that never read. Before, each pinned its whole
//! queue (a `--since 0` replay of the bus ring, 1,024 watch lines, 256 attach chunks) until
//! the write timeout closed it. Now every stream client's queue is charged in bytes
//! (`STREAM_CLIENT_MAX_BYTES` each, `STREAM_TOTAL_MAX_BYTES` together) and one over its share
//! is dropped at once, told so if it ever reads. Each test drives the real daemon and
//! asserts bounds from `daemon.stats` and `/proc`, never timings.

use crate::common::{wait_for, Daemon, READER};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

const MIB: i64 = 1024 * 1024;
/// `STREAM_TOTAL_MAX_BYTES`.
const TOTAL_MAX: i64 = 64 * MIB;

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

fn stats(d: &Daemon) -> Value {
    d.ok("daemon.stats", json!({}))
}

/// Open a connection, send one request, and keep it without reading.
fn stalled(d: &Daemon, method: &str, params: Value, caller: Option<&str>) -> UnixStream {
    let mut s = UnixStream::connect(d.socket()).unwrap();
    let mut req = json!({"token": d.token(), "method": method, "params": params});
    if let Some(c) = caller {
        req["caller"] = json!(c);
    }
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    s
}

/// A 16 KiB payload (the largest an event may carry is 16,384 bytes of JSON).
fn big_payload(i: usize) -> Value {
    json!({"i": i, "blob": "x".repeat(16_000)})
}

fn emit(d: &Daemon, id: &str, i: usize) {
    d.ok(
        "sessions.emit-event",
        json!({"session_id": id, "event": "big", "payload": big_payload(i)}),
    );
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

/// Every complete line a stalled client can still read, up to EOF (a last line cut by
/// the write timeout is left out).
fn drain_lines(s: UnixStream) -> Vec<Value> {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut r = BufReader::new(s);
    let mut out = Vec::new();
    loop {
        let mut line = Vec::new();
        match r.read_until(b'\n', &mut line) {
            Ok(0) => return out,
            Ok(_) if line.ends_with(b"\n") => out.push(serde_json::from_slice(&line).unwrap()),
            Ok(_) => return out,
            Err(e) => panic!("a stalled stream was never closed: {e}"),
        }
    }
}

/// 32 `stream.watch --since 0` clients and 4 `sessions.watch` clients that never read,
/// over a session whose ring already holds 600 events of 16 KiB, while 600 more are
/// emitted. Before: each `--since 0` client decoded the whole ring into its queue at once
/// (~10 MiB each here, 165 MiB with a full ring) and every watcher queued 1,024 lines.
/// Now a replay goes in 256 KiB batches and every client's queue is charged: the total
/// never passes 64 MiB, every stalled client is dropped (counted in
/// `slow_consumers_dropped`) and, read afterwards, shows the reset notice or EOF; a live
/// reader sees every event.
#[test]
fn stalled_stream_readers_are_dropped_and_memory_stays_bounded() {
    const STALLED: usize = 32;
    const WATCHERS: usize = 4;
    const BEFORE: usize = 600;
    const AFTER: usize = 600;
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "sleep 600"})));
    for i in 0..BEFORE {
        emit(&d, &id, i);
    }
    let base_rss = proc_kib(d.pid(), "VmRSS:");

    // A live reader of the same session, following from now on.
    let mut live = d.open_stream("stream.watch", json!({"session_id": id}));
    assert_eq!(live.next()["type"], "hello");
    let live_reader = std::thread::spawn(move || {
        let mut seen = 0;
        while seen < AFTER {
            let line = live.next();
            assert_eq!(
                line["type"], "event",
                "the live reader was not left alone: {line}"
            );
            if line["event"]["name"] == "big" {
                seen += 1;
            }
        }
        seen
    });

    let streams: Vec<UnixStream> = (0..STALLED)
        .map(|_| {
            stalled(
                &d,
                "stream.watch",
                json!({"session_id": id, "since": 0}),
                None,
            )
        })
        .collect();
    let watchers: Vec<UnixStream> = (0..WATCHERS)
        .map(|_| stalled(&d, "sessions.watch", json!({"session_id": id}), None))
        .collect();
    wait_for(
        "the stalled clients to subscribe",
        Duration::from_secs(20),
        || {
            let s = stats(&d);
            (s["streams"] == STALLED as i64 + 1 && s["watchers"] == WATCHERS as i64).then_some(())
        },
    );

    let mut most_queued = 0;
    for i in 0..AFTER {
        emit(&d, &id, BEFORE + i);
        if i % 25 == 0 {
            let q = stats(&d)["stream_queued_bytes"].as_i64().unwrap();
            assert!(q <= TOTAL_MAX, "{q} bytes queued");
            most_queued = most_queued.max(q);
        }
    }
    let dropped = wait_for(
        "every stalled client to be dropped",
        Duration::from_secs(30),
        || {
            let s = stats(&d);
            let n = s["slow_consumers_dropped"].as_i64().unwrap();
            (n >= (STALLED + WATCHERS) as i64).then_some(n)
        },
    );
    let peak_rss = proc_kib(d.pid(), "VmHWM:");
    let grew_mib = (peak_rss - base_rss) / 1024;
    eprintln!(
        "figures: {STALLED}+{WATCHERS} stalled: most queued {} KiB, {dropped} dropped, \
         RSS {} MiB -> peak {} MiB",
        most_queued / 1024,
        base_rss / 1024,
        peak_rss / 1024
    );
    // The queues (64 MiB), the ring and audit log taking 600 more events (~20 MiB), and
    // the allocator's slack. Before: ~300 MiB of replay queues alone.
    assert!(grew_mib < 128, "RSS grew {grew_mib} MiB");

    assert_eq!(live_reader.join().unwrap(), AFTER);

    // Read afterwards, each stalled stream ends: the events it took, then the notice
    // (or EOF, if the write timeout closed it first), never the whole stream.
    let mut told = 0;
    for s in streams {
        let lines = drain_lines(s);
        assert_eq!(lines[0]["type"], "hello", "{}", lines[0]);
        let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
        assert!(
            events.len() < BEFORE + AFTER,
            "a stalled reader got everything"
        );
        let cursors: Vec<u64> = events
            .iter()
            .map(|e| e["event"]["cursor"].as_u64().unwrap())
            .collect();
        assert!(cursors.windows(2).all(|w| w[0] < w[1]), "out of order");
        if let Some(reset) = lines.iter().position(|l| l["type"] == "reset") {
            told += 1;
            assert_eq!(lines[reset]["reason"], "slow_consumer");
            let tail: Vec<String> = lines[reset.saturating_sub(3)..]
                .iter()
                .map(|l| format!("{} {}", l["type"], l["event"]["cursor"]))
                .collect();
            assert_eq!(
                lines[reset]["resume_since"].as_u64(),
                cursors.last().copied().or(Some(0)),
                "resume where it stopped: {tail:?} {}",
                lines[reset]
            );
            assert_eq!(lines[reset + 1], json!({"type": "end"}));
        }
    }
    for s in watchers {
        let lines = drain_lines(s);
        assert_eq!(lines[0]["type"], "snapshot");
        if let Some(end) = lines.iter().find(|l| l["type"] == "end") {
            assert_eq!(end["reason"], "dropped", "{end}");
        }
    }
    eprintln!("figures: {told} of {STALLED} stalled streams read their reset notice");
    wait_for("every queue released", Duration::from_secs(20), || {
        let s = stats(&d);
        // The live reader hung up too.
        (s["stream_queued_bytes"] == 0 && s["streams"] == 0 && s["watchers"] == 0).then_some(())
    });
}

/// An attach client that never reads, while its program writes as fast as it can. It is
/// detached once its queue passes its 4 MiB share (before: up to 256 chunks, until the
/// write timeout), the program keeps running, and another attach reads live output.
#[test]
fn a_stalled_attach_reader_is_detached_and_the_program_keeps_running() {
    let d = Daemon::start();
    let id = sid(&d.create(json!({"command": "yes 0123456789abcdefghijklmnopqrstuvwxyz"})));
    let stuck = stalled(
        &d,
        "sessions.attach",
        json!({"session_id": id}),
        Some(READER),
    );
    wait_for(
        "the stalled attach to be dropped",
        Duration::from_secs(60),
        || {
            let s = stats(&d);
            assert!(
                s["stream_queued_bytes"].as_i64().unwrap() <= TOTAL_MAX,
                "{s}"
            );
            (s["slow_consumers_dropped"] == 1).then_some(())
        },
    );
    assert_eq!(d.get(&id)["lifecycle"], "running");

    // The stalled client, read afterwards: its answer line, output, then EOF.
    let mut r = BufReader::new(stuck);
    r.get_mut()
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut first = String::new();
    r.read_line(&mut first).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&first).unwrap()["ok"], true);
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).expect("detached: EOF");
    assert!(!rest.is_empty());

    // A reader that keeps up stays attached to the same busy program.
    let mut s = UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = json!({"token": d.token(), "method": "sessions.attach", "caller": READER,
                     "params": {"session_id": id}});
    s.write_all(format!("{req}\n").as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut first = String::new();
    r.read_line(&mut first).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&first).unwrap()["ok"], true);
    let mut total = 0;
    let mut buf = vec![0u8; 64 * 1024];
    while total < 16 * MIB as usize {
        let n = r.read(&mut buf).unwrap();
        assert!(n > 0, "the live attach was closed after {total} bytes");
        total += n;
    }
    assert_eq!(stats(&d)["slow_consumers_dropped"], 1);
    assert_eq!(d.get(&id)["lifecycle"], "running");
}
