//! A `maxx daemon` on a private temp control dir, and an in-process socket client that
//! speaks the wire exactly as scripts do: one NDJSON request per connection.

use crate::util::{wait_until, TempDir, R};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Everything a socket client needs (cheap to clone into threads).
#[derive(Clone)]
pub struct Client {
    pub sock: PathBuf,
    pub token: String,
}

impl Client {
    /// The request line for `method`.
    pub fn line(&self, method: &str, params: &Value) -> Vec<u8> {
        let mut v = serde_json::to_vec(&json!({
            "token": self.token, "method": method, "params": params,
        }))
        .expect("encode");
        v.push(b'\n');
        v
    }

    /// Open a long-lived request as policy source `caller` (see [`READER`]).
    pub fn open_as(&self, caller: &str, method: &str, params: Value) -> R<BufReader<UnixStream>> {
        let mut s = UnixStream::connect(&self.sock)?;
        let mut v = serde_json::to_vec(&json!({
            "token": self.token, "method": method, "params": params, "caller": caller,
        }))?;
        v.push(b'\n');
        s.write_all(&v)?;
        Ok(BufReader::with_capacity(64 * 1024, s))
    }

    /// One round trip: connect, write the line, half-close, read one response line.
    pub fn raw(&self, line: &[u8]) -> R<Vec<u8>> {
        let mut s = UnixStream::connect(&self.sock)?;
        s.write_all(line)?;
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut r = BufReader::with_capacity(64 * 1024, s);
        let mut buf = Vec::with_capacity(4096);
        r.read_until(b'\n', &mut buf)?;
        if buf.is_empty() {
            return Err("the daemon closed the connection without answering".into());
        }
        Ok(buf)
    }

    /// A request that must succeed; returns `result`.
    pub fn call(&self, method: &str, params: Value) -> R<Value> {
        let resp = self.raw(&self.line(method, &params))?;
        let v: Value = serde_json::from_slice(&resp)?;
        if v["ok"] != true {
            return Err(format!("{method} failed: {}", v["error"]).into());
        }
        Ok(v["result"].clone())
    }

    /// Open a long-lived request (waits, streams): the connection stays open, since closing
    /// it cancels a wait.
    pub fn open(&self, method: &str, params: Value) -> R<BufReader<UnixStream>> {
        let mut s = UnixStream::connect(&self.sock)?;
        s.write_all(&self.line(method, &params))?;
        Ok(BufReader::with_capacity(64 * 1024, s))
    }

    /// A `daemon.stats` counter.
    pub fn stat(&self, name: &str) -> R<i64> {
        Ok(self.call("daemon.stats", json!({}))?[name]
            .as_i64()
            .unwrap_or(-1))
    }

    /// Create a session; returns its id.
    pub fn create(&self, params: Value) -> R<String> {
        let r = self.call("sessions.create", params)?;
        Ok(r["session"]["session_id"]
            .as_str()
            .ok_or("create: no session_id")?
            .to_string())
    }

    /// Close a session's surface (kills its child).
    pub fn close(&self, id: &str) -> R<()> {
        self.call(
            "sessions.action",
            json!({"session_id": id, "action": "close"}),
        )?;
        Ok(())
    }
}

/// Read one NDJSON line from an open request.
pub fn read_line(r: &mut BufReader<UnixStream>) -> R<Value> {
    let mut buf = Vec::new();
    r.read_until(b'\n', &mut buf)?;
    if buf.is_empty() {
        return Err("connection closed".into());
    }
    Ok(serde_json::from_slice(&buf)?)
}

/// The policy source the harness uses for screen reads (`sessions.wait --until`): reading
/// output needs `output:read`, which no built-in source holds, so every daemon the harness
/// starts gets a policy file declaring this one.
pub const READER: &str = "bench-reader";

/// A foreground daemon on its own control dir, stopped on drop.
pub struct Daemon {
    pub bin: PathBuf,
    pub tmp: TempDir,
    pub control: PathBuf,
    child: Option<Child>,
    extra: Vec<String>,
    pub client: Client,
    /// `perf record` attached to the daemon when `MAXX_BENCH_PERF=<dir>` is set.
    perf: Option<Child>,
    /// The daemon, once its keeper was killed ([`Daemon::without_keeper`]): stopped by pid.
    orphan: Option<u32>,
    /// Start the keeper (and so the daemon) under this `RLIMIT_NOFILE` (soft = hard).
    nofile: Option<u64>,
}

impl Daemon {
    pub fn start(bin: &Path, extra: &[&str]) -> R<Daemon> {
        Daemon::start_nofile(bin, extra, None)
    }

    /// As [`Daemon::start`], with the open-files limit raised to `nofile` (soft and hard) in
    /// the keeper before it execs (the daemon raises only its soft limit, up to the hard one).
    pub fn start_nofile(bin: &Path, extra: &[&str], nofile: Option<u64>) -> R<Daemon> {
        let tmp = TempDir::new("maxx-bench-")?;
        let control = tmp.join("ctl");
        let mut d = Daemon {
            bin: bin.to_path_buf(),
            client: Client {
                sock: control.join("control.sock"),
                token: String::new(),
            },
            tmp,
            control,
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            perf: None,
            orphan: None,
            nofile,
        };
        d.launch()?;
        Ok(d)
    }

