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

use crate::screen::ScreenEvent;
use crate::screen_model::{Drained, ScreenModel};
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use portable_pty::{native_pty_system, CommandBuilder, MasterPty, PtySize};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
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
    /// A chunk of output for the people attached (the terminal queries in it cut out), with
    /// the stream offset just past the raw chunk; drop the permit once it is processed.
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
    pid: u32,
    /// The child is `/bin/sh -c COMMAND`, which dash forks rather than execs: the command's
    /// own process (say the interactive shell it started) is the child's child.
    wrapped: bool,
    reaped: bool,
    /// The child's process group, registered from spawn until it has been ended, so a
    /// stopping daemon waits for (and at worst SIGKILLs) every group it started — even one
    /// whose `Pty` was never dropped.
    group: Option<Reaper>,
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
        let master = pair.master;
        let raw = master
            .as_raw_fd()
            .ok_or_else(|| io::Error::other("PTY master has no fd"))?;
        set_iutf8(raw)?;
        let pid = spawn_on_tty(&spec, &tty)?;
        let group = Reaper::new(Pid::from_raw(pid as i32));
        let wrapped = spec.command.is_some();
        // The reader only sees EOF once every slave fd is closed, ours included.
        drop(pair.slave);
        let io_fd = dup_nonblocking(raw)?;
        let pidfd = pidfd_open(pid)?;
        let io_fd = register(io_fd)?;
        let pidfd = register(pidfd)?;
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
            pid,
            wrapped,
            reaped: false,
            group: Some(group),
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

impl Drop for Pty {
    fn drop(&mut self) {
        self.pump.abort();
        // The session is going away (close, cancel, restart, daemon stop or a failed
        // actor): nobody is left to read this group's output.
        end_group(self.pid, self.reaped, self.group.take());
    }
}

