//! Re-adoption by proof, never by guess: a restored record gets back a live program only
//! when the keeper presents that record's own surface — its session id, its surface id (a
//! fresh id per spawn, kept in the durable record), the pid the record last showed running —
//! with a PTY master and the surface's registration secret, and the kernel agrees: the
//! descriptor is a PTY master, and a program still running under that pid is the keeper's
//! child with that PTY as its controlling terminal. Nothing is read from output, names or
//! paths.

use super::Survivor;
use maxx_protocol::session::{Lifecycle, SessionView};
use std::os::fd::AsRawFd;

/// What the durable record said before it was detached for the restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastSeen {
    /// Its lifecycle.
    pub lifecycle: Lifecycle,
    /// Its pid.
    pub pid: Option<u32>,
}

/// Why a survivor is not a record's own program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Another session's, or another surface of this one.
    NotItsSurface,
    /// The record was not running that pid when last written.
    NotRunning,
    /// The registration secret is not one this daemon issues (32 lowercase hex digits).
    BadToken,
    /// The descriptor is no PTY master.
    NotAPty,
    /// A live process under that pid is not the keeper's child on that terminal.
    NotItsProgram,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::NotItsSurface => "not the record's surface",
            Refusal::NotRunning => "the record was not running that pid",
            Refusal::BadToken => "a malformed registration secret",
            Refusal::NotAPty => "the descriptor is no PTY master",
            Refusal::NotItsProgram => "the process under that pid is not that terminal's program",
        })
    }
}

/// Whether `survivor` is the program of `record` (detached for the restart; `last` is what
/// it said before).
pub fn check(record: &SessionView, last: LastSeen, survivor: &Survivor) -> Result<(), Refusal> {
    if survivor.session_id != record.session_id
        || survivor.surface_id.is_empty()
        || survivor.surface_id != record.surface_id
    {
        return Err(Refusal::NotItsSurface);
    }
    if last.lifecycle != Lifecycle::Running || last.pid != Some(survivor.pid) {
        return Err(Refusal::NotRunning);
    }
    if survivor.token.len() != 32
        || !survivor
            .token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(Refusal::BadToken);
    }
    let pty = pty_number(survivor.master.as_raw_fd()).ok_or(Refusal::NotAPty)?;
    if survivor.status.is_none() {
        if let Some(proc) = ProcStat::read(survivor.pid) {
            // A zombie has let go of its terminal; the keeper reports its status.
            let keeper = nix::unistd::getppid().as_raw();
            if proc.state != 'Z' && (proc.ppid != keeper || Some(proc.tty_nr) != tty_nr(pty)) {
                return Err(Refusal::NotItsProgram);
            }
        }
    }
    Ok(())
}

/// The PTY number of a master (`TIOCGPTN`), `None` if it is not a PTY master.
fn pty_number(fd: std::os::fd::RawFd) -> Option<u32> {
    let mut n: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes one unsigned int.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGPTN, &mut n) };
    (rc == 0).then_some(n)
}

/// `/proc/<pid>/stat`'s encoding of `/dev/pts/<n>`'s device number.
fn tty_nr(n: u32) -> Option<i64> {
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(format!("/dev/pts/{n}")).ok()?.rdev();
    let (major, minor) = (libc::major(rdev) as i64, libc::minor(rdev) as i64);
    Some((minor & 0xff) | (major << 8) | ((minor & !0xff) << 12))
}

struct ProcStat {
    state: char,
    ppid: i32,
    tty_nr: i64,
}

impl ProcStat {
    fn read(pid: u32) -> Option<ProcStat> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name, which may hold spaces and parentheses.
        let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = rest.next()?.chars().next()?;
        let ppid = rest.next()?.parse().ok()?;
        let _pgrp = rest.next()?;
        let _session = rest.next()?;
        let tty_nr = rest.next()?.parse().ok()?;
        Some(ProcStat {
            state,
            ppid,
            tty_nr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portable_pty::{native_pty_system, PtySize};

    fn view(session: &str, surface: &str) -> SessionView {
        serde_json::from_value(serde_json::json!({
            "session_id": session, "surface_id": surface, "title": null, "command": null,
            "cwd": "/", "status": null, "lifecycle": "closed", "metadata": {},
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "pid": null, "exit_code": null, "exit_signal": null, "location": "tab",
            "split_target": null, "split_direction": null, "focused": false,
            "restart_count": 0, "terminal_title": null, "cols": 80, "rows": 24,
            "restored": true, "last_seen_at": null, "archive_reason": null
        }))
        .unwrap()
    }

    fn survivor(master: std::os::fd::OwnedFd, pid: u32) -> Survivor {
        Survivor {
            session_id: "A".into(),
            surface_id: "S".into(),
            pid,
            token: "0123456789abcdef0123456789abcdef".into(),
            master,
            screen: None,
            // An exited child: no process to look at.
            status: Some(maxx_protocol::keeper::ChildStatus::Code(0)),
        }
    }

    fn master() -> std::os::fd::OwnedFd {
        let pair = native_pty_system().openpty(PtySize::default()).unwrap();
        let raw = pair.master.as_raw_fd().unwrap();
        let dup = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 0) };
        unsafe { std::os::fd::FromRawFd::from_raw_fd(dup) }
    }

    const RUNNING: LastSeen = LastSeen {
        lifecycle: Lifecycle::Running,
        pid: Some(42),
    };

    #[test]
    fn the_records_own_surface_is_accepted() {
        assert_eq!(
            check(&view("A", "S"), RUNNING, &survivor(master(), 42)),
            Ok(())
        );
    }

    #[test]
    fn anything_else_is_refused() {
        let v = view("A", "S");
        assert_eq!(
            check(&view("B", "S"), RUNNING, &survivor(master(), 42)),
            Err(Refusal::NotItsSurface)
        );
        assert_eq!(
            check(&view("A", "T"), RUNNING, &survivor(master(), 42)),
            Err(Refusal::NotItsSurface)
        );
        assert_eq!(
            check(&v, RUNNING, &survivor(master(), 43)),
            Err(Refusal::NotRunning)
        );
        let closed = LastSeen {
            lifecycle: Lifecycle::Closed,
            ..RUNNING
        };
        assert_eq!(
            check(&v, closed, &survivor(master(), 42)),
            Err(Refusal::NotRunning)
        );
        let mut s = survivor(master(), 42);
        s.token = "not-hex".into();
        assert_eq!(check(&v, RUNNING, &s), Err(Refusal::BadToken));
        let devnull: std::os::fd::OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        assert_eq!(
            check(&v, RUNNING, &survivor(devnull, 42)),
            Err(Refusal::NotAPty)
        );
    }

    #[test]
    fn a_live_process_must_be_the_keepers_child_on_that_terminal() {
        // This test process is alive, but not its own parent's child on a fresh PTY.
        let me = std::process::id();
        let last = LastSeen {
            lifecycle: Lifecycle::Running,
            pid: Some(me),
        };
        let mut s = survivor(master(), me);
        s.status = None;
        assert_eq!(
            check(&view("A", "S"), last, &s),
            Err(Refusal::NotItsProgram)
        );
    }
}
