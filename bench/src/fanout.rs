//! Scenario 6 — Event fan-out: 100 `stream.watch` subscribers (filter: one session) read by one
//! epoll thread; publishers `event.emit` on that session as fast as the daemon acks for a
//! fixed time; then every subscriber must have received every acknowledged event, with no
//! `reset` (slow-consumer drop) line. Figure: events delivered per second (acked events x
//! subscribers / time until the last subscriber had the last event). tmux has no event
//! stream to compare with.

use crate::maxx::{read_line, Daemon};
use crate::util::{median, Summary, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SUBSCRIBERS: usize = 100;
const PUBLISHERS: usize = 2;

struct Outcome {
    emitted: u64,
    emit_rate: f64,
    delivered_rate: f64,
    lost: u64,
    resets: u64,
    drain_lag_ms: f64,
}

fn once(cfg: &Cfg, secs: f64) -> R<Outcome> {
    let daemon = Daemon::start(&cfg.maxx, &[])?;
    let c = daemon.client.clone();
    let id = c.create(json!({"command": "exec sleep 100000", "focus": false}))?;
    let mut socks: Vec<UnixStream> = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let mut r = c.open("stream.watch", json!({"session_id": id}))?;
        let hello = read_line(&mut r)?;
        if hello["type"] != "hello" {
            return Err(format!("stream.watch: {hello}").into());
        }
        if !r.buffer().is_empty() {
            return Err("unexpected data after hello".into());
        }
        let s = r.into_inner();
        s.set_nonblocking(true)?;
        socks.push(s);
    }
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let exp2 = expected.clone();
    let t0 = Instant::now();
    let reader = std::thread::spawn(move || -> Result<(Vec<u64>, u64, Instant), String> {
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        for (i, s) in socks.iter().enumerate() {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: i as u64,
            };
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
        }
        let mut counts = vec![0u64; socks.len()];
        let mut partial: Vec<Vec<u8>> = vec![Vec::new(); socks.len()];
        let mut resets = 0u64;
        let mut last = Instant::now();
        let mut buf = vec![0u8; 256 * 1024];
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 128];
        let hard = Instant::now() + Duration::from_secs(600);
        loop {
            let want = exp2.load(Ordering::Acquire);
            if want != u64::MAX && counts.iter().all(|c| *c >= want) {
                break;
            }
            if Instant::now() > hard {
                break;
            }
            if want != u64::MAX && last.elapsed() > Duration::from_secs(5) {
                break; // nothing more is coming
            }
            let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, 100) };
            for e in evs.iter().take(n.max(0) as usize) {
                let i = e.u64 as usize;
                loop {
                    match (&socks[i]).read(&mut buf) {
                        Ok(0) => {
                            unsafe {
                                libc::epoll_ctl(
                                    ep,
                                    libc::EPOLL_CTL_DEL,
                                    socks[i].as_raw_fd(),
                                    std::ptr::null_mut(),
                                )
                            };
                            break;
                        }
                        Ok(k) => {
                            last = Instant::now();
                            let p = &mut partial[i];
                            p.extend_from_slice(&buf[..k]);
                            let mut start = 0;
                            while let Some(nl) = p[start..].iter().position(|b| *b == b'\n') {
                                let line = &p[start..start + nl];
                                // `{"type":"event","event":{…}}`; control lines are
                                // `{"type":"reset"|"end"…}`.
                                if line.starts_with(b"{\"type\":\"event\"") {
                                    counts[i] += 1;
                                } else if memfind(line, b"\"reset\"") {
                                    resets += 1;
                                }
                                start += nl + 1;
                            }
                            p.drain(..start);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.to_string()),
                    }
                }
            }
        }
        unsafe { libc::close(ep) };
        Ok((counts, resets, last))
    });
    // Publishers.
    let deadline = t0 + Duration::from_secs_f64(secs);
    let pubs: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let c = c.clone();
            let id = id.clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    n += 1;
                    let line = c.line("event.emit", &json!({"session_id": id, "type": "bench.fan", "payload": {"p": p, "n": n}}));
                    let resp = c.raw(&line).map_err(|e| e.to_string())?;
                    if !resp.starts_with(b"{\"ok\":true") {
                        return Err(String::from_utf8_lossy(&resp).into_owned());
                    }
                }
                Ok(n)
            })
        })
        .collect();
    let mut emitted = 0;
    for h in pubs {
        emitted += h.join().map_err(|_| "publisher panicked")??;
    }
    let publish_end = Instant::now();
    let emit_rate = emitted as f64 / (publish_end - t0).as_secs_f64();
    expected.store(emitted, Ordering::Release);
    let (counts, resets, last) = reader.join().map_err(|_| "reader panicked")??;
    let received: u64 = counts.iter().sum();
    let lost = counts.iter().map(|c| emitted.saturating_sub(*c)).sum();
    let span = (last.max(publish_end) - t0).as_secs_f64();
    drop(daemon);
    Ok(Outcome {
        emitted,
        emit_rate,
        delivered_rate: received as f64 / span,
        lost,
        resets,
        drain_lag_ms: last.saturating_duration_since(publish_end).as_secs_f64() * 1e3,
    })
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let (runs, secs) = if cfg.quick { (1, 2.0) } else { (3, 4.0) };
    let runs = cfg.runs.unwrap_or(runs);
    let (mut del, mut emit, mut lag) = (vec![], vec![], vec![]);
    let mut lost_total = 0;
    let mut resets_total = 0;
    let mut emitted_total = 0;
    for run in 0..runs {
        let o = once(cfg, secs)?;
        eprintln!(
            "  fanout run {run}: {} events acked ({:.0}/s), delivered {:.0} events/s to {SUBSCRIBERS} subscribers, lost {}, resets {}, drain lag {:.1} ms",
            o.emitted, o.emit_rate, o.delivered_rate, o.lost, o.resets, o.drain_lag_ms
        );
        del.push(o.delivered_rate);
        emit.push(o.emit_rate);
        lag.push(o.drain_lag_ms);
        lost_total += o.lost;
        resets_total += o.resets;
        emitted_total += o.emitted;
    }
    let rows = vec![
        Row::new("fanout", &format!("{SUBSCRIBERS} stream.watch subscribers: events delivered"), "events/s")
            .maxx(Summary::of(&del))
            .target("no loss", Some(lost_total == 0 && resets_total == 0))
            .note(format!(
                "{PUBLISHERS} publishers acked med {:.0} events/s; lost {lost_total}, resets {resets_total}; last delivery med {:.1} ms after publishing stopped; tmux: no equivalent",
                median(&emit),
                median(&lag)
            )),
    ];
    let detail = json!({
        "subscribers": SUBSCRIBERS,
        "publishers": PUBLISHERS,
        "runs": runs,
        "seconds_per_run": secs,
        "delivered_events_per_s": Summary::of(&del).map(|s| s.json()),
        "acked_events_per_s": Summary::of(&emit).map(|s| s.json()),
        "drain_lag_ms": Summary::of(&lag).map(|s| s.json()),
        "events_emitted": emitted_total,
        "lost": lost_total,
        "resets": resets_total,
    });
    Ok((rows, detail))
}
