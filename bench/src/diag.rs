//! `maxx-bench diag-spawn`: why maxx's spawn and reap cost what they do, isolated from the
//! daemon. Spawns `/bin/sh -c ': > marker; exec sleep'` in a PTY from this process with
//! three pre-exec variants, with few and with many open fds (a daemon with 1,000 sessions
//! holds ~3 fds per session):
//!
//! - `minimal`: setsid + TIOCSCTTY (the bare baseline of the main table);
//! - `portable_pty`: what portable-pty 0.9 runs before exec: reset 6 signal dispositions,
//!   clear the signal mask, setsid, TIOCSCTTY, then `close_random_fds()` = list `/dev/fd`
//!   (i.e. `/proc/self/fd`) and close every fd above 2;
//! - `close_range`: the same, but closing with one `close_range(3, ~0, 0)` syscall;
//! - `posix_spawn`: no fork at all (see [`posix_spawn`]).
//!
//! For each: time until the child runs (marker), and time to reap it after it exited
//! (`waitpid` on a zombie: the kernel frees the child's /proc dentries there).

use crate::util::{median, ms, percentile, Inotify, TempDir, R};
use serde_json::{json, Value};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Minimal,
    PortablePty,
    CloseRange,
    PosixSpawn,
}

/// `posix_spawn` (vfork-style: no page-table copy, no copy-on-write faults): a new session
/// (POSIX_SPAWN_SETSID), signal mask cleared and dispositions reset, and the slave opened
/// by path as fd 0 — a session leader without a controlling terminal that opens a tty
/// without O_NOCTTY acquires it, so no TIOCSCTTY is needed. Every other fd is CLOEXEC.
fn posix_spawn(cmd: &str, master: &OwnedFd) -> R<libc::pid_t> {
    use std::ffi::CString;
    let mut name = [0 as libc::c_char; 128];
    if unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) } != 0 {
        return Err(io::Error::last_os_error().into());
    }
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        let mut defaults: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut defaults);
        for sig in [
            libc::SIGCHLD,
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGTERM,
            libc::SIGALRM,
            libc::SIGPIPE,
        ] {
            libc::sigaddset(&mut defaults, sig);
        }
        libc::posix_spawnattr_setsigmask(&mut attr, &empty);
        libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
        libc::posix_spawnattr_setflags(
            &mut attr,
            (libc::POSIX_SPAWN_SETSID as i32
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short,
        );
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        libc::posix_spawn_file_actions_addopen(&mut fa, 0, name.as_ptr(), libc::O_RDWR, 0);
        libc::posix_spawn_file_actions_adddup2(&mut fa, 0, 1);
        libc::posix_spawn_file_actions_adddup2(&mut fa, 0, 2);
        let sh = CString::new("/bin/sh")?;
        let dash_c = CString::new("-c")?;
        let c = CString::new(cmd)?;
        let argv = [
            sh.as_ptr() as *mut libc::c_char,
            dash_c.as_ptr() as *mut _,
            c.as_ptr() as *mut _,
            std::ptr::null_mut(),
        ];
        extern "C" {
            static environ: *const *mut libc::c_char;
        }
        let mut pid: libc::pid_t = 0;
        let rc = libc::posix_spawn(&mut pid, sh.as_ptr(), &fa, &attr, argv.as_ptr(), environ);
        libc::posix_spawn_file_actions_destroy(&mut fa);
        libc::posix_spawnattr_destroy(&mut attr);
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc).into());
        }
        Ok(pid)
    }
}

