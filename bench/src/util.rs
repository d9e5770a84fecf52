//! Clocks, statistics, temp dirs, RSS and an inotify waiter.

use serde_json::{json, Value};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Boxed error; `?` works on io errors and strings.
pub type R<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// CLOCK_MONOTONIC in nanoseconds: comparable across processes on this machine (children
/// stamp their exit with it).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain syscall writing into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Milliseconds of a duration as f64.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Nearest-rank percentile (p in 0..=100) of unsorted samples.
pub fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Median (the mean of the two middle samples for an even count).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// min / median / max of per-run figures.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub min: f64,
    pub med: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    pub fn of(v: &[f64]) -> Option<Summary> {
        let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        Some(Summary {
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            med: median(&v),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n: v.len(),
        })
    }

    pub fn json(&self) -> Value {
        json!({"min": round(self.min), "median": round(self.med), "max": round(self.max), "runs": self.n})
    }
}

/// Round to 4 significant digits for JSON readability.
pub fn round(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let mag = x.abs().log10().floor() as i32;
    let scale = 10f64.powi(3 - mag);
    (x * scale).round() / scale
}

/// Format a figure with 3 significant digits (no exponent for the usual ranges).
pub fn fmt(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.01 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

/// A temp dir removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> R<TempDir> {
        let tmpl = CString::new(format!("/tmp/{prefix}XXXXXX"))?;
        let mut raw = tmpl.into_bytes_with_nul();
        // SAFETY: mkdtemp rewrites the template in place.
        let p = unsafe { libc::mkdtemp(raw.as_mut_ptr() as *mut libc::c_char) };
        if p.is_null() {
            return Err(io::Error::last_os_error().into());
        }
        raw.pop();
        Ok(TempDir(PathBuf::from(String::from_utf8(raw)?)))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// VmRSS of a process in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Each of a process's threads' `/proc/PID/task/TID/FILE`, as text (threads that end
/// meanwhile are skipped).
fn per_thread(pid: u32, file: &str) -> Option<Vec<String>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join(file)).ok())
            .collect(),
    )
}

/// A process's time on a CPU and waiting for one (run queue), ns, summed over its threads
/// (`schedstat`).
pub fn schedstat(pid: u32) -> Option<(u64, u64)> {
    let mut sum = (0, 0);
    for text in per_thread(pid, "schedstat")? {
        let mut fields = text
            .split_whitespace()
            .map(|f| f.parse::<u64>().unwrap_or(0));
        sum.0 += fields.next().unwrap_or(0);
        sum.1 += fields.next().unwrap_or(0);
    }
    Some(sum)
}

/// A process's context switches, voluntary (it slept: each is a later wake-up) and not
/// (preempted), summed over its threads (`status`).
pub fn ctxt_switches(pid: u32) -> Option<(u64, u64)> {
    let mut sum = (0, 0);
    for text in per_thread(pid, "status")? {
        for line in text.lines() {
            let count = || line.split_whitespace().nth(1)?.parse::<u64>().ok();
            if line.starts_with("voluntary_ctxt_switches:") {
                sum.0 += count().unwrap_or(0);
            } else if line.starts_with("nonvoluntary_ctxt_switches:") {
                sum.1 += count().unwrap_or(0);
            }
        }
    }
    Some(sum)
}

/// Threads of a process.
pub fn threads(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("Threads:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Poll `cond` every `step` until it holds or `timeout` passes.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    step: Duration,
    mut cond: impl FnMut() -> bool,
) -> R<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}").into());
        }
        std::thread::sleep(step);
    }
}

/// Watches one directory for created files; the same detector is used for maxx, tmux and
/// the bare baseline, so "child running" means the same thing for all three.
pub struct Inotify {
    fd: OwnedFd,
    seen: std::collections::HashSet<Vec<u8>>,
}

