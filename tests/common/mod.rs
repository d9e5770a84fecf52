//! Test harness: a real daemon on a temp control dir, driven through the real CLI and the
//! real socket. Waits are on conditions with deadlines, never fixed sleeps.

#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The policy source every test daemon allowlists for screen reads.
pub const READER: &str = "reader";

/// Path of the built `maxx` binary.
pub fn maxx_bin() -> &'static str {
    env!("CARGO_BIN_EXE_maxx")
}

/// The variable that lets a test skip a check this machine cannot run (one that needs root).
/// CI runs as root and never sets it, so there a check that cannot run is a failure, not a
/// silent pass.
pub const ALLOW_SKIP: &str = "MAXX_TEST_ALLOW_SKIP";

/// Say why a check cannot run here. With `MAXX_TEST_ALLOW_SKIP=1` that is a skip (the caller
/// returns after this); without it the test fails with the reason.
#[track_caller]
pub fn skip_or_fail(why: &str) {
    if std::env::var_os(ALLOW_SKIP).is_some_and(|v| v == "1") {
        eprintln!("skipped: {why}");
    } else {
        panic!("cannot run here: {why} (set {ALLOW_SKIP}=1 to let it skip)");
    }
}

/// Poll `cond` until it returns Some or the deadline passes.
pub fn wait_for<T>(what: &str, timeout: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    let mut backoff = Duration::from_millis(2);
    loop {
        if let Some(v) = cond() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_millis(50));
    }
}

/// A daemon running in the foreground on its own temp control dir. `maxx daemon` is the
/// keeper (the child this harness holds), which runs the daemon proper as its child: `pid()`
/// is the daemon serving the socket (`daemon.pid`), `keeper_pid()` the keeper.
pub struct Daemon {
    pub tmp: tempfile::TempDir,
    pub control: PathBuf,
    child: Option<Child>,
    extra: Vec<String>,
    env: Vec<(String, String)>,
    /// The binary `maxx daemon` runs from (the keeper's path on disk).
    bin: PathBuf,
    /// For `MAXX_TEST_FIGURES`: when the first daemon process started, how many were
    /// started, and the highest peak RSS among those that stopped.
    started: Instant,
    launches: u32,
    peak_kib: u64,
}

impl Daemon {
    /// Start a daemon and wait until its socket answers.
    pub fn start() -> Daemon {
        Daemon::start_with(&[])
    }

    /// Start a daemon with extra `maxx daemon` flags.
    pub fn start_with(extra: &[&str]) -> Daemon {
        let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
        let control = tmp.path().join("ctl");
        let extra = extra.iter().map(|s| s.to_string()).collect();
        Daemon::launched(tmp, control, extra, Vec::new())
    }

    /// Start a daemon whose control dir is `control` (which the caller prepared, e.g. a
    /// mount point); policy and HOME still live in a fresh temp dir.
    pub fn start_at(control: PathBuf) -> Daemon {
        let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
        Daemon::launched(tmp, control, Vec::new(), Vec::new())
    }

    /// Start a daemon whose keeper runs from a hard link to the binary at `bin/maxx` in the
    /// test's dir, so a test can replace "the binary on disk" (`maxx daemon upgrade`).
    pub fn start_linked() -> Daemon {
        let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
        let control = tmp.path().join("ctl");
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let linked = bin.join("maxx");
        if std::fs::hard_link(maxx_bin(), &linked).is_err() {
            std::fs::copy(maxx_bin(), &linked).unwrap();
        }
        Daemon::launched_from(tmp, control, linked)
    }

    /// Start `maxx daemon` as `bin` (a link to or a wrapper of the binary).
    fn launched_from(tmp: tempfile::TempDir, control: PathBuf, bin: PathBuf) -> Daemon {
        let mut d = Daemon {
            tmp,
            control,
            child: None,
            extra: Vec::new(),
            env: Vec::new(),
            bin,
            started: Instant::now(),
            launches: 0,
            peak_kib: 0,
        };
        d.launch();
        d
    }

    /// Start a daemon under an open-files limit of `soft`/`hard` (set by `prlimit` from
    /// util-linux around the binary).
    pub fn start_with_fd_limit(soft: u64, hard: u64) -> Daemon {
        Daemon::launched_through(&format!(
            "exec prlimit --nofile={soft}:{hard} -- '{}' \"$@\"",
            maxx_bin()
        ))
    }

