//! The keeper: the small process `maxx daemon` runs, with the daemon proper as its child, so
//! that sessions outlive a daemon that dies (kill -9, a panic, the OOM killer).
//!
//! It is a plain `poll` loop over two descriptors — a signalfd (SIGCHLD, SIGTERM, SIGINT,
//! SIGHUP, SIGUSR2) and its end of a `SOCK_SEQPACKET` socketpair to the current daemon — with no
//! async runtime and no threads, and it parses nothing but its own fixed packets
//! (`maxx_protocol::keeper`). It:
//!
//! - is the sessions' subreaper (`PR_SET_CHILD_SUBREAPER`): a daemon's children that outlive
//!   it are re-parented here, not to init;
//! - holds a duplicate of every session's PTY master, sent by the daemon with `SCM_RIGHTS`
//!   when it spawns the session, dropped when the daemon says the surface is closed: while
//!   it is open the terminal never hangs up, and a program whose output nobody reads blocks
//!   in the kernel's PTY buffer instead of losing it;
//! - reaps its children: the daemon (that is how it learns of a death), the session children
//!   re-parented to it (recording their status, and telling a daemon that re-adopted them),
//!   and any other orphan (discarded). While a daemon lives, it reaps its own session
//!   children as before; only orphans are the keeper's;
//! - decides, when the daemon dies, between a restart — a new daemon on a fresh socketpair,
//!   handed every surviving master with its pid, ids, secret and recorded status — and
//!   stopping ([`state::decide`]): a requested stop ends everything as before;
//! - on SIGUSR2 (`maxx daemon upgrade`) has the daemon hand its sessions over and starts the
//!   binary now on disk in its place, falling back to its own build if that one cannot start.
//!
//! Who reaps whom, the messages and what survives which failure: `docs/recovery.md`.

mod state;

use maxx_actors::control_dir::{ControlDir, KEEPER_PID_FILE, LOG_FILE};
use maxx_actors::keeper_link::packet;
use maxx_protocol::keeper::{ChildStatus, FromKeeper, MESSAGE_MAX};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, killpg, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use state::{DaemonEnd, Decision, Facts, Handled, Os, Reaped, Table};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The descriptor a daemon started by the keeper finds its end of the socketpair at
/// (`maxx daemon --keeper-fd 4`); 3 is the detach readiness pipe.
pub const KEEPER_FD: RawFd = 4;
/// Where the readiness pipe of `maxx daemon --detach` sits, for the first daemon only.
const READY_FD: RawFd = 3;
/// The keeper's own build, whatever has replaced the file on disk since it started.
const OWN_BUILD: &str = "/proc/self/exe";
/// Packets read from the daemon per wake-up, so a chatty daemon cannot starve signals.
const PACKETS_PER_WAKE: usize = 256;

/// The kernel, for [`state`].
struct RealOs;

