//! Hostile callers against the daemon itself (issue 18, items 5, 10 and 18): single-instance
//! ownership that does not depend on connecting, files in the control dir that are symlinks
//! or FIFOs, and session programs that ignore the hangup.

use crate::common::{maxx_bin, skip_or_fail, wait_for, Daemon};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

/// The error object a failed CLI printed on stderr.
fn stderr_error(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON error on stderr: {text}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("bad error line {line:?}: {e}"))
}

/// `maxx daemon [args]` on `control` (not through the harness), bounded by `limit`.
fn maxx_daemon(control: &Path, home: &Path, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(maxx_bin())
        .arg("daemon")
        .args(args)
        .env("MAXX_CONTROL_DIR", control)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("MAXX_PROFILES_FILE")
        .env("MAXX_CONTROL_POLICY_FILE", home.join("no-policy.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let done = wait_for_exit(&mut child, limit);
    if !done {
        // A second daemon that started serving instead of refusing: stop it, then fail.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        done,
        "maxx daemon {args:?} did not exit within {limit:?}: {out:?}"
    );
    out
}

fn wait_for_exit(child: &mut std::process::Child, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills a detached daemon a test started (found by its pid file) when dropped.
struct DetachedGuard(PathBuf);

impl Drop for DetachedGuard {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.0.join("daemon.pid")) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                // SAFETY: a daemon this test started.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
    }
}

/// A non-blocking connect to `socket`: `Ok(fd)` when queued or accepted, `Err(errno)`.
fn nonblocking_connect(socket: &Path) -> Result<OwnedFd, i32> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: plain socket calls on a fresh fd; the address is built in place.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let owned = OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = socket.as_os_str().as_bytes();
        assert!(bytes.len() < addr.sun_path.len());
        for (i, b) in bytes.iter().enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) == 0 {
            Ok(owned)
        } else {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        }
    }
}

/// Item 5: a full listen queue (every connection slot taken by idle clients that send no
/// token, and the kernel's backlog full behind them) made a second daemon's liveness probe
/// fail with EAGAIN; it unlinked the live socket and took over. Ownership is now a lock.
#[test]
fn a_second_daemon_refuses_while_the_first_serves_even_with_a_full_listen_queue() {
    let d = Daemon::start();
    let socket = d.socket();
    let before = std::fs::metadata(&socket).unwrap().ino();
    // Fill the daemon's connection slots and then the kernel's backlog until a connect
    // answers EAGAIN (the daemon's read timeout frees the slots after 10 s, so be quick).
    let mut held = Vec::new();
    let mut saw_eagain = false;
    for _ in 0..20_000 {
        match nonblocking_connect(&socket) {
            Ok(fd) => held.push(fd),
            Err(libc::EAGAIN) => {
                saw_eagain = true;
                break;
            }
            Err(e) => panic!(
                "connect failed with errno {e} after {} connections",
                held.len()
            ),
        }
    }
    assert!(
        saw_eagain,
        "{} connections never filled the listen queue",
        held.len()
    );
    let home = d.tmp.path();
    for args in [&["--detach"][..], &[][..]] {
        let out = maxx_daemon(&d.control, home, args, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(1), "maxx daemon {args:?}: {out:?}");
        assert!(out.stdout.is_empty());
        let err = stderr_error(&out);
        assert_eq!(err["ok"], false);
        assert_eq!(err["error"]["code"], "already_running", "{err}");
        assert!(err["error"]["remedy"].is_string(), "{err}");
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&d.pid().to_string()),
            "names the running daemon's pid: {err}"
        );
        // The live socket is untouched.
        let meta = std::fs::symlink_metadata(&socket).expect("the socket is still there");
        assert_eq!(meta.ino(), before, "the socket was replaced");
    }
    drop(held);
    // The first daemon keeps serving on its own socket.
    let listed = wait_for(
        "the first daemon to answer",
        Duration::from_secs(20),
        || {
            let r = d.call("sessions.list", json!({}));
            (r["ok"] == true).then_some(r)
        },
    );
    assert!(listed["result"]["sessions"].is_array());
    assert_eq!(std::fs::metadata(&socket).unwrap().ino(), before);
    let lock = std::fs::symlink_metadata(d.control.join("daemon.lock")).unwrap();
    assert!(lock.file_type().is_file());
    assert_eq!(lock.mode() & 0o777, 0o600);
}

