//! A session's process group after the session: ending it (signals, the grace, SIGKILL, reaping
//! the leader) off the actor, and the registry of groups still being ended that a stopping daemon
//! waits for.

use super::{pidfd_open, register, KILL_GRACE};
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use tokio::io::unix::AsyncFd;

/// End a session's whole process group (the child is a session leader, so its pid is the
/// group's id): SIGHUP, SIGTERM and SIGCONT (so a stopped member sees them) to the group;
/// once the leader has exited, or after [`KILL_GRACE`] if it ignores them, SIGKILL to the
/// group; then reap the leader. The leader is reaped only after that SIGKILL ([`Pty::reap`]
/// leaves it a zombie), so the group id cannot have been reused by another process when
/// it is signalled. What escapes: a process that left the group (`setsid`, `setpgid`, a
/// job-control shell's jobs) — the kernel offers no handle on "everything this session
/// started" short of a cgroup.
/// `pidfd`: the leader's, registered with the runtime, if the caller holds one (the
/// daemon's own child); otherwise one is opened here.
pub(super) fn end_group(
    pid: u32,
    exited: bool,
    group: Option<Reaper>,
    pidfd: Option<Arc<AsyncFd<OwnedFd>>>,
) {
    let pid = Pid::from_raw(pid as i32);
    for sig in [Signal::SIGHUP, Signal::SIGTERM, Signal::SIGCONT] {
        let _ = killpg(pid, sig);
    }
    let kill_and_reap = move || {
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
    };
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        kill_and_reap();
        return;
    };
    // The pidfd (it works on a zombie too) says when the leader has exited, so reaping never
    // blocks a thread: no blocking-pool thread per closed session.
    let pidfd = match pidfd {
        Some(pidfd) => pidfd,
        None => match pidfd_open(pid.as_raw() as u32).and_then(register) {
            Ok(pidfd) => Arc::new(pidfd),
            Err(_) => {
                kill_and_reap();
                return;
            }
        },
    };
    handle.spawn(async move {
        // Unregistered once the group is ended and its leader reaped.
        let _group = group;
        // A leader that already exited has nothing left to wait for: what it left in its
        // group is killed at once (nothing tells when such stragglers are done).
        if !exited {
            let _ = tokio::time::timeout(KILL_GRACE, pidfd.readable()).await;
        }
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = tokio::time::timeout(KILL_GRACE, pidfd.readable()).await;
        if matches!(
            waitpid(pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        ) {
            // Not gone 2 s after SIGKILL (stuck in the kernel): reap it off the runtime.
            let _ = tokio::task::spawn_blocking(move || waitpid(pid, None)).await;
        }
    });
}

/// Process groups still being ended (by their leader's pid, which is their id); a stopping
/// daemon waits for them ([`wait_for_reapers`]).
static REAPERS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());
static REAPERS_DONE: tokio::sync::Notify = tokio::sync::Notify::const_new();

fn reapers() -> std::sync::MutexGuard<'static, Vec<i32>> {
    REAPERS.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) struct Reaper(i32);

impl Reaper {
    pub(super) fn new(pid: Pid) -> Reaper {
        reapers().push(pid.as_raw());
        Reaper(pid.as_raw())
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let mut pending = reapers();
        if let Some(i) = pending.iter().position(|p| *p == self.0) {
            pending.swap_remove(i);
        }
        if pending.is_empty() {
            REAPERS_DONE.notify_waiters();
        }
    }
}

/// Wait (at most `limit`) until every session's process group that is being ended has been
/// killed and its leader reaped, so a clean daemon stop leaves no session's program behind.
/// Groups still pending after `limit` (a loaded machine) are sent SIGKILL at once.
pub async fn wait_for_reapers(limit: std::time::Duration) {
    let waited = tokio::time::timeout(limit, async {
        loop {
            let notified = REAPERS_DONE.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if reapers().is_empty() {
                return;
            }
            notified.await;
        }
    })
    .await;
    if waited.is_err() {
        for pid in reapers().iter() {
            // Their leaders are not reaped yet, so these ids are still theirs.
            let _ = killpg(Pid::from_raw(*pid), Signal::SIGKILL);
        }
    }
}

/// The parent of `pid`, from `/proc/<pid>/stat` (field 4, after the command name, which may
/// hold spaces and parentheses).
pub(super) fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}
