//! When the kernel finished each exit: the SIGCHLD it sends the parent.
//!
//! A member stamps its exit just before `_exit`; the exit itself (closing its files, the
//! tty's hang-up, freeing its memory, becoming a zombie the parent's pidfd reports) comes
//! after, and in a burst of 1,000 on two cores it can take the kernel tens of milliseconds
//! past the last stamp. The group scenario asks how long after the last exit the waiter
//! knows; this measures that exit where the kernel makes it: `signal:signal_generate` for
//! the SIGCHLD of an exit (`code == CLD_EXITED`), which fires in the exiting member's own
//! context (the line's task is the member, whoever its parent; tmux's `utempter` helpers
//! and the server's own SIGCHLDs are told apart by that), read from a tracefs instance of
//! this run's own (the system's trace buffer is not touched) on the `mono` clock, the one
//! [`crate::util::mono_ns`] reads.
//!
//! Beside the exits it records the `waitid` calls that ask about a member (the daemon's reap;
//! tmux reaps with `waitpid`, not traced): how many exits the daemon had not yet taken when the
//! kernel finished the last one says whether a slow answer was a daemon kept off the cores
//! during the burst (most of them) or one slow after it (few).
//!
//! Needs a writable tracefs (root); without one [`ExitTrace::start`] says why and the
//! figures are absent from the results.

use std::collections::HashSet;
use std::path::PathBuf;

/// A tracefs instance recording the exits' SIGCHLDs; removed on drop.
pub struct ExitTrace {
    dir: PathBuf,
}

