//! A session's PTY and child process, driven by one tokio task (the *pump*), not a thread.
//!
//! portable-pty opens the PTY; the child is started with `posix_spawn` (setsid, controlling
//! tty, cwd, env).
//! After that the daemon owns the I/O itself: the master is duplicated, made non-blocking
//! and registered with tokio (`AsyncFd`), and the child's exit is observed through a
//! pidfd, so 1,000 sessions cost 1,000 small tasks and no threads.
//!
//! The pump reads output in chunks and drains each into the session's screen model (which
//! may write answers to the program's terminal queries back through the input queue). While
//! someone is attached it also hands the chunk to the session actor with a credit from a
//! bounded semaphore, and while the screen's backlog is full it stops reading: either way the
//! kernel's PTY buffer pushes back on the child — memory never grows without bound.
//! Input is queued to the pump and written when the master is writable, so a child that
//! does not read its input can never block the actor.
//!
//! A `Pty` is made either by spawning ([`Pty::spawn`]: the daemon's own child, reaped by the
//! daemon) or by re-adopting a survivor the keeper handed over ([`Pty::adopt`]: the keeper's
//! child, whose exit status the keeper reports and whose group the keeper ends). Both wrap
//! the master descriptor directly; portable-pty only opens the pair.
//!
//! Layout: this file holds [`Pty`] and its pump; `spawn.rs` starts the child on the tty;
//! `group.rs` ends the session's process group and tracks the groups still being ended;
//! `master.rs` the master's ioctls.

mod gate;
mod group;
mod master;
mod spawn;

pub use group::wait_for_reapers;
pub use spawn::{pty_exhausted, PtyExhausted};

use group::{end_group, parent_pid, Reaper};
use master::Master;
use spawn::{open_failed, set_iutf8, spawn_on_tty};

use crate::keeper_link::Keeper;
use maxx_protocol::keeper::ChildStatus;

use crate::screen::ScreenEvent;
use crate::screen_model::store::{Staging, ARM_MAX};
use crate::screen_model::{Drained, ScreenModel};
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use portable_pty::{native_pty_system, PtySize};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// Largest chunk read from the master at once.
const READ_CHUNK: usize = 64 * 1024;
// The pump reads into the screen memory's staging area when there is one: the same size.
const _: () = assert!(READ_CHUNK == crate::screen_model::store::STAGE_BYTES);
/// Forwarded chunks in flight between the pump and the actor before the pump stops reading.
const READ_CREDITS: usize = 16;
/// Input bytes that may wait for a child that is not reading before writes are refused.
pub const INPUT_QUEUE_MAX: usize = 1024 * 1024;
/// How long a hung-up child may take to exit before it is killed.
pub const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// What to run and how.
pub struct SpawnSpec {
    /// Shell command (`/bin/sh -c`); `None` runs the user's login shell.
    pub command: Option<String>,
    /// Working directory (validated by the caller).
    pub cwd: PathBuf,
    /// Environment added to the daemon's own, in order; later entries win.
    pub env: Vec<(String, String)>,
    /// PTY columns.
    pub cols: u16,
    /// PTY rows.
    pub rows: u16,
}

/// What the pump reports to its session (output itself goes to the [`ScreenModel`]).
pub enum PumpEvent {
    /// A chunk of output for the people attached (the terminal queries in it cut out), with
    /// the stream offset just past the raw chunk; drop the permit once it is processed.
    Output(Vec<u8>, u64, OwnedSemaphorePermit),
    /// Announcements the output carried (title, OSC 133 D), in order.
    Screen(Vec<ScreenEvent>),
    /// The child's pidfd became readable: call [`Pty::reap`].
    ChildExited,
}

/// How the child ended, as the kernel reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitInfo {
    /// `exit(code)`.
    Code(i32),
    /// Killed by a signal, e.g. `SIGKILL`.
    Signal(String),
    /// It ended, but nobody could say how: a re-adopted child whose keeper is gone (its
    /// status went to whoever reaped it).
    Unknown,
}

impl From<ChildStatus> for ExitInfo {
    fn from(status: ChildStatus) -> ExitInfo {
        match status {
            ChildStatus::Code(c) => ExitInfo::Code(c),
            ChildStatus::Signal(n) => ExitInfo::Signal(match Signal::try_from(n) {
                Ok(sig) => sig.as_str().to_string(),
                Err(_) => format!("SIG{n}"),
            }),
        }
    }
}

/// Who the child's parent is, which decides who reaps it and who ends its group.
enum Parent {
    /// The daemon spawned it: the daemon reaps it (pidfd + `waitid`) and ends its group.
    Daemon,
    /// A survivor re-adopted from the keeper, which is its parent: the keeper reaps it and
    /// reports the status (kept here by the pump), and ends its group on `Close`.
    Keeper(Arc<std::sync::Mutex<Option<ExitInfo>>>),
}

/// The keeper holding a duplicate of this master, and the surface it is filed under.
struct Kept {
    keeper: Keeper,
    surface_id: String,
    /// Set once the surface is closed, under the lock, so a registration of the screen
    /// memory by the pump (which shares this, see [`Keep`]) never follows the `Close`.
    closed: std::sync::Mutex<bool>,
}

/// What a spawn needs to have the keeper hold its master (so the program outlives a daemon
/// crash) and, from the first output on, its screen memory.
pub struct Keep {
    pub keeper: Keeper,
    pub session_id: String,
    pub surface_id: String,
    /// The surface's registration secret (the keeper hands it to the next daemon).
    pub token: String,
}

/// Resolves when the child has exited: `None` for the daemon's own child (read the status
/// with `waitid`), the status for a keeper's child.
type ChildGone = Pin<Box<dyn std::future::Future<Output = Option<ExitInfo>> + Send>>;

struct InputChunk {
    bytes: Vec<u8>,
    done: oneshot::Sender<io::Result<()>>,
}

/// The live PTY of a session. Dropping it stops the pump, hangs up the terminal and
/// kills the child's process group.
pub struct Pty {
    // Field order is drop order: stop the pump before the master fd closes.
    pump: JoinHandle<()>,
    input: mpsc::UnboundedSender<InputChunk>,
    /// Bytes queued for the child and not yet written (bounded by [`INPUT_QUEUE_MAX`]).
    queued: Arc<std::sync::atomic::AtomicUsize>,
    master: Master,
    pid: u32,
    parent: Parent,
    /// Set once the keeper holds this master: told when the surface goes.
    kept: Option<Arc<Kept>>,
    /// The child is `/bin/sh -c COMMAND`, which dash forks rather than execs: the command's
    /// own process (say the interactive shell it started) is the child's child.
    wrapped: bool,
    reaped: bool,
    /// The child's process group, registered from spawn until it has been ended, so a
    /// stopping daemon waits for (and at worst SIGKILLs) every group it started — even one
    /// whose `Pty` was never dropped.
    group: Option<Reaper>,
    /// The daemon's own child's pidfd (registered with the runtime), from spawn until its
    /// group has been ended.
    pidfd: Option<Arc<AsyncFd<OwnedFd>>>,
}

