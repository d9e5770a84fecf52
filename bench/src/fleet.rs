//! Scenario 9 — A fleet of agent TUIs (issue 23): N sessions (100 and 1,000; 100 in `--quick`)
//! each running this binary as `child-agent`, a program that redraws like an agent's terminal
//! UI (see [`child_agent`]), for a fixed time, under maxx and under a private tmux server, back
//! to back in the same run, at the same size (120x40) and the same history limit (2,000 lines,
//! tmux's default; maxx's default is 10,000).
//!
//! Figures: the daemon's (maxx: `daemon.pid`, not the keeper, which is reported apart) and the
//! tmux server's CPU seconds (utime + stime from /proc, delta over the window) per session per
//! minute; their RSS at the end of the plain window, less their RSS idle before any session,
//! per session, with every maxx grid materialised (one `sessions.snapshot` per session before
//! the window; tmux's grids always exist).
//!
//! Two windows per side: *plain* (nobody looks), then *watched*: one real `maxx attach` client
//! on one session plus one `maxx top`, each in a PTY this harness owns and reads continuously;
//! for tmux one `tmux attach` client in a PTY and `tmux list-windows -a` run as a process once
//! a second (tmux has no `top`; the poll stands in for a dashboard).

use crate::bare::{self, Bare};
use crate::maxx::{Daemon, READER};
use crate::tmux::Tmux;
use crate::util::{ctxt_switches, mkfifo, rss_kib, Rng, Summary, TempDir, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const COLS: u16 = 120;
const ROWS: u16 = 40;
const HISTORY: u32 = 2000;
/// Status line rewrites per second.
const HZ: u64 = 20;
/// A full repaint every this many ticks (3 s).
const REPAINT_TICKS: u64 = 60;
/// A burst of tool output every this many ticks (10 s), of this many lines.
const BURST_TICKS: u64 = 200;
const BURST_LINES: usize = 300;

/// utime + stime of a process in seconds.
pub fn cpu_s(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz.max(1.0))
}

/// CPU seconds of single-threaded processes, from /proc/<pid>/schedstat (nanoseconds: the
/// programs each use a few milliseconds a second, below /proc/<pid>/stat's 10 ms ticks).
fn cpu_sum(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|p| schedstat_ns(&format!("/proc/{p}/schedstat")))
        .sum::<f64>()
        / 1e9
}

fn schedstat_ns(path: &str) -> Option<f64> {
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()
}

/// CPU seconds of a process over all its threads, in nanoseconds' precision.
fn cpu_threads(pid: u32) -> f64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| schedstat_ns(&format!("{}/schedstat", e.path().display())))
                .sum::<f64>()
        })
        .unwrap_or(0.0)
        / 1e9
}

