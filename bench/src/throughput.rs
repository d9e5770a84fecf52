//! Scenario 2 — Output throughput: `cat` a file of realistic terminal output (SGR colours, 256/true
//! colour, progress bars redrawn with CR + erase-line, cursor up/column moves, some UTF-8
//! and wrapping lines) in a 200x50 terminal until it is all consumed.
//!
//! - bare: openpty + `cat F`, master read until EIO, no parsing (the physical limit).
//! - maxx drain: `read x; cat F; exit 0`; clock from the submit that releases `read` to
//!   `sessions.wait --lifecycle exited` returning. Nobody reads: the drain path (light pass +
//!   backlog ring) and, off it, the grid workers parsing every byte (issue 17).
//! - maxx grid: `read x; cat F; printf DONE`; clock from the submit to
//!   `sessions.wait --until DONE` returning. A pending text wait makes the daemon bring its
//!   alacritty grid up to date on every chunk and match the new lines: the screen model on.
//! - maxx attached: as drain, with a `sessions.attach` client reading the live output on the
//!   socket; clock from the submit until both the exit wait returned and the attachment
//!   delivered every byte (EOF).
//! - tmux: `read x; cat F; tmux wait-for -S ch`; clock from `send-keys Enter` to
//!   `tmux wait-for ch` returning (a detached session: tmux parses into its grid, draws
//!   nothing).
//!
//! When the child's last write returns, at most one kernel PTY buffer of output is still
//! unread, so "child finished" and "output consumed" differ by < 0.1% of the file.

use crate::maxx::{read_line, Daemon};
use crate::tmux::Tmux;
use crate::util::{median, Rng, Summary, TempDir, R};
use crate::{bare, Cfg, Row};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const WORDS: &[&str] = &[
    "Compiling",
    "Checking",
    "Running",
    "Finished",
    "warning:",
    "error[E0599]:",
    "test",
    "ok",
    "passed",
    "failed",
    "src/main.rs",
    "actors/src/session.rs:1020:17",
    "fn",
    "let",
    "mut",
    "=>",
    "{",
    "}",
    "tokio",
    "serde_json",
    "ractor",
    "session",
    "registry",
    "v0.1.0",
    "v1.54.0",
    "(/work/main/actors)",
    "in",
    "3.21s",
    "└──",
    "├──",
    "✓",
    "→",
    "λ",
    "数据",
    "naïve",
    "0x7ffd5e",
    "GET",
    "/api/v1/sessions",
    "200",
    "12ms",
    "[INFO]",
    "[WARN]",
    "retrying",
    "connection",
    "refused",
    "bytes",
    "npm",
    "install",
    "added",
    "packages",
    "from",
    "audited",
    "vulnerabilities",
];

