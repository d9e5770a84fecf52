//! Hostile callers against the audit log (issue 18, item 8): an agent that emits 16 KB
//! events as fast as it can. Before: a session's in-memory log was never trimmed (the heap
//! grew ~100 MB/s) and one `sessions.events` answer held all of it (310 MiB). Now each log
//! and all of them together are bounded, `sessions.events` pages, and a reader whose
//! `since` predates what is kept is told the dropped range.

use crate::common::{wait_for, Daemon};
use serde_json::{json, Value};
use std::time::Duration;

const MIB: i64 = 1024 * 1024;

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> i64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// `count` events of ~16 KB each into `id`, named `e<first + i>`.
fn flood(d: &Daemon, id: &str, first: usize, count: usize) {
    let blob = "x".repeat(16_000);
    for i in first..first + count {
        d.ok(
            "sessions.emit-event",
            json!({"session_id": id, "event": format!("e{i}"), "payload": {"blob": blob}}),
        );
    }
}

fn seqs(events: &Value) -> Vec<u64> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

/// Four agents flooding 16 KB events (~2.4 MB each) into a daemon whose logs may hold
/// 1 MiB each and 3 MiB in all: `audit_bytes` stays within the total, evictions are
/// counted, every session still has its newest entries, and RSS does not grow with what
/// was emitted beyond what persistence keeps.
#[test]
fn an_agent_flooding_16k_events_keeps_the_audit_logs_bounded() {
    let d = Daemon::start_with(&[
        "--audit-session-bytes",
        "1048576",
        "--audit-total-bytes",
        "3145728",
    ]);
    let stats = d.ok("daemon.stats", json!({}));
    assert_eq!(stats["audit_session_max_bytes"], 1048576, "{stats}");
    assert_eq!(stats["audit_total_max_bytes"], 3145728, "{stats}");
    let ids: Vec<String> = (0..4)
        .map(|_| sid(&d.create(json!({"command": "sleep 600"}))))
        .collect();
    let before = rss_kib(d.pid());
    std::thread::scope(|s| {
        for id in &ids {
            let d = &d;
            s.spawn(move || flood(d, id, 0, 150));
        }
    });
    let stats = d.ok("daemon.stats", json!({}));
    let bytes = stats["audit_bytes"].as_i64().unwrap();
    assert!(
        bytes > 0 && bytes <= 3 * MIB,
        "audit_bytes {bytes} is outside (0, 3 MiB]: {stats}"
    );
    assert!(
        stats["audit_evicted"].as_i64().unwrap() > 0,
        "nothing was evicted: {stats}"
    );
    for id in &ids {
        let page = d.ok("sessions.events", json!({"session_id": id}));
        let got = seqs(&page["events"]);
        // The events are seqs 1..=150 (`created` is a bus event, not an audit entry); the
        // newest is always kept.
        assert_eq!(got.last(), Some(&150), "{id}: {got:?}");
        assert_eq!(page["reset"], true, "{id}: the dropped range is reported");
        assert_eq!(
            page["dropped_through"].as_u64().unwrap() + 1,
            got[0],
            "{id}: the gap ends where the kept entries start"
        );
        let line = serde_json::to_string(&page).unwrap().len() as i64;
        assert!(line <= MIB + 64 * 1024, "{id}: answer of {line} B");
    }
    // 9.6 MB were emitted. What may stay: the logs' 3 MiB, what persistence keeps of each
    // record (at most 1000 entries each, here all 150 × 16 KB × 4), and slack for the
    // allocator and journal buffers.
    let after = rss_kib(d.pid());
    let grown_mib = (after - before) / 1024;
    eprintln!("audit flood: RSS {before} -> {after} KiB, audit_bytes {bytes}");
    assert!(
        grown_mib <= 3 + 10 + 32,
        "RSS grew {grown_mib} MiB ({before} -> {after} KiB)"
    );
    // A session that is dropped gives its bytes back.
    for id in &ids {
        d.ok("sessions.archive", json!({"session_id": id}));
    }
    assert!(d.stat("audit_bytes") <= 3 * MIB);
}