/// The agent program. Cheap on purpose (its CPU is not what is measured): 20 times a second
/// it rewrites a spinner line at the top and a status line at the bottom in place (cursor
/// addressing, SGR colours, erase-line); every 3 s it repaints the whole screen (clear + 40
/// styled lines); every 10 s it prints a burst of 300 lines of tool output that scroll the
/// screen (into the history). Each program has its own random phase for all three. A tick
/// that comes late is skipped (not caught up), so the tick counter on the top line
/// (`tick N/DUE`) says how much of the load the machine kept up with. Exits on any write
/// error (its terminal is gone) or after `life` seconds.
///
/// It starts when `gate` (a FIFO the harness holds open) reads EOF: every session is created
/// first (so creation is not slowed by a fleet already printing, which made tmux take minutes
/// for 1,000 windows on a busy machine) and the whole fleet starts at once, each program then
/// keeping its own random phase.
pub fn child_agent(seed: &str, life: &str, gate: &str) -> ! {
    if let Ok(mut f) = std::fs::File::open(gate) {
        use std::io::Read;
        let mut b = [0u8; 16];
        loop {
            match f.read(&mut b) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
    let seed: u64 = seed.parse().unwrap_or(1);
    let life = Duration::from_secs(life.parse().unwrap_or(300));
    let mut rng = Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5eed);
    let period = Duration::from_nanos(1_000_000_000 / HZ);
    let repaint_phase = rng.below(REPAINT_TICKS);
    let burst_phase = rng.below(BURST_TICKS);
    std::thread::sleep(Duration::from_millis(rng.below(1000 / HZ)));
    let start = Instant::now();
    let spin = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let words = [
        "reading",
        "src/daemon/pump.rs",
        "grep",
        "-n",
        "fn",
        "cargo",
        "test",
        "passed",
        "failed",
        "diff",
        "+",
        "-",
        "let",
        "mut",
        "Ok(())",
        "=>",
        "match",
        "the",
        "session",
        "screen",
    ];
    let mut out: Vec<u8> = Vec::with_capacity(64 * 1024);
    let write_all = |buf: &[u8]| {
        let mut off = 0;
        while off < buf.len() {
            let n = unsafe {
                libc::write(
                    1,
                    buf[off..].as_ptr() as *const libc::c_void,
                    buf.len() - off,
                )
            };
            if n < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                unsafe { libc::_exit(0) };
            }
            off += n as usize;
        }
    };
    write_all(b"\x1b[?25l\x1b[H\x1b[2J");
    let mut tick: u64 = 0;
    let mut done: u64 = 0;
    let mut last_repaint = u64::MAX;
    let mut last_burst = burst_phase / BURST_TICKS;
    let mut next = Instant::now();
    loop {
        let now = Instant::now();
        if now.duration_since(start) > life {
            unsafe { libc::_exit(0) };
        }
        out.clear();
        // A repaint (a burst) is due when the tick counter crossed its period since the last
        // tick written (skipped ticks included).
        let repaint_epoch = (tick + repaint_phase) / REPAINT_TICKS;
        if repaint_epoch != last_repaint {
            last_repaint = repaint_epoch;
            out.extend_from_slice(b"\x1b[0m\x1b[H\x1b[2J");
            for r in 2..ROWS {
                let _ = write!(
                    out,
                    "\x1b[{r};1H\x1b[38;5;{}m{:>3}\x1b[0m ",
                    (r as u64 * 7 + tick) % 216 + 16,
                    r
                );
                let mut len = 4;
                while len < COLS as usize - 12 {
                    let w = words[rng.below(words.len() as u64) as usize];
                    if rng.below(4) == 0 {
                        let _ = write!(out, "\x1b[1;{}m{w}\x1b[0m ", 31 + rng.below(6));
                    } else {
                        let _ = write!(out, "{w} ");
                    }
                    len += w.len() + 1;
                }
            }
        }
        let burst_epoch = (tick + burst_phase) / BURST_TICKS;
        if burst_epoch != last_burst {
            last_burst = burst_epoch;
            let _ = write!(out, "\x1b[{};1H", ROWS - 1);
            for i in 0..BURST_LINES {
                let _ = write!(
                    out,
                    "\r\n\x1b[32m+\x1b[0m src/fleet/module_{}.rs:{}: \x1b[2m{}\x1b[0m {} {} {}",
                    i % 17,
                    rng.below(2000),
                    words[i % words.len()],
                    words[(i * 7) % words.len()],
                    words[(i * 3) % words.len()],
                    rng.next() % 1_000_000
                );
            }
        }
        let due = now.duration_since(start).as_millis() as u64 * HZ / 1000 + 1;
        let _ = write!(
            out,
            "\x1b[1;1H\x1b[1;38;5;{}m{}\x1b[0m \x1b[1magent-{seed}\x1b[0m \x1b[2mthinking…\x1b[0m tick {}/{} \x1b[33m{:.1}s\x1b[0m tokens {}\x1b[K",
            39 + tick % 6,
            spin[(tick % spin.len() as u64) as usize],
            done + 1,
            due,
            now.duration_since(start).as_secs_f64(),
            tick * 37 % 100_000
        );
        let _ = write!(
            out,
            "\x1b[{ROWS};1H\x1b[7m ctx {:>2}% │ {} │ ${:.2} \x1b[0m\x1b[K",
            tick % 100,
            words[(tick % words.len() as u64) as usize],
            tick as f64 * 0.0013
        );
        write_all(&out);
        done += 1;
        tick += 1;
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            // Late: skip the missed ticks rather than catch up in a burst.
            let missed = (now - next).as_nanos() / period.as_nanos() + 1;
            tick += missed as u64 - 1;
            next += period * (missed as u32 - 1);
            if next < now {
                next = now;
            }
        }
    }
}