impl Pty {
    /// Open a PTY, spawn the child in it and start the pump, which drains output into
    /// `model` (as surface `generation`) and reports to `sink`. `sink` returns false once
    /// nobody listens, which ends the pump.
    ///
    /// `keep`: the keeper is handed a duplicate of the master now (queued on the link, not
    /// waited for), and the surface's screen memory once there is output to put in it: at
    /// the first readiness the pump makes the memory, registers the master again with it
    /// and reads nothing until that packet was sent (what the program writes meanwhile
    /// waits in the kernel's PTY buffer). So no output is ever read that a daemon killed
    /// at that instant would leave outside both the kernel and the keeper's memory, and a
    /// spawn costs no memory map, no page and no descriptor for a screen until it prints.
    pub fn spawn<F>(
        spec: SpawnSpec,
        model: Arc<ScreenModel>,
        generation: u64,
        keep: Option<Keep>,
        sink: F,
    ) -> io::Result<Pty>
    where
        F: Fn(PumpEvent) -> bool + Send + Sync + 'static,
    {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: spec.rows,
                cols: spec.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(open_failed)?;
        let tty = pair
            .master
            .tty_name()
            .ok_or_else(|| io::Error::other("the PTY has no slave name"))?;
        let raw = pair
            .master
            .as_raw_fd()
            .ok_or_else(|| io::Error::other("PTY master has no fd"))?;
        // Our own descriptor of the master; portable-pty's closes with the pair below.
        let master = Master::new(dup_cloexec(raw)?);
        set_iutf8(raw)?;
        let pid = spawn_on_tty(&spec, &tty)?;
        let group = Reaper::new(Pid::from_raw(pid as i32));
        let wrapped = spec.command.is_some();
        // The reader only sees EOF once every slave fd is closed, ours included.
        drop(pair);
        // Kept until the session's group is ended (`end_group` waits on it too): dropping it
        // at the exit cost an `epoll_ctl` and the pidfd's teardown inside a burst of exits.
        let pidfd = Arc::new(register(pidfd_open(pid)?)?);
        let watched = pidfd.clone();
        let gone: ChildGone = Box::pin(async move {
            let _ = watched.readable().await;
            None
        });
        let mut kept = None;
        let lazy = match keep {
            Some(k) => {
                k.keeper.register(
                    &k.session_id,
                    &k.surface_id,
                    pid,
                    &k.token,
                    master.fd().as_fd(),
                    None,
                );
                let shared = Arc::new(Kept {
                    keeper: k.keeper,
                    surface_id: k.surface_id,
                    closed: Default::default(),
                });
                kept = Some(shared.clone());
                Lazy::Make(MakeScreen {
                    kept: shared,
                    session_id: k.session_id,
                    token: k.token,
                    pid,
                })
            }
            None => Lazy::Ready,
        };
        let mut pty = Pty::start(
            master,
            pid,
            wrapped,
            Parent::Daemon,
            gone,
            model,
            generation,
            lazy,
            sink,
        )?;
        pty.group = Some(group);
        pty.pidfd = Some(pidfd);
        pty.kept = kept;
        Ok(pty)
    }

    /// Take over a program that outlived the previous daemon: `master` is its PTY master
    /// as the keeper held it, `pid` the keeper's child, `status` how it ended if it already
    /// did. The pump starts reading where the last daemon stopped: what the program wrote
    /// meanwhile waited in the kernel's PTY buffer. `wrapped`: the record has a command (so
    /// the child is its `/bin/sh -c` wrapper).
    #[allow(clippy::too_many_arguments)]
    pub fn adopt<F>(
        master: OwnedFd,
        pid: u32,
        status: Option<ChildStatus>,
        wrapped: bool,
        keeper: Keeper,
        surface_id: String,
        model: Arc<ScreenModel>,
        generation: u64,
        sink: F,
    ) -> io::Result<Pty>
    where
        F: Fn(PumpEvent) -> bool + Send + Sync + 'static,
    {
        let slot = Arc::new(std::sync::Mutex::new(None));
        let gone: ChildGone = match status {
            Some(status) => Box::pin(async move { Some(status.into()) }),
            None => {
                let exit = keeper.exit_of(&surface_id);
                // The keeper has not reaped it, so the pid is still this program's.
                let pidfd = pidfd_open(pid).and_then(register).ok();
                Box::pin(async move {
                    match exit.await {
                        Ok(status) => Some(status.into()),
                        Err(_) => {
                            // The keeper is gone: the kernel still says when, not how.
                            if let Some(pidfd) = pidfd {
                                let _ = pidfd.readable().await;
                            }
                            Some(ExitInfo::Unknown)
                        }
                    }
                })
            }
        };
        let master = Master::new(master);
        let parent = Parent::Keeper(slot);
        let mut pty = Pty::start(
            master,
            pid,
            wrapped,
            parent,
            gone,
            model,
            generation,
            Lazy::Ready,
            sink,
        )?;
        pty.kept = Some(Arc::new(Kept {
            keeper,
            surface_id,
            closed: Default::default(),
        }));
        Ok(pty)
    }

