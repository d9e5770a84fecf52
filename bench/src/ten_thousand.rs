//! Scenario 10 — 10,000 live sessions (issue 23; not in `--quick`). maxx: 10,000 `exec sleep`
//! sessions created one after another over the socket, in one group; total create time;
//! `sessions.get` p50/p99 over random ids (a connection each); `sessions.list`; daemon RSS per
//! idle session; the daemon's and the keeper's descriptors and threads per session (from
//! /proc/<pid>/fd and /proc/<pid>/task before and after); then `stream.wait {group, all:
//! "exited"}` opened, every member `kill -9`ed at once by the harness, and the wait's answer
//! timed from the last `kill` returning.
//!
//! The daemon needs 4 descriptors per session plus its reserve (44,160 for 10,000) and never
//! raises its hard limit, so the harness starts the keeper (and so the daemon) under
//! `RLIMIT_NOFILE` 65,536 (soft and hard; we run as root). The tmux server gets the same.
//!
//! tmux: as many windows as it makes within a deadline (120 s) through control mode; server
//! RSS per window, `display-message` p50/p99 and `list-windows` over control mode, and the same
//! kill-all, counted by `%window-close` notifications. What it did not reach is "n/a beyond K".

use crate::maxx::{read_line, Daemon};
use crate::tmux::Tmux;
use crate::util::{median, mono_ns, ms, percentile, proc_count, rss_kib, threads, Rng, R};
use crate::util::{wait_until, Summary};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const N: usize = 10_000;
const NOFILE: u64 = 65_536;
const GETS: usize = 2000;
const LISTS: usize = 5;
const MAXX_CREATE_DEADLINE: Duration = Duration::from_secs(150);
const TMUX_CREATE_DEADLINE: Duration = Duration::from_secs(120);

fn read_num(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Tasks (processes and threads) alive on the machine, from /proc/loadavg.
fn tasks_alive() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    s.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok()
}

#[derive(Default)]
struct Out {
    made: usize,
    create_s: f64,
    rss_per_kib: f64,
    get50: f64,
    get99: f64,
    list_ms: f64,
    list_bytes: usize,
    kill_spread_ms: f64,
    wait_after_last_kill_ms: f64,
    fds_per: f64,
    fds: (usize, usize),
    threads: (u64, u64),
    extra: Value,
}

