//! Scenario 4 — Group wait: N members exit at once; how long after the last exit does the waiter know?
//!
//! Every member runs this bench binary (`child-fifo`): it opens a shared FIFO (the bench
//! holds it open read-write, so the open does not block), reports ready, and blocks in
//! `read`. The bench closes its end: every member sees EOF at the same moment, stamps
//! CLOCK_MONOTONIC into a shared file (one O_APPEND write) and `_exit(0)`s.
//!
//! maxx: `stream.wait {group, all: "exited"}` open on its own connection before the
//! trigger; the figure is its return time minus the last member's stamp. It must answer
//! `matched` with every member exited (never misses an exit).
//! tmux: the fastest event-driven equivalent: a control-mode client attached to the
//! session counts `%window-close` notifications (windows close when their pane's process
//! exits, remain-on-exit off) until all N have closed.

use crate::exit_trace::ExitTrace;
use crate::maxx::{read_line, Daemon};
use crate::tmux::Tmux;
use crate::util::{median, mkfifo, mono_ns, schedstat, wait_until, Summary, TempDir, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// The member program: see the module doc.
pub fn child_fifo(fifo: &str, ready: &str, stamps: &str) -> ! {
    use std::io::Read;
    let mut f = match std::fs::File::open(fifo) {
        Ok(f) => f,
        Err(_) => unsafe { libc::_exit(3) },
    };
    if let Ok(mut r) = std::fs::OpenOptions::new().append(true).open(ready) {
        let _ = r.write_all(b"r\n");
    }
    let mut b = [0u8; 64];
    loop {
        match f.read(&mut b) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let t = mono_ns();
    if let Ok(mut s) = std::fs::OpenOptions::new().append(true).open(stamps) {
        let _ = s.write_all(format!("{t}\n").as_bytes());
    }
    unsafe { libc::_exit(0) }
}

struct Setup {
    _dir: TempDir,
    fifo_holder: Option<OwnedFd>,
    ready: std::path::PathBuf,
    stamps: std::path::PathBuf,
    cmd: String,
}

fn setup(me: &Path) -> R<Setup> {
    let dir = TempDir::new("maxx-bench-group-")?;
    let fifo = dir.join("fifo");
    mkfifo(&fifo)?;
    let holder: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)?
        .into();
    let ready = dir.join("ready");
    let stamps = dir.join("stamps");
    std::fs::write(&ready, "")?;
    std::fs::write(&stamps, "")?;
    let cmd = format!(
        "exec {} child-fifo {} {} {}",
        me.display(),
        fifo.display(),
        ready.display(),
        stamps.display()
    );
    Ok(Setup {
        _dir: dir,
        fifo_holder: Some(holder),
        ready,
        stamps,
        cmd,
    })
}

impl Setup {
    fn wait_ready(&self, n: usize) -> R<()> {
        let ready = self.ready.clone();
        wait_until(
            "members ready",
            Duration::from_secs(120),
            Duration::from_millis(5),
            || {
                std::fs::metadata(&ready)
                    .map(|m| m.len() as usize >= 2 * n)
                    .unwrap_or(false)
            },
        )
    }
    fn trigger(&mut self) -> u64 {
        let t = mono_ns();
        self.fifo_holder.take();
        t
    }
    fn stamps(&self, n: usize) -> R<Vec<u64>> {
        let path = self.stamps.clone();
        wait_until(
            "exit stamps",
            Duration::from_secs(30),
            Duration::from_millis(2),
            || {
                std::fs::read_to_string(&path)
                    .map(|s| s.lines().count() >= n)
                    .unwrap_or(false)
            },
        )?;
        Ok(std::fs::read_to_string(&self.stamps)?
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }
}

struct One {
    after_last_ms: f64,
    after_trigger_ms: f64,
    exit_spread_ms: f64,
    /// maxx only: the daemon's CPU time and run-queue wait from the trigger to the answer
    /// (ms, all its threads): whether a slow answer was work or waiting for a core.
    daemon_cpu_ms: f64,
    daemon_wait_ms: f64,
    /// The last exit as the kernel made it (the last member's SIGCHLD, [`ExitTrace`]): how
    /// long after the last stamp it came, and the answer's time after it. `None` without a
    /// writable tracefs.
    kernel_exit: Option<KernelExit>,
}

#[derive(Clone, Copy)]
struct KernelExit {
    last_after_last_stamp_ms: f64,
    answer_after_ms: f64,
    /// maxx: the members whose exit the daemon had not yet reaped (`waitid`) when the kernel
    /// finished the last one; `None` for tmux (it reaps with `waitpid`) or without syscall
    /// events.
    unreaped: Option<usize>,
}

/// Start tracing exits, or say once why not.
fn trace() -> Option<ExitTrace> {
    ExitTrace::start()
        .map_err(|e| {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| eprintln!("  group: no kernel exit times ({e})"));
        })
        .ok()
}

/// The figures of a finished trace: `None` unless it saw every member's exit.
fn kernel_exit(
    trace: Option<ExitTrace>,
    members: &HashSet<u32>,
    last_stamp: u64,
    ret: u64,
) -> Option<KernelExit> {
    let n = members.len();
    let seen = trace?.finish(members);
    if seen.exits.len() != n {
        eprintln!(
            "  group: the kernel trace saw {} of {n} exits; left out",
            seen.exits.len()
        );
        return None;
    }
    let last = *seen.exits.last()?;
    Some(KernelExit {
        last_after_last_stamp_ms: (last as f64 - last_stamp as f64) / 1e6,
        answer_after_ms: (ret as f64 - last as f64) / 1e6,
        unreaped: seen.unreaped_at_last_exit(),
    })
}

fn maxx_once(cfg: &Cfg, n: usize, tag: &str) -> R<One> {
    let daemon = Daemon::start(&cfg.maxx, &[])?;
    let c = daemon.client.clone();
    let mut s = setup(&cfg.me)?;
    let group = format!("g-{tag}");
    for _ in 0..n {
        c.create(json!({"command": s.cmd, "group": group, "focus": false}))?;
    }
    s.wait_ready(n)?;
    let mut wait = c.open(
        "stream.wait",
        json!({"group": group, "all": "exited", "timeout": 300}),
    )?;
    wait_until(
        "the group waiter",
        Duration::from_secs(10),
        Duration::from_millis(1),
        || c.stat("waiters").unwrap_or(0) >= 1,
    )?;
    let members: HashSet<u32> = c.call("sessions.list", json!({"group": group}))?["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["pid"].as_u64().map(|p| p as u32))
        .collect();
    let exits = trace();
    std::thread::sleep(Duration::from_millis(100));
    let before = schedstat(daemon.pid()).unwrap_or_default();
    let trig = s.trigger();
    let v = read_line(&mut wait)?;
    let ret = mono_ns();
    let after = schedstat(daemon.pid()).unwrap_or_default();
    if v["ok"] != true || v["result"]["outcome"] != "matched" {
        return Err(format!("maxx stream.wait: {}", truncate(&v.to_string())).into());
    }
    let stamps = s.stamps(n)?;
    if stamps.len() != n {
        return Err(format!("{} of {n} members stamped their exit", stamps.len()).into());
    }
    // Never misses an exit: every member of the group is reported not running.
    let listed = c.call("sessions.list", json!({"group": group}))?;
    let arr = listed["sessions"].as_array().cloned().unwrap_or_default();
    let running = arr.iter().filter(|m| m["lifecycle"] == "running").count();
    if arr.len() != n || running != 0 {
        return Err(format!(
            "maxx group {group}: {} members, {running} still running after the wait",
            arr.len()
        )
        .into());
    }
    let last = *stamps.iter().max().unwrap();
    let first = *stamps.iter().min().unwrap();
    Ok(One {
        after_last_ms: (ret as f64 - last as f64) / 1e6,
        after_trigger_ms: (ret as f64 - trig as f64) / 1e6,
        exit_spread_ms: (last as f64 - first as f64) / 1e6,
        daemon_cpu_ms: after.0.saturating_sub(before.0) as f64 / 1e6,
        daemon_wait_ms: after.1.saturating_sub(before.1) as f64 / 1e6,
        kernel_exit: kernel_exit(exits, &members, last, ret),
    })
}

fn tmux_once(cfg: &Cfg, n: usize) -> R<One> {
    let tmux = Tmux::start("bench", 80, 24)?;
    let mut ctl = tmux.control("bench")?;
    let mut s = setup(&cfg.me)?;
    let keeper = pane_pids(&tmux)?;
    for _ in 0..n {
        ctl.cmd(&format!("new-window -d -t bench: \"{}\"", s.cmd))?;
    }
    s.wait_ready(n)?;
    // The session's first window (the one keeping it alive) does not exit.
    let members: HashSet<u32> = pane_pids(&tmux)?.difference(&keeper).copied().collect();
    let exits = trace();
    std::thread::sleep(Duration::from_millis(100));
    // Drain queued notifications (window-add etc.) before the trigger.
    let _ = ctl.cmd("display-message -p x")?;
    ctl.notes.clear();
    let trig = s.trigger();
    let ret = ctl.wait_notes(
        |l| l.starts_with("%window-close ") || l.starts_with("%unlinked-window-close "),
        n,
        Duration::from_secs(300),
    )?;
    let stamps = s.stamps(n)?;
    let last = *stamps.iter().max().unwrap();
    let first = *stamps.iter().min().unwrap();
    let left = ctl.cmd("list-windows -t bench: -F '#{window_id}'")?.len();
    if left != 1 {
        return Err(format!("tmux: {left} windows left, expected only the keeper").into());
    }
    Ok(One {
        after_last_ms: (ret as f64 - last as f64) / 1e6,
        after_trigger_ms: (ret as f64 - trig as f64) / 1e6,
        exit_spread_ms: (last as f64 - first as f64) / 1e6,
        daemon_cpu_ms: 0.0,
        daemon_wait_ms: 0.0,
        kernel_exit: kernel_exit(exits, &members, last, ret),
    })
}

/// The pids of every pane of the bench session.
fn pane_pids(tmux: &Tmux) -> R<HashSet<u32>> {
    Ok(tmux
        .run(&["list-panes", "-s", "-t", "bench", "-F", "#{pane_pid}"])?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect())
}

fn truncate(s: &str) -> String {
    s.chars().take(300).collect()
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let plan: Vec<(usize, usize, &str)> = if cfg.quick {
        vec![(100, 2, "≤ 2 ms"), (300, 1, "≤ 10 ms (at 1,000)")]
    } else {
        vec![(100, 7, "≤ 2 ms"), (1000, 5, "≤ 10 ms")]
    };
    let mut rows = Vec::new();
    let mut detail = serde_json::Map::new();
    for (n, runs, target) in plan {
        let runs = cfg.runs.unwrap_or(runs);
        let (mut m, mut mt, mut ms_, mut t, mut tt, mut ts, mut ratio) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        let (mut cpu, mut waited) = (vec![], vec![]);
        // The same two figures measured from the kernel's last exit (every run, or none).
        let (mut mk, mut tk, mut mk_lag, mut tk_lag) = (vec![], vec![], vec![], vec![]);
        let mut unreaped = vec![];
        let mut traced = true;
        for run in 0..runs {
            let started = Instant::now();
            let a = maxx_once(cfg, n, &format!("{n}-{run}"))?;
            let b = tmux_once(cfg, n)?;
            eprintln!(
                "  group {n} run {run}: maxx {:.2} ms after last exit ({:.2} after trigger, exits spread {:.2}; daemon CPU {:.1} ms, run-queue wait {:.1} ms); tmux {:.2} ms ({:.2}, {:.2}) [{:.1}s]",
                a.after_last_ms, a.after_trigger_ms, a.exit_spread_ms, a.daemon_cpu_ms, a.daemon_wait_ms, b.after_last_ms, b.after_trigger_ms, b.exit_spread_ms,
                started.elapsed().as_secs_f64()
            );
            ratio.push(a.after_last_ms / b.after_last_ms);
            m.push(a.after_last_ms);
            mt.push(a.after_trigger_ms);
            ms_.push(a.exit_spread_ms);
            cpu.push(a.daemon_cpu_ms);
            waited.push(a.daemon_wait_ms);
            t.push(b.after_last_ms);
            tt.push(b.after_trigger_ms);
            ts.push(b.exit_spread_ms);
            match (a.kernel_exit, b.kernel_exit) {
                (Some(ka), Some(kb)) => {
                    eprintln!(
                        "    after the kernel's last exit: maxx {:.2} ms, tmux {:.2} ms (the kernel's last exit {:.2} / {:.2} ms after the last stamp; maxx had {} of {n} exits unreaped then)",
                        ka.answer_after_ms, kb.answer_after_ms, ka.last_after_last_stamp_ms, kb.last_after_last_stamp_ms,
                        ka.unreaped.map_or("?".to_string(), |u| u.to_string())
                    );
                    unreaped.push(ka.unreaped);
                    mk.push(ka.answer_after_ms);
                    tk.push(kb.answer_after_ms);
                    mk_lag.push(ka.last_after_last_stamp_ms);
                    tk_lag.push(kb.last_after_last_stamp_ms);
                }
                _ => traced = false,
            }
        }
        let limit = if n <= 100 { 2.0 } else { 10.0 };
        let row = |what: &str, maxx: &[f64], tmux: &[f64]| {
            Row::new(
                "group",
                &format!("stream wait --all exited, {n} exit at once: {what}"),
                "ms",
            )
            .maxx(Summary::of(maxx))
            .tmux(Summary::of(tmux))
            .target(target, Summary::of(maxx).map(|x| x.med <= limit))
        };
        rows.push(
            row("after last exit", &m, &t)
                .ratio("maxx/tmux", Summary::of(&ratio))
                .note(format!(
                    "after trigger: maxx med {:.1} ms, tmux med {:.1} ms; no exit missed",
                    median(&mt),
                    median(&tt)
                )),
        );
        if traced {
            rows.push(row("after the kernel's last exit", &mk, &tk).note(format!(
                "the last exit as the kernel made it (the members' SIGCHLDs, tracefs): med {:.2} ms (max {:.2}) after the last member's stamp in maxx's runs",
                median(&mk_lag),
                mk_lag.iter().cloned().fold(0.0, f64::max)
            )));
        }
        let j = |v: &Vec<f64>| Summary::of(v).map(|x| x.json());
        detail.insert(
            format!("members_{n}"),
            json!({
                "runs": runs,
                "maxx_after_last_exit_ms": j(&m), "maxx_after_trigger_ms": j(&mt), "maxx_exit_spread_ms": j(&ms_),
                "tmux_after_last_exit_ms": j(&t), "tmux_after_trigger_ms": j(&tt), "tmux_exit_spread_ms": j(&ts),
                "ratio_maxx_over_tmux": j(&ratio),
                "maxx_daemon_cpu_ms": j(&cpu), "maxx_daemon_runqueue_wait_ms": j(&waited),
                "maxx_after_last_exit_ms_each": m, "maxx_daemon_cpu_ms_each": cpu,
                "maxx_daemon_runqueue_wait_ms_each": waited,
                "kernel_exit_traced": traced,
                "maxx_after_kernel_last_exit_ms": traced.then(|| j(&mk)),
                "tmux_after_kernel_last_exit_ms": traced.then(|| j(&tk)),
                "maxx_after_kernel_last_exit_ms_each": traced.then_some(&mk),
                "maxx_kernel_last_exit_after_last_stamp_ms_each": traced.then_some(&mk_lag),
                "tmux_kernel_last_exit_after_last_stamp_ms_each": traced.then_some(&tk_lag),
                "maxx_unreaped_at_kernel_last_exit_each": traced.then_some(&unreaped),
            }),
        );
    }
    detail.insert(
        "tmux_method".into(),
        json!("control-mode client counting %window-close notifications"),
    );
    Ok((rows, Value::Object(detail)))
}
