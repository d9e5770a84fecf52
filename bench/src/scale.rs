//! Scenario 3 — Scale: N live sessions (`exec sleep`), created one after another.
//!
//! maxx: time to create all N over the socket; daemon VmRSS before/after (per session);
//! `sessions.get` latency p50/p99 on random sessions (a fresh connection each, as every
//! client does); `sessions.list` time; the same `get` through the CLI process.
//! tmux: N windows created through control mode (its fastest path); server VmRSS per
//! window; `display-message -p -t @id` p50/p99 over control mode and through the CLI;
//! `list-windows` over control mode and through the CLI.

use crate::maxx::Daemon;
use crate::tmux::Tmux;
use crate::util::{median, ms, percentile, rss_kib, threads, Rng, Summary, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const FMT: &str = "#{window_id} #{window_name} #{pane_pid} #{pane_dead} #{pane_current_command} #{window_width}x#{window_height}";

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let (runs, n, gets, lists, cli_gets) = if cfg.quick {
        (1, 200, 300, 5, 10)
    } else {
        (3, 1000, 2000, 20, 30)
    };
    let runs = cfg.runs.unwrap_or(runs);
    let mut m_create = Vec::new();
    let mut m_rss = Vec::new();
    let mut m_get50 = Vec::new();
    let mut m_get99 = Vec::new();
    let mut m_list = Vec::new();
    let mut m_cli_get = Vec::new();
    let mut m_list_bytes = 0usize;
    let mut m_threads = Vec::new();
    let mut m_first = Vec::new();
    let mut m_last = Vec::new();
    let mut t_create = Vec::new();
    let mut t_rss = Vec::new();
    let mut t_get50 = Vec::new();
    let mut t_get99 = Vec::new();
    let mut t_list_ctl = Vec::new();
    let mut t_list_cli = Vec::new();
    let mut t_cli_get = Vec::new();
    let mut r_create = Vec::new();
    let mut r_rss = Vec::new();
    let mut r_list = Vec::new();

    for run in 0..runs {
        // ---- maxx
        let daemon = Daemon::start(&cfg.maxx, &[])?;
        let c = daemon.client.clone();
        std::thread::sleep(Duration::from_millis(300));
        let rss0 = rss_kib(daemon.pid()).unwrap_or(0);
        let t0 = Instant::now();
        let mut ids = Vec::with_capacity(n);
        let mut each = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            ids.push(c.create(
                json!({"command": "exec sleep 100000", "title": format!("s{i}"), "focus": false}),
            )?);
            each.push(ms(t.elapsed()));
        }
        let create_s = t0.elapsed().as_secs_f64();
        // Does a create get slower as the daemon holds more sessions?
        let tenth = (n / 10).max(1);
        m_first.push(median(&each[..tenth]));
        m_last.push(median(&each[n - tenth..]));
        std::thread::sleep(Duration::from_millis(1000));
        let rss1 = rss_kib(daemon.pid()).unwrap_or(0);
        let per = (rss1 as f64 - rss0 as f64) / n as f64;
        m_threads.push(threads(daemon.pid()).unwrap_or(0) as f64);
        let mut rng = Rng::new(7 + run as u64);
        let mut lat = Vec::with_capacity(gets);
        for _ in 0..gets {
            let id = &ids[rng.below(n as u64) as usize];
            let line = c.line("sessions.get", &json!({"session_id": id}));
            let t = Instant::now();
            let resp = c.raw(&line)?;
            lat.push(ms(t.elapsed()));
            if !resp.starts_with(b"{\"ok\":true") {
                return Err(format!("sessions.get: {}", String::from_utf8_lossy(&resp)).into());
            }
        }
        let mut lt = Vec::new();
        for _ in 0..lists {
            let line = c.line("sessions.list", &json!({}));
            let t = Instant::now();
            let resp = c.raw(&line)?;
            lt.push(ms(t.elapsed()));
            m_list_bytes = resp.len();
        }
        let listed: Value = serde_json::from_slice(&c.raw(&c.line("sessions.list", &json!({})))?)?;
        let live = listed["result"]["sessions"]
            .as_array()
            .map(|a| a.iter().filter(|s| s["lifecycle"] == "running").count())
            .unwrap_or(0);
        if live != n {
            return Err(format!("maxx: {live} of {n} sessions running").into());
        }
        let mut cg = Vec::new();
        for k in 0..cli_gets {
            let t = Instant::now();
            let out = daemon
                .cli()
                .args(["sessions", "get", &ids[k % n]])
                .output()?;
            cg.push(ms(t.elapsed()));
            if !out.status.success() {
                return Err("maxx sessions get (CLI) failed".into());
            }
        }
        m_create.push(create_s);
        m_rss.push(per);
        m_get50.push(median(&lat));
        m_get99.push(percentile(&lat, 99.0));
        m_list.push(median(&lt));
        m_cli_get.push(median(&cg));
        let t_stop = Instant::now();
        drop(daemon);
        eprintln!(
            "  scale run {run}: maxx create {create_s:.2}s, {per:.1} KiB/session, get p50 {:.3} p99 {:.3} ms, list {:.2} ms (stop {:.1}s)",
            median(&lat),
            percentile(&lat, 99.0),
            median(&lt),
            t_stop.elapsed().as_secs_f64()
        );

        // ---- tmux
        let tmux = Tmux::start("bench", 80, 24)?;
        let mut ctl = tmux.control("bench")?;
        let pid = tmux.server_pid()?;
        std::thread::sleep(Duration::from_millis(300));
        let rss0 = rss_kib(pid).unwrap_or(0);
        let t0 = Instant::now();
        let mut wids = Vec::with_capacity(n);
        for _ in 0..n {
            let out =
                ctl.cmd("new-window -d -t bench: -P -F '#{window_id}' \"exec sleep 100000\"")?;
            wids.push(out.into_iter().next().unwrap_or_default());
        }
        let tcreate = t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(1000));
        let rss1 = rss_kib(pid).unwrap_or(0);
        let tper = (rss1 as f64 - rss0 as f64) / n as f64;
        let mut lat = Vec::with_capacity(gets);
        for _ in 0..gets {
            let id = &wids[rng.below(n as u64) as usize];
            let cmd = format!("display-message -p -t {id} '{FMT}'");
            let t = Instant::now();
            ctl.cmd(&cmd)?;
            lat.push(ms(t.elapsed()));
        }
        let mut lc = Vec::new();
        for _ in 0..lists {
            let t = Instant::now();
            let out = ctl.cmd(&format!("list-windows -t bench: -F '{FMT}'"))?;
            lc.push(ms(t.elapsed()));
            if out.len() < n {
                let cli = tmux
                    .run(&["list-windows", "-t", "bench:", "-F", "#{window_id}"])
                    .unwrap_or_default();
                return Err(format!(
                    "tmux list-windows over control mode gave {} of {n} lines ({:?}…); the CLI lists {}",
                    out.len(),
                    out.iter().take(2).collect::<Vec<_>>(),
                    cli.lines().count()
                )
                .into());
            }
        }
        let mut ll = Vec::new();
        for _ in 0..lists.min(10) {
            let t = Instant::now();
            tmux.run(&["list-windows", "-t", "bench:", "-F", FMT])?;
            ll.push(ms(t.elapsed()));
        }
        let mut cg = Vec::new();
        for k in 0..cli_gets {
            let t = Instant::now();
            tmux.run(&["display-message", "-p", "-t", &wids[k % n], FMT])?;
            cg.push(ms(t.elapsed()));
        }
        t_create.push(tcreate);
        t_rss.push(tper);
        t_get50.push(median(&lat));
        t_get99.push(percentile(&lat, 99.0));
        t_list_ctl.push(median(&lc));
        t_list_cli.push(median(&ll));
        t_cli_get.push(median(&cg));
        r_create.push(create_s / tcreate);
        r_rss.push(per / tper);
        r_list.push(m_list.last().unwrap() / median(&lc));
        drop(ctl);
        drop(tmux);
        eprintln!(
            "  scale run {run}: tmux create {tcreate:.2}s, {tper:.1} KiB/window, display p50 {:.3} p99 {:.3} ms, list-windows {:.2} ms (ctl) {:.2} ms (cli)",
            median(&lat),
            percentile(&lat, 99.0),
            median(&lc),
            median(&ll)
        );
    }

    let s = Summary::of;
    let rows = vec![
        Row::new(
            "scale",
            &format!("create {n} sessions (sequential, socket / control mode)"),
            "s",
        )
        .maxx(s(&m_create))
        .tmux(s(&t_create))
        .ratio("maxx/tmux", s(&r_create))
        .target(
            if n == 1000 {
                "≤ 3 s"
            } else {
                "≤ 3 s (at 1,000)"
            },
            s(&m_create).map(|x| x.med <= 3.0 * n as f64 / 1000.0),
        ),
        Row::new(
            "scale",
            &format!("one create, p50 of the first {} of {n}", n / 10),
            "ms",
        )
        .maxx(s(&m_first)),
        Row::new(
            "scale",
            &format!("one create, p50 of the last {} of {n}", n / 10),
            "ms",
        )
        .maxx(s(&m_last)),
        Row::new("scale", "daemon / server RSS per idle session", "KiB")
            .maxx(s(&m_rss))
            .tmux(s(&t_rss))
            .ratio("maxx/tmux", s(&r_rss))
            .target("≤ 32 KiB", s(&m_rss).map(|x| x.med <= 32.0)),
        Row::new(
            "scale",
            &format!("sessions.get p50 ({n} live; tmux display-message, control)"),
            "ms",
        )
        .maxx(s(&m_get50))
        .tmux(s(&t_get50)),
        Row::new(
            "scale",
            &format!("sessions.get p99 ({n} live; tmux display-message, control)"),
            "ms",
        )
        .maxx(s(&m_get99))
        .tmux(s(&t_get99))
        .target("≤ 1 ms", s(&m_get99).map(|x| x.med <= 1.0)),
        Row::new(
            "scale",
            &format!("sessions.list ({n} live; tmux list-windows, control)"),
            "ms",
        )
        .maxx(s(&m_list))
        .tmux(s(&t_list_ctl))
        .ratio("maxx/tmux", s(&r_list))
        .target("≤ 10 ms", s(&m_list).map(|x| x.med <= 10.0))
        .note(format!(
            "response {} KiB; tmux list-windows CLI med {:.1} ms",
            m_list_bytes / 1024,
            median(&t_list_cli)
        )),
        Row::new(
            "scale",
            &format!("get through the CLI process ({n} live; tmux display-message CLI)"),
            "ms",
        )
        .maxx(s(&m_cli_get))
        .tmux(s(&t_cli_get)),
    ];
    let j = |v: &Vec<f64>| s(v).map(|x| x.json());
    let detail = json!({
        "sessions": n,
        "runs": runs,
        "maxx": {
            "create_all_s": j(&m_create), "rss_per_session_kib": j(&m_rss),
            "get_p50_ms": j(&m_get50), "get_p99_ms": j(&m_get99), "list_ms": j(&m_list),
            "list_response_bytes": m_list_bytes, "cli_get_ms": j(&m_cli_get),
            "daemon_threads": j(&m_threads),
            "create_p50_first_tenth_ms": j(&m_first), "create_p50_last_tenth_ms": j(&m_last),
        },
        "tmux": {
            "create_all_s": j(&t_create), "rss_per_window_kib": j(&t_rss),
            "display_message_p50_ms": j(&t_get50), "display_message_p99_ms": j(&t_get99),
            "list_windows_control_ms": j(&t_list_ctl), "list_windows_cli_ms": j(&t_list_cli),
            "display_message_cli_ms": j(&t_cli_get),
        },
        "gets_per_run": gets,
        "lists_per_run": lists,
    });
    Ok((rows, detail))
}