    /// The common part: a non-blocking duplicate of the master under tokio, the input queue,
    /// the answer sink, and the pump.
    #[allow(clippy::too_many_arguments)]
    fn start<F>(
        master: Master,
        pid: u32,
        wrapped: bool,
        parent: Parent,
        gone: ChildGone,
        model: Arc<ScreenModel>,
        generation: u64,
        lazy: Lazy,
        sink: F,
    ) -> io::Result<Pty>
    where
        F: Fn(PumpEvent) -> bool + Send + Sync + 'static,
    {
        let io_fd = register(dup_nonblocking(master.fd().as_raw_fd())?)?;
        let slot = match &parent {
            Parent::Keeper(slot) => Some(slot.clone()),
            Parent::Daemon => None,
        };
        let (input, input_rx) = mpsc::unbounded_channel();
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // The answers to the program's terminal queries share the input queue (and its
        // bound: a program that floods queries and never reads loses answers, not memory).
        let answers = input.clone();
        let answers_queued = queued.clone();
        model.set_answer_sink(
            generation,
            Box::new(move |bytes: Vec<u8>| {
                use std::sync::atomic::Ordering;
                let len = bytes.len();
                if answers_queued.fetch_add(len, Ordering::AcqRel) + len > INPUT_QUEUE_MAX {
                    answers_queued.fetch_sub(len, Ordering::AcqRel);
                    return;
                }
                let (done, _) = oneshot::channel();
                if answers.send(InputChunk { bytes, done }).is_err() {
                    answers_queued.fetch_sub(len, Ordering::AcqRel);
                }
            }),
        );
        let screen = match (model.staging(generation), lazy) {
            (None, Lazy::Ready) => None,
            (staging, lazy) => {
                let slot = ScreenSlot {
                    staging: std::sync::OnceLock::new(),
                    lazy: std::sync::Mutex::new(lazy),
                    settled: Default::default(),
                };
                if let Some(s) = staging {
                    let _ = slot.staging.set(s);
                }
                Some(Box::new(slot))
            }
        };
        let output = Output {
            screen,
            model,
            generation,
            credits: Arc::new(Semaphore::new(READ_CREDITS)),
        };
        let gone: ChildGone = Box::pin(async move {
            let info = gone.await;
            if let (Some(slot), Some(info)) = (slot, &info) {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.clone());
            }
            info
        });
        let pump = tokio::spawn(pump(io_fd, gone, input_rx, queued.clone(), output, sink));
        HELD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Pty {
            pump,
            input,
            queued,
            master,
            pid,
            parent,
            kept: None,
            wrapped,
            reaped: false,
            group: None,
            pidfd: None,
        })
    }

    /// Hand the keeper a duplicate of the master, so this program outlives a daemon crash;
    /// the keeper is told when the surface goes (drop).
    /// `screen`: the session's screen memory, held with the master and handed back with it.
    pub fn keep(
        &mut self,
        keeper: Keeper,
        session_id: &str,
        surface_id: &str,
        token: &str,
        screen: Option<OwnedFd>,
    ) {
        keeper.register(
            session_id,
            surface_id,
            self.pid,
            token,
            self.master.fd().as_fd(),
            screen.as_ref().map(AsFd::as_fd),
        );
        self.kept = Some(Arc::new(Kept {
            keeper,
            surface_id: surface_id.to_string(),
            closed: Default::default(),
        }));
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Queue bytes for the child's input; the receiver resolves once they are written to
    /// the kernel's tty queue.
    pub fn write(&self, bytes: Vec<u8>) -> oneshot::Receiver<io::Result<()>> {
        use std::sync::atomic::Ordering;
        let (done, rx) = oneshot::channel();
        let len = bytes.len();
        if self.queued.fetch_add(len, Ordering::AcqRel) + len > INPUT_QUEUE_MAX {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            let _ = done.send(Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the program is not reading its input",
            )));
            return rx;
        }
        if let Err(mpsc::error::SendError(chunk)) = self.input.send(InputChunk { bytes, done }) {
            let _ = chunk.done.send(Err(io::Error::other("the PTY is closed")));
        }
        rx
    }

    /// Collect the child's exit status after [`PumpEvent::ChildExited`]. `None` if it has
    /// not exited (or was already reaped).
    pub fn reap(&mut self) -> Option<ExitInfo> {
        if self.reaped {
            return None;
        }
        if let Parent::Keeper(slot) = &self.parent {
            let info = slot.lock().unwrap_or_else(|e| e.into_inner()).take()?;
            self.reaped = true;
            return Some(info);
        }
        // WNOWAIT: take the status but leave the zombie, so the child's pid — its process
        // group's id — stays allocated until Drop has signalled the group (see `end_group`).
        match waitid(
            Id::Pid(Pid::from_raw(self.pid as i32)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ) {
            Ok(WaitStatus::Exited(_, code)) => {
                self.reaped = true;
                Some(ExitInfo::Code(code))
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                self.reaped = true;
                Some(ExitInfo::Signal(sig.as_str().to_string()))
            }
            _ => None,
        }
    }

    /// Whether the child was reaped.
    pub fn reaped(&self) -> bool {
        self.reaped
    }

    /// Resize the PTY; returns the size the kernel reports afterwards.
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<maxx_protocol::screen::Size> {
        self.master.resize(cols, rows)?;
        let (cols, rows) = self.master.size()?;
        Ok(maxx_protocol::screen::Size { cols, rows })
    }

    /// Foreground process group of the terminal (`tcgetpgrp` on the master).
    pub fn foreground_pgrp(&self) -> Option<i32> {
        self.master.foreground_pgrp()
    }

    /// Whether the terminal's foreground process group is the session's own program (kernel
    /// facts only): the child's group (the child is a session leader, so pid = pgid), or,
    /// when the child is the `/bin/sh -c` wrapper of a command, a group led by one of the
    /// wrapper's own children (the shell the command started, with job control). A program
    /// that shell started leads a group whose parent is that shell: not ours.
    pub fn foreground_is_own(&self) -> bool {
        let child = self.pid as i32;
        match self.foreground_pgrp() {
            Some(pgrp) if pgrp == child => true,
            Some(pgrp) if self.wrapped => parent_pid(pgrp) == Some(child),
            _ => false,
        }
    }

    /// Signal the terminal's foreground process group (falling back to the child's own).
    pub fn signal_foreground(&self, sig: Signal) -> io::Result<()> {
        let pgrp = self
            .foreground_pgrp()
            .filter(|p| *p > 0)
            .unwrap_or(self.pid as i32);
        killpg(Pid::from_raw(pgrp), sig).map_err(io::Error::from)
    }

    /// Signal the child's process group (the child is a session leader, so pgid = pid).
    pub fn signal_child_group(&self, sig: Signal) {
        if !self.reaped {
            let _ = killpg(Pid::from_raw(self.pid as i32), sig);
        }
    }
}

/// PTYs this daemon holds: one per session with a surface, an exited one's included (it
/// keeps its master, and the terminal, until it is closed). Named in `pty_exhausted`.
static HELD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// See [`HELD`].
fn held() -> usize {
    HELD.load(std::sync::atomic::Ordering::Relaxed)
}

impl Drop for Pty {
    fn drop(&mut self) {
        HELD.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.pump.abort();
        // The session is going away (close, cancel, restart, daemon stop or a failed
        // actor): nobody is left to read this group's output. The keeper drops its master;
        // it ends the group of a child it is the parent of.
        let keeper_ends_it = match (&self.kept, &self.parent) {
            (Some(kept), Parent::Keeper(_)) => {
                kept.close();
                kept.keeper.connected()
            }
            (Some(kept), Parent::Daemon) => {
                kept.close();
                false
            }
            (None, _) => false,
        };
        match self.parent {
            Parent::Daemon => {
                end_group(self.pid, self.reaped, self.group.take(), self.pidfd.take())
            }
            // The keeper is gone: its orphan is init's now; end the group without reaping.
            Parent::Keeper(_) if !keeper_ends_it && !self.reaped => {
                end_group(self.pid, false, None, None)
            }
            Parent::Keeper(_) => {}
        }
    }
}