fn maxx_side(cfg: &Cfg) -> R<Out> {
    let mut o = Out::default();
    let daemon = Daemon::start_nofile(&cfg.maxx, &[], Some(NOFILE))?;
    let c = daemon.client.clone();
    let (pid, keeper) = (daemon.pid(), daemon.keeper_pid());
    let stats = c.call("daemon.stats", json!({}))?;
    let cap = stats["session_capacity"].as_u64().unwrap_or(0);
    // Raising the hard limit needs CAP_SYS_RESOURCE: without it (a container) the daemon runs
    // under the hard limit it was given and the scenario runs at the sessions that leaves room
    // for, saying so.
    let n = N.min(cap as usize);
    if n < 1000 {
        return Err(format!(
            "the daemon leaves room for {cap} sessions (fd_limit {}): the raised open-files limit did not apply",
            stats["fd_limit"]
        )
        .into());
    }
    if n < N {
        eprintln!(
            "  ten_thousand: the daemon's fd_limit is {} (the hard RLIMIT_NOFILE could not be raised to {NOFILE}): {n} sessions, not {N}",
            stats["fd_limit"]
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let rss0 = rss_kib(pid).unwrap_or(0);
    let fd0 = proc_count(pid, "fd").unwrap_or(0);
    let kfd0 = proc_count(keeper, "fd").unwrap_or(0);
    let th0 = threads(pid).unwrap_or(0);
    let t0 = Instant::now();
    let mut ids = Vec::with_capacity(n);
    let mut each = Vec::with_capacity(n);
    let mut stopped = None;
    for i in 0..n {
        if t0.elapsed() > MAXX_CREATE_DEADLINE {
            stopped = Some(format!("deadline {MAXX_CREATE_DEADLINE:?}"));
            break;
        }
        let t = Instant::now();
        match c.create(json!({"command": "exec sleep 100000", "group": "ten", "focus": false})) {
            Ok(id) => ids.push(id),
            Err(e) => {
                stopped = Some(e.to_string());
                break;
            }
        }
        each.push(ms(t.elapsed()));
        if (i + 1) % 2500 == 0 {
            eprintln!(
                "  ten_thousand: maxx {} sessions in {:.1} s",
                i + 1,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    o.create_s = t0.elapsed().as_secs_f64();
    o.made = ids.len();
    if let Some(why) = stopped {
        return Err(format!("maxx stopped at {} of {n} sessions: {why}", ids.len()).into());
    }
    std::thread::sleep(Duration::from_millis(1000));
    let rss1 = rss_kib(pid).unwrap_or(0);
    let fd1 = proc_count(pid, "fd").unwrap_or(0);
    let kfd1 = proc_count(keeper, "fd").unwrap_or(0);
    let th1 = threads(pid).unwrap_or(0);
    o.rss_per_kib = (rss1 as f64 - rss0 as f64) / n as f64;
    o.fds_per = (fd1 as f64 - fd0 as f64) / n as f64;
    o.fds = (fd1, kfd1);
    o.threads = (th0, th1);

    let mut rng = Rng::new(10_000);
    let mut lat = Vec::with_capacity(GETS);
    for _ in 0..GETS {
        let id = &ids[rng.below(n as u64) as usize];
        let line = c.line("sessions.get", &json!({"session_id": id}));
        let t = Instant::now();
        let resp = c.raw(&line)?;
        lat.push(ms(t.elapsed()));
        if !resp.starts_with(b"{\"ok\":true") {
            return Err(format!("sessions.get: {}", String::from_utf8_lossy(&resp)).into());
        }
    }
    o.get50 = median(&lat);
    o.get99 = percentile(&lat, 99.0);
    let mut lt = Vec::new();
    let mut listed = Vec::new();
    for _ in 0..LISTS {
        let line = c.line("sessions.list", &json!({}));
        let t = Instant::now();
        listed = c.raw(&line)?;
        lt.push(ms(t.elapsed()));
    }
    o.list_ms = median(&lt);
    o.list_bytes = listed.len();
    let listed: Value = serde_json::from_slice(&listed)?;
    let sessions = listed["result"]["sessions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let pids: Vec<i32> = sessions
        .iter()
        .filter(|s| s["lifecycle"] == "running")
        .filter_map(|s| s["pid"].as_i64().map(|p| p as i32))
        .collect();
    if pids.len() != n {
        return Err(format!("maxx: {} of {n} sessions listed running", pids.len()).into());
    }

    // Group wait: every member killed at once.
    let mut wait = c.open(
        "stream.wait",
        json!({"group": "ten", "all": "exited", "timeout": 300}),
    )?;
    wait_until(
        "the group waiter",
        Duration::from_secs(10),
        Duration::from_millis(1),
        || c.stat("waiters").unwrap_or(0) >= 1,
    )?;
    std::thread::sleep(Duration::from_millis(200));
    let k0 = mono_ns();
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    let k1 = mono_ns();
    let v = read_line(&mut wait)?;
    let ret = mono_ns();
    if v["ok"] != true || v["result"]["outcome"] != "matched" {
        let s = v.to_string();
        return Err(format!("maxx stream.wait: {}", &s[..s.len().min(300)]).into());
    }
    o.kill_spread_ms = (k1 - k0) as f64 / 1e6;
    o.wait_after_last_kill_ms = (ret - k1) as f64 / 1e6;
    let after = c.call("sessions.list", json!({"group": "ten"}))?;
    let arr = after["sessions"].as_array().cloned().unwrap_or_default();
    let running = arr.iter().filter(|s| s["lifecycle"] == "running").count();
    if arr.len() != n || running != 0 {
        return Err(format!(
            "maxx group: {} members, {running} running after the wait",
            arr.len()
        )
        .into());
    }
    let t_stop = Instant::now();
    drop(daemon);
    o.extra = json!({
        "fd_limit": stats["fd_limit"], "session_capacity": cap,
        "daemon_fds_before": fd0, "daemon_fds_after": fd1,
        "keeper_fds_before": kfd0, "keeper_fds_after": kfd1,
        "keeper_fds_per_session": crate::util::round((kfd1 as f64 - kfd0 as f64) / n as f64),
        "daemon_threads_before": th0, "daemon_threads_after": th1,
        "daemon_tasks_after": proc_count(pid, "task"),
        "rss_before_kib": rss0, "rss_after_kib": rss1,
        "create_p50_first_1000_ms": crate::util::round(median(&each[..1000])),
        "create_p50_last_1000_ms": crate::util::round(median(&each[n - 1000..])),
        "get_p50_ms": crate::util::round(o.get50),
        "list_response_bytes": o.list_bytes,
        "kill_loop_ms": crate::util::round(o.kill_spread_ms),
        "wait_after_first_kill_ms": crate::util::round((ret - k0) as f64 / 1e6),
        "stop_s": crate::util::round(t_stop.elapsed().as_secs_f64()),
    });
    Ok(o)
}

fn tmux_side() -> R<Out> {
    let mut o = Out::default();
    let tmux = Tmux::start_nofile("bench", 80, 24, Some(NOFILE))?;
    let mut ctl = tmux.control("bench")?;
    let pid = tmux.server_pid()?;
    std::thread::sleep(Duration::from_millis(300));
    let rss0 = rss_kib(pid).unwrap_or(0);
    let fd0 = proc_count(pid, "fd").unwrap_or(0);
    let th0 = threads(pid).unwrap_or(0);
    let t0 = Instant::now();
    let mut wids = Vec::with_capacity(N);
    let mut stopped = None;
    for i in 0..N {
        if t0.elapsed() > TMUX_CREATE_DEADLINE {
            stopped = Some(format!("deadline {TMUX_CREATE_DEADLINE:?}"));
            break;
        }
        match ctl.cmd("new-window -d -t bench: -P -F '#{window_id}' \"exec sleep 100000\"") {
            Ok(out) => wids.push(out.into_iter().next().unwrap_or_default()),
            Err(e) => {
                stopped = Some(e.to_string());
                break;
            }
        }
        if (i + 1) % 2500 == 0 {
            eprintln!(
                "  ten_thousand: tmux {} windows in {:.1} s",
                i + 1,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    o.create_s = t0.elapsed().as_secs_f64();
    let k = wids.len();
    o.made = k;
    if k == 0 {
        return Err(format!("tmux made no window: {stopped:?}").into());
    }
    std::thread::sleep(Duration::from_millis(1000));
    let rss1 = rss_kib(pid).unwrap_or(0);
    let fd1 = proc_count(pid, "fd").unwrap_or(0);
    let th1 = threads(pid).unwrap_or(0);
    o.rss_per_kib = (rss1 as f64 - rss0 as f64) / k as f64;
    o.fds_per = (fd1 as f64 - fd0 as f64) / k as f64;
    o.fds = (fd1, 0);
    o.threads = (th0, th1);
    let mut rng = Rng::new(10_001);
    let mut lat = Vec::with_capacity(GETS);
    for _ in 0..GETS {
        let id = &wids[rng.below(k as u64) as usize];
        let cmd = format!("display-message -p -t {id} '#{{window_id}} #{{pane_pid}} #{{pane_dead}} #{{window_width}}x#{{window_height}}'");
        let t = Instant::now();
        ctl.cmd(&cmd)?;
        lat.push(ms(t.elapsed()));
    }
    o.get50 = median(&lat);
    o.get99 = percentile(&lat, 99.0);
    let mut lt = Vec::new();
    for _ in 0..LISTS {
        let t = Instant::now();
        let out = ctl.cmd("list-windows -t bench: -F '#{window_id} #{window_name} #{pane_pid} #{pane_dead} #{pane_current_command} #{window_width}x#{window_height}'")?;
        lt.push(ms(t.elapsed()));
        o.list_bytes = out.iter().map(|l| l.len() + 1).sum();
    }
    o.list_ms = median(&lt);
    let pids: Vec<i32> = ctl
        .cmd("list-panes -s -t bench -F '#{window_id} #{pane_pid}'")?
        .iter()
        .filter_map(|l| {
            let (w, p) = l.split_once(' ')?;
            wids.contains(&w.to_string())
                .then(|| p.parse().ok())
                .flatten()
        })
        .collect();
    if pids.len() != k {
        return Err(format!("tmux: {} of {k} pane pids", pids.len()).into());
    }
    let _ = ctl.cmd("display-message -p x")?;
    ctl.notes.clear();
    let k0 = mono_ns();
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    let k1 = mono_ns();
    let ret = ctl.wait_notes(
        |l| l.starts_with("%window-close ") || l.starts_with("%unlinked-window-close "),
        k,
        Duration::from_secs(120),
    )?;
    o.kill_spread_ms = (k1 - k0) as f64 / 1e6;
    o.wait_after_last_kill_ms = (ret as f64 - k1 as f64) / 1e6;
    o.extra = json!({
        "windows_made": k, "stopped": stopped,
        "server_fds_before": fd0, "server_fds_after": fd1,
        "server_threads_before": th0, "server_threads_after": th1,
        "rss_before_kib": rss0, "rss_after_kib": rss1,
        "display_message_p50_ms": crate::util::round(o.get50),
        "list_windows_output_bytes": o.list_bytes,
        "kill_loop_ms": crate::util::round(o.kill_spread_ms),
    });
    drop(ctl);
    drop(tmux);
    Ok(o)
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let pid_max = read_num("/proc/sys/kernel/pid_max").unwrap_or(0);
    let threads_max = read_num("/proc/sys/kernel/threads-max").unwrap_or(0);
    let tasks = tasks_alive().unwrap_or(0);
    if pid_max > 0 && tasks + N as u64 + 100 > pid_max {
        return Err(format!(
            "kernel.pid_max {pid_max} with {tasks} tasks alive leaves no room for {N} sessions"
        )
        .into());
    }
    eprintln!("  ten_thousand: pid_max {pid_max}, threads-max {threads_max}, {tasks} tasks alive");
    let m = maxx_side(cfg)?;
    eprintln!(
        "  ten_thousand: maxx create {:.1} s, {:.1} KiB/session, {:.2} fds/session, threads {:?}, get p50 {:.3} p99 {:.3} ms, list {:.1} ms, group wait {:.1} ms after the last kill",
        m.create_s, m.rss_per_kib, m.fds_per, m.threads, m.get50, m.get99, m.list_ms, m.wait_after_last_kill_ms
    );
    let t = tmux_side()?;
    eprintln!(
        "  ten_thousand: tmux {} windows in {:.1} s, {:.1} KiB/window, {:.2} fds/window, display p50 {:.3} p99 {:.3} ms, list-windows {:.1} ms, all closed {:.1} ms after the last kill",
        t.made, t.create_s, t.rss_per_kib, t.fds_per, t.get50, t.get99, t.list_ms, t.wait_after_last_kill_ms
    );
    let full = t.made == N;
    let at = if full {
        String::new()
    } else {
        format!(
            "; tmux figures at {} windows (n/a beyond {}: {} s deadline)",
            t.made,
            t.made,
            TMUX_CREATE_DEADLINE.as_secs()
        )
    };
    let one = |x: f64| Summary::of(&[x]);
    let tm = |x: f64| if full { one(x) } else { None };
    let tmk = |x: f64| one(x); // figures that hold at the windows tmux reached
    let ratio = |a: f64, b: f64| if full { one(a / b) } else { None };
    let rows = vec![
        Row::new("ten_thousand", "create 10,000 sessions (sequential, socket / control mode)", "s")
            .maxx(one(m.create_s))
            .tmux(tm(t.create_s))
            .ratio("maxx/tmux", ratio(m.create_s, t.create_s))
            .target("≤ 30 s (3 s per 1,000, linear)", Some(m.create_s <= 30.0))
            .note(format!(
                "one create p50: first 1,000 {} ms, last 1,000 {} ms{}",
                m.extra["create_p50_first_1000_ms"], m.extra["create_p50_last_1000_ms"],
                if full { String::new() } else { format!("; tmux made {} windows in {:.0} s (n/a beyond {})", t.made, t.create_s, t.made) }
            )),
        Row::new("ten_thousand", "sessions.get p99 (10,000 live; tmux display-message, control)", "ms")
            .maxx(one(m.get99))
            .tmux(tmk(t.get99))
            .target("≤ 1 ms", Some(m.get99 <= 1.0))
            .note(format!("p50 maxx {:.3} ms, tmux {:.3} ms{at}", m.get50, t.get50)),
        Row::new("ten_thousand", "sessions.list (10,000 live; tmux list-windows, control)", "ms")
            .maxx(one(m.list_ms))
            .tmux(tmk(t.list_ms))
            .ratio("maxx/tmux", ratio(m.list_ms, t.list_ms))
            .target("≤ 100 ms (10 ms per 1,000, linear)", Some(m.list_ms <= 100.0))
            .note(format!("median of {LISTS}; response {} KiB{at}", m.list_bytes / 1024)),
        Row::new("ten_thousand", "group wait --all exited, 10,000 killed at once: after the last kill", "ms")
            .maxx(one(m.wait_after_last_kill_ms))
            .tmux(tmk(t.wait_after_last_kill_ms))
            .ratio("maxx/tmux", ratio(m.wait_after_last_kill_ms, t.wait_after_last_kill_ms))
            .target("≤ 100 ms (10 ms per 1,000, linear)", Some(m.wait_after_last_kill_ms <= 100.0))
            .note(format!(
                "the harness kill -9s every member in a loop ({:.0} ms maxx, {:.0} ms tmux), timed from the last kill returning; tmux counts %window-close{at}",
                m.kill_spread_ms, t.kill_spread_ms
            )),
        Row::new("ten_thousand", "daemon / server RSS per idle session (10,000)", "KiB")
            .maxx(one(m.rss_per_kib))
            .tmux(tmk(t.rss_per_kib))
            .ratio("maxx/tmux", ratio(m.rss_per_kib, t.rss_per_kib))
            .target("≤ 32 KiB", Some(m.rss_per_kib <= 32.0))
            .note(at.trim_start_matches("; ").to_string()),
        Row::new("ten_thousand", "descriptors per session (daemon; tmux server)", "fds")
            .maxx(one(m.fds_per))
            .tmux(tmk(t.fds_per))
            .target("4 (daemon) + 2 (keeper)", Some(m.fds_per <= 4.01 && m.extra["keeper_fds_per_session"].as_f64().is_some_and(|k| k <= 2.01)))
            .note(format!(
                "daemon {} → {} fds, keeper {} → {} ({} per session); fd_limit {} (harness-raised RLIMIT_NOFILE {NOFILE}), session_capacity {}",
                m.extra["daemon_fds_before"], m.extra["daemon_fds_after"], m.extra["keeper_fds_before"], m.extra["keeper_fds_after"],
                m.extra["keeper_fds_per_session"], m.extra["fd_limit"], m.extra["session_capacity"]
            )),
        Row::new("ten_thousand", "daemon / server threads with 10,000 sessions", "threads")
            .maxx(one(m.threads.1 as f64))
            .tmux(tmk(t.threads.1 as f64))
            .target("O(1): as with none", Some(m.threads.1 <= m.threads.0 + 2))
            .note(format!(
                "maxx {} threads before the sessions, {} after (/proc/<pid>/task: {}); tmux {} → {}; kernel.pid_max {pid_max} ({tasks} tasks alive before; 10,000 sleeps fit), threads-max {threads_max}",
                m.threads.0, m.threads.1, m.extra["daemon_tasks_after"], t.threads.0, t.threads.1
            )),
    ];
    let detail = json!({
        "sessions": m.made,
        "nofile": NOFILE,
        "pid_max": pid_max,
        "threads_max": threads_max,
        "tasks_alive_before": tasks,
        "maxx": {
            "create_s": crate::util::round(m.create_s), "rss_per_session_kib": crate::util::round(m.rss_per_kib),
            "get_p99_ms": crate::util::round(m.get99), "list_ms": crate::util::round(m.list_ms),
            "group_wait_after_last_kill_ms": crate::util::round(m.wait_after_last_kill_ms),
            "fds_per_session": crate::util::round(m.fds_per), "daemon_fds": m.fds.0, "keeper_fds": m.fds.1,
            "detail": m.extra,
        },
        "tmux": {
            "windows": t.made, "create_s": crate::util::round(t.create_s), "rss_per_window_kib": crate::util::round(t.rss_per_kib),
            "display_message_p99_ms": crate::util::round(t.get99), "list_windows_ms": crate::util::round(t.list_ms),
            "all_closed_after_last_kill_ms": crate::util::round(t.wait_after_last_kill_ms),
            "fds_per_window": crate::util::round(t.fds_per),
            "detail": t.extra,
        },
    });
    Ok((rows, detail))
}