/// Paging: a log of ~8 MiB (its per-session bound) is read in answers of at most 4 MiB /
/// `limit` entries, each giving the `next_since` to pass on and `more`; following them
/// returns every kept entry once, in order; a `since` older than what is kept reports
/// `reset` and `dropped_through`; bad limits are refused; the CLI follows the pages (or
/// prints one with `--limit`).
#[test]
fn sessions_events_pages_with_next_since_and_reports_the_dropped_range() {
    let d = Daemon::start_with(&["--audit-session-bytes", "8388608"]);
    let id = sid(&d.create(json!({"command": "sleep 600"})));
    flood(&d, &id, 0, 600);
    wait_for("evictions", Duration::from_secs(10), || {
        (d.stat("audit_evicted") > 0).then_some(())
    });
    let last = 600; // the events are seqs 1..=600

    // Without `limit`: capped at 4 MiB, `more` says there is a next page.
    let first = d.call("sessions.events", json!({"session_id": id, "since": 0}));
    assert_eq!(first["ok"], true, "{first}");
    let line = serde_json::to_string(&first).unwrap().len() as i64;
    assert!(line <= 4 * MIB + 64 * 1024, "first answer is {line} B");
    let r = &first["result"];
    assert_eq!(r["more"], true, "8 MiB of entries do not fit one answer");
    assert_eq!(r["reset"], true);
    let dropped = r["dropped_through"].as_u64().unwrap();
    assert!(dropped > 1 && dropped < last, "dropped_through {dropped}");
    let mut all = seqs(&r["events"]);
    assert_eq!(all[0], dropped + 1);
    assert_eq!(r["next_since"].as_u64(), all.last().copied());
    let mut since = r["next_since"].as_u64().unwrap();
    let mut pages = 1;
    loop {
        let page = d.call("sessions.events", json!({"session_id": id, "since": since}));
        let line = serde_json::to_string(&page).unwrap().len() as i64;
        assert!(line <= 4 * MIB + 64 * 1024, "page answer is {line} B");
        let r = &page["result"];
        assert!(r.get("reset").is_none(), "no gap after a next_since: {r}");
        all.extend(seqs(&r["events"]));
        since = r["next_since"].as_u64().unwrap();
        pages += 1;
        if r["more"] == false {
            break;
        }
        assert!(pages < 10, "paging does not end");
    }
    assert!(pages >= 2);
    assert!(
        all == (dropped + 1..=last).collect::<Vec<_>>(),
        "every kept entry once, in order: {} entries, {:?}..{:?}",
        all.len(),
        all.first(),
        all.last()
    );
    assert_eq!(since, last);

    // With `limit`: pages of that many, contiguous.
    let p = d.ok(
        "sessions.events",
        json!({"session_id": id, "since": 590, "limit": 4}),
    );
    assert_eq!(seqs(&p["events"]), [591, 592, 593, 594]);
    assert_eq!(
        (p["next_since"].as_u64(), &p["more"]),
        (Some(594), &json!(true))
    );
    let p = d.ok(
        "sessions.events",
        json!({"session_id": id, "since": 598, "limit": 4}),
    );
    assert_eq!(seqs(&p["events"]), [599, 600]);
    assert_eq!(
        (p["next_since"].as_u64(), &p["more"]),
        (Some(600), &json!(false))
    );
    // Caught up: nothing, the cursor stays.
    let p = d.ok("sessions.events", json!({"session_id": id, "since": last}));
    assert_eq!(seqs(&p["events"]), Vec::<u64>::new());
    assert_eq!(
        (p["next_since"].as_u64(), &p["more"]),
        (Some(last), &json!(false))
    );
    assert!(p.get("reset").is_none());
    // A `since` inside the dropped range: the gap is reported, the page starts after it.
    let p = d.ok(
        "sessions.events",
        json!({"session_id": id, "since": dropped / 2, "limit": 2}),
    );
    assert_eq!(
        (&p["reset"], p["dropped_through"].as_u64()),
        (&json!(true), Some(dropped))
    );
    assert_eq!(seqs(&p["events"]), [dropped + 1, dropped + 2]);
    for bad in [json!(0), json!(1001), json!(-1), json!("5")] {
        d.err(
            "sessions.events",
            json!({"session_id": id, "limit": bad}),
            "invalid_request",
        );
    }

    // The CLI: without --limit it follows every page into one answer.
    let out = d.cli_ok(&["sessions", "events", &id]);
    let r = &out["result"];
    assert_eq!(seqs(&r["events"]), (dropped + 1..=last).collect::<Vec<_>>());
    assert_eq!(
        (&r["more"], r["next_since"].as_u64()),
        (&json!(false), Some(last))
    );
    assert_eq!(
        (&r["reset"], r["dropped_through"].as_u64()),
        (&json!(true), Some(dropped))
    );
    // With --limit: one page, as the daemon answers it.
    let out = d.cli_ok(&["sessions", "events", &id, "--since", "596", "--limit", "2"]);
    let r = &out["result"];
    assert_eq!(seqs(&r["events"]), [597, 598]);
    assert_eq!(r["more"], true);
    let bad = d.cli(&["sessions", "events", &id, "--limit", "0"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}