/// Write `size` bytes of deterministic, realistic terminal output to `path`.
pub fn generate(path: &Path, size: u64) -> R<()> {
    let mut rng = Rng::new(0x5eed);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut written = 0u64;
    let mut line = String::with_capacity(1024);
    let words = |rng: &mut Rng, line: &mut String, max: usize| {
        let target = 10 + rng.below(max as u64) as usize;
        while line.len() < target {
            line.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
            line.push(' ');
        }
    };
    while written < size {
        line.clear();
        let kind = rng.below(100);
        match kind {
            // Cargo-style coloured status line.
            0..=39 => {
                let color = 31 + rng.below(7);
                line.push_str(&format!(
                    "\x1b[1;{color}m{:>12}\x1b[0m ",
                    WORDS[rng.below(6) as usize]
                ));
                words(&mut rng, &mut line, 140);
                line.push('\n');
            }
            // 256-colour and true-colour spans.
            40..=54 => {
                for _ in 0..(2 + rng.below(5)) {
                    if rng.below(2) == 0 {
                        line.push_str(&format!("\x1b[38;5;{}m", rng.below(256)));
                    } else {
                        line.push_str(&format!(
                            "\x1b[38;2;{};{};{}m\x1b[48;5;{}m",
                            rng.below(256),
                            rng.below(256),
                            rng.below(256),
                            232 + rng.below(24)
                        ));
                    }
                    let mut w = String::new();
                    words(&mut rng, &mut w, 30);
                    line.push_str(&w);
                }
                line.push_str("\x1b[0m\n");
            }
            // A progress bar redrawn in place: CR + erase line, then a final newline.
            55..=64 => {
                for step in 0..(3 + rng.below(8)) {
                    let pct = (step * 13).min(100);
                    let filled = (pct / 5) as usize;
                    line.push_str(&format!(
                        "\r\x1b[2K\x1b[36m[{}>{}]\x1b[0m {pct:>3}% \x1b[2m{} MB/s\x1b[22m",
                        "=".repeat(filled),
                        " ".repeat(20 - filled.min(20)),
                        rng.below(900)
                    ));
                }
                line.push('\n');
            }
            // Cursor movement: go up, erase, rewrite; jump to a column; save/restore.
            65..=74 => {
                line.push_str("\x1b[A\x1b[2K\r\x1b[32m✓\x1b[0m ");
                words(&mut rng, &mut line, 80);
                line.push_str(&format!("\x1b[{}G\x1b[33m", 100 + rng.below(60)));
                words(&mut rng, &mut line, 30);
                line.push_str("\x1b[0m\x1b[s\x1b[5C*\x1b[u\n");
            }
            // Attributes: bold, italic, underline, reverse, and their resets.
            75..=84 => {
                line.push_str("\x1b[1mbold\x1b[22m \x1b[3mitalic\x1b[23m \x1b[4munder\x1b[24m \x1b[7mrev\x1b[27m ");
                words(&mut rng, &mut line, 120);
                line.push('\n');
            }
            // Long lines that wrap at 200 columns.
            85..=89 => {
                words(&mut rng, &mut line, 320);
                line.push('\n');
            }
            // Plain lines.
            _ => {
                words(&mut rng, &mut line, 100);
                line.push('\n');
            }
        }
        out.write_all(line.as_bytes())?;
        written += line.len() as u64;
    }
    out.flush()?;
    Ok(())
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let (runs, size) = if cfg.quick {
        (1, 20_000_000u64)
    } else {
        (5, 100_000_000u64)
    };
    let runs = cfg.runs.unwrap_or(runs);
    let dir = TempDir::new("maxx-bench-tp-")?;
    let file = dir.join("out.txt");
    generate(&file, size)?;
    let size = std::fs::metadata(&file)?.len();
    if std::fs::read(&file)?.windows(4).any(|w| w == b"DONE") {
        return Err("generated data contains the DONE marker".into());
    }
    let f = file.display().to_string();
    let daemon = Daemon::start(&cfg.maxx, &[])?;
    let c = daemon.client.clone();
    // `MAXX_BENCH_NO_KEEPER_ROW=1`: no keeper-killed row, for an A/B against a build from
    // before the keeper (its daemon has none to kill).
    let mut alone = match std::env::var_os("MAXX_BENCH_NO_KEEPER_ROW") {
        Some(_) => None,
        None => Some(Daemon::start(&cfg.maxx, &[])?),
    };
    if let Some(alone) = alone.as_mut() {
        alone.without_keeper()?;
    }
    let mut rate_no_keeper = Vec::new();
    let mut r_keeper = Vec::new();
    let tmux = Tmux::start("keep", 200, 50)?;
    let mb = size as f64 / 1e6;
    let big = Duration::from_secs(600);

    let mut rate: [Vec<f64>; 4] = Default::default(); // bare, maxx drain, maxx grid, tmux
    let mut rate_attached = Vec::new();
    let mut r_attached = Vec::new();
    let mut r_drain = Vec::new();
    let mut r_grid = Vec::new();
    let mut r_tmux = Vec::new();
    let mut r_grid_tmux = Vec::new();
    let mut daemon_cpu = Vec::new();
    let mut cpu_per_100mb: [Vec<f64>; 2] = Default::default(); // drain, grid
    for run in 0..runs {
        // bare
        let t0 = Instant::now();
        let b = bare::spawn(&format!("cat {f}"), 200, 50)?;
        let drained = b.drain();
        let bare_s = t0.elapsed().as_secs_f64();
        drop(b);
        if drained < size {
            return Err(format!("bare drained {drained} of {size} bytes").into());
        }

        // maxx, drain path only
        let (drain_s, cpu_s) = drain(&c, daemon.pid(), &f, big)?;
        daemon_cpu.push(cpu_s / drain_s);
        cpu_per_100mb[0].push(cpu_s * 100.0 / mb);
        // the same with the keeper gone (issue 20: holding the masters must not cost the
        // drain path)
        if let Some(alone) = &alone {
            let (alone_s, _) = drain(&alone.client, alone.pid(), &f, big)?;
            rate_no_keeper.push(mb / alone_s);
            r_keeper.push(alone_s / drain_s);
        }

        // maxx, drain path with a person attached (bytes forwarded through the actor)
        let id = c.create(json!({"command": format!("read x; cat {f}; exit 0"), "cols": 200, "rows": 50, "focus": false}))?;
        let mut wait = c.open(
            "sessions.wait",
            json!({"session_id": id, "lifecycle": "exited", "timeout": big.as_secs()}),
        )?;
        // Attaching shows the screen: it needs output:read, so it goes as the reader source.
        let mut attach = c.open_as(
            crate::maxx::READER,
            "sessions.attach",
            json!({"session_id": id}),
        )?;
        let first = read_line(&mut attach)?;
        if first["ok"] != true {
            return Err(format!("maxx attach: {first}").into());
        }
        let reader = std::thread::spawn(move || -> (u64, Instant) {
            use std::io::Read;
            let mut buf = vec![0u8; 64 * 1024];
            let mut n = 0u64;
            while let Ok(k) = attach.read(&mut buf) {
                if k == 0 {
                    break;
                }
                n += k as u64;
            }
            (n, Instant::now())
        });
        let t0 = release(&c, &id)?;
        let v = read_line(&mut wait)?;
        let exited = Instant::now();
        let (forwarded, eof) = reader.join().map_err(|_| "attach reader panicked")?;
        let attached_s = exited.max(eof).duration_since(t0).as_secs_f64();
        if v["result"]["outcome"] != "matched" {
            return Err(format!("maxx exit wait (attached): {v}").into());
        }
        if forwarded < size {
            return Err(format!("the attachment got {forwarded} of {size} bytes").into());
        }
        c.close(&id).ok();

        // maxx, grid kept current by a pending text wait
        let id = c.create(json!({"command": format!("read x; cat {f}; printf 'DO''NE\\n'; exec sleep 100000"), "cols": 200, "rows": 50, "focus": false}))?;
        let mut wait = c.open_as(
            crate::maxx::READER,
            "sessions.wait",
            json!({"session_id": id, "until": "DONE", "timeout": big.as_secs()}),
        )?;
        if let Err(e) = crate::util::wait_until(
            "the text waiter",
            Duration::from_secs(10),
            Duration::from_millis(1),
            || c.stat("waiters").unwrap_or(0) >= 1,
        ) {
            // Say why: the daemon may have answered the wait already (e.g. refused it).
            let _ = wait
                .get_ref()
                .set_read_timeout(Some(Duration::from_millis(500)));
            let answer = read_line(&mut wait)
                .map(|v| v.to_string())
                .unwrap_or_default();
            return Err(format!("{e}; the wait answered: {answer}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
        let cpu0 = cpu_ticks(daemon.pid());
        let t0 = Instant::now();
        c.call(
            "sessions.action",
            json!({"session_id": id, "action": "submit", "input": ""}),
        )?;
        let v = read_line(&mut wait)?;
        let grid_s = t0.elapsed().as_secs_f64();
        let cpu1 = cpu_ticks(daemon.pid());
        cpu_per_100mb[1].push((cpu1 - cpu0) as f64 / ticks_per_sec() * 100.0 / mb);
        if v["result"]["outcome"] != "matched" {
            return Err(format!("maxx text wait: {v}").into());
        }
        c.close(&id).ok();

        // tmux
        let sess = format!("tp{run}");
        let ch = format!("tpdone{run}");
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            &sess,
            "-x",
            "200",
            "-y",
            "50",
            &format!("read x; cat {f}; tmux wait-for -S {ch}; exec sleep 100000"),
        ])?;
        let mut waiter = tmux.command().args(["wait-for", &ch]).spawn()?;
        std::thread::sleep(Duration::from_millis(100));
        let t0 = Instant::now();
        tmux.run(&["send-keys", "-t", &sess, "Enter"])?;
        waiter.wait()?;
        let tmux_s = t0.elapsed().as_secs_f64();
        tmux.run(&["kill-session", "-t", &sess])?;

        let rates = [mb / bare_s, mb / drain_s, mb / grid_s, mb / tmux_s];
        for (i, r) in rates.iter().enumerate() {
            rate[i].push(*r);
        }
        r_drain.push(rates[1] / rates[0]);
        r_grid.push(rates[2] / rates[0]);
        r_tmux.push(rates[3] / rates[0]);
        r_grid_tmux.push(rates[2] / rates[3]);
        rate_attached.push(mb / attached_s);
        r_attached.push(mb / attached_s / rates[0]);
        eprintln!(
            "  throughput run {run}: bare {:.1} MB/s, maxx drain {:.1}, maxx attached {:.1}, maxx grid {:.1}, tmux {:.1}; daemon CPU s/100MB drain {:.2} grid {:.2}",
            rates[0], rates[1], mb / attached_s, rates[2], rates[3], cpu_per_100mb[0].last().unwrap(), cpu_per_100mb[1].last().unwrap()
        );
    }
    let pct = |v: &Vec<f64>| Summary::of(&v.iter().map(|x| x * 100.0).collect::<Vec<_>>());
    let rows = vec![
        Row::new("throughput", "output, screen model on (text wait pending)", "MB/s")
            .maxx(Summary::of(&rate[2]))
            .tmux(Summary::of(&rate[3]))
            .bare(Summary::of(&rate[0]))
            .ratio("maxx/bare %", pct(&r_grid))
            .target("≥ 80% of bare", Summary::of(&r_grid).map(|r| r.med >= 0.8))
            .note(format!("maxx/tmux med {:.2}x; tmux/bare med {:.0}%", median(&r_grid_tmux), median(&r_tmux) * 100.0)),
        Row::new("throughput", "output, nobody reading (drain + lazy grid)", "MB/s")
            .maxx(Summary::of(&rate[1]))
            .tmux(Summary::of(&rate[3]))
            .bare(Summary::of(&rate[0]))
            .ratio("maxx/bare %", pct(&r_drain))
            .note(format!(
                "daemon CPU during drain med {:.0}% of one core; daemon CPU per 100 MB: drain {:.2} s, grid {:.2} s",
                median(&daemon_cpu) * 100.0,
                median(&cpu_per_100mb[0]),
                median(&cpu_per_100mb[1])
            )),
        Row::new("throughput", "output, nobody reading, keeper killed (no master held)", "MB/s")
            .maxx(Summary::of(&rate_no_keeper))
            .ratio("with/without keeper", Summary::of(&r_keeper))
            .note("the keeper holds a duplicate of each master and is never on the drain path: the ratio should be 1 within noise".to_string()),
        Row::new("throughput", "output, drain path + one `attach` client reading", "MB/s")
            .maxx(Summary::of(&rate_attached))
            .tmux(Summary::of(&rate[3]))
            .bare(Summary::of(&rate[0]))
            .ratio("maxx/bare %", pct(&r_attached)),
    ];
    let detail = json!({
        "bytes": size,
        "runs": runs,
        "terminal": "200x50",
        "mb_per_s": {
            "bare": Summary::of(&rate[0]).map(|s| s.json()),
            "maxx_drain": Summary::of(&rate[1]).map(|s| s.json()),
            "maxx_drain_no_keeper": Summary::of(&rate_no_keeper).map(|s| s.json()),
            "maxx_grid": Summary::of(&rate[2]).map(|s| s.json()),
            "maxx_attached": Summary::of(&rate_attached).map(|s| s.json()),
            "tmux": Summary::of(&rate[3]).map(|s| s.json()),
        },
        "ratio_maxx_grid_over_bare": Summary::of(&r_grid).map(|s| s.json()),
        "ratio_maxx_drain_over_bare": Summary::of(&r_drain).map(|s| s.json()),
        "ratio_maxx_attached_over_bare": Summary::of(&r_attached).map(|s| s.json()),
        "ratio_tmux_over_bare": Summary::of(&r_tmux).map(|s| s.json()),
        "ratio_maxx_grid_over_tmux": Summary::of(&r_grid_tmux).map(|s| s.json()),
        "daemon_cpu_cores_during_drain": Summary::of(&daemon_cpu).map(|s| s.json()),
        "daemon_cpu_s_per_100mb_drain": Summary::of(&cpu_per_100mb[0]).map(|s| s.json()),
        "daemon_cpu_s_per_100mb_grid": Summary::of(&cpu_per_100mb[1]).map(|s| s.json()),
        "screen_model": "maxx's alacritty_terminal grid parses every byte, lazily, off the drain path (issue 17); 'grid' = a pending sessions.wait --until also makes the grid workers match the new rows, 'drain' = nobody reads (light pass + backlog in the pump, grid workers parse in batches), 'attached' = drain + every chunk forwarded to one attach client",
    });
    Ok((rows, detail))
}

/// `read x; cat F; exit 0` in a new session of the daemon `pid` serves through `c`, from the
/// submit that releases it until its exit wait returns: (seconds, daemon CPU seconds).
fn drain(c: &crate::maxx::Client, pid: u32, f: &str, big: Duration) -> R<(f64, f64)> {
    let cpu0 = cpu_ticks(pid);
    let id = c.create(json!({"command": format!("read x; cat {f}; exit 0"), "cols": 200, "rows": 50, "focus": false}))?;
    let mut wait = c.open(
        "sessions.wait",
        json!({"session_id": id, "lifecycle": "exited", "timeout": big.as_secs()}),
    )?;
    let t0 = release(c, &id)?;
    let v = read_line(&mut wait)?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_ticks(pid);
    if v["result"]["outcome"] != "matched" {
        return Err(format!("maxx exit wait: {v}").into());
    }
    c.close(&id).ok();
    Ok((secs, (cpu1 - cpu0) as f64 / ticks_per_sec()))
}

/// Once the exit waiter is registered, press Enter to release the session's `read x`; returns
/// when the clock starts.
fn release(c: &crate::maxx::Client, id: &str) -> R<Instant> {
    crate::util::wait_until(
        "the exit waiter",
        Duration::from_secs(10),
        Duration::from_millis(1),
        || c.stat("waiters").unwrap_or(0) >= 1,
    )?;
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    c.call(
        "sessions.action",
        json!({"session_id": id, "action": "submit", "input": ""}),
    )?;
    Ok(t0)
}

/// utime + stime of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // after ')': state is field 3 → index 0; utime is field 14 → index 11, stime index 12
    let g = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    g(11) + g(12)
}

pub fn ticks_per_sec() -> f64 {
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}
