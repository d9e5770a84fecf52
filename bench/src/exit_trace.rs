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
        Ok(trace)
    }

    /// Stop, and give the exit time (ns, CLOCK_MONOTONIC) of each of `members` seen, in order.
    pub fn finish(self, members: &HashSet<u32>) -> Vec<u64> {
        let _ = std::fs::write(self.dir.join("events/signal/signal_generate/enable"), "0");
        let text = std::fs::read_to_string(self.dir.join("trace")).unwrap_or_default();
        parse(&text, members)
    }
}

impl Drop for ExitTrace {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("events/signal/signal_generate/enable"), "0");
        // An instance directory is removed with rmdir (its files are the kernel's).
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The timestamps of the `signal_generate` lines of a tracefs `trace` file whose task
/// (the one exiting) is one of `members`:
/// `  comm-pid  [cpu] flags  12345.678901: signal_generate: sig=17 ...` (a comm may hold
/// spaces and dashes; the pid is after the last dash before the cpu).
fn parse(text: &str, members: &HashSet<u32>) -> Vec<u64> {
    let mut times: Vec<u64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (head, _) = l.split_once(": signal_generate:")?;
            let (task, rest) = head.split_once(" [")?;
            let pid: u32 = task.trim().rsplit_once('-')?.1.parse().ok()?;
            let secs: f64 = rest.rsplit(char::is_whitespace).next()?.parse().ok()?;
            members.contains(&pid).then(|| (secs * 1e9).round() as u64)
        })
        .collect();
    times.sort_unstable();
    times
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
            garbage line\n";
        let members = [4242, 17].into_iter().collect();
        assert_eq!(
            super::parse(text, &members),
            vec![3_000_001_000, 67_144_829_774_000]
        );
    }
}