/// A program in a PTY this harness owns, its output read (and counted) continuously.
struct Viewer {
    term: Bare,
    bytes: Arc<AtomicU64>,
    head: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Viewer {
    fn spawn(cmd: &str) -> R<Viewer> {
        let term = bare::spawn(cmd, COLS, ROWS)?;
        let fd = unsafe { libc::dup(term.master.as_raw_fd()) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let bytes = Arc::new(AtomicU64::new(0));
        let head = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (b, h) = (bytes.clone(), head.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                if n > 0 {
                    b.fetch_add(n as u64, Ordering::Relaxed);
                    let mut h = h.lock().unwrap();
                    if h.len() < 256 * 1024 {
                        h.extend_from_slice(&buf[..n as usize]);
                    }
                } else if n < 0
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
                {
                    continue;
                } else {
                    break;
                }
            }
            unsafe { libc::close(fd) };
        });
        Ok(Viewer { term, bytes, head })
    }
    fn pid(&self) -> u32 {
        self.term.child.id()
    }
    fn alive(&mut self) -> bool {
        matches!(self.term.child.try_wait(), Ok(None))
    }
    fn saw(&self, s: &str) -> bool {
        String::from_utf8_lossy(&self.head.lock().unwrap()).contains(s)
    }
}

/// `tick N/DUE` on a program's top line → N/DUE.
fn tick_ratio(line: &str) -> Option<f64> {
    let t = line.split("tick ").nth(1)?.split_whitespace().next()?;
    let (a, b) = t.split_once('/')?;
    let (a, b): (f64, f64) = (a.parse().ok()?, b.parse().ok()?);
    (b > 0.0).then(|| (a / b).min(1.0))
}

/// One side's figures for one N.
#[derive(Default, Clone)]
struct Side {
    /// CPU seconds per session per minute, plain and watched.
    cpu_plain: f64,
    cpu_watched: f64,
    /// Keeper (maxx) CPU s per session per minute over the plain window.
    keeper_cpu: f64,
    /// The programs' own CPU, cores used (plain window).
    programs_cores: f64,
    /// The viewers' (attach client, top) CPU seconds over the watched window.
    viewers_cpu: f64,
    viewer_bytes: u64,
    rss_idle_kib: f64,
    rss_plain_kib: f64,
    rss_watched_kib: f64,
    /// (RSS after the plain window - idle) / N.
    mem_per_session_kib: f64,
    /// The same every [`RSS_EVERY`] through the plain window: seconds into it, KiB.
    mem_series: Vec<(u64, f64)>,
    ticks_kept: f64,
    history_lines: f64,
    setup_s: f64,
    /// Over the plain window, per redraw the programs were to make (N x HZ a second): the
    /// daemon's (server's) voluntary context switches (each a sleep and a wake-up) and
    /// preemptions, all threads.
    sleeps_per_redraw: f64,
    preemptions_per_redraw: f64,
    extra: Value,
}

impl Side {
    /// Context switches since `before` (taken at the window's start), per redraw.
    fn switches(&mut self, before: (u64, u64), pid: u32, n: usize, window: Duration) {
        let after = ctxt_switches(pid).unwrap_or_default();
        let redraws = n as f64 * HZ as f64 * window.as_secs_f64();
        self.sleeps_per_redraw = after.0.saturating_sub(before.0) as f64 / redraws;
        self.preemptions_per_redraw = after.1.saturating_sub(before.1) as f64 / redraws;
    }
}