/// Item 5: a daemon only removes the socket it created. A socket someone else put at the
/// path while it ran is left alone when it stops.
#[test]
fn a_stopping_daemon_leaves_a_socket_it_did_not_create() {
    let mut d = Daemon::start();
    let socket = d.socket();
    // Replace the socket (rename keeps the dir's inotify watch quiet about a removal of
    // `control.sock`: it reports a move *to* the name).
    let other = d.control.join("other.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&other).unwrap();
    std::fs::rename(&other, &socket).unwrap();
    let replaced = std::fs::metadata(&socket).unwrap().ino();
    let status = d.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status:?}");
    let meta = std::fs::symlink_metadata(&socket).expect("the other socket is still there");
    assert_eq!(meta.ino(), replaced);
}

/// Item 10: `daemon.log` (and the lock file) as a symlink are refused, never written
/// through; nothing is left serving.
#[test]
fn symlinked_log_and_lock_files_are_refused_and_never_written_through() {
    let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
    for name in ["daemon.log", "daemon.lock"] {
        let control = tmp.path().join(format!("ctl-{name}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&control)
            .unwrap();
        let target = tmp.path().join(format!("victim-{name}"));
        std::fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, control.join(name)).unwrap();
        let _guard = DetachedGuard(control.clone());
        let out = maxx_daemon(
            &control,
            tmp.path(),
            &["--detach", "--log-level", "info"],
            Duration::from_secs(15),
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {out:?}");
        let err = stderr_error(&out);
        assert_eq!(err["error"]["code"], "unsafe_file", "{name}: {err}");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(name),
            "{err}"
        );
        assert!(err["error"]["remedy"].is_string(), "{err}");
        assert_eq!(
            std::fs::read(&target).unwrap().len(),
            0,
            "{name}: written through the symlink"
        );
        assert!(
            UnixStream::connect(control.join("control.sock")).is_err(),
            "{name}: a daemon serves anyway"
        );
    }
}

/// Item 10: a FIFO as the profiles file blocked every worker that opened it. Now each
/// create that names a profile is refused with `unsafe_file`, and others are served.
#[test]
fn a_fifo_profiles_file_is_refused_without_blocking_creates() {
    let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
    let fifo = tmp.path().join("agent-profiles.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let d = Daemon::start_with_env(&[("MAXX_PROFILES_FILE", fifo.display().to_string())]);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (socket, token) = (d.socket(), d.token());
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(socket).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let req = json!({"token": token, "method": "sessions.create",
                    "params": {"profile": "agent", "command": "sleep 30"}});
                s.write_all(format!("{req}\n").as_bytes()).unwrap();
                let mut line = String::new();
                BufReader::new(s)
                    .read_line(&mut line)
                    .expect("a create with a FIFO profiles file is answered");
                serde_json::from_str::<Value>(&line).unwrap()
            })
        })
        .collect();
    for h in handles {
        let r = h.join().unwrap();
        assert_eq!(r["ok"], false, "{r}");
        assert_eq!(r["error"]["code"], "unsafe_file", "{r}");
        assert!(r["error"]["remedy"].is_string(), "{r}");
    }
    let r = d.call("profiles.list", json!({}));
    assert_eq!(r["error"]["code"], "unsafe_file", "{r}");
    let r = d.call("sessions.create", json!({"command": "sleep 30"}));
    assert_eq!(r["ok"], true, "{r}");
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet: it runs nothing).
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat[stat.rfind(')').unwrap() + 2..].starts_with('Z'),
    }
}

