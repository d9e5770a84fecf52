//! A session's PTY and child process, driven by one tokio task (the *pump*), not a thread.
//!
//! portable-pty opens the PTY and spawns the child (setsid, controlling tty, cwd, env).
//! After that the daemon owns the I/O itself: the master is duplicated, made non-blocking
//! and registered with tokio (`AsyncFd`), and the child's exit is observed through a
//! pidfd, so 1,000 sessions cost 1,000 small tasks and no threads.
//!
//! The pump reads output in chunks and hands each to the session actor together with a
//! credit from a bounded semaphore: if the actor falls behind, the pump stops reading and
//! the kernel's PTY buffer pushes back on the child — memory never grows without bound.
//! Input is queued to the pump and written when the master is writable, so a child that
//! does not read its input can never block the actor.

use crate::screen::ScreenEvent;
use crate::screen_model::ScreenModel;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use portable_pty::{native_pty_system, CommandBuilder, MasterPty, PtySize};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// Largest chunk read from the master at once.
const READ_CHUNK: usize = 64 * 1024;
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
    /// A chunk of output for the people attached, with the stream offset just past it; drop
    /// the permit once it is processed.
    Output(Vec<u8>, u64, OwnedSemaphorePermit),
    /// Announcements the output carried (title, OSC 133 D), in order.
    Screen(Vec<ScreenEvent>),
    /// The master read EOF/EIO: every holder of the slave side closed it.
    OutputClosed,
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
}

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
    master: Box<dyn MasterPty + Send>,
    // Held so the std Child is not dropped early; reaping is done with waitpid.
    _child: std::process::Child,
    pid: u32,
    reaped: bool,
}

impl Pty {
    /// Open a PTY, spawn the child in it and start the pump, which drains output into
    /// `model` (as surface `generation`) and reports to `sink`. `sink` returns false once
    /// nobody listens, which ends the pump.
    pub fn spawn<F>(
        spec: SpawnSpec,
        model: Arc<ScreenModel>,
        generation: u64,
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
            .map_err(|e| io::Error::other(format!("openpty: {e}")))?;
        let tty = pair
            .master
            .tty_name()
            .ok_or_else(|| io::Error::other("the PTY has no slave name"))?;
        let child = spawn_on_tty(&spec, &tty)?;
        // The reader only sees EOF once every slave fd is closed, ours included.
        drop(pair.slave);
        let master = pair.master;
        let pid = child.id();

        let raw = master
            .as_raw_fd()
            .ok_or_else(|| io::Error::other("PTY master has no fd"))?;
        let io_fd = dup_nonblocking(raw)?;
        let pidfd = pidfd_open(pid)?;
        let io_fd = register(io_fd)?;
        let pidfd = register(pidfd)?;
        let (input, input_rx) = mpsc::unbounded_channel();
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let output = Output {
            model,
            generation,
            credits: Arc::new(Semaphore::new(READ_CREDITS)),
        };
        let pump = tokio::spawn(pump(io_fd, pidfd, input_rx, queued.clone(), output, sink));
        Ok(Pty {
            pump,
            input,
            queued,
            master,
            _child: child,
            pid,
            reaped: false,
        })
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
        match waitpid(Pid::from_raw(self.pid as i32), Some(WaitPidFlag::WNOHANG)) {
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
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| io::Error::other(e.to_string()))?;
        let got = self
            .master
            .get_size()
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(maxx_protocol::screen::Size {
            cols: got.cols,
            rows: got.rows,
        })
    }