impl Os for RealOs {
    fn is_child(&self, pid: u32) -> bool {
        // WNOWAIT: look, do not reap. ECHILD means it is not (or no longer) ours.
        waitid(
            Id::Pid(Pid::from_raw(pid as i32)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        )
        .is_ok()
    }

    fn signal_group(&mut self, pid: u32, sig: Signal) {
        let _ = killpg(Pid::from_raw(pid as i32), sig);
    }
}

/// The daemon the keeper runs now.
struct Daemon {
    pid: u32,
    /// Not reaped yet: its pid is still its own (after the reap it may name anyone).
    alive: bool,
    /// The keeper's end of this daemon's socketpair; `None` once the daemon closed it.
    link: Option<OwnedFd>,
    facts: Facts,
    /// Packets for the daemon not yet sent (its queue was full), in order.
    outbox: VecDeque<(Vec<u8>, Vec<OwnedFd>)>,
    /// Packets refused from this daemon (the first is logged).
    refused: u32,
}

struct Keeper {
    control_dir: PathBuf,
    /// This binary's arguments, replayed (plus `--keeper-fd`) to start each daemon.
    argv0: OsString,
    args: Vec<OsString>,
    /// The binary's path on disk, as the keeper was started from it: what an upgrade runs.
    exe: PathBuf,
    /// What a restart after a crash runs: the keeper's own build, or the build on disk once
    /// an upgrade to it served.
    program: PathBuf,
    signals: SignalFd,
    table: Table,
    daemon: Daemon,
    /// How the current daemon ended, once reaped.
    ended: Option<DaemonEnd>,
    stop_requested: bool,
    restarts: Vec<Instant>,
    /// Daemons started so far.
    daemons: u32,
    /// keeper.pid holds our pid (written once a daemon first served).
    pid_file: bool,
    /// A daemon of ours said `Ready` before the current one.
    served: bool,
    /// daemon.log when detached (stderr is /dev/null then); stderr otherwise.
    log: Option<std::fs::File>,
    /// `--log-level` is info or more: say so on a requested stop too (restarts and giving
    /// up are always logged).
    verbose: bool,
}

/// Run the keeper for `maxx daemon` on `control_dir`; returns the exit code.
pub fn run(control_dir: &Path, detached: bool, log_level: &str) -> i32 {
    let verbose = !matches!(log_level, "error" | "warn");
    // The detach readiness pipe is the first daemon's to answer on: keep it out of fd 3
    // (close-on-exec) until that daemon is spawned.
    let ready = std::env::var_os("MAXX_READY_FD").and_then(|_| {
        // SAFETY: fcntl on the descriptor our parent placed at 3; we own the result.
        let fd = unsafe { libc::fcntl(READY_FD, libc::F_DUPFD_CLOEXEC, 10) };
        (fd >= 0).then(|| {
            // SAFETY: closing the original; the duplicate stays ours.
            unsafe { libc::close(READY_FD) };
            // SAFETY: a fresh descriptor nobody else owns.
            unsafe { OwnedFd::from_raw_fd(fd) }
        })
    });
    close_inherited(ready.as_ref().map(AsRawFd::as_raw_fd));
    match Keeper::start(control_dir, detached, ready) {
        Ok(mut keeper) => {
            keeper.verbose = verbose;
            keeper.serve()
        }
        Err((e, ready)) => {
            let body =
                maxx_protocol::ErrorBody::internal(format!("the keeper could not start: {e}"))
                    .with_remedy(
                        "see daemon.log in the control dir, or run `maxx daemon` in the foreground",
                    );
            match ready {
                Some(fd) => {
                    let mut f = std::fs::File::from(fd);
                    let _ = writeln!(
                        f,
                        "err {}",
                        serde_json::to_string(&body).unwrap_or_default()
                    );
                }
                None => eprintln!("{}", serde_json::json!({"ok": false, "error": body})),
            }
            1
        }
    }
}

type StartError = (io::Error, Option<OwnedFd>);

impl Keeper {
    fn start(
        control_dir: &Path,
        detached: bool,
        ready: Option<OwnedFd>,
    ) -> Result<Keeper, StartError> {
        let fail = |e: io::Error, ready| -> StartError { (e, ready) };
        // SAFETY: prctl with an integer argument.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(fail(io::Error::last_os_error(), ready));
        }
        raise_fd_limit();
        let mut mask = SigSet::empty();
        for sig in [
            Signal::SIGCHLD,
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
            Signal::SIGUSR2,
        ] {
            mask.add(sig);
        }
        // No thread exists yet: the mask is the process's. A daemon gets an empty one back
        // before it execs (`spawn_daemon`).
        if let Err(e) = mask.thread_block() {
            return Err(fail(e.into(), ready));
        }
        let signals =
            match SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
                Ok(s) => s,
                Err(e) => return Err(fail(e.into(), ready)),
            };
        let log = detached
            .then(|| ControlDir::prepare(control_dir).ok())
            .flatten()
            .and_then(|dir| {
                use std::os::unix::fs::OpenOptionsExt;
                maxx_actors::control_dir::open_regular(
                    &dir.path().join(LOG_FILE),
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .mode(0o600),
                    false,
                )
                .ok()
            });
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_else(|| "maxx".into());
        let mut keeper = Keeper {
            control_dir: control_dir.to_path_buf(),
            argv0,
            args: args.collect(),
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from(OWN_BUILD)),
            program: PathBuf::from(OWN_BUILD),
            signals,
            table: Table::default(),
            daemon: Daemon {
                pid: 0,
                alive: false,
                link: None,
                facts: Facts::default(),
                outbox: VecDeque::new(),
                refused: 0,
            },
            ended: None,
            stop_requested: false,
            restarts: Vec::new(),
            daemons: 0,
            pid_file: false,
            served: false,
            log,
            verbose: true,
        };
        let ready_raw = ready.as_ref().map(AsRawFd::as_raw_fd);
        match keeper.spawn_daemon(ready_raw, Path::new(OWN_BUILD)) {
            Ok(daemon) => keeper.daemon = daemon,
            Err(e) => return Err(fail(e, ready)),
        }
        // The first daemon has its copy; ours closes here.
        drop(ready);
        // Every daemon reads a handoff before it serves; the first one's is empty.
        keeper.hand_off();
        Ok(keeper)
    }

    fn log(&mut self, message: String) {
        let line = format!(
            "{} maxx keeper (pid {}): {message}\n",
            maxx_protocol::time::now_rfc3339(),
            std::process::id()
        );
        match &mut self.log {
            Some(f) => {
                let _ = f.write_all(line.as_bytes());
            }
            None => {
                let _ = io::stderr().write_all(line.as_bytes());
            }
        }
    }

    /// Start a daemon on a fresh socketpair: this binary (`/proc/self/exe`: the same build,
    /// even if the file on disk was replaced) with the keeper's own arguments and
    /// `--keeper-fd`. Only the first one gets the readiness pipe.
    fn spawn_daemon(&mut self, ready: Option<RawFd>, program: &Path) -> io::Result<Daemon> {
        let (mine, theirs) = packet::pair()?;
        // Above 4, so placing it at KEEPER_FD in the child is a real dup2 (which clears
        // close-on-exec) and never lands on the readiness pipe's number.
        let theirs = dup_above(theirs.as_raw_fd(), 10)?;
        let theirs_raw = theirs.as_raw_fd();
        let mut cmd = std::process::Command::new(program);
        cmd.arg0(&self.argv0)
            .args(&self.args)
            .arg("--keeper-fd")
            .arg(KEEPER_FD.to_string());
        if ready.is_none() {
            cmd.env_remove("MAXX_READY_FD");
        }
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // The keeper blocks the signals its signalfd reads; exec keeps a mask.
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                if libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::other("cannot clear the signal mask"));
                }
                if libc::dup2(theirs_raw, KEEPER_FD) == -1 {
                    return Err(io::Error::last_os_error());
                }
                if let Some(r) = ready {
                    if libc::dup2(r, READY_FD) == -1 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        self.daemons += 1;
        // Reaped through waitid below, never through `Child`.
        let pid = child.id();
        drop(child);
        Ok(Daemon {
            pid,
            alive: true,
            link: Some(mine),
            facts: Facts::default(),
            outbox: VecDeque::new(),
            refused: 0,
        })
    }

    /// The loop; returns the exit code.
    fn serve(&mut self) -> i32 {
        loop {
            let now = Instant::now();
            let due = self.table.overdue(&mut RealOs, now);
            if let Err(e) = self.wait_once(due) {
                self.log(format!("poll failed ({e}); stopping"));
                return self.finish(1);
            }
            let Some(end) = self.ended.take() else {
                continue;
            };
            let facts = Facts {
                stop_requested: self.stop_requested,
                served_before: self.served,
                ..self.daemon.facts
            };
            let recent = state::restarts_in_window(&mut self.restarts, Instant::now());
            match state::decide(end, facts, recent) {
                Decision::Exit(code) => {
                    if !(facts.stopping || facts.stop_requested) && self.table.len() > 0 {
                        self.log(format!(
                            "the daemon (pid {}) ended ({end:?}; {recent} restarts within a minute): not restarting it; ending the {} sessions it held",
                            self.daemon.pid,
                            self.table.len()
                        ));
                    }
                    return self.finish(code);
                }
                decision => {
                    self.served |= self.daemon.facts.ready;
                    let (program, why) = match decision {
                        Decision::Upgrade => (self.exe.clone(), "an upgrade was asked"),
                        Decision::FallBack => {
                            self.program = PathBuf::from(OWN_BUILD);
                            (
                                self.program.clone(),
                                "the upgraded build did not start; starting the keeper's own",
                            )
                        }
                        _ => {
                            self.restarts.push(Instant::now());
                            (self.program.clone(), "it died")
                        }
                    };
                    self.log(format!(
                        "the daemon (pid {}) ended ({end:?}: {why}); starting {} with the {} sessions it held",
                        self.daemon.pid,
                        program.display(),
                        self.table.len()
                    ));
                    let mut upgraded = decision == Decision::Upgrade;
                    let spawned = match self.spawn_daemon(None, &program) {
                        // The build on disk cannot even be started (removed, not executable):
                        // the keeper's own takes the sessions, as after one that exits.
                        Err(e) if program != Path::new(OWN_BUILD) => {
                            self.log(format!(
                                "cannot start {} ({e}); starting the keeper's own build",
                                program.display()
                            ));
                            self.program = PathBuf::from(OWN_BUILD);
                            upgraded = false;
                            self.spawn_daemon(None, Path::new(OWN_BUILD))
                        }
                        other => other,
                    };
                    match spawned {
                        Ok(daemon) => self.daemon = daemon,
                        // Not provoked by a test: the keeper's own build (`/proc/self/exe`)
                        // fails to start only when fork or the descriptors fail.
                        Err(e) => {
                            self.log(format!("cannot start a daemon ({e}); stopping"));
                            return self.finish(1);
                        }
                    }
                    self.daemon.facts.upgraded = upgraded;
                    self.hand_off();
                }
            }
        }
    }

    /// One `poll` and whatever it woke for. `due`: when a process group's grace ends.
    fn wait_once(&mut self, due: Option<Instant>) -> nix::Result<()> {
        let timeout = match due {
            None => PollTimeout::NONE,
            Some(t) => {
                let ms = t.saturating_duration_since(Instant::now()).as_millis() + 1;
                PollTimeout::try_from(ms.min(60_000) as i32).unwrap_or(PollTimeout::MAX)
            }
        };
        let (sig_ready, link_events) = {
            let mut fds = vec![PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
            if let Some(link) = &self.daemon.link {
                let mut events = PollFlags::POLLIN;
                if !self.daemon.outbox.is_empty() {
                    events |= PollFlags::POLLOUT;
                }
                fds.push(PollFd::new(link.as_fd(), events));
            }
            match poll(&mut fds, timeout) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => return Ok(()),
                Err(e) => return Err(e),
            }
            let sig_ready = fds[0].any().unwrap_or(false);
            (sig_ready, fds.get(1).and_then(PollFd::revents))
        };
        if sig_ready {
            self.on_signals();
        }
        if let Some(events) = link_events {
            if events.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR) {
                self.read_link();
            }
            if events.contains(PollFlags::POLLOUT) {
                self.flush();
            }
        }
        Ok(())
    }

    fn on_signals(&mut self) {
        while let Ok(Some(info)) = self.signals.read_signal() {
            match Signal::try_from(info.ssi_signo as i32) {
                Ok(Signal::SIGCHLD) => self.reap(),
                Ok(Signal::SIGUSR2) => {
                    // `maxx daemon upgrade`: the daemon hands its sessions over and exits;
                    // the binary on disk takes them.
                    if self.daemon.alive && !self.stop_requested && !self.daemon.facts.handover {
                        self.log(format!(
                            "SIGUSR2: upgrading the daemon (pid {}) to {}",
                            self.daemon.pid,
                            self.exe.display()
                        ));
                        self.daemon.facts.handover = true;
                        let _ = kill(Pid::from_raw(self.daemon.pid as i32), Signal::SIGUSR2);
                    }
                }
                Ok(sig) => {
                    if !self.stop_requested && self.verbose {
                        self.log(format!("{sig}: stopping the daemon and the sessions"));
                    }
                    self.stop_requested = true;
                    if self.daemon.alive {
                        let _ = kill(Pid::from_raw(self.daemon.pid as i32), Signal::SIGTERM);
                    }
                }
                Err(_) => {}
            }
        }
        // SIGCHLDs coalesce, and one may have been pending before the block: always look.
        self.reap();
    }

    /// Reap every child that has exited: the daemon, a session child re-parented here, or a
    /// stray orphan. Each status is read with WNOWAIT first, so a session group being ended
    /// is SIGKILLed while its leader's pid is still held, then reaped.
    fn reap(&mut self) {
        loop {
            let status = match waitid(
                Id::All,
                WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
            ) {
                Ok(WaitStatus::Exited(pid, code)) => (pid, ChildStatus::Code(code)),
                Ok(WaitStatus::Signaled(pid, sig, _)) => (pid, ChildStatus::Signal(sig as i32)),
                _ => break,
            };
            let (pid, status) = status;
            let reaped = if pid.as_raw() as u32 == self.daemon.pid && self.daemon.alive {
                self.daemon.alive = false;
                self.ended = Some(match status {
                    ChildStatus::Code(c) => DaemonEnd::Code(c),
                    ChildStatus::Signal(s) => DaemonEnd::Signal(s),
                });
                Reaped::Stray
            } else {
                self.table.reaped(pid.as_raw() as u32, status, &mut RealOs)
            };
            // Now release the pid.
            let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
            if let Reaped::Session(msg) = reaped {
                if self.daemon.alive && self.daemon.link.is_some() {
                    self.queue(msg, Vec::new());
                }
            }
        }
        self.flush();
    }

    fn read_link(&mut self) {
        let mut buf = [0u8; MESSAGE_MAX];
        for _ in 0..PACKETS_PER_WAKE {
            let Some(link) = &self.daemon.link else {
                return;
            };
            let received = match packet::recv(link.as_fd(), &mut buf) {
                Ok(Some(r)) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Ok(None) | Err(_) => {
                    // The daemon closed its end (it is exiting): its death comes by SIGCHLD.
                    self.daemon.link = None;
                    self.daemon.outbox.clear();
                    return;
                }
            };
            let was_ready = self.daemon.facts.ready;
            let handled = self.table.handle_packet(
                &buf[..received.len],
                received.fds,
                received.truncated,
                &mut self.daemon.facts,
                &mut RealOs,
                Instant::now(),
            );
            if let Handled::Refused(why) = handled {
                self.daemon.refused += 1;
                if self.daemon.refused == 1 {
                    self.log(format!(
                        "refused {why} from the daemon (pid {})",
                        self.daemon.pid
                    ));
                }
            }
            if self.daemon.facts.ready && !was_ready {
                self.write_pid_file();
                if self.daemon.facts.upgraded {
                    self.program = self.exe.clone();
                }
            }
        }
    }

    /// Queue the survivors (and the end marker) for the daemon just started.
    fn hand_off(&mut self) {
        for (msg, fds) in self.table.handoff(&RealOs, self.daemons - 1) {
            self.queue(msg, fds);
        }
        let total = self.daemon.outbox.len();
        self.flush();
        // The rest goes as the daemon reads (POLLOUT): said, because a daemon that never
        // reads leaves them here.
        let waiting = self.daemon.outbox.len();
        if waiting > 0 {
            self.log(format!(
                "the link to the daemon (pid {}) is full: {waiting} of {total} handover packets wait for it to read",
                self.daemon.pid
            ));
        }
    }

    fn queue(&mut self, msg: FromKeeper, fds: Vec<OwnedFd>) {
        // Every field came from a daemon's packet that decoded, so it encodes.
        if let Some(bytes) = msg.encode() {
            self.daemon.outbox.push_back((bytes, fds));
        }
    }

    fn flush(&mut self) {
        let Some(link) = &self.daemon.link else {
            self.daemon.outbox.clear();
            return;
        };
        while let Some((bytes, fds)) = self.daemon.outbox.front() {
            let fds: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
            match packet::send(link.as_fd(), bytes, &fds) {
                Ok(()) => {
                    self.daemon.outbox.pop_front();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.daemon.outbox.clear();
                    return;
                }
            }
        }
    }

    /// `keeper.pid`, once a daemon served (so a keeper whose daemon was refused as
    /// `already_running` never overwrites the running keeper's file).
    fn write_pid_file(&mut self) {
        if self.pid_file {
            return;
        }
        if let Ok(dir) = ControlDir::open(&self.control_dir) {
            let pid = format!("{}\n", std::process::id());
            self.pid_file = dir.write_private(KEEPER_PID_FILE, pid.as_bytes()).is_ok();
        }
    }

    /// Stop: end the session groups the keeper is the parent of, drop every master, wait (a
    /// grace, then SIGKILL, then one more) for those groups' leaders, remove keeper.pid.
    fn finish(&mut self, code: i32) -> i32 {
        let start = Instant::now();
        self.table.end_all(&mut RealOs, start);
        self.daemon.link = None;
        let give_up = start + state::KILL_GRACE * 3;
        while self.table.ending() > 0 && Instant::now() < give_up {
            let due = self.table.overdue(&mut RealOs, Instant::now());
            if self.wait_once(due.map(|d| d.min(give_up))).is_err() {
                break;
            }
        }
        if self.pid_file {
            let path = self.control_dir.join(KEEPER_PID_FILE);
            let ours = std::fs::read_to_string(&path)
                .is_ok_and(|s| s.trim() == std::process::id().to_string());
            if ours {
                let _ = std::fs::remove_file(path);
            }
        }
        code
    }
}

/// Close every descriptor above stderr that whoever started us left open (except the
/// readiness pipe): the keeper runs for as long as the sessions do, and each daemon it starts
/// would inherit them too.
fn close_inherited(keep: Option<RawFd>) {
    let close = |from: RawFd, to: RawFd| {
        if from <= to {
            // SAFETY: close_range on a range of our own descriptors; nothing else holds them
            // yet (no thread, no file opened since main started).
            unsafe { libc::syscall(libc::SYS_close_range, from as u32, to as u32, 0u32) };
        }
    };
    match keep {
        Some(fd) => {
            close(3, fd - 1);
            close(fd + 1, RawFd::MAX);
        }
        None => close(3, RawFd::MAX),
    }
}

/// A close-on-exec duplicate of `fd` numbered at least `min`.
fn dup_above(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a valid descriptor; the result is a new one we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// The keeper holds a master per session: lift the soft descriptor limit to the hard one,
/// as the daemon does.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}