fn per_min(cpu: f64, n: usize, secs: f64) -> f64 {
    cpu / n as f64 / (secs / 60.0)
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn agent_cmd(cfg: &Cfg, i: usize, life: u64, gate: &Gate) -> String {
    format!(
        "exec {} child-agent {i} {life} {}",
        cfg.me.display(),
        gate.path.display()
    )
}

/// The start gate: a FIFO the harness holds open read-write (so the programs' opens do not
/// block); closing it gives every program EOF at once.
struct Gate {
    _dir: TempDir,
    path: std::path::PathBuf,
    holder: Option<std::fs::File>,
}

impl Gate {
    fn new() -> R<Gate> {
        let dir = TempDir::new("maxx-bench-fleet-")?;
        let path = dir.join("gate");
        mkfifo(&path)?;
        let holder = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        Ok(Gate {
            _dir: dir,
            path,
            holder: Some(holder),
        })
    }
    fn open(&mut self) {
        self.holder.take();
    }
}

fn maxx_side(cfg: &Cfg, n: usize, warm: Duration, win: Duration) -> R<Side> {
    let life = (warm + win * 2).as_secs() + 120;
    let mut side = Side::default();
    let mut gate = Gate::new()?;
    let daemon = Daemon::start(&cfg.maxx, &[])?;
    let c = daemon.client.clone();
    let pid = daemon.pid();
    let keeper = daemon.keeper_pid();
    std::thread::sleep(Duration::from_millis(300));
    side.rss_idle_kib = rss_kib(pid).unwrap_or(0) as f64;
    let t0 = Instant::now();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        ids.push(c.create(json!({
            "command": agent_cmd(cfg, i, life, &gate), "focus": false, "group": "fleet",
            "cols": COLS, "rows": ROWS, "scrollback_lines": HISTORY,
        }))?);
    }
    let list = c.call("sessions.list", json!({"group": "fleet"}))?;
    let pids: Vec<u32> = list["sessions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["pid"].as_u64().map(|p| p as u32))
                .collect()
        })
        .unwrap_or_default();
    if pids.len() != n {
        return Err(format!("maxx: {} of {n} agent pids listed", pids.len()).into());
    }
    gate.open();
    std::thread::sleep(warm);
    // Materialise every grid (a session whose output has not passed 512 KiB has none yet).
    let snap = |id: &str| -> R<Value> {
        let mut r = c.open_as(READER, "sessions.snapshot", json!({"session_id": id}))?;
        let v = crate::maxx::read_line(&mut r)?;
        if v["ok"] != true {
            return Err(format!("sessions.snapshot: {}", v["error"]).into());
        }
        Ok(v["result"].clone())
    };
    for id in &ids {
        snap(id)?;
    }
    side.setup_s = t0.elapsed().as_secs_f64();

    // Plain window.
    let (d0, k0, p0) = (
        cpu_s(pid).unwrap_or(0.0),
        cpu_s(keeper).unwrap_or(0.0),
        cpu_sum(&pids),
    );
    let t = Instant::now();
    let switches = ctxt_switches(pid).unwrap_or_default();
    side.mem_series = plain_window(pid, win, side.rss_idle_kib, n);
    side.switches(switches, pid, n, t.elapsed());
    let secs = t.elapsed().as_secs_f64();
    let (d1, k1, p1) = (
        cpu_s(pid).unwrap_or(0.0),
        cpu_s(keeper).unwrap_or(0.0),
        cpu_sum(&pids),
    );
    side.cpu_plain = per_min(d1 - d0, n, secs);
    side.programs_cores = (p1 - p0) / secs;
    side.rss_plain_kib = rss_kib(pid).unwrap_or(0) as f64;
    side.mem_per_session_kib = (side.rss_plain_kib - side.rss_idle_kib) / n as f64;
    let stats = c.call("daemon.stats", json!({}))?;
    // How much of the load the programs kept up with, and the history they built.
    let mut kept = Vec::new();
    for k in 0..5 {
        let s = snap(&ids[k * n / 5])?;
        if let Some(r) = s["lines"]
            .get(0)
            .and_then(|l| l.as_str())
            .and_then(tick_ratio)
        {
            kept.push(r);
        }
    }
    side.ticks_kept = crate::util::median(&kept);
    let mut ins = c.open_as(READER, "sessions.inspect", json!({"session_id": ids[0]}))?;
    let inspect = crate::maxx::read_line(&mut ins)?;
    side.history_lines = inspect["result"]["scrollback"]["total"]
        .as_f64()
        .unwrap_or(f64::NAN);

    // Watched window: one `maxx attach` on the first session, one `maxx top`.
    let env = format!(
        "MAXX_CONTROL_DIR={} MAXX_CONTROL_POLICY_FILE={} HOME={} TERM=xterm-256color",
        sh_quote(&daemon.control.display().to_string()),
        sh_quote(&daemon.tmp.join("control-policy.json").display().to_string()),
        sh_quote(&daemon.tmp.path().display().to_string()),
    );
    let bin = sh_quote(&daemon.bin.display().to_string());
    let mut attach = Viewer::spawn(&format!(
        "{env} exec {bin} attach --as {READER} --no-status {}",
        ids[0]
    ))?;
    let mut top = Viewer::spawn(&format!("{env} exec {bin} top"))?;
    std::thread::sleep(Duration::from_millis(1500));
    if !attach.alive() || !top.alive() {
        return Err(format!(
            "maxx attach alive {}, top alive {}; top said {:?}",
            attach.alive(),
            top.alive(),
            String::from_utf8_lossy(&top.head.lock().unwrap())
                .chars()
                .take(300)
                .collect::<String>()
        )
        .into());
    }
    let v0 = cpu_threads(attach.pid()) + cpu_threads(top.pid());
    let b0 = attach.bytes.load(Ordering::Relaxed) + top.bytes.load(Ordering::Relaxed);
    let d2 = cpu_s(pid).unwrap_or(0.0);
    let t = Instant::now();
    std::thread::sleep(win);
    let wsecs = t.elapsed().as_secs_f64();
    let d3 = cpu_s(pid).unwrap_or(0.0);
    side.cpu_watched = per_min(d3 - d2, n, wsecs);
    side.viewers_cpu = cpu_threads(attach.pid()) + cpu_threads(top.pid()) - v0;
    side.viewer_bytes =
        attach.bytes.load(Ordering::Relaxed) + top.bytes.load(Ordering::Relaxed) - b0;
    side.rss_watched_kib = rss_kib(pid).unwrap_or(0) as f64;
    side.keeper_cpu = per_min(k1 - k0, n, secs);
    let attach_ok = attach.saw("agent-") && attach.alive();
    let top_ok = top.alive() && top.bytes.load(Ordering::Relaxed) > 0;
    if !attach_ok || !top_ok {
        return Err(format!(
            "maxx viewers: attach showed the agent {attach_ok}, top drew {top_ok}"
        )
        .into());
    }
    side.extra = json!({
        "daemon_heap_allocated": stats["heap_allocated"],
        "daemon_heap_resident": stats["heap_resident"],
        "keeper_rss_kib": rss_kib(keeper),
        "daemon_threads": crate::util::threads(pid),
        "attach_bytes": attach.bytes.load(Ordering::Relaxed),
        "top_bytes": top.bytes.load(Ordering::Relaxed),
    });
    drop(attach);
    drop(top);
    drop(daemon);
    Ok(side)
}