    /// Foreground process group of the terminal (`tcgetpgrp` on the master).
    pub fn foreground_pgrp(&self) -> Option<i32> {
        self.master.process_group_leader()
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

impl Drop for Pty {
    fn drop(&mut self) {
        self.pump.abort();
        if !self.reaped {
            // The session is going away without a graceful close (daemon stop or a failed
            // actor): nobody is left to read this child's output, so hang it up, give it a
            // moment, then kill and reap it.
            let pid = Pid::from_raw(self.pid as i32);
            let _ = killpg(pid, Signal::SIGHUP);
            let _ = killpg(pid, Signal::SIGCONT);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let pidfd = pidfd_open(self.pid).and_then(register);
                handle.spawn(async move {
                    if let Ok(pidfd) = pidfd {
                        let _ = tokio::time::timeout(KILL_GRACE, pidfd.readable()).await;
                    }
                    if matches!(
                        waitpid(pid, Some(WaitPidFlag::WNOHANG)),
                        Ok(WaitStatus::StillAlive)
                    ) {
                        let _ = killpg(pid, Signal::SIGKILL);
                        let _ = tokio::task::spawn_blocking(move || waitpid(pid, None)).await;
                    }
                });
            }
        }
    }
}

/// Start the child as a session leader whose controlling terminal is the PTY at `tty`.
///
/// portable-pty's own spawn closes inherited descriptors by listing `/proc/self/fd` in the
/// child, which costs O(open fds) per spawn — 12 ms per create with 1,000 live sessions. The
/// daemon opens everything close-on-exec, and `close_range(2)` closes anything left in O(1),
/// so a spawn costs the same with 1 session or 1,000.
fn spawn_on_tty(spec: &SpawnSpec, tty: &std::path::Path) -> io::Result<std::process::Child> {
    use std::os::unix::ffi::OsStrExt;
    let mut cmd = match &spec.command {
        Some(command) => {
            let mut c = std::process::Command::new("/bin/sh");
            c.arg("-c").arg(command);
            c
        }
        None => {
            // A login shell, as a terminal would start it: argv[0] is "-<name>".
            let shell = CommandBuilder::new_default_prog().get_shell();
            let name = shell.rsplit('/').next().unwrap_or("sh").to_string();
            let mut c = std::process::Command::new(&shell);
            c.arg0(format!("-{name}"));
            c
        }
    };
    cmd.current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Everything the child does between fork and exec must be async-signal-safe: build the
    // path now.
    let tty = std::ffi::CString::new(tty.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("tty path has a NUL"))?;
    // SAFETY: only async-signal-safe calls (signal, sigprocmask, setsid, open, ioctl, dup2,
    // close, syscall) run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for sig in [
                libc::SIGCHLD,
                libc::SIGHUP,
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTERM,
                libc::SIGALRM,
                libc::SIGPIPE,
            ] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let empty: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            // Opening the slave as a session leader with no terminal makes it the
            // controlling terminal; TIOCSCTTY makes that explicit.
            let fd = libc::open(tty.as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::ioctl(fd, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            for target in 0..3 {
                if libc::dup2(fd, target) == -1 {
                    return Err(io::Error::last_os_error());
                }
            }
            // Nothing but stdio crosses exec (this covers `fd` too). CLOSE_RANGE_CLOEXEC
            // rather than closing now keeps std's exec-error pipe working until exec.
            const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("spawn: {e}")))
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

/// Register an owned descriptor with tokio's reactor.
fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the OwnedFd is moved into the AsyncFd, which keeps it open (and is the only
    // owner) until it deregisters and drops it.
    unsafe { AsyncFd::register(fd).map_err(io::Error::from) }
}

fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
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

/// Read everything the master has now, up to [`READ_CHUNK`] bytes (the tty hands out at most
/// ~4 KiB per `read`, so one chunk per readiness instead of one per `read`), and drain it into
/// the screen model before the next await. `None` on EOF or EIO (slave closed).
async fn read_chunk(io: &AsyncFd<OwnedFd>, output: &Output) -> Option<Drained> {
    loop {
        let mut guard = io.readable().await.ok()?;
        let (drained, closed) = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let mut filled = 0;
            let mut closed = false;
            while filled < scratch.len() {
                let rest = &mut scratch[filled..];
                let result = guard.try_io(|fd| {
                    // SAFETY: reading into a valid, exclusively borrowed slice.
                    let n = unsafe {
                        libc::read(
                            fd.as_raw_fd(),
                            rest.as_mut_ptr() as *mut libc::c_void,
                            rest.len(),
                        )
                    };
                    if n < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(n as usize)
                    }
                });
                match result {
                    Ok(Ok(0)) => {
                        closed = true;
                        break;
                    }
                    Ok(Ok(n)) => filled += n,
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(Err(_)) => {
                        // EIO: the slave side is gone (what was read before still counts).
                        closed = true;
                        break;
                    }
                    Err(_would_block) => break,
                }
            }
            let drained = (filled > 0).then(|| output.drain(&scratch[..filled]));
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

/// Write as much of `bytes` as the master takes now. Returns bytes written.
async fn write_some(io: &AsyncFd<OwnedFd>, bytes: &[u8]) -> io::Result<usize> {
    loop {
        let mut guard = io.writable().await?;
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

/// Where the pump puts output.
struct Output {
    model: Arc<ScreenModel>,
    generation: u64,
    /// Bounds forwarded chunks the session actor has not processed yet.
    credits: Arc<Semaphore>,
}

/// A chunk after the drain: what the session actor must hear.
struct Drained {
    events: Vec<ScreenEvent>,
    /// The bytes and the stream offset just past them, when someone is attached.
    forward: Option<(Vec<u8>, u64)>,
}

impl Output {
    /// Drain one chunk into the model (light pass + ring), copying it out only if it must
    /// be forwarded.
    fn drain(&self, bytes: &[u8]) -> Drained {
        let drained = self.model.drain(self.generation, bytes);
        Drained {
            events: drained.events,
            forward: drained.forward_end.map(|end| (bytes.to_vec(), end)),
        }
    }

    /// Tell the session what it must hear about a drained chunk. False once it is gone.
    async fn report<F>(&self, drained: Drained, sink: &F) -> bool
    where
        F: Fn(PumpEvent) -> bool,
    {
        if !drained.events.is_empty() && !sink(PumpEvent::Screen(drained.events)) {
            return false;
        }
        if let Some((bytes, end)) = drained.forward {
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

async fn pump<F>(
    io: AsyncFd<OwnedFd>,
    pidfd: AsyncFd<OwnedFd>,
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
    while read_open || child_alive || input_open || !pending.is_empty() {
        let front: &[u8] = pending.front().map(|c| &c.bytes[offset..]).unwrap_or(&[]);
        let has_pending = !pending.is_empty();
        tokio::select! {
            chunk = read_chunk(&io, &output), if read_open => match chunk {
                Some(drained) => {
                    if !output.report(drained, &sink).await {
                        return;
                    }
                }
                None => {
                    read_open = false;
                    if !sink(PumpEvent::OutputClosed) {
                        return;
                    }
                }
            },
            ready = pidfd.readable(), if child_alive => {
                if let Ok(mut guard) = ready {
                    guard.retain_ready();
                }
                child_alive = false;
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
            msg = input_rx.recv(), if input_open => match msg {
                Some(chunk) if chunk.bytes.is_empty() => { let _ = chunk.done.send(Ok(())); }
                Some(chunk) => pending.push_back(chunk),
                None => input_open = false,
            },
        }
    }
}