impl Kept {
    /// Tell the keeper the surface is gone; after this the pump registers nothing more.
    fn close(&self) {
        let mut closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        *closed = true;
        self.keeper.close(&self.surface_id);
    }
}

fn dup_cloexec(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a valid fd; the result is a new fd we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

fn dup_nonblocking(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a valid fd; the result is a new fd we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is a fresh descriptor owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(dup) };
    // O_NONBLOCK is a property of the open file description, shared with the master.
    // portable-pty never reads or writes the master for us, so that is safe.
    let flags = unsafe { libc::fcntl(dup, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(dup, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned)
}

/// Register an owned descriptor with tokio's reactor (the keeper link uses it too).
pub(crate) fn register_fd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    register(fd)
}

/// Register an owned descriptor with tokio's reactor.
pub(super) fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the OwnedFd is moved into the AsyncFd, which keeps it open (and is the only
    // owner) until it deregisters and drops it.
    unsafe { AsyncFd::register(fd).map_err(io::Error::from) }
}

pub(super) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

thread_local! {
    /// The pump's read buffer, one per runtime thread rather than one per session: a session
    /// that prints a prompt and then idles holds no 64 KiB buffer.
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0u8; READ_CHUNK].into_boxed_slice());
}

/// One `read` of the master into `rest` (the buffer's bytes from `filled` on). Into the
/// staging area it is armed first (see `screen_model::store`, "The armed read"): for exactly
/// what is waiting, so a kill inside the `read` leaves a region the next daemon can tell
/// apart. A read that took every byte counted says so ([`Read::emptied`]: the usual end of
/// a drain, see below). Nothing waiting and the slave side not hung up (`hup`): `WouldBlock`
/// without a `read`. Nothing waiting after a hang-up: 1 byte, which reports EOF or EIO, and
/// cannot be a short copy that looks like a cut one. The caller publishes the result
/// ([`Staging::staged`]).
///
/// Why ending the drain there loses nothing (neither asking `FIONREAD` again nor the `read`
/// that would say `EAGAIN`): bytes reach the count `FIONREAD` reports (the line discipline's
/// queue) before the wake-up that makes the master readable, so anything not counted yet
/// brings its own readiness event, which the runtime records under a newer tick than the one
/// this drain clears.
fn read_once(
    fd: RawFd,
    staging: Option<&Staging>,
    hup: bool,
    mut rest: &mut [u8],
    filled: usize,
) -> io::Result<Read> {
    let mut counted = None;
    if let Some(s) = staging {
        let avail = pending_input(fd);
        // Only a count of zero ends the drain: a failed `FIONREAD` reads (1 byte) as before.
        if avail == Some(0) && !hup {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let want = avail.unwrap_or(0).clamp(1, rest.len().min(ARM_MAX));
        counted = avail.filter(|&a| a == want && !hup);
        rest = &mut rest[..want];
        s.arm(rest, filled);
    }
    // SAFETY: reading into a valid, exclusively borrowed slice.
    let n = unsafe { libc::read(fd, rest.as_mut_ptr() as *mut libc::c_void, rest.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        let n = n as usize;
        Ok(Read {
            n,
            emptied: n > 0 && counted == Some(n) && n < LDISC_FULL,
        })
    }
}

/// A full line discipline: n_tty's read buffer is 4 KiB (`N_TTY_BUF_SIZE`) and it keeps one
/// byte of it free, so `FIONREAD` counts at most 4,095 (measured; the flood test below). A
/// count that filled it says the program is ahead of the reader (a flood), and more is likely
/// on its way: the drain asks again, to fill its chunk, rather than end.
const LDISC_FULL: usize = 4095;

/// What one [`read_once`] got.
struct Read {
    /// Bytes read; 0 is EOF.
    n: usize,
    /// The read took every byte `FIONREAD` counted, and the count was below
    /// [`LDISC_FULL`]: the queue was empty after it, as far as this readiness goes (see
    /// [`read_once`]), so the drain ends without asking again.
    emptied: bool,
}

/// Read everything the master has now, up to [`READ_CHUNK`] bytes (the tty hands out at most
/// ~4 KiB per `read`, so one chunk per readiness instead of one per `read`), and drain it into
/// the screen model before the next await. `None` on EOF or EIO (slave closed).
async fn read_chunk(io: &AsyncFd<OwnedFd>, output: &Output) -> Option<Drained> {
    loop {
        // The pump is the master's only reader and writer: the registration's own waker slots
        // serve it (no waiter queued and unlinked under the registration's lock each wake).
        let mut guard = std::future::poll_fn(|cx| io.poll_read_ready(cx))
            .await
            .ok()?;
        if !output.ready() {
            if hung_up_empty(guard.ready(), || pending_input(io.as_raw_fd())) {
                // The slave side hung up with nothing to read: no screen memory for that (the
                // read would answer EIO). A program that printed nothing makes none at its
                // exit — 1,000 exiting at once made 1,000 memfds, mapped them and waited for
                // the keeper to have each before their exits could be reported.
                return None;
            }
            // Boxed: its state is not carried by every idle session's pump.
            Box::pin(output.screen_ready(io.get_ref().as_fd())).await;
        }
        let (drained, closed) = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let staging = output.staging();
            let buf: &mut [u8] = match staging {
                Some(s) => {
                    s.begin();
                    // SAFETY: this pump is the staging area's only user, and the slice is
                    // dropped before the next `begin`.
                    unsafe { s.buf() }
                }
                None => &mut scratch[..],
            };
            let mut filled = 0;
            let mut closed = false;
            let hup = guard.ready().is_read_closed();
            while filled < buf.len() {
                let result = guard.try_io(|fd| {
                    read_once(fd.as_raw_fd(), staging, hup, &mut buf[filled..], filled)
                });
                match result {
                    Ok(Ok(Read { n: 0, .. })) => {
                        closed = true;
                        break;
                    }
                    Ok(Ok(Read { n, emptied })) => {
                        filled += n;
                        if let Some(s) = staging {
                            s.staged(filled);
                        }
                        if emptied {
                            // Everything counted is read: what comes after the count brings
                            // its own readiness, under a newer tick than the one cleared here
                            // (an agent's redraw costs one `FIONREAD` this way, not two).
                            guard.clear_ready();
                            break;
                        }
                    }
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(Err(_)) => {
                        // EIO: the slave side is gone (what was read before still counts).
                        closed = true;
                        break;
                    }
                    Err(_would_block) => break,
                }
            }
            let drained = (filled > 0).then(|| output.drain(&buf[..filled]));
            if let (Some(s), true) = (staging, filled > 0) {
                s.logged(filled);
            }
            (drained, closed)
        });
        if drained.is_some() {
            return drained;
        }
        if closed {
            return None;
        }
    }
}