    /// Start `maxx daemon` through a shell script whose body is `exec_line` (which execs the
    /// binary with `"$@"`), written to the test's dir.
    fn launched_through(exec_line: &str) -> Daemon {
        let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
        let control = tmp.path().join("ctl");
        let wrapper = tmp.path().join("maxx-wrapped");
        std::fs::write(&wrapper, format!("#!/bin/sh\n{exec_line}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        Daemon::launched_from(tmp, control, wrapper)
    }

    /// Start a daemon in a mount namespace of its own whose `/dev/pts` is a fresh devpts
    /// instance allowing `max` pseudo-terminals (`unshare -m` + `mount -t devpts -o
    /// newinstance,max=N`; needs root): the real kernel limit, reached without touching the
    /// machine's. None when this machine cannot make one.
    pub fn start_with_pty_max(max: u32) -> Option<Daemon> {
        let probe = Command::new("unshare")
            .args(["-m", "--", "sh", "-c"])
            .arg("mount -t devpts -o newinstance devpts /dev/pts")
            .stderr(Stdio::null())
            .status();
        if !probe.is_ok_and(|s| s.success()) {
            return None;
        }
        Some(Daemon::launched_through(&format!(
            "exec unshare -m -- sh -c 'mount -t devpts -o newinstance,ptmxmode=0666,max={max} \
             devpts /dev/pts && mount --bind /dev/pts/ptmx /dev/ptmx && exec \"$0\" \"$@\"' \
             '{}' \"$@\"",
            maxx_bin()
        )))
    }

    /// Start a daemon with extra environment (e.g. a profiles file).
    pub fn start_with_env(env: &[(&str, String)]) -> Daemon {
        let tmp = tempfile::Builder::new().prefix("maxx-t").tempdir().unwrap();
        let control = tmp.path().join("ctl");
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Daemon::launched(tmp, control, Vec::new(), env)
    }

    fn launched(
        tmp: tempfile::TempDir,
        control: PathBuf,
        extra: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Daemon {
        let mut d = Daemon {
            tmp,
            control,
            child: None,
            bin: PathBuf::from(maxx_bin()),
            extra,
            env,
            started: Instant::now(),
            launches: 0,
            peak_kib: 0,
        };
        d.launch();
        d
    }

    fn launch(&mut self) {
        // Every test daemon gets its own policy: the built-ins plus `reader`, a local source
        // the user allowlisted for screen reads (no source holds output:read by default).
        let policy = self.tmp.path().join("control-policy.json");
        if !policy.exists()
            && !self
                .env
                .iter()
                .any(|(k, _)| k == "MAXX_CONTROL_POLICY_FILE")
        {
            std::fs::write(
                &policy,
                json!({"version": 1, "sources": [{
                    "id": READER, "kind": "local",
                    "allow": ["output:read", "tabs:list", "input:send", "keys:press", "surface:attach"],
                    "confirm": [], "confirm_scope": "always"
                }]})
                .to_string(),
            )
            .unwrap();
        }
        let child = Command::new(&self.bin)
            .args(["daemon", "--log-level", "warn"])
            .args(&self.extra)
            .env("MAXX_CONTROL_DIR", &self.control)
            .env("HOME", self.tmp.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("MAXX_PROFILES_FILE")
            .env("MAXX_CONTROL_POLICY_FILE", &policy)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn daemon");
        self.child = Some(child);
        self.launches += 1;
        let sock = self.socket();
        wait_for("the daemon socket", Duration::from_secs(10), || {
            UnixStream::connect(&sock).ok()
        });
        // The socket is bound a moment before daemon.pid is written.
        wait_for("daemon.pid", Duration::from_secs(10), || {
            self.daemon_pid().filter(|p| process_alive(*p))
        });
    }

    /// Stop with `sig` sent to the keeper (the process `maxx daemon` is), which stops the
    /// daemon and ends the sessions on SIGTERM, SIGINT and SIGHUP; wait for it to exit with
    /// the daemon's status. A crash is [`Daemon::crash`].
    pub fn stop_with(&mut self, sig: i32) -> std::process::ExitStatus {
        assert_ne!(
            sig,
            libc::SIGKILL,
            "use crash(): SIGKILL to the keeper alone leaves the daemon"
        );
        if let Some(pid) = self.daemon_pid() {
            self.note_peak(pid);
        }
        let mut child = self.child.take().expect("daemon running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        child.wait().unwrap()
    }

    /// What kill -9 of the daemon did before the keeper existed: kill -9 the keeper and then
    /// the daemon, so nothing restarts it and every PTY master closes (the sessions' programs
    /// are hung up). Returns once both are gone.
    pub fn crash(&mut self) {
        let daemon = self.daemon_pid().expect("a daemon pid");
        self.note_peak(daemon);
        let mut keeper = self.child.take().expect("daemon running");
        // SAFETY: signalling our own child, then the daemon it started.
        unsafe { libc::kill(keeper.id() as i32, libc::SIGKILL) };
        keeper.wait().unwrap();
        unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
        self.wait_lock_free();
    }

    /// Wait until no process holds the control dir's lock: a daemon killed by a signal has
    /// let go of its descriptors only once its last thread is gone (its leader shows as a
    /// zombie before that, and it is not our child to wait for).
    pub fn wait_lock_free(&self) {
        use std::os::fd::AsRawFd;
        let lock = self.control.join("daemon.lock");
        wait_for(
            "the daemon's lock to be free",
            Duration::from_secs(10),
            || {
                let file = std::fs::File::open(&lock).ok()?;
                // SAFETY: flock on a descriptor we own; released when the file closes.
                let got = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
                (got == 0).then_some(())
            },
        );
    }

    /// The daemon's pid as `daemon.pid` names it now.
    pub fn daemon_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.control.join("daemon.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The keeper's pid (the `maxx daemon` process this harness started).
    pub fn keeper_pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Start the daemon again on the same control dir.
    pub fn restart(&mut self) {
        self.launch();
    }

    pub fn socket(&self) -> PathBuf {
        self.control.join("control.sock")
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.control.join("token"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// A path inside the test's temp dir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Run the CLI against this daemon.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(maxx_bin())
            .args(args)
            .env("MAXX_CONTROL_DIR", &self.control)
            .env_remove("MAXX_SESSION_ID")
            .env_remove("MAXX_SURFACE_ID")
            .env_remove("MAXX_REGISTRATION_TOKEN")
            .current_dir(self.tmp.path())
            .output()
            .expect("run maxx")
    }

    /// Run the CLI and parse stdout as JSON (panics unless it exits 0).
    pub fn cli_ok(&self, args: &[&str]) -> Value {
        let out = self.cli(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "maxx {args:?} failed: stdout={} stderr={}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("stdout is JSON")
    }

    /// Send raw bytes on a fresh connection; return the response line parsed.
    pub fn raw(&self, bytes: &[u8]) -> Value {
        let mut s = UnixStream::connect(self.socket()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // The daemon may answer and close before reading everything (too_large).
        let _ = s.write_all(bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad response {line:?}: {e}"))
    }

    /// A request with the right token.
    pub fn call(&self, method: &str, params: Value) -> Value {
        let req = json!({"token": self.token(), "method": method, "params": params});
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.raw(&line)
    }

    /// A request as a given policy source (`caller`).
    pub fn call_as(&self, caller: &str, method: &str, params: Value) -> Value {
        let req =
            json!({"token": self.token(), "method": method, "params": params, "caller": caller});
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.raw(&line)
    }

    /// A request as `caller` that must succeed; returns `result`.
    pub fn ok_as(&self, caller: &str, method: &str, params: Value) -> Value {
        let r = self.call_as(caller, method, params.clone());
        assert_eq!(r["ok"], true, "{method} {params} as {caller} failed: {r}");
        r["result"].clone()
    }

    /// A request that must succeed; returns `result`.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        let r = self.call(method, params.clone());
        assert_eq!(r["ok"], true, "{method} {params} failed: {r}");
        r["result"].clone()
    }

    /// A request that must fail with `code`; returns the response.
    pub fn err(&self, method: &str, params: Value, code: &str) -> Value {
        let r = self.call(method, params.clone());
        assert_eq!(
            r["ok"], false,
            "{method} {params} unexpectedly succeeded: {r}"
        );
        assert_eq!(r["error"]["code"], code, "{method} {params}: {r}");
        r
    }

    /// Create a session; returns its view.
    pub fn create(&self, params: Value) -> Value {
        self.ok("sessions.create", params)["session"].clone()
    }

    /// The record of a session.
    pub fn get(&self, id: &str) -> Value {
        self.ok("sessions.get", json!({ "session_id": id }))["session"].clone()
    }

    /// How many sessions exist.
    pub fn count(&self) -> usize {
        self.ok("sessions.list", json!({}))["sessions"]
            .as_array()
            .unwrap()
            .len()
    }

    /// Run the CLI in the background (for waits); join the handle for its output.
    pub fn cli_bg(&self, args: &[&str]) -> std::thread::JoinHandle<Output> {
        let control = self.control.clone();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        std::thread::spawn(move || {
            Command::new(maxx_bin())
                .args(&args)
                .env("MAXX_CONTROL_DIR", control)
                .output()
                .unwrap()
        })
    }

    /// A counter from `daemon.stats`.
    pub fn stat(&self, name: &str) -> i64 {
        self.ok("daemon.stats", json!({}))[name].as_i64().unwrap()
    }

    /// Wait until a `daemon.stats` counter reaches `n`.
    pub fn wait_stat(&self, name: &str, n: i64) {
        wait_for(
            &format!("stats.{name} == {n}"),
            Duration::from_secs(10),
            || (self.stat(name) == n).then_some(()),
        );
    }

    /// Open a raw streaming request; read lines with [`Lines::next`].
    pub fn open_stream(&self, method: &str, params: Value) -> Lines {
        let mut s = UnixStream::connect(self.socket()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = json!({"token": self.token(), "method": method, "params": params});
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        Lines {
            reader: BufReader::new(s),
        }
    }

    /// Pid of the daemon process (the one serving the socket).
    pub fn pid(&self) -> u32 {
        self.daemon_pid().expect("daemon.pid names the daemon")
    }

    /// Whether the keeper and the daemon it ran at this call are still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().unwrap().try_wait(), Ok(None))
            && self.daemon_pid().is_some_and(process_alive)
    }
}

impl Daemon {
    /// Fold a daemon process's peak RSS into the figures (its `VmHWM`, read while it lives).
    fn note_peak(&mut self, pid: u32) {
        let kib = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0);
        self.peak_kib = self.peak_kib.max(kib);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let daemon = self.daemon_pid();
        if let Some(pid) = daemon {
            self.note_peak(pid);
        }
        if std::env::var_os("MAXX_TEST_FIGURES").is_some() {
            // For docs/reliability.md: per test, the daemon's peak RSS and how long it ran.
            eprintln!(
                "figures: {}: {} daemon process(es), peak RSS {} KiB, {:.2} s",
                std::thread::current().name().unwrap_or("?"),
                self.launches,
                self.peak_kib,
                self.started.elapsed().as_secs_f64()
            );
        }
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // A daemon whose keeper is gone (a test killed it, or it did not stop in time) is
        // not left behind: stopped cleanly if it can be, else killed.
        if let Some(pid) = daemon.filter(|p| process_alive(*p)) {
            // SAFETY: the daemon our keeper started.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while process_alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if process_alive(pid) {
                // SAFETY: as above.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// Whether `pid` runs (a zombie has ended).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A raw NDJSON stream.
pub struct Lines {
    pub reader: BufReader<UnixStream>,
}

impl Lines {
    /// The next line, parsed.
    pub fn next(&mut self) -> Value {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }
}

/// Read a file if it exists.
pub fn read(path: &Path) -> Option<String> {
    let mut s = String::new();
    std::fs::File::open(path)
        .ok()?
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// Replace ids, times, pids and paths so a JSON shape can be snapshotted.
pub fn redact(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, val) in map.iter_mut() {
                    let placeholder = match k.as_str() {
                        "session_id" | "surface_id" | "split_target" => Some("[id]"),
                        k if k.ends_with("_at") => Some("[time]"),
                        "cwd" => Some("[cwd]"),
                        "pid" if !val.is_null() => Some("[pid]"),
                        _ => None,
                    };
                    match placeholder {
                        Some(p) if !val.is_null() => *val = Value::String(p.into()),
                        _ => walk(val),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            Value::String(text) => *text = redact_paths(text),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// Replace temp paths (`/tmp/...` up to a space, quote or backtick) with `[path]`.
fn redact_paths(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/tmp/") {
        out.push_str(&rest[..i]);
        out.push_str("[path]");
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '`' || c == '"' || c == ')')
            .unwrap_or(tail.len());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Snapshot a JSON value (after [`redact`]) into the top-level `snapshots/maxx/`.
#[macro_export]
macro_rules! maxx_snapshot {
    ($name:expr, $value:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/maxx"));
        settings.set_prepend_module_to_snapshot(false);
        let redacted = $crate::common::redact($value);
        settings.bind(|| {
            insta::assert_json_snapshot!($name, redacted);
        });
    }};
}

/// Path of a program built from `examples/` (`cargo test` builds the examples next to the
/// test binary's `deps/` folder, in `target/<profile>/examples/`).
pub fn example_bin(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: the examples are built by `cargo test` (or `cargo build --examples`)",
        path.display()
    );
    path.display().to_string()
}