/// When `pid` started (clock ticks since boot, `/proc/PID/stat` field 22), if it runs.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis: state is field 3, starttime 22.
    stat[stat.rfind(')')? + 2..]
        .split(' ')
        .nth(22 - 3)
        .and_then(|t| t.parse().ok())
}

/// Whether the process that had `pid` and started at `start` is gone: no such pid, a
/// zombie, or the pid now belongs to a newer process (the rest of the suite spawns many;
/// a pid can be reused within seconds).
fn gone(pid: i32, start: Option<u64>) -> bool {
    dead(pid) || start_time(pid) != start
}

fn read_pid(path: &Path) -> i32 {
    wait_for("the grandchild's pid file", Duration::from_secs(10), || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
}

/// The leader ignores SIGHUP and SIGTERM; a background grandchild in its group too.
fn stubborn(pidfile: &Path) -> String {
    format!(
        "trap '' HUP TERM; sleep 1000 & echo $! > {}; exec sleep 1000",
        pidfile.display()
    )
}

/// The leader dies of the hangup; its background grandchild ignores SIGHUP and SIGTERM.
fn stubborn_grandchild(pidfile: &Path, then: &str) -> String {
    // The grandchild writes its pid once it ignores the signals, and the leader goes on
    // only then (a leader that exits first hangs up a grandchild not yet ignoring them).
    let f = pidfile.display();
    format!(
        "sh -c 'trap \"\" HUP TERM; echo $$ > {f}; exec sleep 1000' & \
         until [ -s {f} ]; do sleep 0.01; done; {then}"
    )
}

/// Item 18: cancel and close end the session's whole process group, escalating to
/// SIGKILL, whether the leader or a grandchild ignores the hangup, and also what a program
/// that already exited left running in its group.
#[test]
fn cancel_and_close_end_the_whole_process_group() {
    let d = Daemon::start();
    let cases = [
        (
            "leader and grandchild ignore",
            stubborn(&d.path("a.pid")),
            "a.pid",
            false,
        ),
        (
            "grandchild ignores",
            stubborn_grandchild(&d.path("b.pid"), "wait"),
            "b.pid",
            false,
        ),
        (
            "leader exited, grandchild ignores",
            stubborn_grandchild(&d.path("c.pid"), "exit 3"),
            "c.pid",
            true,
        ),
    ];
    for (what, command, pidfile, exits) in cases {
        let s = d.create(json!({ "command": command }));
        let id = sid(&s);
        let leader = s["pid"].as_i64().unwrap() as i32;
        let grandchild = read_pid(&d.path(pidfile));
        if exits {
            d.ok(
                "sessions.wait",
                json!({"session_id": id, "lifecycle": "exited", "timeout": 10}),
            );
            assert!(!dead(grandchild), "{what}: the grandchild runs on");
            d.ok("sessions.cancel", json!({"session_id": id}));
        } else {
            d.ok("sessions.cancel", json!({"session_id": id}));
        }
        wait_for(
            &format!("{what}: the session's group to end"),
            Duration::from_secs(10),
            || (dead(leader) && dead(grandchild)).then_some(()),
        );
    }
}

/// Item 18: a clean daemon stop ends every session's group before the daemon exits, even
/// a program that ignores SIGHUP and SIGTERM.
#[test]
fn a_clean_daemon_stop_ends_every_sessions_process_group() {
    let mut d = Daemon::start();
    let a = d.create(json!({ "command": stubborn(&d.path("a.pid")) }));
    let b = d.create(json!({ "command": stubborn_grandchild(&d.path("b.pid"), "wait") }));
    let pids = [
        a["pid"].as_i64().unwrap() as i32,
        read_pid(&d.path("a.pid")),
        b["pid"].as_i64().unwrap() as i32,
        read_pid(&d.path("b.pid")),
    ];
    let starts = pids.map(start_time);
    let status = d.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status:?}");
    // The daemon waited for them: they are gone as soon as it has exited (the grandchildren
    // were re-parented away from it, so allow for their reaping).
    let alive = || {
        pids.iter()
            .zip(starts)
            .filter(|(p, s)| !gone(**p, *s))
            .map(|(p, _)| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                format!("{p}: {stat}")
            })
            .collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !alive().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "every session's program should have ended with the daemon: {:?}",
            alive()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Item 9: connections that send a large partial line and no token. Before: each held up
/// to 1 MiB until its 10 s read timeout, so 4,000 of them cost 4.1 GB before any token was
/// checked. Now all not-yet-authenticated lines together may hold 64 MiB beyond 8 KiB each
/// (`UNAUTH_BUDGET_BYTES`, `UNAUTH_FREE_BYTES`): a line that would take more is answered
/// `too_large` and closed, `daemon.stats` shows the charge and the refusals, RSS stays
/// under the bound, and a normal request is answered while the flood is held open.
#[test]
fn unauthenticated_partial_lines_are_bounded_in_total() {
    const CONNECTIONS: usize = 256;
    const BUDGET_MIB: u64 = 64;
    let d = Daemon::start();
    let pid = d.pid();
    // Warm up: one ordinary request, so the baseline includes a served connection.
    d.ok("daemon.stats", json!({}));
    let before = rss_kib(pid);
    let partial = vec![b'x'; 1024 * 1024 - 64];
    let mut held = Vec::with_capacity(CONNECTIONS);
    let mut refused = 0usize;
    for _ in 0..CONNECTIONS {
        let mut s = UnixStream::connect(d.socket()).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        // The daemon may answer and close before reading everything.
        if s.write_all(&partial).is_err() {
            refused += 1;
        }
        held.push(s);
    }
    // All of them are still within their 10 s read timeout: measure now.
    let stats = d.ok("daemon.stats", json!({}));
    let after = rss_kib(pid);
    let grown_mib = after.saturating_sub(before) / 1024;
    eprintln!("unauthenticated flood: RSS {before} -> {after} KiB, {refused} refused");
    assert!(
        grown_mib <= 2 * BUDGET_MIB,
        "RSS grew {grown_mib} MiB ({before} -> {after} KiB) for {CONNECTIONS} x 1 MiB \
         partial lines; the bound is {BUDGET_MIB} MiB + 8 KiB a connection"
    );
    let charged = stats["unauthenticated_bytes"]
        .as_i64()
        .unwrap_or_else(|| panic!("daemon.stats has unauthenticated_bytes: {stats}"));
    assert!(
        charged as u64 <= BUDGET_MIB << 20,
        "charged {charged} bytes: {stats}"
    );
    assert!(
        stats["unauthenticated_refused"].as_i64().unwrap() > 0,
        "{stats}"
    );
    assert!(refused > 0, "no connection was refused");
    // A normal request is answered while the flood is held open, and a refused one is
    // typed with a remedy.
    let created = d.create(json!({"command": "sleep 60"}));
    assert!(created["session_id"].is_string(), "{created}");
    let mut line = String::new();
    let last = held.pop().unwrap();
    last.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = BufReader::new(&last).read_line(&mut line);
    if !line.is_empty() {
        let r: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(r["error"]["code"], "too_large", "{r}");
        assert!(r["error"]["remedy"].is_string(), "{r}");
    }
    drop(held);
}

/// #23: the daemon raises its open-files soft limit to the hard one and refuses a create
/// that would pass what that leaves for sessions (`fd_limit`, exit 1) instead of failing
/// inside a spawn or starving the listener; closing a session makes room again.
#[test]
fn sessions_past_the_open_files_limit_are_refused_fd_limit_and_the_daemon_keeps_serving() {
    // Hard 160: a reserve of 64, (160 - 64) / 4 = 24 sessions. The soft 100 is raised.
    let d = Daemon::start_with_fd_limit(100, 160);
    let stats = d.ok("daemon.stats", json!({}));
    assert_eq!(stats["fd_limit"], 160, "{stats}");
    assert_eq!(stats["session_capacity"], 24, "{stats}");
    let ids: Vec<String> = (0..24)
        .map(|_| {
            d.create(json!({"command": "exec sleep 600"}))["session_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let before = d.count();
    let refused = d.err(
        "sessions.create",
        json!({"command": "exec sleep 600"}),
        "fd_limit",
    );
    assert!(
        refused["error"]["remedy"]
            .as_str()
            .unwrap()
            .contains("ulimit"),
        "{refused}"
    );
    assert_eq!(d.count(), before, "nothing was created");
    let out = d.cli(&["sessions", "create", "--command", "true"]);
    assert_eq!(out.status.code(), Some(1));
    // Every session still works, and the daemon still takes connections.
    for id in &ids {
        assert_eq!(d.get(id)["lifecycle"], "running");
    }
    // Room again once a session's actor is gone.
    d.ok(
        "sessions.action",
        json!({"session_id": ids[0], "action": "close"}),
    );
    wait_for("room for one more session", Duration::from_secs(20), || {
        let r = d.call("sessions.create", json!({"command": "exec sleep 600"}));
        (r["ok"] == true).then_some(())
    });
}

/// When the kernel has no pseudo-terminal left (here a devpts instance of its own allowing
/// two), a create is refused `pty_exhausted` (exit 1, the count in the message), not
/// `internal`, and nothing is recorded; so is a restart of a closed session, which stays
/// closed; a freed PTY makes room again.
#[test]
fn a_create_when_the_kernel_has_no_pty_left_is_refused_pty_exhausted() {
    let Some(d) = Daemon::start_with_pty_max(2) else {
        return skip_or_fail("unshare -m and a devpts mount need root");
    };
    let a = d.create(json!({"command": "exec sleep 600"}))["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    d.create(json!({"command": "exec sleep 600"}));
    // Both acknowledged creates are counted at once (their records registered first).
    let records = d.ok("daemon.stats", json!({}))["records"].clone();
    assert_eq!(records, 2);
    let refused = d.err(
        "sessions.create",
        json!({"command": "exec sleep 600"}),
        "pty_exhausted",
    );
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("no pseudo-terminal is free"), "{refused}");
    assert!(message.contains("kernel.pty.max"), "{refused}");
    assert!(message.contains("this daemon holds 2 of them"), "{refused}");
    assert!(
        refused["error"]["remedy"]
            .as_str()
            .unwrap()
            .contains("sysctl"),
        "{refused}"
    );
    assert_eq!(d.ok("daemon.stats", json!({}))["records"], records);
    assert_eq!(d.count(), 2, "nothing was created");
    let out = d.cli(&["sessions", "create", "--command", "true"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pty_exhausted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Close `a` (its PTY is freed once its program is gone), take the PTY with a new
    // session, then restart `a`: refused the same way, and `a` stays as it was.
    d.ok(
        "sessions.action",
        json!({"session_id": a, "action": "close"}),
    );
    let c = wait_for("a PTY freed by the close", Duration::from_secs(20), || {
        let r = d.call("sessions.create", json!({"command": "exec sleep 600"}));
        (r["ok"] == true).then(|| r["result"]["session"]["session_id"].clone())
    });
    let before = d.get(&a);
    d.err(
        "sessions.restart",
        json!({"session_id": a}),
        "pty_exhausted",
    );
    let after = d.get(&a);
    assert_eq!(after["lifecycle"], "closed", "{after}");
    assert_eq!(after["restart_count"], before["restart_count"]);
    // Every session the daemon did start still runs.
    assert_eq!(d.get(c.as_str().unwrap())["lifecycle"], "running");
}
