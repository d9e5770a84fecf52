//! Scenario 5 — Durable declarations: acknowledged `sessions.set-metadata` / `sessions.emit-event`
//! per second, with 1 and 16 concurrent clients (each client declares on its own session,
//! one request per connection, back to back), with the daemon's default persistence and
//! with `--fsync`. After the default-persistence runs the daemon is `kill -9`ed and
//! restarted, and every session's last acknowledged metadata value and event must be there.
//! tmux, for orientation (nothing durable): `set-option -w @bench N` over control mode.

use crate::maxx::{Client, Daemon};
use crate::tmux::Tmux;
use crate::util::{Summary, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const METHODS: [&str; 2] = ["sessions.set-metadata", "sessions.emit-event"];

fn params(method: &str, id: &str, k: u64) -> Value {
    match method {
        "sessions.set-metadata" => json!({"session_id": id, "key": "bench", "value": k}),
        _ => json!({"session_id": id, "event": "bench.tick", "payload": {"n": k}}),
    }
}

/// Run `clients` threads for `secs`; returns (acks per second, last acked k per client).
fn blast(
    c: &Client,
    ids: &[String],
    method: &'static str,
    clients: usize,
    secs: f64,
    base: u64,
) -> R<(f64, Vec<u64>)> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let c = c.clone();
            let id = ids[i].clone();
            std::thread::spawn(move || -> Result<(u64, u64), String> {
                let mut k = base;
                let mut n = 0u64;
                while Instant::now() < deadline {
                    k += 1;
                    let line = c.line(method, &params(method, &id, k));
                    let resp = c.raw(&line).map_err(|e| e.to_string())?;
                    if !resp.starts_with(b"{\"ok\":true") {
                        return Err(format!("{method}: {}", String::from_utf8_lossy(&resp)));
                    }
                    n += 1;
                }
                Ok((n, k))
            })
        })
        .collect();
    let mut total = 0;
    let mut last = Vec::new();
    for h in handles {
        let (n, k) = h.join().map_err(|_| "client thread panicked")??;
        total += n;
        last.push(k);
    }
    Ok((total as f64 / start.elapsed().as_secs_f64(), last))
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let (runs, secs) = if cfg.quick { (1, 1.0) } else { (3, 2.0) };
    let runs = cfg.runs.unwrap_or(runs);
    let mut rows = Vec::new();
    let mut detail = serde_json::Map::new();
    let mut survived = None;

    // tmux first (orientation only): per clients count, set-option rate.
    let mut tmux_rate: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    {
        let tmux = Tmux::start("bench", 80, 24)?;
        let mut ctl = tmux.control("bench")?;
        let mut wids = Vec::new();
        for _ in 0..16 {
            wids.push(
                ctl.cmd("new-window -d -t bench: -P -F '#{window_id}' \"exec sleep 100000\"")?
                    .join(""),
            );
        }
        drop(ctl);
        for (ci, clients) in [1usize, 16].into_iter().enumerate() {
            for _ in 0..runs {
                let deadline = Instant::now() + Duration::from_secs_f64(secs);
                let start = Instant::now();
                let handles: Vec<_> = (0..clients)
                    .map(|i| {
                        let mut ctl = tmux.control("bench");
                        let wid = wids[i].clone();
                        std::thread::spawn(move || -> Result<u64, String> {
                            let ctl = ctl.as_mut().map_err(|e| e.to_string())?;
                            let mut n = 0;
                            while Instant::now() < deadline {
                                n += 1;
                                ctl.cmd(&format!("set-option -w -t {wid} @bench {n}"))
                                    .map_err(|e| e.to_string())?;
                            }
                            Ok(n)
                        })
                    })
                    .collect();
                let mut total = 0;
                for h in handles {
                    total += h.join().map_err(|_| "tmux client panicked")??;
                }
                tmux_rate[ci].push(total as f64 / start.elapsed().as_secs_f64());
            }
        }
    }

    for fsync in [false, true] {
        let mode = if fsync { "--fsync" } else { "default" };
        let mut daemon = Daemon::start(&cfg.maxx, if fsync { &["--fsync"] } else { &[] })?;
        let c = daemon.client.clone();
        let mut ids = Vec::new();
        for i in 0..16 {
            ids.push(c.create(
                json!({"command": "exec sleep 100000", "title": format!("d{i}"), "focus": false}),
            )?);
        }
        let mut last_k: std::collections::HashMap<&str, Vec<u64>> = Default::default();
        let mut first_k: std::collections::HashMap<&str, Vec<u64>> = Default::default();
        let mut base = 0u64;
        for (ci, clients) in [1usize, 16].into_iter().enumerate() {
            for method in METHODS {
                let mut rates = Vec::new();
                let mut ratio = Vec::new();
                for run in 0..runs {
                    let first = base + 1;
                    let (rate, last) = blast(&c, &ids, method, clients, secs, base)?;
                    base = last.iter().copied().max().unwrap_or(base) + 1;
                    // Every event acked in this run carries first..=last[i] for client i.
                    let fe = first_k.entry(method).or_insert_with(|| vec![0; 16]);
                    for slot in fe.iter_mut().take(clients) {
                        *slot = first;
                    }
                    // Track the newest acked value per session (clients map to ids[i]).
                    let entry = last_k.entry(method).or_insert_with(|| vec![0; 16]);
                    for (i, k) in last.iter().enumerate() {
                        entry[i] = *k;
                    }
                    rates.push(rate);
                    if let Some(t) = tmux_rate[ci].get(run) {
                        ratio.push(rate / t);
                    }
                }
                eprintln!(
                    "  durable {mode} {method} x{clients}: {:?} /s",
                    rates.iter().map(|r| r.round()).collect::<Vec<_>>()
                );
                let short = method.trim_start_matches("sessions.");
                let mut row = Row::new(
                    "durable",
                    &format!(
                        "{short}, {clients} client{} ({mode} persistence)",
                        if clients > 1 { "s" } else { "" }
                    ),
                    "acks/s",
                )
                .maxx(Summary::of(&rates));
                if !fsync {
                    row = row
                        .tmux(Summary::of(&tmux_rate[ci]))
                        .ratio("maxx/tmux", Summary::of(&ratio))
                        .target("≥ 5,000/s", Summary::of(&rates).map(|x| x.med >= 5000.0));
                }
                rows.push(row);
                detail.insert(
                    format!("{mode}_{short}_{clients}"),
                    json!({"acks_per_s": Summary::of(&rates).map(|s| s.json())}),
                );
            }
        }
        if !fsync {
            // kill -9, restart, check every last acknowledged value survived.
            daemon.crash()?;
            // Keep the files as the crash left them, as evidence should the check fail.
            let evidence = crate::util::TempDir::new("maxx-bench-kill9-")?;
            for f in ["registry.json", "registry.journal"] {
                let _ = std::fs::copy(daemon.control.join(f), evidence.join(f));
            }
            daemon.restart()?;
            let c = daemon.client.clone();
            let mut bad = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                let want_meta = last_k
                    .get("sessions.set-metadata")
                    .map(|v| v[i])
                    .unwrap_or(0);
                if want_meta > 0 {
                    let got = c.call("sessions.get", json!({"session_id": id}))?;
                    let have = got["session"]["metadata"]["bench"].as_u64().unwrap_or(0);
                    if have != want_meta {
                        bad.push(format!("{id}: metadata {have} != acked {want_meta}"));
                    }
                }
                let want_ev = last_k.get("sessions.emit-event").map(|v| v[i]).unwrap_or(0);
                if want_ev > 0 {
                    let got = c.call("sessions.events", json!({"session_id": id, "since": 0}))?;
                    let entries = got["entries"]
                        .as_array()
                        .or_else(|| got["events"].as_array())
                        .cloned()
                        .unwrap_or_default();
                    let ns: Vec<u64> = entries
                        .iter()
                        .filter(|e| e["name"] == "bench.tick" || e["event"] == "bench.tick")
                        .filter_map(|e| e["payload"]["n"].as_u64())
                        .collect();
                    let have = ns.last().copied().unwrap_or(0);
                    if have != want_ev {
                        bad.push(format!("{id}: last event {have} != acked {want_ev}"));
                    }
                    // Every event acked in the last run, as far back as the restored log
                    // reaches (at most 1,000 entries per record are kept on disk), is there.
                    let first = first_k
                        .get("sessions.emit-event")
                        .map(|v| v[i])
                        .unwrap_or(0);
                    let from = first.max(ns.first().copied().unwrap_or(0));
                    let present: std::collections::HashSet<u64> = ns.iter().copied().collect();
                    let missing: Vec<u64> =
                        (from..=want_ev).filter(|n| !present.contains(n)).collect();
                    if !missing.is_empty() {
                        bad.push(format!(
                            "{id}: acked events missing after restart: {:?}",
                            &missing[..missing.len().min(10)]
                        ));
                    }
                }
            }
            eprintln!(
                "  durable: kill -9 check: {}",
                if bad.is_empty() {
                    "every acknowledged value survived".to_string()
                } else {
                    bad.join("; ")
                }
            );
            survived = Some(bad.is_empty());
            if !bad.is_empty() {
                let keep = std::path::PathBuf::from(format!(
                    "/tmp/maxx-bench-kill9-evidence-{}",
                    std::process::id()
                ));
                let _ = std::fs::create_dir_all(&keep);
                for f in ["registry.json", "registry.journal"] {
                    let _ = std::fs::copy(evidence.join(f), keep.join(f));
                }
                bad.push(format!("files as kill -9 left them: {}", keep.display()));
            }
            detail.insert(
                "kill9_check".into(),
                json!({"survived": bad.is_empty(), "problems": bad}),
            );
        }
    }
    rows.push(
        Row::new(
            "durable",
            "every acknowledged mutation survives kill -9",
            "",
        )
        .target("yes", survived)
        .note(match survived {
            Some(true) => {
                "checked: last acked metadata + event of 16 sessions after kill -9 + restart".into()
            }
            Some(false) => "LOST acknowledged values (see JSON kill9_check)".into(),
            None => "not checked".into(),
        }),
    );
    detail.insert("runs".into(), json!(runs));
    detail.insert("seconds_per_run".into(), json!(secs));
    detail.insert(
        "tmux_set_option_per_s".into(),
        json!({"1": Summary::of(&tmux_rate[0]).map(|s| s.json()), "16": Summary::of(&tmux_rate[1]).map(|s| s.json())}),
    );
    Ok((rows, Value::Object(detail)))
}