/// Whether a readiness says the slave side hung up with nothing left to read. Nothing can be
/// missed: no one is left to write, and the kernel's poll that said "hung up" (`n_tty_poll`)
/// first moved what was in flight into the queue (`tty_buffer_flush_work`) and then said
/// whether the queue held anything, in the same answer: hung up and not readable is an empty
/// queue that stays empty. Only a readiness that says readable too (perhaps from an earlier
/// answer) asks `pending` (`FIONREAD`): on a hung-up tty that ioctl waits for the terminal's
/// locks the hang-up holds (9% of a burst's daemon samples).
fn hung_up_empty(ready: tokio::io::Ready, pending: impl FnOnce() -> Option<usize>) -> bool {
    // `Ready::is_readable` also says yes to a hang-up: the bit itself is asked.
    let input = !(ready & tokio::io::Ready::READABLE).is_empty();
    ready.is_read_closed() && (!input || pending() == Some(0))
}

/// Bytes waiting in the master's input queue (`FIONREAD`); `None` if it cannot say.
fn pending_input(fd: RawFd) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which outlives the call.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    (r >= 0).then_some(n.max(0) as usize)
}

/// Write as much of `bytes` as the master takes now. Returns bytes written.
async fn write_some(io: &AsyncFd<OwnedFd>, bytes: &[u8]) -> io::Result<usize> {
    loop {
        let mut guard = std::future::poll_fn(|cx| io.poll_write_ready(cx)).await?;
        match guard.try_io(|fd| {
            // SAFETY: writing from a valid slice.
            let n = unsafe {
                libc::write(
                    fd.as_raw_fd(),
                    bytes.as_ptr() as *const libc::c_void,
                    bytes.len(),
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }) {
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(r) => return r,
            Err(_would_block) => continue,
        }
    }
}

/// The screen memory a spawned surface gets at its first output (see [`Pty::spawn`]).
enum Lazy {
    /// Nothing to make: the memory exists (`Output::staging`), or none is wanted (no keeper).
    Ready,
    /// Make it at the first readiness, before the first `read`.
    Make(MakeScreen),
    /// Made and registered; no `read` before this packet was sent. Kept here while it is
    /// awaited, so a pump future dropped mid-wait (a `select!` taking another branch) finds
    /// it again.
    Sending(oneshot::Receiver<()>),
}

/// What the pump needs to register the screen memory with the master.
struct MakeScreen {
    /// The keeper and the surface, shared with the `Pty` (which closes it).
    kept: Arc<Kept>,
    session_id: String,
    token: String,
    pid: u32,
}

impl MakeScreen {
    /// Make the screen memory and register it with the master: the packet is queued on the
    /// link, the receiver resolves once it was sent. `None`: nothing to wait for (no memory
    /// could be made — this surface's screen then does not survive a crash, as without a
    /// keeper — or the surface is already closed).
    fn open(
        self,
        output: &Output,
        slot: &ScreenSlot,
        master: std::os::fd::BorrowedFd<'_>,
    ) -> Option<oneshot::Receiver<()>> {
        let (staging, fd) = match output.model.open_screen(output.generation) {
            Ok(Some(made)) => made,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(
                    session_id = %self.session_id,
                    error = %e,
                    "no screen memory for this surface; its screen will not survive a daemon crash"
                );
                return None;
            }
        };
        let kept = &self.kept;
        let closed = kept.closed.lock().unwrap_or_else(|e| e.into_inner());
        if *closed {
            return None;
        }
        let _ = slot.staging.set(staging);
        // The same surface and pid again: the keeper replaces its entry with this one (the
        // master, and now the memory), as any keeper build does.
        kept.keeper.register(
            &self.session_id,
            &kept.surface_id,
            self.pid,
            &self.token,
            master,
            Some(fd.as_fd()),
        );
        Some(kept.keeper.flushed())
    }
}

/// Puts a registration still being awaited back, if the wait is dropped.
struct PutBack<'a> {
    slot: &'a std::sync::Mutex<Lazy>,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for PutBack<'_> {
    fn drop(&mut self) {
        if let Some(rx) = self.rx.take() {
            *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Lazy::Sending(rx);
        }
    }
}

/// The pump's side of the session's screen memory (boxed in [`Output`]: every session's
/// pump task is allocated at its full size, and these do not fit its size class).
/// `repr(C)`: what every redraw reads (`settled`, `staging`) first, in one cache line.
#[repr(C)]
struct ScreenSlot {
    /// `lazy` was seen [`Lazy::Ready`], which it stays: later wake-ups skip its lock.
    settled: std::sync::atomic::AtomicBool,
    /// The read buffer in the screen memory, once it has one: a chunk read and not drained
    /// yet survives the daemon there.
    staging: std::sync::OnceLock<Staging>,
    /// Whether the screen memory must still be made (or its registration awaited) before
    /// the next `read`.
    lazy: std::sync::Mutex<Lazy>,
}

/// Where the pump puts output.
struct Output {
    /// `None`: no screen memory, now or later (no keeper).
    screen: Option<Box<ScreenSlot>>,
    model: Arc<ScreenModel>,
    generation: u64,
    /// Bounds forwarded chunks the session actor has not processed yet.
    credits: Arc<Semaphore>,
}

impl Output {
    /// Output is waiting: make sure the screen memory exists and the keeper has it before
    /// anything is read (see [`Pty::spawn`]). Cancel-safe.
    async fn screen_ready(&self, master: std::os::fd::BorrowedFd<'_>) {
        let Some(slot) = self.screen.as_deref() else {
            return;
        };
        loop {
            let state = std::mem::replace(
                &mut *slot.lazy.lock().unwrap_or_else(|e| e.into_inner()),
                Lazy::Ready,
            );
            match state {
                Lazy::Ready => return,
                Lazy::Make(make) => match make.open(self, slot, master) {
                    Some(rx) => {
                        *slot.lazy.lock().unwrap_or_else(|e| e.into_inner()) = Lazy::Sending(rx)
                    }
                    None => return,
                },
                Lazy::Sending(rx) => {
                    let mut wait = PutBack {
                        slot: &slot.lazy,
                        rx: Some(rx),
                    };
                    if let Some(rx) = wait.rx.as_mut() {
                        // An error: the link task is gone, nothing will be sent.
                        let _ = rx.await;
                    }
                    wait.rx = None;
                    return;
                }
            }
        }
    }

    /// The read buffer in the screen memory, if there is one.
    fn staging(&self) -> Option<&Staging> {
        self.screen.as_deref().and_then(|s| s.staging.get())
    }

    /// Whether a `read` may go ahead without [`Output::screen_ready`].
    fn ready(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.screen.as_deref().is_none_or(|s| {
            // Only the pump changes `lazy`, and it never leaves `Ready` (`screen_ready` sets
            // `Ready` in passing only while it makes the memory, within this task).
            s.settled.load(Relaxed) || {
                let ready = matches!(
                    *s.lazy.lock().unwrap_or_else(|e| e.into_inner()),
                    Lazy::Ready
                );
                s.settled.store(ready, Relaxed);
                ready
            }
        })
    }

    /// Whether the screen memory's registration is being awaited.
    fn sending(&self) -> bool {
        self.screen.as_deref().is_some_and(|s| {
            matches!(
                *s.lazy.lock().unwrap_or_else(|e| e.into_inner()),
                Lazy::Sending(_)
            )
        })
    }

    /// Drain one chunk into the model (light pass, answers, ring).
    fn drain(&self, bytes: &[u8]) -> Drained {
        self.model.drain(self.generation, bytes)
    }

    /// Tell the session what it must hear about a drained chunk. False once it is gone.
    async fn report<F>(&self, drained: Drained, sink: &F) -> bool
    where
        F: Fn(PumpEvent) -> bool,
    {
        if !drained.events.is_empty() && !sink(PumpEvent::Screen(drained.events)) {
            return false;
        }
        if let Some((bytes, end)) = drained.forward.filter(|(b, _)| !b.is_empty()) {
            // Someone is attached: the bytes go to the actor, at most READ_CREDITS chunks
            // ahead of it (it drops an attachment that cannot keep up, so this is brief).
            let Ok(permit) = self.credits.clone().acquire_owned().await else {
                return false;
            };
            return sink(PumpEvent::Output(bytes, end, permit));
        }
        true
    }
}

/// Reads of what a child left in the master when it exited, at most, before its exit is
/// reported (64 KiB each).
const EXIT_DRAIN_CHUNKS: usize = 64;

async fn pump<F>(
    io: AsyncFd<OwnedFd>,
    mut gone: ChildGone,
    mut input_rx: mpsc::UnboundedReceiver<InputChunk>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
    output: Output,
    sink: F,
) where
    F: Fn(PumpEvent) -> bool + Send + 'static,
{
    let mut read_open = true;
    let mut child_alive = true;
    let mut input_open = true;
    let mut pending: VecDeque<InputChunk> = VecDeque::new();
    let mut offset = 0usize;
    // The screen's backlog is full: no reading until the grid has parsed some of it (the
    // program then waits on the kernel's PTY buffer; nothing it wrote is dropped).
    let mut blocked = false;
    // The exit and the input are polled only when they woke the pump (see `gate`): nearly
    // every wake-up is the master's.
    let gates = gate::Gates::new();
    let exit_gate = gates.gate(0);
    let input_gate = gates.gate(1);
    while read_open || child_alive || input_open || !pending.is_empty() {
        let front: &[u8] = pending.front().map(|c| &c.bytes[offset..]).unwrap_or(&[]);
        let has_pending = !pending.is_empty();
        tokio::select! {
            chunk = read_chunk(&io, &output), if read_open && !blocked => match chunk {
                Some(drained) => {
                    blocked = drained.full;
                    if !output.report(drained, &sink).await {
                        return;
                    }
                }
                // EOF/EIO: every holder of the slave side closed it (nobody needs telling:
                // one message less per exit in a burst of them).
                None => read_open = false,
            },
            _ = output.model.space(), if blocked => blocked = output.model.full(),
            _ = std::future::poll_fn(|cx| exit_gate.poll(cx, |cx| gone.as_mut().poll(cx))), if child_alive => {
                child_alive = false;
                // What the child wrote before it exited is already in the master: report it
                // before the exit, so an attached reader (a recording) gets the last output
                // before its stream ends. Bounded: up to the first read that would wait, EOF,
                // a full backlog or EXIT_DRAIN_CHUNKS reads (a grandchild may keep writing).
                for _ in 0..EXIT_DRAIN_CHUNKS {
                    if !read_open || blocked {
                        break;
                    }
                    // The first output may have just made the screen memory: its
                    // registration is a local hop away, and what is waiting counts.
                    if output.sending() {
                        Box::pin(output.screen_ready(io.get_ref().as_fd())).await;
                    }
                    let chunk = tokio::select! {
                        biased;
                        chunk = read_chunk(&io, &output) => Some(chunk),
                        _ = std::future::ready(()) => None,
                    };
                    match chunk {
                        None if output.sending() => continue,
                        None => break,
                        Some(Some(drained)) => {
                            blocked = drained.full;
                            if !output.report(drained, &sink).await {
                                return;
                            }
                        }
                        Some(None) => read_open = false,
                    }
                }
                if !sink(PumpEvent::ChildExited) {
                    return;
                }
            },
            written = write_some(&io, front), if has_pending => {
                match written {
                    Ok(n) => {
                        offset += n;
                        queued.fetch_sub(n, std::sync::atomic::Ordering::AcqRel);
                        if offset >= pending.front().map_or(0, |c| c.bytes.len()) {
                            if let Some(chunk) = pending.pop_front() {
                                let _ = chunk.done.send(Ok(()));
                            }
                            offset = 0;
                        }
                    }
                    Err(e) => {
                        // The slave is gone: fail everything queued, releasing exactly the
                        // bytes it still held against the queue bound.
                        let mut held = 0;
                        for (i, chunk) in pending.iter().enumerate() {
                            held += chunk.bytes.len() - if i == 0 { offset } else { 0 };
                        }
                        queued.fetch_sub(held, std::sync::atomic::Ordering::AcqRel);
                        for chunk in pending.drain(..) {
                            let _ = chunk.done.send(Err(io::Error::new(e.kind(), e.to_string())));
                        }
                        offset = 0;
                    }
                }
            },
            msg = std::future::poll_fn(|cx| input_gate.poll(cx, |cx| input_rx.poll_recv(cx))), if input_open => match msg {
                Some(chunk) if chunk.bytes.is_empty() => { let _ = chunk.done.send(Ok(())); }
                Some(chunk) => pending.push_back(chunk),
                None => input_open = false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::waitpid;
    use portable_pty::MasterPty;
    use std::os::fd::IntoRawFd;

    /// A PTY pair from `openpty`, the master non-blocking; the caller closes both.
    fn raw_pair() -> (RawFd, RawFd) {
        let mut fds = [0; 2];
        // SAFETY: openpty into our array.
        let r = unsafe {
            libc::openpty(
                &mut fds[0],
                &mut fds[1],
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0);
        // SAFETY: our own descriptor.
        unsafe { libc::fcntl(fds[0], libc::F_SETFL, libc::O_NONBLOCK) };
        (fds[0], fds[1])
    }

    fn write_all(fd: RawFd, data: &[u8]) {
        if !data.is_empty() {
            // SAFETY: writing from a valid slice.
            let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
            assert_eq!(n as usize, data.len());
        }
    }

    /// Wait (10 s at most) until the master's `FIONREAD` says `n`: the tty moves what the
    /// slave wrote to the master's side in its own time.
    fn wait_counted(master: RawFd, n: usize) {
        wait_count(master, |avail| avail == n);
    }

    /// Wait (10 s at most) until the master's `FIONREAD` count satisfies `done`.
    fn wait_count(master: RawFd, done: impl Fn(usize) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let avail = pending_input(master).unwrap_or(0);
            if done(avail) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{avail} bytes waiting"
            );
            std::thread::yield_now();
        }
    }

    /// A redraw (a count below a full line discipline) ends the drain on the `read` that took
    /// it; a flood (the line discipline full, more behind it) does not, and the next `read`
    /// goes on with what followed.
    #[test]
    fn a_read_of_all_that_was_counted_ends_the_drain_unless_the_count_was_a_full_buffer() {
        use crate::screen_model::store::Store;
        let (master, slave) = raw_pair();
        let store = Store::create(80, 24, 0).unwrap();
        let staging = store.staging();
        staging.begin();
        // SAFETY: this test is the staging area's only user.
        let buf = unsafe { staging.buf() };
        write_all(slave, &[b'r'; 100]);
        wait_counted(master, 100);
        let got = read_once(master, Some(&staging), false, &mut buf[..], 0).unwrap();
        assert_eq!((got.n, got.emptied), (100, true), "a redraw");
        write_all(slave, &[b'f'; 8_000]);
        wait_counted(master, LDISC_FULL);
        let got = read_once(master, Some(&staging), false, &mut buf[100..], 100).unwrap();
        assert_eq!((got.n, got.emptied), (LDISC_FULL, false), "a flood");
        let mut filled = 100 + got.n;
        while filled < 8_100 {
            match read_once(master, Some(&staging), false, &mut buf[filled..], filled) {
                Ok(got) => filled += got.n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_count(master, |n| n > 0),
                Err(e) => panic!("{e}"),
            }
        }
        assert!(
            buf[..100].iter().all(|&b| b == b'r') && buf[100..filled].iter().all(|&b| b == b'f')
        );
        // SAFETY: closing our own descriptors.
        unsafe {
            libc::close(master);
            libc::close(slave);
        }
    }

    /// A pump `read` killed before it could publish what it got (SIGKILL takes effect on the
    /// return from the syscall, which leaves exactly this state): a real PTY, a real process
    /// killed. The next daemon takes what the `read` consumed from the tty, once.
    #[test]
    fn a_read_killed_before_it_was_published_loses_nothing() {
        use crate::screen_model::store::{Record, Store};
        // Output waiting in the master (200 times), or none: the `read` is armed for 1 byte
        // and gets EAGAIN.
        for waiting in [&b"0123456789abcdef"[..], b""] {
            let (master, slave) = raw_pair();
            let data: Vec<u8> = waiting.repeat(200);
            write_all(slave, &data);
            wait_counted(master, data.len());
            let mut store = Store::create(80, 24, 0).unwrap();
            store.output(b"logged ");
            let staging = store.staging();
            staging.begin();
            // SAFETY: this test is the staging area's only user.
            unsafe { staging.buf()[..6].copy_from_slice(b"staged") };
            staging.staged(6);
            // SAFETY: the child only reads, writes its own memory and kills itself.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: as above; nothing here allocates.
                unsafe {
                    let _ = read_once(master, Some(&staging), false, &mut staging.buf()[6..], 6);
                    libc::kill(libc::getpid(), libc::SIGKILL);
                    libc::_exit(1);
                }
            }
            let mut status = 0;
            // SAFETY: our own child.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);
            // The tty gave it everything: it is in the store only.
            assert_eq!(pending_input(master), Some(0));
            let (_, saved) = Store::open(store.fd().try_clone_to_owned().unwrap()).unwrap();
            let expect = [&b"staged"[..], &data].concat();
            assert_eq!(
                saved.log,
                [Record::Output(b"logged ".to_vec()), Record::Output(expect)]
            );
            // SAFETY: closing our own descriptors.
            unsafe {
                libc::close(master);
                libc::close(slave);
            }
        }
    }

    /// The keeper's end of a link: the packets a daemon sent, with their descriptors.
    async fn from_daemon(
        keeper: &AsyncFd<OwnedFd>,
    ) -> (maxx_protocol::keeper::ToKeeper, Vec<OwnedFd>) {
        let mut buf = [0u8; maxx_protocol::keeper::MESSAGE_MAX];
        loop {
            let mut guard = keeper.readable().await.unwrap();
            let got =
                guard.try_io(|fd| crate::keeper_link::packet::recv(fd.get_ref().as_fd(), &mut buf));
            if let Ok(got) = got {
                let got = got.unwrap().expect("the link is open");
                let msg = maxx_protocol::keeper::ToKeeper::decode(&buf[..got.len]).unwrap();
                return (msg, got.fds);
            }
        }
    }

    /// A keeper link with no survivors to hand over: the daemon's side, and the keeper's end
    /// of the socket (what the daemon sends it: [`from_daemon`]).
    async fn keeper() -> (Keeper, AsyncFd<OwnedFd>) {
        use maxx_protocol::keeper::FromKeeper;
        let (mine, theirs) = crate::keeper_link::packet::pair().unwrap();
        let end = FromKeeper::HandoffEnd {
            count: 0,
            daemons_before: 0,
        };
        crate::keeper_link::packet::send(mine.as_fd(), &end.encode().unwrap(), &[]).unwrap();
        let (keeper, _) = crate::keeper_link::Keeper::connect(theirs.into_raw_fd())
            .await
            .unwrap();
        (keeper, register(mine).unwrap())
    }

    /// A drain that ends on a `read` of everything `FIONREAD` counted (no second `FIONREAD`)
    /// still hears of what the program writes next: 60 titles, each its own write after a
    /// pause, all arrive, in order, read through the screen memory's armed read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drain_ended_by_its_count_misses_nothing_written_after_it() {
        let (keeper, _link) = keeper().await;
        let model = ScreenModel::new(Box::new(|_| {}));
        let generation = model.reset(80, 24, 100);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let cmd = "i=0; while [ $i -lt 60 ]; do printf '\\033]2;t%d\\007' $i; \
                   i=$((i+1)); sleep 0.005; done; exec sleep 5";
        let pty = Pty::spawn(
            spec(cmd, "/"),
            model.clone(),
            generation,
            Some(Keep {
                keeper,
                session_id: "S".into(),
                surface_id: "F".into(),
                token: "0".repeat(32),
            }),
            move |event| {
                if let PumpEvent::Screen(events) = event {
                    for e in events {
                        let _ = tx.send(e);
                    }
                }
                true
            },
        )
        .unwrap();
        for i in 0..60 {
            let event = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("title {i} never arrived"))
                .unwrap();
            assert_eq!(event, ScreenEvent::Title(format!("t{i}")));
        }
        assert!(
            model.screen_fd().is_some(),
            "read through the screen memory"
        );
        drop(pty);
    }

    /// A spawn registers the master with the keeper at once and makes no screen memory; the
    /// first output makes it, registers it with the master again, and is logged in it —
    /// a program that prints nothing never gets one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_screen_memory_is_made_and_registered_at_the_first_output() {
        use crate::screen_model::store::{Record, Store};
        use maxx_protocol::keeper::ToKeeper;
        let (keeper, link) = keeper().await;
        let dir = std::env::temp_dir();
        let go = dir.join(format!("maxx-lazy-screen-{}", std::process::id()));
        let _ = std::fs::remove_file(&go);
        let cmd = format!(
            "while [ ! -e {0} ]; do sleep 0.01; done; rm {0}; printf '\\033]2;T\\007first-output'; exec sleep 5",
            go.display()
        );
        let model = ScreenModel::new(Box::new(|_| {}));
        let generation = model.reset(80, 24, 100);
        let (drained, mut was_drained) = mpsc::unbounded_channel();
        let pty = Pty::spawn(
            spec(&cmd, "/"),
            model.clone(),
            generation,
            Some(Keep {
                keeper: keeper.clone(),
                session_id: "S".into(),
                surface_id: "F".into(),
                token: "0".repeat(32),
            }),
            // A title is announced once its chunk was drained, which logged it.
            move |event| {
                if let PumpEvent::Screen(_) = event {
                    let _ = drained.send(());
                }
                true
            },
        )
        .unwrap();
        let (msg, fds) = from_daemon(&link).await;
        assert!(
            matches!(&msg, ToKeeper::Register { surface_id, pid, .. } if surface_id == "F" && *pid == pty.pid()),
            "{msg:?}"
        );
        assert_eq!(fds.len(), 1, "the master only");
        assert!(
            model.screen_fd().is_none(),
            "no screen memory before any output"
        );
        std::fs::write(&go, b"").unwrap();
        let (msg, fds) = from_daemon(&link).await;
        assert!(
            matches!(&msg, ToKeeper::Register { surface_id, .. } if surface_id == "F"),
            "{msg:?}"
        );
        assert_eq!(fds.len(), 2, "the master and the screen memory");
        let mut fds = fds.into_iter();
        let _master = fds.next();
        let screen = fds.next().unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), was_drained.recv())
            .await
            .expect("the output is drained");
        let (_, saved) = Store::open(screen).unwrap();
        assert_eq!((saved.cols, saved.rows, saved.scrollback), (80, 24, 100));
        assert_eq!(
            saved.log,
            [Record::Output(b"\x1b]2;T\x07first-output".to_vec())]
        );
        drop(pty);
        let (msg, _) = from_daemon(&link).await;
        assert!(matches!(msg, ToKeeper::Close { .. }), "{msg:?}");
    }

    fn tty() -> (Box<dyn MasterPty + Send>, PathBuf) {
        let pair = native_pty_system()
            .openpty(PtySize::default())
            .expect("openpty");
        let name = pair.master.tty_name().expect("a slave name");
        (pair.master, name)
    }

    fn spec(command: &str, cwd: &str) -> SpawnSpec {
        SpawnSpec {
            command: Some(command.into()),
            cwd: cwd.into(),
            env: vec![("MAXX_T".into(), "1".into()), ("MAXX_T".into(), "7".into())],
            cols: 80,
            rows: 24,
        }
    }

    /// A bare hang-up is taken as it is; the queue is asked only when the readiness also
    /// says readable, and what it says decides.
    #[test]
    fn a_hang_up_without_input_is_not_asked_again() {
        use tokio::io::Ready;
        let never = || -> Option<usize> { panic!("FIONREAD asked for a bare hang-up") };
        assert!(super::hung_up_empty(Ready::READ_CLOSED, never));
        let both = Ready::READ_CLOSED | Ready::READABLE;
        assert!(super::hung_up_empty(both, || Some(0)));
        assert!(!super::hung_up_empty(both, || Some(5)));
        assert!(!super::hung_up_empty(both, || None));
        let asked = std::cell::Cell::new(false);
        assert!(!super::hung_up_empty(Ready::READABLE, || {
            asked.set(true);
            Some(0)
        }));
        assert!(!asked.get(), "no hang-up, no question");
    }

    #[test]
    fn parent_pid_reads_the_kernel() {
        assert_eq!(
            parent_pid(std::process::id() as i32),
            Some(nix::unistd::getppid().as_raw())
        );
        assert_eq!(parent_pid(-1), None);
    }

    #[test]
    fn the_terminal_starts_with_iutf8() {
        let (master, _name) = tty();
        set_iutf8(master.as_raw_fd().expect("an fd")).expect("termios set");
        let t = master.get_termios().expect("termios read");
        assert_ne!(t.input_flags.bits() & libc::IUTF8, 0);
    }

    #[test]
    fn a_failed_chdir_comes_back_as_the_spawn_error() {
        let (_master, name) = tty();
        let err = spawn_on_tty(&spec("exit 0", "/nonexistent/dir"), &name).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(err.to_string().starts_with("spawn: "), "{err}");
    }

    #[test]
    fn the_child_gets_its_env_with_later_entries_winning() {
        let (_master, name) = tty();
        let pid = spawn_on_tty(&spec("exit $MAXX_T", "/"), &name).unwrap();
        let status = waitpid(Pid::from_raw(pid as i32), None).unwrap();
        assert_eq!(status, WaitStatus::Exited(Pid::from_raw(pid as i32), 7));
    }

    #[test]
    fn a_nul_in_an_argument_is_refused_before_anything_runs() {
        let (_master, name) = tty();
        let err = spawn_on_tty(&spec("echo a\0b", "/"), &name).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