impl Inotify {
    pub fn new(dir: &Path) -> R<Inotify> {
        // SAFETY: plain syscalls; the fd is owned right away.
        let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error().into());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let c = CString::new(dir.as_os_str().as_bytes())?;
        let wd = unsafe {
            libc::inotify_add_watch(
                fd.as_raw_fd(),
                c.as_ptr(),
                libc::IN_CREATE | libc::IN_MOVED_TO,
            )
        };
        if wd < 0 {
            return Err(io::Error::last_os_error().into());
        }
        Ok(Inotify {
            fd,
            seen: Default::default(),
        })
    }

    /// Block until a file called `name` was created in the directory.
    pub fn wait(&mut self, name: &str, timeout: Duration) -> R<()> {
        let deadline = Instant::now() + timeout;
        let want = name.as_bytes();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if self.seen.remove(want) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("marker {name} did not appear within {timeout:?}").into());
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                )
            };
            if n <= 0 {
                continue;
            }
            let mut off = 0usize;
            let n = n as usize;
            while off + 16 <= n {
                let len = u32::from_ne_bytes(buf[off + 12..off + 16].try_into().unwrap()) as usize;
                let name = &buf[off + 16..off + 16 + len];
                let end = name.iter().position(|b| *b == 0).unwrap_or(len);
                self.seen.insert(name[..end].to_vec());
                off += 16 + len;
            }
        }
    }
}

/// `mkfifo`.
pub fn mkfifo(path: &Path) -> R<()> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(io::Error::last_os_error().into());
    }
    Ok(())
}

/// A deterministic xorshift PRNG (no dependency, same data every run).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Machine description for the results.
pub fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let hv = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.contains(" hypervisor"))
        .unwrap_or(false);
    let autogroup = std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    json!({
        "cpu": cpu,
        "cores": cores,
        "mem_gib": round(mem_kib as f64 / 1024.0 / 1024.0),
        "kernel": kernel,
        "virtualized": hv,
        "sched_autogroup": autogroup,
        "harness_autogroup_nice": autogroup_nice(),
    })
}

/// The nice value of the harness's own scheduling autogroup (`/proc/self/autogroup`:
/// `/autogroup-N nice X`). Not 0 skews every figure: the harness and its clients compete with
/// the daemon, tmux and their programs (each a session, so each its own autogroup) at another
/// weight.
pub fn autogroup_nice() -> Option<i32> {
    let s = std::fs::read_to_string("/proc/self/autogroup").ok()?;
    s.split_whitespace().last()?.parse().ok()
}

/// Run a command and return trimmed stdout (empty on failure).
pub fn capture(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Fraction of all CPUs busy (not idle/iowait) over `window`, from /proc/stat.
pub fn cpu_busy(window: Duration) -> f64 {
    fn sample() -> (u64, u64) {
        let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let v: Vec<u64> = s
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        (total, idle)
    }
    let (t0, i0) = sample();
    std::thread::sleep(window);
    let (t1, i1) = sample();
    let dt = (t1 - t0).max(1) as f64;
    1.0 - (i1 - i0) as f64 / dt
}

/// Before a scenario: wait (up to `max_wait`) until other processes use < 15% of the CPUs,
/// so a concurrent build does not skew the figures. Returns the busy fraction measured
/// last (recorded with the results).
pub fn wait_quiet(max_wait: Duration) -> f64 {
    let deadline = Instant::now() + max_wait;
    let mut warned = false;
    loop {
        let busy = cpu_busy(Duration::from_millis(1000));
        if busy < 0.15 || Instant::now() >= deadline {
            if busy >= 0.15 {
                eprintln!("  warning: the machine is busy ({:.0}% CPU used by other processes); figures will be noisy", busy * 100.0);
            }
            return busy;
        }
        if !warned {
            eprintln!(
                "  waiting for the machine to go quiet ({:.0}% CPU busy)...",
                busy * 100.0
            );
            warned = true;
        }
    }
}

/// Run `cmd` under `RLIMIT_NOFILE` = `n` (soft and hard), set in the child before it execs.
/// Raising the hard limit needs privilege (root, or CAP_SYS_RESOURCE); without it the child
/// gets its soft limit raised to the hard one it has, and whatever it reports (the daemon's
/// `fd_limit`) says so.
pub fn raise_nofile(cmd: &mut std::process::Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit/getrlimit are async-signal-safe; no allocation in the closure.
    unsafe {
        cmd.pre_exec(move || {
            let want = libc::rlimit {
                rlim_cur: n as libc::rlim_t,
                rlim_max: n as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
                let mut have = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut have) == 0 {
                    have.rlim_cur = have.rlim_max;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &have);
                }
            }
            Ok(())
        });
    }
}

/// Entries in a /proc/<pid>/ directory (`fd`, `task`).
pub fn proc_count(pid: u32, what: &str) -> Option<usize> {
    Some(
        std::fs::read_dir(format!("/proc/{pid}/{what}"))
            .ok()?
            .count(),
    )
}