fn spawn(cmd: &str, v: Variant) -> R<(OwnedFd, libc::pid_t)> {
    let mut m = -1;
    let mut s = -1;
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error().into());
    }
    let master = unsafe { OwnedFd::from_raw_fd(m) };
    let slave = unsafe { OwnedFd::from_raw_fd(s) };
    unsafe {
        libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(slave.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
    if v == Variant::PosixSpawn {
        let pid = posix_spawn(cmd, &master)?;
        drop(slave);
        return Ok((master, pid));
    }
    let mut c = Command::new("/bin/sh");
    c.arg("-c")
        .arg(cmd)
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    unsafe {
        c.pre_exec(move || {
            if v != Variant::Minimal {
                for sig in [
                    libc::SIGCHLD,
                    libc::SIGHUP,
                    libc::SIGINT,
                    libc::SIGQUIT,
                    libc::SIGTERM,
                    libc::SIGALRM,
                ] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                let empty: libc::sigset_t = std::mem::zeroed();
                libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            }
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            match v {
                Variant::Minimal => {}
                Variant::PortablePty => {
                    // portable_pty::unix::close_random_fds, verbatim in effect.
                    if let Ok(dir) = std::fs::read_dir("/dev/fd") {
                        let mut fds = vec![];
                        for entry in dir {
                            if let Some(n) = entry
                                .ok()
                                .and_then(|e| e.file_name().into_string().ok())
                                .and_then(|n| n.parse::<libc::c_int>().ok())
                            {
                                if n > 2 {
                                    fds.push(n);
                                }
                            }
                        }
                        for fd in fds {
                            libc::close(fd);
                        }
                    }
                }
                Variant::CloseRange => {
                    libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
                }
                Variant::PosixSpawn => unreachable!(),
            }
            Ok(())
        });
    }
    let child = c.spawn()?;
    drop(c);
    Ok((master, child.id() as libc::pid_t))
}

/// Whether the slave is the child's controlling terminal (the terminal's foreground
/// process group is the child's).
fn controls(master: &OwnedFd, pid: libc::pid_t) -> bool {
    let mut pgrp: libc::pid_t = 0;
    let rc = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPGRP, &mut pgrp) };
    rc == 0 && pgrp == pid
}

pub fn run(iters: usize) -> R<Value> {
    let dir = TempDir::new("maxx-bench-diag-")?;
    let mut ino = Inotify::new(dir.path())?;
    let mut out = serde_json::Map::new();
    for extra in [0usize, 3000] {
        // Hold `extra` more fds, as a daemon with extra/3 sessions does, and with them a
        // daemon-sized heap (fork copies the page tables of all of it).
        let ballast: Vec<u8> = if extra > 0 {
            vec![1u8; 32 << 20]
        } else {
            Vec::new()
        };
        let devnull = std::fs::File::open("/dev/null")?;
        let held: Vec<OwnedFd> = (0..extra)
            .map(|_| {
                let fd = unsafe { libc::fcntl(devnull.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
                unsafe { OwnedFd::from_raw_fd(fd) }
            })
            .collect();
        for (vname, v) in [
            ("minimal", Variant::Minimal),
            ("portable_pty", Variant::PortablePty),
            ("close_range", Variant::CloseRange),
            ("posix_spawn", Variant::PosixSpawn),
        ] {
            let mut run_ms = Vec::new();
            let mut kids = Vec::new();
            for i in 0..iters {
                let name = format!("{vname}-{extra}-{i}");
                let cmd = format!(": > {}; exec sleep 100000", dir.join(&name).display());
                let t = Instant::now();
                kids.push(spawn(&cmd, v)?);
                ino.wait(&name, Duration::from_secs(10))?;
                run_ms.push(ms(t.elapsed()));
            }
            let ctty = kids.iter().all(|(m, pid)| controls(m, *pid));
            // Kill all, let them become zombies, then time each reap.
            for (_, pid) in &kids {
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(300));
            let mut reap_ms = Vec::new();
            for (_, pid) in kids.iter() {
                let t = Instant::now();
                let mut st = 0;
                unsafe { libc::waitpid(*pid, &mut st, 0) };
                reap_ms.push(ms(t.elapsed()));
            }
            drop(kids);
            eprintln!(
                "  diag {extra:>4} extra fds, {vname:<12}: child running p50 {:.3} ms (p90 {:.3}); reap p50 {:.3} ms; controlling tty: {ctty}",
                median(&run_ms),
                percentile(&run_ms, 90.0),
                median(&reap_ms)
            );
            out.insert(
                format!("{vname}_{extra}_fds"),
                json!({"child_running_p50_ms": median(&run_ms), "child_running_p90_ms": percentile(&run_ms, 90.0), "reap_p50_ms": median(&reap_ms), "controlling_tty": ctty}),
            );
        }
        drop(held);
        drop(ballast);
    }
    Ok(Value::Object(out))
}