    fn launch(&mut self) -> R<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.tmp.join("daemon.log"))?;
        let policy = self.tmp.join("control-policy.json");
        if !policy.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&policy)?;
            f.write_all(
                format!(
                    r#"{{"version":1,"sources":[{{"id":"{READER}","kind":"local","allow":["output:read","tabs:list","surface:attach"]}}]}}"#
                )
                .as_bytes(),
            )?;
        }
        let mut cmd = Command::new(&self.bin);
        if let Some(n) = self.nofile {
            crate::util::raise_nofile(&mut cmd, n);
        }
        let child = cmd
            .args(["daemon", "--log-level", "warn"])
            .env("MAXX_CONTROL_POLICY_FILE", &policy)
            .args(&self.extra)
            .env("MAXX_CONTROL_DIR", &self.control)
            .env("HOME", self.tmp.path())
            .env("XDG_CONFIG_HOME", self.tmp.join("config"))
            .env_remove("MAXX_SESSION_ID")
            .env_remove("MAXX_SURFACE_ID")
            .env_remove("MAXX_REGISTRATION_TOKEN")
            .current_dir(self.tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()?;
        self.child = Some(child);
        let sock = self.client.sock.clone();
        let token_path = self.control.join("token");
        let pid_path = self.control.join("daemon.pid");
        wait_until(
            "the daemon socket",
            Duration::from_secs(15),
            Duration::from_millis(2),
            || token_path.exists() && pid_path.exists() && UnixStream::connect(&sock).is_ok(),
        )?;
        self.client.token = std::fs::read_to_string(&token_path)?.trim().to_string();
        // One request so lazily initialised state is in place before anything is measured.
        self.client.call("daemon.stats", json!({}))?;
        self.attach_perf()?;
        Ok(())
    }

    /// With `MAXX_BENCH_PERF=<dir>`, record a CPU profile (with DWARF call graphs) of this
    /// daemon into `<dir>/daemon-<n>.data` until it stops. Figures taken under perf are
    /// slower; use it to see where the time goes, not for the table.
    fn attach_perf(&mut self) -> R<()> {
        let Ok(dir) = std::env::var("MAXX_BENCH_PERF") else {
            return Ok(());
        };
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        std::fs::create_dir_all(&dir)?;
        let out = Path::new(&dir).join(format!("daemon-{n}.data"));
        let freq = std::env::var("MAXX_BENCH_PERF_FREQ").unwrap_or_else(|_| "999".into());
        let child = Command::new("perf")
            .args([
                "record",
                "-q",
                "-e",
                "cpu-clock",
                "-F",
                &freq,
                "--call-graph",
                "dwarf,16384",
                "-p",
            ])
            .arg(self.pid().to_string())
            .arg("-o")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        std::thread::sleep(Duration::from_millis(500));
        eprintln!(
            "  perf: recording daemon {} into {}",
            self.pid(),
            out.display()
        );
        self.perf = Some(child);
        Ok(())
    }

    fn stop_perf(&mut self) {
        if let Some(mut p) = self.perf.take() {
            unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
            let _ = p.wait();
        }
    }

    /// The daemon serving the socket (`daemon.pid`): `maxx daemon` is a keeper process that
    /// runs the daemon as its child, so the child this harness holds is the keeper.
    pub fn pid(&self) -> u32 {
        std::fs::read_to_string(self.control.join("daemon.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The keeper (the process this harness started).
    pub fn keeper_pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// What kill -9 of the daemon meant before the keeper: kill -9 the keeper, then the
    /// daemon (so nothing restarts it), and wait until its lock is free.
    pub fn crash(&mut self) -> R<()> {
        self.stop_perf();
        let daemon = self.pid();
        if let Some(mut keeper) = self.child.take() {
            unsafe { libc::kill(keeper.id() as i32, libc::SIGKILL) };
            let _ = keeper.wait();
        }
        unsafe { libc::kill(daemon as i32, libc::SIGKILL) };
        let lock = self.control.join("daemon.lock");
        wait_until(
            "the killed daemon's lock to be free",
            Duration::from_secs(10),
            Duration::from_millis(2),
            || {
                use std::os::fd::AsRawFd;
                std::fs::File::open(&lock).is_ok_and(|f| unsafe {
                    libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0
                })
            },
        )
    }

    /// The CLI against this daemon.
    pub fn cli(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("MAXX_CONTROL_DIR", &self.control)
            .env(
                "MAXX_CONTROL_POLICY_FILE",
                self.tmp.join("control-policy.json"),
            )
            .env("HOME", self.tmp.path())
            .env_remove("MAXX_SESSION_ID")
            .env_remove("MAXX_SURFACE_ID")
            .env_remove("MAXX_REGISTRATION_TOKEN")
            .current_dir(self.tmp.path())
            .stdin(Stdio::null());
        c
    }

    /// Signal the daemon and wait (SIGKILL after 10 s).
    /// Kill -9 the keeper alone: the daemon goes on serving its sessions without one (what
    /// the drain path costs with no keeper holding the masters).
    pub fn without_keeper(&mut self) -> R<()> {
        let daemon = self.pid();
        if let Some(mut keeper) = self.child.take() {
            unsafe { libc::kill(keeper.id() as i32, libc::SIGKILL) };
            keeper.wait()?;
        }
        self.orphan = Some(daemon);
        Ok(())
    }

    pub fn stop_with(&mut self, sig: i32) {
        self.stop_perf();
        if let Some(pid) = self.orphan.take() {
            unsafe { libc::kill(pid as i32, sig) };
            let _ = wait_until(
                "the daemon without a keeper to stop",
                Duration::from_secs(10),
                Duration::from_millis(5),
                || {
                    // Gone, or a zombie nobody may reap (its parent is whoever adopted it).
                    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |st| {
                        st.rsplit(')')
                            .next()
                            .and_then(|a| a.split_whitespace().next())
                            == Some("Z")
                    })
                },
            );
        }
        if let Some(mut child) = self.child.take() {
            unsafe { libc::kill(child.id() as i32, sig) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again on the same control dir (after a stop).
    pub fn restart(&mut self) -> R<()> {
        self.launch()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop_with(libc::SIGTERM);
    }
}
