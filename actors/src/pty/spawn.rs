//! Starting a session's child on its PTY: `posix_spawn` as a session leader with the tty as its
//! controlling terminal, its environment, and the terminal modes set before it runs.

use super::SpawnSpec;
use portable_pty::CommandBuilder;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Turn on `IUTF8` in the terminal's input modes before the child starts, as tmux and other
/// terminals do: the line discipline then knows characters are UTF-8, so in cooked mode
/// Backspace erases a whole `é` or `日`, not its last byte. On Linux the master's termios
/// calls act on the slave.
pub(super) fn set_iutf8(master: RawFd) -> io::Result<()> {
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

/// The kernel had no pseudo-terminal left to give: opening `/dev/ptmx` fails with `ENOSPC`
/// once its limit (`kernel.pty.max`, less the reserve, or a devpts mount's `max=`) is
/// reached. A fact of the system, not a fault of the daemon: callers get `pty_exhausted`.
#[derive(Debug)]
pub struct PtyExhausted {
    /// Pseudo-terminals in use system-wide (`/proc/sys/kernel/pty/nr`), if readable.
    pub in_use: Option<u64>,
    /// The system's limit (`/proc/sys/kernel/pty/max`), if readable.
    pub max: Option<u64>,
    /// How many of them this daemon holds (its sessions', exited ones' included).
    pub held_here: usize,
}

impl std::fmt::Display for PtyExhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no pseudo-terminal is free: the kernel refused a new one (ENOSPC)")?;
        if let (Some(in_use), Some(max)) = (self.in_use, self.max) {
            write!(
                f,
                "; {in_use} in use system-wide, limit kernel.pty.max = {max} (a container's \
                 devpts mount may set a lower max=)"
            )?;
        }
        write!(
            f,
            "; this daemon holds {} of them (an exited session keeps its PTY until it is \
             closed)",
            self.held_here
        )
    }
}

impl std::error::Error for PtyExhausted {}

/// Why opening a PTY failed, as an `io::Error`: [`PtyExhausted`] inside when the kernel is
/// out of pseudo-terminals. portable-pty reports `openpty`'s failure as text only, so the
/// cause is asked of the kernel again, the way `openpty` asks it: one open of `/dev/ptmx`
/// (closed at once if it succeeds: something was freed meanwhile, and the original error
/// stands).
pub(super) fn open_failed(e: impl std::fmt::Display) -> io::Error {
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    let flags = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    match open("/dev/ptmx", flags, Mode::empty()) {
        Err(nix::errno::Errno::ENOSPC) => io::Error::other(PtyExhausted {
            in_use: proc_number("/proc/sys/kernel/pty/nr"),
            max: proc_number("/proc/sys/kernel/pty/max"),
            held_here: super::held(),
        }),
        // Dropped: closes the probe's master.
        Ok(_) | Err(_) => io::Error::other(format!("openpty: {e}")),
    }
}

fn proc_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The [`PtyExhausted`] behind a failed start, if that is what it was: `err` itself, the
/// error an `io::Error` wraps, or any error in its source chain.
pub fn pty_exhausted<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a PtyExhausted> {
    if let Some(p) = err.downcast_ref::<PtyExhausted>() {
        return Some(p);
    }
    if let Some(inner) = err.downcast_ref::<io::Error>().and_then(|e| e.get_ref()) {
        return pty_exhausted(inner);
    }
    err.source().and_then(pty_exhausted)
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
pub(super) fn spawn_on_tty(spec: &SpawnSpec, tty: &std::path::Path) -> io::Result<u32> {
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
    let actions = posix::FileActions::new()?;
    actions.chdir(&cwd)?;
    actions.open(0, &tty, libc::O_RDWR)?;
    actions.dup2(0, 1)?;
    actions.dup2(0, 2)?;
    actions.close_from(3)?;
    let attr = posix::Attr::new()?;
    attr.session_leader_with_default_signals()?;
    posix::spawn(&program, &actions, &attr, &argv, &envp)
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
mod posix {
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