fn tmux_side(cfg: &Cfg, n: usize, warm: Duration, win: Duration) -> R<Side> {
    let life = (warm + win * 2).as_secs() + 120;
    let mut side = Side::default();
    let mut gate = Gate::new()?;
    let tmux = Tmux::start("bench", COLS, ROWS)?;
    tmux.run(&["set", "-g", "status", "off"])?;
    tmux.run(&["set", "-g", "history-limit", &HISTORY.to_string()])?;
    let pid = tmux.server_pid()?;
    std::thread::sleep(Duration::from_millis(300));
    side.rss_idle_kib = rss_kib(pid).unwrap_or(0) as f64;
    let t0 = Instant::now();
    let mut wids = Vec::with_capacity(n);
    {
        let mut ctl = tmux.control("bench")?;
        // Control clients get every pane's output as %output lines unless told otherwise.
        let _ = ctl.cmd("refresh-client -f no-output");
        for i in 0..n {
            let out = ctl.cmd(&format!(
                "new-window -d -t bench: -P -F '#{{window_id}}' \"{}\"",
                agent_cmd(cfg, i, life, &gate)
            ))?;
            wids.push(out.into_iter().next().unwrap_or_default());
        }
    }
    let size = tmux.run(&[
        "display-message",
        "-p",
        "-t",
        &wids[0],
        "#{window_width}x#{window_height}",
    ])?;
    if size != format!("{COLS}x{ROWS}") {
        return Err(format!("tmux window size {size}, expected {COLS}x{ROWS}").into());
    }
    let pids: Vec<u32> = tmux
        .run(&["list-panes", "-s", "-t", "bench", "-F", "#{pane_pid}"])?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if pids.len() != n + 1 {
        return Err(format!("tmux: {} panes, expected {}", pids.len(), n + 1).into());
    }
    gate.open();
    std::thread::sleep(warm);
    side.setup_s = t0.elapsed().as_secs_f64();

    let (s0, p0) = (cpu_s(pid).unwrap_or(0.0), cpu_sum(&pids));
    let t = Instant::now();
    let switches = ctxt_switches(pid).unwrap_or_default();
    side.mem_series = plain_window(pid, win, side.rss_idle_kib, n);
    side.switches(switches, pid, n, t.elapsed());
    let secs = t.elapsed().as_secs_f64();
    let (s1, p1) = (cpu_s(pid).unwrap_or(0.0), cpu_sum(&pids));
    side.cpu_plain = per_min(s1 - s0, n, secs);
    side.programs_cores = (p1 - p0) / secs;
    side.rss_plain_kib = rss_kib(pid).unwrap_or(0) as f64;
    side.mem_per_session_kib = (side.rss_plain_kib - side.rss_idle_kib) / n as f64;
    let mut kept = Vec::new();
    for k in 0..5 {
        let cap = tmux.run(&["capture-pane", "-p", "-t", &wids[k * n / 5]])?;
        if let Some(r) = cap.lines().next().and_then(tick_ratio) {
            kept.push(r);
        }
    }
    side.ticks_kept = crate::util::median(&kept);
    side.history_lines = tmux
        .run(&["display-message", "-p", "-t", &wids[0], "#{history_size}"])?
        .parse()
        .unwrap_or(f64::NAN);

    // Watched window: one `tmux attach` client in a PTY, showing the first agent (as `maxx
    // attach` does); `list-windows -a` once a second.
    tmux.run(&["select-window", "-t", &wids[0]])?;
    let mut attach = Viewer::spawn(&format!(
        "TERM=xterm-256color exec tmux -L {} attach -t bench",
        tmux.name
    ))?;
    let stop = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicU64::new(0));
    let poller = {
        let (stop, polls) = (stop.clone(), polls.clone());
        let name = tmux.name.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::process::Command::new("tmux")
                    .args(["-L", &name, "list-windows", "-a", "-F"])
                    .arg("#{window_id} #{window_name} #{pane_pid} #{pane_dead}")
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
                polls.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    if !attach.alive() {
        stop.store(true, Ordering::Relaxed);
        let _ = poller.join();
        return Err("tmux attach exited".into());
    }
    let v0 = cpu_threads(attach.pid());
    let b0 = attach.bytes.load(Ordering::Relaxed);
    let s2 = cpu_s(pid).unwrap_or(0.0);
    let t = Instant::now();
    std::thread::sleep(win);
    let wsecs = t.elapsed().as_secs_f64();
    let s3 = cpu_s(pid).unwrap_or(0.0);
    side.cpu_watched = per_min(s3 - s2, n, wsecs);
    side.viewers_cpu = cpu_threads(attach.pid()) - v0;
    side.viewer_bytes = attach.bytes.load(Ordering::Relaxed) - b0;
    side.rss_watched_kib = rss_kib(pid).unwrap_or(0) as f64;
    stop.store(true, Ordering::Relaxed);
    let _ = poller.join();
    let ok = attach.alive() && attach.saw("agent-");
    side.extra = json!({
        "attach_bytes": attach.bytes.load(Ordering::Relaxed),
        "list_windows_polls": polls.load(Ordering::Relaxed),
    });
    drop(attach);
    drop(tmux);
    if !ok {
        return Err("tmux attach did not show the agent".into());
    }
    Ok(side)
}

