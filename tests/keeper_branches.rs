//! The keeper's branches that `keeper.rs` does not take (issue #20: its own tests cover its
//! every branch): a keeper that cannot start, a detached keeper, giving up after too many
//! crashes, a build on disk that cannot be started or that sends garbage, signals that
//! cross, a `keeper.pid` that is not ours, and the open-files limit. Which branches no test
//! reaches, and why: `docs/recovery.md` ("Keeper tests").

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

fn sid(v: &Value) -> String {
    v["session_id"].as_str().unwrap().to_string()
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a process this test started (or its keeper's daemon).
    unsafe { libc::kill(pid as i32, sig) };
}

/// `maxx daemon` in the foreground under an open-files limit of `n`: what it printed and
/// its exit code.
fn daemon_under_fd_limit(n: u32) -> (Option<i32>, String) {
    let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
    let out = Command::new("prlimit")
        .arg(format!("--nofile={n}:{n}"))
        .arg("--")
        .arg(maxx_bin())
        .args(["daemon", "--log-level", "warn"])
        .env("MAXX_CONTROL_DIR", tmp.path().join("ctl"))
        .env("HOME", tmp.path())
        .stdin(Stdio::null())
        .output()
        .expect("run prlimit");
    assert!(
        !tmp.path().join("ctl/control.sock").exists() || {
            UnixStream::connect(tmp.path().join("ctl/control.sock")).is_err()
        },
        "nothing serves"
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A keeper that cannot set itself up (no descriptor left for the daemon's socketpair; then
/// none at or above 10 for the daemon's end) says why on stderr and exits 1.
#[test]
fn a_keeper_that_cannot_start_says_why_and_exits_1() {
    // 4: stdin, stdout, stderr and the signalfd; 8: the socketpair fits, its copy above 10
    // does not.
    for limit in [4, 8] {
        let (code, stderr) = daemon_under_fd_limit(limit);
        assert_eq!(code, Some(1), "limit {limit}: {stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("limit {limit}: no error object in {stderr}"));
        let err: Value = serde_json::from_str(line).unwrap();
        assert_eq!(err["ok"], false, "{err}");
        assert_eq!(err["error"]["code"], "internal", "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("the keeper could not start: "), "{err}");
        assert!(err["error"]["remedy"].is_string(), "{err}");
    }
}

/// `maxx daemon --detach` whose keeper cannot set up its first daemon: under an open-files
/// limit of 11 the readiness pipe's copy lands at 10 and the daemon's end of the link finds
/// nothing free at 10 or above. The keeper reports it on the readiness pipe, and the command
/// prints the error and exits 1; nothing serves.
#[test]
fn a_detached_keeper_that_cannot_start_reports_on_the_readiness_pipe() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
    let mut cmd = Command::new("prlimit");
    cmd.arg("--nofile=11:11")
        .arg("--")
        .arg(maxx_bin())
        .args(["daemon", "--detach"])
        .env("MAXX_CONTROL_DIR", tmp.path().join("ctl"))
        .env("HOME", tmp.path())
        .stdin(Stdio::null());
    // Nothing inherited past stderr (a harness may leak descriptors): the numbers the keeper
    // gets are then exactly the ones counted above.
    // SAFETY: close_range only marks descriptors close-on-exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    let out = cmd.output().expect("run prlimit");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no error object in {text}"));
    let err: Value = serde_json::from_str(line).unwrap();
    assert_eq!(err["error"]["code"], "internal", "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("the keeper could not start: "), "{err}");
    assert!(!tmp.path().join("ctl/keeper.pid").exists());
}

/// The keeper lifts its open-files soft limit to the hard one (it holds a master per
/// session).
#[test]
fn the_keeper_raises_its_open_files_limit() {
    let d = Daemon::start_with_fd_limit(200, 400);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", d.keeper_pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, ["400", "400"], "{line}");
}

/// A keeper started by `maxx daemon --detach`: its own build at `bin/maxx` in a temp dir (a
/// test can replace it), logging into the control dir's `daemon.log`.
struct Detached {
    tmp: tempfile::TempDir,
    control: PathBuf,
    keeper: u32,
}

impl Detached {
    fn start() -> Detached {
        let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
        let control = tmp.path().join("ctl");
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        if std::fs::hard_link(maxx_bin(), bin.join("maxx")).is_err() {
            std::fs::copy(maxx_bin(), bin.join("maxx")).unwrap();
        }
        let out = Command::new(bin.join("maxx"))
            .args(["daemon", "--detach"])
            .env("MAXX_CONTROL_DIR", &control)
            .env("HOME", tmp.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("MAXX_PROFILES_FILE")
            .env(
                "MAXX_CONTROL_POLICY_FILE",
                tmp.path().join("no-policy.json"),
            )
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let keeper = wait_for("keeper.pid", T, || {
            read(&control.join("keeper.pid"))?.trim().parse().ok()
        });
        Detached {
            tmp,
            control,
            keeper,
        }
    }

    fn log(&self) -> String {
        read(&self.control.join("daemon.log")).unwrap_or_default()
    }

    /// Wait until the keeper's log holds `what`.
    fn wait_log(&self, what: &str) -> String {
        wait_for(&format!("{what:?} in daemon.log"), T, || {
            let log = self.log();
            log.contains(what).then_some(log)
        })
    }

    fn daemon_pid(&self) -> Option<u32> {
        read(&self.control.join("daemon.pid"))?.trim().parse().ok()
    }

    fn call(&self, method: &str, params: Value) -> Value {
        let token = read(&self.control.join("token")).unwrap();
        let req = json!({"token": token.trim(), "method": method, "params": params});
        let mut s = UnixStream::connect(self.control.join("control.sock")).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        s.write_all(&line).unwrap();
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    }

    /// A daemon other than `old` answers.
    fn wait_new_daemon(&self, old: u32) -> u32 {
        wait_for("a new daemon to answer", T, || {
            let pid = self
                .daemon_pid()
                .filter(|p| *p != old && process_alive(*p))?;
            UnixStream::connect(self.control.join("control.sock")).ok()?;
            (self.call("sessions.list", json!({}))["ok"] == true).then_some(pid)
        })
    }

    fn create(&self) -> (String, u32) {
        let r = self.call("sessions.create", json!({"command": "exec sleep 600"}));
        assert_eq!(r["ok"], true, "{r}");
        let id = sid(&r["result"]["session"]);
        (id.clone(), self.get(&id)["pid"].as_u64().unwrap() as u32)
    }

    fn get(&self, id: &str) -> Value {
        let r = self.call("sessions.get", json!({ "session_id": id }));
        assert_eq!(r["ok"], true, "{r}");
        r["result"]["session"].clone()
    }

    /// Put `script` at the keeper's binary path on disk.
    fn replace_binary(&self, script: &str) {
        use std::os::unix::fs::PermissionsExt;
        let next = self.tmp.path().join("bin/next");
        std::fs::write(&next, script).unwrap();
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&next, self.tmp.path().join("bin/maxx")).unwrap();
    }

    fn wait_keeper_gone(&self) {
        wait_for("the keeper to exit", T, || {
            (!process_alive(self.keeper)).then_some(())
        });
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if process_alive(self.keeper) {
            signal(self.keeper, libc::SIGTERM);
            let _ = std::panic::catch_unwind(|| {
                wait_for("the keeper to stop", T, || {
                    (!process_alive(self.keeper)).then_some(())
                })
            });
        }
        if let Some(pid) = self.daemon_pid().filter(|p| process_alive(*p)) {
            signal(pid, libc::SIGKILL);
        }
    }
}

/// Detached, the keeper logs into the control dir (its stderr is /dev/null), says why it
/// stops at the default log level, and removes its `keeper.pid`.
#[test]
fn a_detached_keeper_logs_into_the_control_dir_and_stops_on_sigterm() {
    let d = Detached::start();
    let (_, pid) = d.create();
    signal(d.keeper, libc::SIGTERM);
    d.wait_keeper_gone();
    let log = d.log();
    assert!(
        log.contains(&format!(
            "maxx keeper (pid {}): SIGTERM: stopping the daemon and the sessions",
            d.keeper
        )),
        "{log}"
    );
    assert!(!d.control.join("keeper.pid").exists());
    wait_for("the session's program to end", T, || {
        (!process_alive(pid)).then_some(())
    });
}

/// A `keeper.pid` that names another process (a newer keeper took the control dir over) is
/// left in place when the keeper stops.
#[test]
fn a_keeper_pid_file_naming_another_keeper_is_left_in_place() {
    let d = Detached::start();
    std::fs::write(d.control.join("keeper.pid"), "1\n").unwrap();
    signal(d.keeper, libc::SIGTERM);
    d.wait_keeper_gone();
    assert_eq!(read(&d.control.join("keeper.pid")).unwrap(), "1\n");
}

/// An upgrade to a build on disk that cannot even be started (removed) falls back to the
/// keeper's own build: the sessions live on.
#[test]
fn an_upgrade_to_a_removed_binary_falls_back_to_the_keepers_own() {
    let d = Detached::start();
    let (id, pid) = d.create();
    let old = d.daemon_pid().unwrap();
    std::fs::remove_file(d.tmp.path().join("bin/maxx")).unwrap();
    signal(d.keeper, libc::SIGUSR2);
    let new = d.wait_new_daemon(old);
    let log = d.wait_log("starting the keeper's own build");
    assert!(log.contains("cannot start"), "{log}");
    let s = d.get(&id);
    assert_eq!(s["lifecycle"], "running", "{s}");
    assert_eq!(s["pid"], pid, "{s}");
    assert!(process_alive(d.keeper));
    // And a crash of that daemon restarts the keeper's own build, not the missing one.
    signal(new, libc::SIGKILL);
    d.wait_new_daemon(new);
    assert!(process_alive(pid));
}

/// A daemon that sends the keeper packets it cannot decode is refused (logged once, however
/// many), and the build it came from, never ready, gives way to the keeper's own.
#[test]
fn packets_the_keeper_cannot_decode_are_refused_and_logged_once() {
    let d = Detached::start();
    let (id, pid) = d.create();
    let old = d.daemon_pid().unwrap();
    // It exits only once the keeper has read the packets (its log says so, 10 s at most):
    // a keeper that sees the exit first would otherwise drop them unread.
    let log = d.control.join("daemon.log");
    d.replace_binary(&format!(
        "#!/bin/sh\nprintf garbage >&4\nprintf more >&4\ni=0\n\
         while ! grep -q 'refused a malformed packet' '{}' && [ $i -lt 1000 ]; do\n\
         i=$((i+1)); sleep 0.01; done\nexit 1\n",
        log.display()
    ));
    signal(d.keeper, libc::SIGUSR2);
    let new = d.wait_new_daemon(old);
    let log = d.wait_log("did not start; starting the keeper's own");
    assert_eq!(
        log.matches("refused a malformed packet from the daemon")
            .count(),
        1,
        "{log}"
    );
    assert_ne!(new, old);
    let s = d.get(&id);
    assert_eq!(s["lifecycle"], "running", "{s}");
    assert!(process_alive(pid));
}

/// Past the restart budget (five within a minute) the keeper gives up: it says so, ends the
/// sessions it holds (re-adopted, so its own children) and exits with the daemon's status.
#[test]
fn a_keeper_gives_up_after_too_many_crashes_and_ends_the_sessions() {
    let d = Daemon::start();
    // Ignores SIGHUP, so the keeper's stop waits for SIGTERM to end it.
    let id = sid(&d.create(json!({"command": "trap '' HUP; exec sleep 600"})));
    let pid = d.get(&id)["pid"].as_u64().unwrap() as u32;
    for _ in 0..5 {
        let old = d.pid();
        signal(old, libc::SIGKILL);
        wait_for("a new daemon to answer", T, || {
            let pid = d.daemon_pid().filter(|p| *p != old && process_alive(*p))?;
            (d.call("sessions.list", json!({}))["ok"] == true).then_some(pid)
        });
    }
    signal(d.pid(), libc::SIGKILL);
    wait_for("the keeper to give up", T, || {
        (!process_alive(d.keeper_pid())).then_some(())
    });
    wait_for("the session's program to end", T, || {
        (!process_alive(pid)).then_some(())
    });
}

/// Signals that cross: a SIGUSR2 after a stop was asked for starts no upgrade.
#[test]
fn an_upgrade_asked_after_a_stop_is_ignored() {
    let d = Detached::start();
    let daemon = d.daemon_pid().unwrap();
    // SIGHUP is read before SIGUSR2 when both are pending (lower signals first).
    signal(d.keeper, libc::SIGHUP);
    signal(d.keeper, libc::SIGUSR2);
    d.wait_keeper_gone();
    let log = d.log();
    assert!(log.contains("SIGHUP: stopping"), "{log}");
    assert!(!log.contains("SIGUSR2: upgrading"), "{log}");
    assert!(!process_alive(daemon));
}

/// A second keeper on a live control dir: its daemon is refused (`already_running`) and never
/// serves, so the second keeper exits 1 without touching the first one's `keeper.pid`.
#[test]
fn a_second_keeper_on_a_live_control_dir_leaves_the_first_ones_pid_file() {
    let d = Daemon::start();
    let first = d.keeper_pid();
    wait_for("keeper.pid", T, || read(&d.control.join("keeper.pid")));
    let out = Command::new(maxx_bin())
        .args(["daemon", "--log-level", "warn"])
        .env("MAXX_CONTROL_DIR", &d.control)
        .env("HOME", d.tmp.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already_running"),
        "{out:?}"
    );
    assert_eq!(
        read(&d.control.join("keeper.pid")).unwrap().trim(),
        first.to_string()
    );
    assert_eq!(d.call("sessions.list", json!({}))["ok"], true);
}

/// `N` sessions, then an upgrade to a build on disk that does not read its link until told
/// to: the keeper's handover (N survivors and the end marker) overflows the link's queue (a
/// socketpair holds about 200 packets) and waits. Returns the sessions, the old daemon's
/// pid, the waiting script's pid and the file that lets it go on to the real build.
fn handover_waiting_on_a_full_link(
    d: &Detached,
    n: usize,
) -> (Vec<(String, u32)>, u32, u32, PathBuf) {
    let sessions: Vec<(String, u32)> = (0..n).map(|_| d.create()).collect();
    let old = d.daemon_pid().unwrap();
    // The real build under another name (the same file: the script replaces only the name
    // `bin/maxx`). The script starts it once told to (10 s at most).
    let bin = d.tmp.path().join("bin");
    std::fs::hard_link(bin.join("maxx"), bin.join("real")).unwrap();
    let (started, go) = (d.tmp.path().join("started"), d.tmp.path().join("go"));
    d.replace_binary(&format!(
        "#!/bin/sh\necho $$ > '{}.tmp'; mv '{0}.tmp' '{0}'\ni=0\n\
         while [ ! -e '{}' ] && [ $i -lt 1000 ]; do\n\
         i=$((i+1)); sleep 0.01; done\nexec '{}' \"$@\"\n",
        started.display(),
        go.display(),
        bin.join("real").display()
    ));
    signal(d.keeper, libc::SIGUSR2);
    let script = wait_for("the next daemon's script to start", T, || {
        read(&started)?.trim().parse().ok()
    });
    let log = d.wait_log("handover packets wait for it to read");
    assert!(
        log.contains(&format!("of {} handover packets", n + 1)),
        "{log}"
    );
    (sessions, old, script, go)
}

fn assert_all_running(d: &Detached, sessions: &[(String, u32)]) {
    let list = d.call("sessions.list", json!({}));
    let listed = list["result"]["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), sessions.len(), "{list}");
    for (id, pid) in sessions {
        let s = d.get(id);
        assert_eq!(s["lifecycle"], "running", "{s}");
        assert_eq!(s["pid"], *pid, "{s}");
    }
}

/// A handover larger than the link's queue to a daemon that does not read yet: the keeper
/// says so, waits until the link is writable (POLLOUT) and sends the rest then. Every
/// session arrives, with its pid.
#[test]
fn a_handover_larger_than_the_links_queue_is_sent_as_the_daemon_reads() {
    let d = Detached::start();
    let (sessions, old, _, go) = handover_waiting_on_a_full_link(&d, 500);
    std::fs::write(&go, "").unwrap();
    d.wait_new_daemon(old);
    assert_all_running(&d, &sessions);
    assert!(!d.log().contains("did not start"), "{}", d.log());
}

/// The upgraded build dies while the keeper still waits to hand it sessions: the packets
/// it never read are dropped (sending them fails), and the keeper's own build gets every
/// session in a fresh handover.
#[test]
fn an_upgraded_build_that_dies_mid_handover_gives_way_to_the_keepers_own() {
    let d = Detached::start();
    let (sessions, old, script, _) = handover_waiting_on_a_full_link(&d, 500);
    signal(script, libc::SIGKILL);
    d.wait_new_daemon(old);
    d.wait_log("the upgraded build did not start; starting the keeper's own");
    assert_all_running(&d, &sessions);
}
