//! Scenario 1 — Spawn: request → the child is running (it created its marker file) and the caller has
//! its answer. Five paths, interleaved round-robin inside each run so drift hits all alike:
//! bare openpty+spawn, maxx over the socket (in-process client), maxx CLI process, tmux
//! control mode (one long-lived client), tmux CLI process.

use crate::maxx::Daemon;
use crate::tmux::Tmux;
use crate::util::{median, ms, percentile, Inotify, Summary, TempDir, R};
use crate::{bare, Cfg, Row};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const KINDS: [&str; 5] = [
    "bare",
    "maxx_socket",
    "maxx_cli",
    "tmux_control",
    "tmux_cli",
];

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let (runs, iters) = if cfg.quick { (2, 10) } else { (5, 30) };
    let runs = cfg.runs.unwrap_or(runs);
    let dir = TempDir::new("maxx-bench-spawn-")?;
    let mut ino = Inotify::new(dir.path())?;
    let daemon = Daemon::start(&cfg.maxx, &[])?;
    let c = daemon.client.clone();
    let tmux = Tmux::start("bench", 80, 24)?;
    let mut ctl = tmux.control("bench")?;
    let timeout = Duration::from_secs(10);

    // per kind: per-run p50 and p90, and every sample
    let mut p50: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
    let mut p90: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
    let mut reply_p50: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
    let mut ratio_sock_bare = Vec::new();
    let mut ratio_cli_tmux = Vec::new();
    let mut ratio_sock_ctl = Vec::new();
    let mut all_samples: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];

    for run in 0..runs {
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
        let mut replies: Vec<Vec<f64>> = vec![Vec::new(); KINDS.len()];
        let mut bares = Vec::new();
        let mut maxx_ids = Vec::new();
        let mut tmux_ids = Vec::new();
        for i in 0..iters {
            for (k, kind) in KINDS.iter().enumerate() {
                let name = format!("{kind}-{run}-{i}");
                let marker = dir.join(&name);
                let cmd = format!(": > {}; exec sleep 100000", marker.display());
                let t0 = Instant::now();
                match *kind {
                    "bare" => bares.push(bare::spawn(&cmd, 80, 24)?),
                    "maxx_socket" => {
                        maxx_ids.push(c.create(json!({"command": cmd, "focus": false}))?)
                    }
                    "maxx_cli" => {
                        let out = daemon
                            .cli()
                            .args(["sessions", "create", "--no-focus", "--command", &cmd])
                            .output()?;
                        if !out.status.success() {
                            return Err(format!(
                                "maxx sessions create: {}",
                                String::from_utf8_lossy(&out.stderr)
                            )
                            .into());
                        }
                        let v: Value = serde_json::from_slice(&out.stdout)?;
                        maxx_ids.push(
                            v["result"]["session"]["session_id"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                        );
                    }
                    "tmux_control" => {
                        let out = ctl.cmd(&format!(
                            "new-window -d -t bench: -P -F '#{{window_id}}' \"{cmd}\""
                        ))?;
                        tmux_ids.extend(out);
                    }
                    "tmux_cli" => {
                        let id = tmux.run(&[
                            "new-window",
                            "-d",
                            "-t",
                            "bench:",
                            "-P",
                            "-F",
                            "#{window_id}",
                            &cmd,
                        ])?;
                        tmux_ids.push(id);
                    }
                    _ => unreachable!(),
                }
                let reply = t0.elapsed();
                ino.wait(&name, timeout)?;
                samples[k].push(ms(t0.elapsed()));
                replies[k].push(ms(reply));
            }
        }
        for k in 0..KINDS.len() {
            p50[k].push(median(&samples[k]));
            p90[k].push(percentile(&samples[k], 90.0));
            reply_p50[k].push(median(&replies[k]));
            all_samples[k].extend(&samples[k]);
        }
        let m = |k: &str| median(&samples[KINDS.iter().position(|x| *x == k).unwrap()]);
        ratio_sock_bare.push(m("maxx_socket") / m("bare"));
        ratio_cli_tmux.push(m("maxx_cli") / m("tmux_cli"));
        ratio_sock_ctl.push(m("maxx_socket") / m("tmux_control"));
        // Clean up between runs, off the clock.
        drop(bares);
        for id in &maxx_ids {
            c.close(id)?;
        }
        for id in &tmux_ids {
            ctl.cmd(&format!("kill-window -t {id}"))?;
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    let s = |k: usize| Summary::of(&p50[k]);
    let rows = vec![
        Row::new(
            "spawn",
            "create → child running, socket / control mode (p50)",
            "ms",
        )
        .maxx(s(1))
        .tmux(s(3))
        .bare(s(0))
        .ratio("maxx/bare", Summary::of(&ratio_sock_bare))
        .target(
            "≤ 1.3x bare",
            Summary::of(&ratio_sock_bare).map(|r| r.med <= 1.3),
        )
        .note(format!(
            "maxx/tmux-control med {:.2}x",
            median(&ratio_sock_ctl)
        )),
        Row::new("spawn", "create → child running, CLI process (p50)", "ms")
            .maxx(s(2))
            .tmux(s(4))
            .ratio("maxx/tmux", Summary::of(&ratio_cli_tmux))
            .target(
                "p50 < tmux new-window -d",
                Summary::of(&ratio_cli_tmux).map(|r| r.med < 1.0),
            ),
        Row::new("spawn", "create → child running, socket (p90)", "ms")
            .maxx(Summary::of(&p90[1]))
            .tmux(Summary::of(&p90[3]))
            .bare(Summary::of(&p90[0])),
        Row::new("spawn", "create → child running, CLI (p90)", "ms")
            .maxx(Summary::of(&p90[2]))
            .tmux(Summary::of(&p90[4])),
    ];
    let mut detail = serde_json::Map::new();
    for (k, kind) in KINDS.iter().enumerate() {
        detail.insert(
            kind.to_string(),
            json!({
                "p50_ms": Summary::of(&p50[k]).map(|s| s.json()),
                "p90_ms": Summary::of(&p90[k]).map(|s| s.json()),
                "reply_only_p50_ms": Summary::of(&reply_p50[k]).map(|s| s.json()),
                "all_samples_p50_ms": crate::util::round(median(&all_samples[k])),
                "all_samples_max_ms": crate::util::round(percentile(&all_samples[k], 100.0)),
            }),
        );
    }
    detail.insert("runs".into(), json!(runs));
    detail.insert("creates_per_kind_per_run".into(), json!(iters));
    detail.insert(
        "ratio_socket_over_bare".into(),
        json!(Summary::of(&ratio_sock_bare).map(|s| s.json())),
    );
    detail.insert(
        "ratio_cli_over_tmux_cli".into(),
        json!(Summary::of(&ratio_cli_tmux).map(|s| s.json())),
    );
    detail.insert(
        "ratio_socket_over_tmux_control".into(),
        json!(Summary::of(&ratio_sock_ctl).map(|s| s.json())),
    );
    detail.insert(
        "definition".into(),
        json!("time from issuing the request until both the reply is back and the child's marker file exists (inotify); child = /bin/sh -c ': > marker; exec sleep'"),
    );
    Ok((rows, Value::Object(detail)))
}