/// How often the plain window samples the server's memory.
const RSS_EVERY: Duration = Duration::from_secs(10);

/// The plain window: `win` of nobody looking (a timed window: the figures are rates over
/// it), sampling the server's (RSS - `idle`) / `n` every [`RSS_EVERY`] — the shape of a long
/// run's memory (a history filling, checkpoints, logs), not only its end.
fn plain_window(pid: u32, win: Duration, idle: f64, n: usize) -> Vec<(u64, f64)> {
    let start = Instant::now();
    let mut series = Vec::new();
    loop {
        let left = win.saturating_sub(start.elapsed());
        if left.is_zero() {
            return series;
        }
        std::thread::sleep(left.min(RSS_EVERY));
        if left > RSS_EVERY {
            let kib = rss_kib(pid).unwrap_or(0) as f64;
            series.push((start.elapsed().as_secs(), (kib - idle) / n as f64));
        }
    }
}

fn side_json(s: &Side) -> Value {
    let r = crate::util::round;
    json!({
        "cpu_s_per_session_per_min_plain": r(s.cpu_plain),
        "cpu_s_per_session_per_min_watched": r(s.cpu_watched),
        "keeper_cpu_s_per_session_per_min": r(s.keeper_cpu),
        "programs_cores_used": r(s.programs_cores),
        "viewers_cpu_s_watched_window": r(s.viewers_cpu),
        "viewer_bytes_watched_window": s.viewer_bytes,
        "rss_idle_kib": s.rss_idle_kib,
        "rss_after_plain_kib": s.rss_plain_kib,
        "rss_after_watched_kib": s.rss_watched_kib,
        "mem_per_session_kib": r(s.mem_per_session_kib),
        "mem_per_session_kib_series": s
            .mem_series
            .iter()
            .map(|&(t, kib)| json!([t, r(kib)]))
            .collect::<Vec<_>>(),
        "ticks_kept": r(s.ticks_kept),
        "history_lines_first_session": s.history_lines,
        "setup_s": r(s.setup_s),
        "sleeps_per_redraw_plain": r(s.sleeps_per_redraw),
        "preemptions_per_redraw_plain": r(s.preemptions_per_redraw),
        "extra": s.extra,
    })
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let plan: Vec<(usize, u64)> = match (cfg.fleet_window, cfg.fleet_sessions) {
        (w, Some(n)) => vec![(n, w.unwrap_or(20))],
        (Some(w), None) => vec![(100, w)],
        (None, None) if cfg.quick => vec![(100, 6)],
        (None, None) => vec![(100, 10), (1000, 20)],
    };
    // A long window is its own row: memory keeps growing with the history and the logs.
    let over = cfg
        .fleet_window
        .map_or(String::new(), |w| format!(" over {w} s"));
    let warm = Duration::from_secs(if cfg.quick { 1 } else { 2 });
    let runs = cfg.runs.unwrap_or(1);
    let mut rows = Vec::new();
    let mut detail = serde_json::Map::new();
    for (n, win_s) in plan {
        let win = Duration::from_secs(win_s);
        let (mut mp, mut mw, mut tp, mut tw, mut rp, mut rw) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let (mut mm, mut tm, mut rm) = (vec![], vec![], vec![]);
        let mut runs_json = Vec::new();
        let mut last: Option<(Side, Side)> = None;
        for run in 0..runs {
            let a = maxx_side(cfg, n, warm, win)?;
            let b = tmux_side(cfg, n, warm, win)?;
            eprintln!(
                "  fleet {n} run {run}: CPU s/session/min plain maxx {:.4} tmux {:.4}, watched maxx {:.4} tmux {:.4}; KiB/session maxx {:.0} tmux {:.0}; ticks kept maxx {:.2} tmux {:.2}; programs {:.2}/{:.2} cores; per redraw, sleeps maxx {:.3} tmux {:.3}, preemptions maxx {:.3} tmux {:.3}",
                a.cpu_plain, b.cpu_plain, a.cpu_watched, b.cpu_watched, a.mem_per_session_kib, b.mem_per_session_kib, a.ticks_kept, b.ticks_kept, a.programs_cores, b.programs_cores,
                a.sleeps_per_redraw, b.sleeps_per_redraw, a.preemptions_per_redraw, b.preemptions_per_redraw
            );
            mp.push(a.cpu_plain);
            mw.push(a.cpu_watched);
            tp.push(b.cpu_plain);
            tw.push(b.cpu_watched);
            rp.push(a.cpu_plain / b.cpu_plain);
            rw.push(a.cpu_watched / b.cpu_watched);
            mm.push(a.mem_per_session_kib);
            tm.push(b.mem_per_session_kib);
            rm.push(a.mem_per_session_kib / b.mem_per_session_kib);
            runs_json.push(json!({"maxx": side_json(&a), "tmux": side_json(&b)}));
            last = Some((a, b));
        }
        let s = Summary::of;
        let (a, b) = last.unwrap();
        let half = |v: &Vec<f64>| s(v).map(|x| x.med <= 0.5);
        rows.push(
            Row::new(
                "fleet",
                &format!("fleet of {n} agent TUIs{over}: daemon/server CPU per session"),
                "CPU-s/min",
            )
            .maxx(s(&mp))
            .tmux(s(&tp))
            .ratio("maxx/tmux", s(&rp))
            .target("≤ 0.5x tmux", half(&rp))
            .note(format!(
                "{win_s} s window, 120x40; keeper {:.4} CPU-s/session/min; the programs used {:.2} (maxx) / {:.2} (tmux) cores and kept {:.0}% / {:.0}% of their ticks",
                a.keeper_cpu, a.programs_cores, b.programs_cores, a.ticks_kept * 100.0, b.ticks_kept * 100.0
            )),
        );
        rows.push(
            Row::new(
                "fleet",
                &format!("fleet of {n}{over} + one attach client + top (tmux: attach + list-windows 1 Hz)"),
                "CPU-s/min",
            )
            .maxx(s(&mw))
            .tmux(s(&tw))
            .ratio("maxx/tmux", s(&rw))
            .target("≤ 0.5x tmux", half(&rw))
            .note(format!(
                "the viewers themselves: maxx attach + top {:.3} CPU-s ({} KiB read), tmux attach client {:.3} CPU-s ({} KiB read) over the window",
                a.viewers_cpu, a.viewer_bytes / 1024, b.viewers_cpu, b.viewer_bytes / 1024
            )),
        );
        rows.push(
            Row::new(
                "fleet",
                &format!("fleet of {n}{over}: memory per session, grid materialised"),
                "KiB",
            )
            .maxx(s(&mm))
            .tmux(s(&tm))
            .ratio("maxx/tmux", s(&rm))
            .target("≤ tmux", s(&rm).map(|x| x.med <= 1.0))
            .note(format!(
                "(RSS after the plain window - idle RSS) / {n}; history limit {HISTORY} lines both; history held by the first session: maxx {} tmux {} lines",
                a.history_lines, b.history_lines
            )),
        );
        detail.insert(
            format!("n{n}"),
            json!({"window_s": win_s, "warm_s": warm.as_secs(), "runs": runs_json}),
        );
    }
    detail.insert(
        "program".into(),
        json!(format!("maxx-bench child-agent: {HZ} Hz spinner + status line, repaint every {} s, {BURST_LINES}-line burst every {} s, random phase; {COLS}x{ROWS}", REPAINT_TICKS / HZ, BURST_TICKS / HZ)),
    );
    detail.insert(
        "tmux_top".into(),
        json!("tmux list-windows -a as a CLI process once a second"),
    );
    Ok((rows, Value::Object(detail)))
}