/// End a session's whole process group (the child is a session leader, so its pid is the
/// group's id): SIGHUP, SIGTERM and SIGCONT (so a stopped member sees them) to the group;
/// once the leader has exited, or after [`KILL_GRACE`] if it ignores them, SIGKILL to the
/// group; then reap the leader. The leader is reaped only after that SIGKILL ([`Pty::reap`]
/// leaves it a zombie), so the group id cannot have been reused by another process when
/// it is signalled. What escapes: a process that left the group (`setsid`, `setpgid`, a
/// job-control shell's jobs) — the kernel offers no handle on "everything this session
/// started" short of a cgroup.
fn end_group(pid: u32, exited: bool, group: Option<Reaper>) {
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
    let Ok(pidfd) = pidfd_open(pid.as_raw() as u32).and_then(register) else {
        kill_and_reap();
        return;
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

struct Reaper(i32);

impl Reaper {
    fn new(pid: Pid) -> Reaper {
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
fn parent_pid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// Turn on `IUTF8` in the terminal's input modes before the child starts, as tmux and other
/// terminals do: the line discipline then knows characters are UTF-8, so in cooked mode
/// Backspace erases a whole `é` or `日`, not its last byte. On Linux the master's termios
/// calls act on the slave.
fn set_iutf8(master: RawFd) -> io::Result<()> {
    // SAFETY: a zeroed termios is a valid out-parameter that tcgetattr fills.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `master` is an open PTY master fd and `t` outlives both calls.
    if unsafe { libc::tcgetattr(master, &mut t) } != 0 {
        return Err(io::Error::other(format!(
            "tcgetattr: {}",
            io::Error::last_os_error()
        )));
    }
    t.c_iflag |= libc::IUTF8;
    // SAFETY: as above.
    if unsafe { libc::tcsetattr(master, libc::TCSANOW, &t) } != 0 {
        return Err(io::Error::other(format!(
            "tcsetattr: {}",
            io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Start the child as a session leader whose controlling terminal is the PTY at `tty`;
/// returns its pid.
///
/// `posix_spawn`, not `fork`: glibc spawns with `clone(CLONE_VM | CLONE_VFORK)`, so the
/// daemon's page tables are never copied (a fork's `copy_page_range` grows with the daemon's
/// mapped memory and was 12% of the daemon's CPU under load) and no Rust code runs in the
/// child. In the child, in glibc's order: signal dispositions back to their defaults,
/// `setsid`, then the file actions — `chdir`, the slave opened on fd 0 (a session leader
/// without a terminal that opens one without `O_NOCTTY` acquires it as its controlling
/// terminal) and duplicated to 1 and 2, every other descriptor closed (`closefrom(3)`: O(1)
/// however many sessions are open) — then an empty signal mask and `execve`. A failure of
/// any step comes back as the return value.
fn spawn_on_tty(spec: &SpawnSpec, tty: &std::path::Path) -> io::Result<u32> {
    let (program, argv) = match &spec.command {
        Some(command) => (
            "/bin/sh".to_string(),
            vec!["/bin/sh".to_string(), "-c".to_string(), command.clone()],
        ),
        None => {
            // A login shell, as a terminal would start it: argv[0] is "-<name>".
            let shell = CommandBuilder::new_default_prog().get_shell();
            let name = shell.rsplit('/').next().unwrap_or("sh").to_string();
            (shell, vec![format!("-{name}")])
        }
    };
    let program = cstring(program.into_bytes())?;
    let argv = argv
        .into_iter()
        .map(|a| cstring(a.into_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    let envp = child_env(&spec.env)?;
    let cwd = cstring(spec.cwd.as_os_str().as_bytes().to_vec())?;
    let tty = cstring(tty.as_os_str().as_bytes().to_vec())?;
    let actions = spawn::FileActions::new()?;
    actions.chdir(&cwd)?;
    actions.open(0, &tty, libc::O_RDWR)?;
    actions.dup2(0, 1)?;
    actions.dup2(0, 2)?;
    actions.close_from(3)?;
    let attr = spawn::Attr::new()?;
    attr.session_leader_with_default_signals()?;
    spawn::spawn(&program, &actions, &attr, &argv, &envp)
        .map_err(|e| io::Error::new(e.kind(), format!("spawn: {e}")))
}

fn cstring(bytes: Vec<u8>) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in a spawn argument",
        )
    })
}

/// The daemon's environment with `extra` applied in order (later entries win), as
/// `KEY=value` strings.
fn child_env(extra: &[(String, String)]) -> io::Result<Vec<std::ffi::CString>> {
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
    for (key, value) in extra {
        let value = std::ffi::OsString::from(value);
        match env.iter_mut().find(|(k, _)| k.as_bytes() == key.as_bytes()) {
            Some(slot) => slot.1 = value,
            None => env.push((key.into(), value)),
        }
    }
    env.into_iter()
        .map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstring(kv)
        })
        .collect()
}

/// Owned wrappers over glibc's `posix_spawn` objects (nix's lack `POSIX_SPAWN_SETSID`,
/// `addchdir_np` and `addclosefrom_np`).
mod spawn {
    use std::ffi::CString;
    use std::io;
    use std::mem::MaybeUninit;

    fn check(rc: libc::c_int) -> io::Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }

    /// A glibc object on the heap (so it never moves while glibc holds pointers into it),
    /// set up by its `init` and torn down by its `destroy`.
    struct Object<T> {
        ptr: *mut T,
        destroy: unsafe extern "C" fn(*mut T) -> libc::c_int,
    }

    impl<T> Object<T> {
        fn new(
            init: unsafe extern "C" fn(*mut T) -> libc::c_int,
            destroy: unsafe extern "C" fn(*mut T) -> libc::c_int,
        ) -> io::Result<Self> {
            let ptr = Box::into_raw(Box::new(MaybeUninit::<T>::uninit())).cast::<T>();
            // SAFETY: `ptr` is valid for writes; init fills the object.
            if let Err(e) = check(unsafe { init(ptr) }) {
                // SAFETY: allocated just above as a MaybeUninit<T>; never initialised.
                drop(unsafe { Box::from_raw(ptr.cast::<MaybeUninit<T>>()) });
                return Err(e);
            }
            Ok(Self { ptr, destroy })
        }
    }

    impl<T> Drop for Object<T> {
        fn drop(&mut self) {
            // SAFETY: initialised in `new`, destroyed once, then its allocation freed.
            unsafe {
                (self.destroy)(self.ptr);
                drop(Box::from_raw(self.ptr.cast::<MaybeUninit<T>>()));
            }
        }
    }

    pub struct FileActions(Object<libc::posix_spawn_file_actions_t>);

    impl FileActions {
        pub fn new() -> io::Result<Self> {
            Object::new(
                libc::posix_spawn_file_actions_init,
                libc::posix_spawn_file_actions_destroy,
            )
            .map(Self)
        }

        fn ptr(&self) -> *mut libc::posix_spawn_file_actions_t {
            self.0.ptr
        }

        pub fn chdir(&self, dir: &CString) -> io::Result<()> {
            // SAFETY: a valid object and a NUL-terminated path glibc copies.
            check(unsafe { libc::posix_spawn_file_actions_addchdir_np(self.ptr(), dir.as_ptr()) })
        }

        pub fn open(&self, fd: libc::c_int, path: &CString, flags: libc::c_int) -> io::Result<()> {
            // SAFETY: as above.
            check(unsafe {
                libc::posix_spawn_file_actions_addopen(self.ptr(), fd, path.as_ptr(), flags, 0)
            })
        }

        pub fn dup2(&self, fd: libc::c_int, to: libc::c_int) -> io::Result<()> {
            // SAFETY: a valid object.
            check(unsafe { libc::posix_spawn_file_actions_adddup2(self.ptr(), fd, to) })
        }

        pub fn close_from(&self, fd: libc::c_int) -> io::Result<()> {
            // SAFETY: a valid object.
            check(unsafe { libc::posix_spawn_file_actions_addclosefrom_np(self.ptr(), fd) })
        }
    }

    pub struct Attr(Object<libc::posix_spawnattr_t>);

    impl Attr {
        pub fn new() -> io::Result<Self> {
            Object::new(libc::posix_spawnattr_init, libc::posix_spawnattr_destroy).map(Self)
        }

        fn ptr(&self) -> *mut libc::posix_spawnattr_t {
            self.0.ptr
        }

        /// `setsid` in the child, every signal's disposition back to the default (the
        /// daemon ignores SIGPIPE, a terminal's program must not inherit that) and an empty
        /// signal mask.
        pub fn session_leader_with_default_signals(&self) -> io::Result<()> {
            // SAFETY: sigset functions on local sets, then setters on a valid object.
            unsafe {
                let mut all = MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigfillset(all.as_mut_ptr());
                let mut none = MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(none.as_mut_ptr());
                check(libc::posix_spawnattr_setsigdefault(
                    self.ptr(),
                    all.as_ptr(),
                ))?;
                check(libc::posix_spawnattr_setsigmask(self.ptr(), none.as_ptr()))?;
                let flags = libc::POSIX_SPAWN_SETSID
                    | libc::POSIX_SPAWN_SETSIGDEF as libc::c_short
                    | libc::POSIX_SPAWN_SETSIGMASK as libc::c_short;
                check(libc::posix_spawnattr_setflags(self.ptr(), flags))
            }
        }
    }

    /// `posix_spawn` (or `posix_spawnp` for a bare program name); returns the child's pid.
    pub fn spawn(
        program: &CString,
        actions: &FileActions,
        attr: &Attr,
        argv: &[CString],
        envp: &[CString],
    ) -> io::Result<u32> {
        // NULL-terminated arrays of pointers into the CStrings, which outlive the call.
        let c_array = |strings: &[CString]| -> Vec<*mut libc::c_char> {
            strings
                .iter()
                .map(|a| a.as_ptr().cast_mut())
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect()
        };
        let (argv, envp) = (c_array(argv), c_array(envp));
        let mut pid: libc::pid_t = 0;
        // A bare program name is searched on PATH, as a shell would.
        let call = if program.as_bytes().contains(&b'/') {
            libc::posix_spawn
        } else {
            libc::posix_spawnp
        };
        // SAFETY: every pointer is valid and NUL-terminated for the call's duration; glibc
        // does not write through argv/envp.
        let rc = unsafe {
            call(
                &mut pid,
                program.as_ptr(),
                actions.ptr(),
                attr.ptr(),
                argv.as_ptr(),
                envp.as_ptr(),
            )
        };
        check(rc)?;
        Ok(pid as u32)
    }
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

impl Output {
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
    // The screen's backlog is full: no reading until the grid has parsed some of it (the
    // program then waits on the kernel's PTY buffer; nothing it wrote is dropped).
    let mut blocked = false;
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
                None => {
                    read_open = false;
                    if !sink(PumpEvent::OutputClosed) {
                        return;
                    }
                }
            },
            _ = output.model.space(), if blocked => blocked = output.model.full(),
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

#[cfg(test)]
mod tests {
    use super::*;

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