impl ExitTrace {
    /// Start recording the SIGCHLDs the kernel generates for exits.
    pub fn start() -> Result<ExitTrace, String> {
        let root = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.join("instances").is_dir())
            .ok_or("no tracefs mounted")?;
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = root
            .join("instances")
            .join(format!("maxx-bench-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("tracefs instance: {e}"))?;
        let trace = ExitTrace { dir };
        let event = trace.dir.join("events/signal/signal_generate");
        let put = |path: PathBuf, value: &str| {
            std::fs::write(&path, value).map_err(|e| format!("{}: {e}", path.display()))
        };
        put(trace.dir.join("trace_clock"), "mono")?;
        put(event.join("filter"), "sig == 17 && code == 1")?;
        put(event.join("enable"), "1")?;
        // Optional: a kernel without syscall events still gives the exits.
        let _ = put(trace.dir.join(WAITID).join("enable"), "1");
        Ok(trace)
    }

    /// Stop, and give what was seen of `members`.
    pub fn finish(self, members: &HashSet<u32>) -> Exits {
        self.disable();
        let text = std::fs::read_to_string(self.dir.join("trace")).unwrap_or_default();
        parse(&text, members)
    }

    fn disable(&self) {
        let _ = std::fs::write(self.dir.join("events/signal/signal_generate/enable"), "0");
        let _ = std::fs::write(self.dir.join(WAITID).join("enable"), "0");
    }
}

const WAITID: &str = "events/syscalls/sys_enter_waitid";

/// What a trace saw of a burst's members (ns, CLOCK_MONOTONIC, each list in order).
pub struct Exits {
    /// The kernel finished each member's exit.
    pub exits: Vec<u64>,
    /// The first `waitid` asking about each member (the daemon's reap).
    pub reaps: Vec<u64>,
}

impl Exits {
    /// How many members had exited and not yet been asked about when the last one exited;
    /// `None` when no `waitid` asked about any (tmux reaps with `waitpid`; a kernel without
    /// syscall events).
    pub fn unreaped_at_last_exit(&self) -> Option<usize> {
        if self.reaps.is_empty() {
            return None;
        }
        let last = *self.exits.last()?;
        Some(self.exits.len() - self.reaps.iter().filter(|&&t| t <= last).count())
    }
}

impl Drop for ExitTrace {
    fn drop(&mut self) {
        self.disable();
        // An instance directory is removed with rmdir (its files are the kernel's).
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The `signal_generate` and `sys_waitid` lines of a tracefs `trace` file about `members`:
/// `  comm-pid  [cpu] flags  12345.678901: signal_generate: sig=17 ...` whose task (the one
/// exiting) is a member, and `... 12345.678902: sys_waitid(which: 0x1, upid: 0x4d2, ...)` whose
/// `upid` is one (the first per member counts). A comm may hold spaces and dashes; the pid is
/// after the last dash before the cpu.
fn parse(text: &str, members: &HashSet<u32>) -> Exits {
    let mut exits = Vec::new();
    let mut reaps = std::collections::HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((task, rest)) = line.split_once(" [") else {
            continue;
        };
        let Some((meta, event)) = rest.split_once(": ") else {
            continue;
        };
        let Some(Ok(secs)) = meta
            .rsplit(char::is_whitespace)
            .next()
            .map(str::parse::<f64>)
        else {
            continue;
        };
        let ns = (secs * 1e9).round() as u64;
        if event.starts_with("signal_generate:") {
            let pid = task
                .trim()
                .rsplit_once('-')
                .and_then(|(_, p)| p.parse().ok());
            if pid.is_some_and(|p| members.contains(&p)) {
                exits.push(ns);
            }
        } else if let Some(args) = event.strip_prefix("sys_waitid(") {
            let upid = args
                .split(", ")
                .find_map(|a| a.strip_prefix("upid: 0x"))
                .and_then(|h| u32::from_str_radix(h.trim_end_matches(')'), 16).ok());
            if let Some(p) = upid.filter(|p| members.contains(p)) {
                reaps.entry(p).or_insert(ns);
            }
        }
    }
    exits.sort_unstable();
    let mut reaps: Vec<u64> = reaps.into_values().collect();
    reaps.sort_unstable();
    Exits { exits, reaps }
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_reads_the_times_of_trace_lines() {
        let text = "# tracer: nop\n#\n\
            maxx-bench-4242  [001] d..2. 67144.829774: signal_generate: sig=17 errno=0 code=1 comm=maxx pid=7 grp=1 res=1\n\
            <...>-17 [000] d..1.   3.000001: signal_generate: sig=17 errno=0 code=1 comm=tmux pid=9 grp=1 res=1\n\
            utempter-99 [000] dN.2. 4.000001: signal_generate: sig=17 errno=0 code=1 comm=tmux: server pid=9 grp=1 res=0\n\
            tmux: server-9 [000] d..1. 5.000001: signal_generate: sig=17 errno=0 code=1 comm=tmux: server pid=9 grp=1 res=2\n\
            maxx-worker-7 [001] ..... 2.500000: sys_waitid(which: 0x1, upid: 0x11, infop: 0x7f, options: 0x1000005, ru: 0x0)\n\
            maxx-worker-7 [001] ..... 2.600000: sys_waitid(which: 0x1, upid: 0x11, infop: 0x7f, options: 0x1000005, ru: 0x0)\n\
            maxx-worker-7 [001] ..... 2.700000: sys_waitid(which: 0x1, upid: 0x63, infop: 0x7f, options: 0x1000005, ru: 0x0)\n\
            maxx-worker-8 [000] ..... 67144.900000: sys_waitid(which: 0x1, upid: 0x1092, infop: 0x7f, options: 0x1000005, ru: 0x0)\n\
            garbage line\n";
        let members = [4242, 17].into_iter().collect();
        let seen = super::parse(text, &members);
        assert_eq!(seen.exits, vec![3_000_001_000, 67_144_829_774_000]);
        // 17 asked about at 2.5 s (once counted), 4242 after the last exit; 99 no member.
        assert_eq!(seen.reaps, vec![2_500_000_000, 67_144_900_000_000]);
        assert_eq!(seen.unreaped_at_last_exit(), Some(1));
        let no_reaper = super::Exits {
            exits: seen.exits,
            reaps: vec![],
        };
        assert_eq!(no_reaper.unreaped_at_last_exit(), None);
    }
}
