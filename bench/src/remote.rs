//! Scenario 9 — Remote hosts over SSH (issue 24, docs/remote.md). A real OpenSSH `sshd` on a
//! loopback port (host and client keys made for the run; Debian's openssh-server), whose
//! forced command leads the key to a daemon on this machine: what `--host` costs on top of
//! the same CLI call locally, and how fast a stream crosses ssh.
//!
//! - `sessions get` through the CLI, locally and with `--host` over a ControlMaster
//!   connection (ControlPersist: the handshake is paid once, as an operator's config does),
//!   and once per call with no master (a full ssh handshake each time).
//! - the floor: the same ssh session through its master with `true` as the forced command
//!   (no maxx at all), in the `bare` column: what ssh itself costs per session.
//! - events per second through `stream watch --since 0`: the replay of N retained events,
//!   read by the CLI locally and over ssh, timed from the hello line to the N-th event line
//!   (the session's setup is the `sessions get` rows' business).
//!
//! tmux has no counterpart row (`ssh host tmux ...` is a person's terminal, not a typed verb).

use crate::maxx::Daemon;
use crate::util::{ms, Summary, TempDir, R};
use crate::{Cfg, Row};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An sshd on a loopback port and the client config that reaches `daemon` as `bench`
/// (`bench-mux` with a ControlMaster).
struct Sshd {
    _dir: TempDir,
    child: Child,
    /// `MAXX_SSH` for the CLI.
    ssh: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        // The ControlPersist master outlives its clients: told to go first.
        for host in ["bench-mux", "bench-true"] {
            let mut argv = self.ssh.split_whitespace();
            if let Some(ssh) = argv.next() {
                let _ = Command::new(ssh)
                    .args(argv)
                    .args(["-O", "exit", host])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_ok(cmd: &mut Command) -> R<()> {
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

fn start_sshd(maxx: &Path, daemon: &Daemon) -> R<Sshd> {
    let sshd = Path::new("/usr/sbin/sshd");
    if !sshd.exists() {
        return Err("no /usr/sbin/sshd (Debian: apt-get install openssh-server)".into());
    }
    let dir = TempDir::new("maxx-bench-ssh-")?;
    let p = |n: &str| dir.join(n);
    for key in ["host_key", "client_key", "true_key"] {
        run_ok(
            Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(p(key)),
        )?;
    }
    let public = std::fs::read_to_string(p("client_key.pub"))?;
    let true_public = std::fs::read_to_string(p("true_key.pub"))?;
    std::fs::write(
        p("authorized_keys"),
        format!(
            "command=\"env MAXX_CONTROL_DIR={} {} proxy\",no-pty {}\n\
             command=\"true\",no-pty {}\n",
            daemon.control.display(),
            maxx.display(),
            public.trim(),
            true_public.trim()
        ),
    )?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    std::fs::create_dir_all("/run/sshd")?;
    std::fs::write(
        p("sshd_config"),
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nPermitRootLogin prohibit-password\nPidFile {}\nLogLevel ERROR\n\
             MaxStartups 100\nMaxSessions 100\n",
            p("host_key").display(),
            p("authorized_keys").display(),
            p("sshd.pid").display()
        ),
    )?;
    let child = Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(p("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let user = String::from_utf8(Command::new("id").arg("-un").output()?.stdout)?;
    std::fs::write(
        p("ssh_config"),
        format!(
            "Host bench-mux\n  ControlMaster auto\n  ControlPath {dir}/cm-maxx-%C\n  \
             ControlPersist 60\n  IdentityFile {key}\n\
             Host bench\n  IdentityFile {key}\n\
             Host bench-true\n  ControlMaster auto\n  ControlPath {dir}/cm-true-%C\n  \
             ControlPersist 60\n  IdentityFile {true_key}\n\
             Host *\n  HostName 127.0.0.1\n  Port {port}\n  User {}\n  \
             IdentitiesOnly yes\n  IdentityAgent none\n  UserKnownHostsFile {}\n  \
             StrictHostKeyChecking accept-new\n  LogLevel ERROR\n",
            user.trim(),
            p("known_hosts").display(),
            dir = dir.path().display(),
            key = p("client_key").display(),
            true_key = p("true_key").display(),
        ),
    )?;
    let ssh = format!("ssh -F {}", p("ssh_config").display());
    let s = Sshd {
        _dir: dir,
        child,
        ssh,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let greeted = std::net::TcpStream::connect(("127.0.0.1", port))
            .and_then(|mut c| {
                c.set_read_timeout(Some(Duration::from_secs(2)))?;
                let mut banner = [0u8; 4];
                c.read_exact(&mut banner)?;
                Ok(&banner == b"SSH-")
            })
            .unwrap_or(false);
        if greeted {
            return Ok(s);
        }
        if Instant::now() > deadline {
            return Err("sshd did not accept within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One CLI call, timed; it must exit 0.
fn timed(mut cmd: Command) -> R<f64> {
    let t = Instant::now();
    let out = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).output()?;
    let took = ms(t.elapsed());
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(took)
}

/// `stream watch --since 0` from its hello line to the `n`-th event line (the connection's
/// setup, a whole ssh session over ssh, is not counted); events per second.
fn replay_rate(mut cmd: Command, n: usize) -> R<f64> {
    let mut t = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    let out = child.stdout.take().expect("piped");
    let mut seen = 0;
    for line in BufReader::new(out).lines() {
        let line = line?;
        if line.starts_with("{\"type\":\"hello\"") {
            t = Instant::now();
        }
        if line.starts_with("{\"type\":\"event\"") {
            seen += 1;
            if seen == n {
                break;
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    if seen < n {
        return Err(format!("the watch ended after {seen} of {n} events").into());
    }
    Ok(n as f64 / secs)
}

pub fn run(cfg: &Cfg) -> R<(Vec<Row>, Value)> {
    let runs = cfg.runs.unwrap_or(if cfg.quick { 2 } else { 5 });
    let calls = if cfg.quick { 20 } else { 50 };
    let handshakes = if cfg.quick { 5 } else { 10 };
    let events = if cfg.quick { 2_000 } else { 8_000 };
    let daemon = Daemon::start(&cfg.maxx, &[])?;
    let sshd = start_sshd(&cfg.maxx, &daemon)?;
    let c = daemon.client.clone();
    let id = c.create(json!({"command": "exec cat", "focus": false}))?;
    for i in 0..events {
        c.call(
            "sessions.emit-event",
            json!({"session_id": id, "event": "bench.tick", "payload": {"i": i}}),
        )?;
    }
    let cli = |host: Option<&str>, args: &[&str]| {
        let mut cmd = daemon.cli();
        cmd.env("MAXX_SSH", &sshd.ssh).env_remove("MAXX_HOST");
        if let Some(h) = host {
            cmd.args(["--host", h]);
        }
        cmd.args(args);
        cmd
    };
    // The masters, up before the clock runs (ControlPersist keeps them).
    timed(cli(Some("bench-mux"), &["sessions", "get", &id]))?;
    // The floor: the same ssh session through its master, the forced command `true`.
    let bare_ssh = || {
        let mut argv = sshd.ssh.split_whitespace();
        let mut cmd = Command::new(argv.next().expect("ssh"));
        cmd.args(argv)
            .args(["-T", "-o", "BatchMode=yes", "--", "bench-true", "true"])
            .stdin(Stdio::null());
        cmd
    };
    timed(bare_ssh())?;
    let (mut local, mut muxed, mut ratio, mut fresh) = (vec![], vec![], vec![], vec![]);
    let mut floor = Vec::new();
    let (mut local_rate, mut ssh_rate) = (vec![], vec![]);
    for _ in 0..runs {
        let mut l = Vec::new();
        let mut m = Vec::new();
        for _ in 0..calls {
            l.push(timed(cli(None, &["sessions", "get", &id]))?);
            m.push(timed(cli(Some("bench-mux"), &["sessions", "get", &id]))?);
        }
        let b: Vec<f64> = (0..calls).map(|_| timed(bare_ssh())).collect::<R<_>>()?;
        floor.push(crate::util::median(&b));
        let (l, m) = (crate::util::median(&l), crate::util::median(&m));
        local.push(l);
        muxed.push(m);
        ratio.push(m / l);
        let mut f = Vec::new();
        for _ in 0..handshakes {
            f.push(timed(cli(Some("bench"), &["sessions", "get", &id]))?);
        }
        fresh.push(crate::util::median(&f));
        let watch = ["stream", "watch", "--since", "0", "--timeout", "60s"];
        local_rate.push(replay_rate(cli(None, &watch), events)?);
        ssh_rate.push(replay_rate(cli(Some("bench-mux"), &watch), events)?);
    }
    eprintln!(
        "  remote: get local {local:?} ms, ssh+ControlMaster {muxed:?} ms, ssh handshake {fresh:?} ms; \
         watch replay local {local_rate:?} ev/s, ssh {ssh_rate:?} ev/s"
    );
    let rate_ratio: Vec<f64> = ssh_rate
        .iter()
        .zip(&local_rate)
        .map(|(s, l)| s / l)
        .collect();
    let rows = vec![
        Row::new(
            "remote",
            "sessions get, CLI, this machine (p50 of calls)",
            "ms",
        )
        .maxx(Summary::of(&local)),
        Row::new(
            "remote",
            "sessions get, CLI --host over ssh with ControlMaster (p50)",
            "ms",
        )
        .maxx(Summary::of(&muxed))
        .bare(Summary::of(&floor))
        .ratio("x local", Summary::of(&ratio))
        .note(
            "bare: the same ssh session through its master running `true` (no maxx): ssh's \
             own cost per session"
                .to_string(),
        ),
        Row::new(
            "remote",
            "sessions get, CLI --host over ssh, a handshake per call (p50)",
            "ms",
        )
        .maxx(Summary::of(&fresh)),
        Row::new(
            "remote",
            &format!("stream watch --since 0, {events} events, CLI, this machine"),
            "ev/s",
        )
        .maxx(Summary::of(&local_rate)),
        Row::new(
            "remote",
            &format!("stream watch --since 0, {events} events, CLI --host over ssh"),
            "ev/s",
        )
        .maxx(Summary::of(&ssh_rate))
        .ratio("x local", Summary::of(&rate_ratio)),
    ];
    let detail = json!({
        "calls_per_run": calls,
        "events": events,
        "get_local_ms": Summary::of(&local).map(|s| s.json()),
        "get_ssh_controlmaster_ms": Summary::of(&muxed).map(|s| s.json()),
        "get_ssh_handshake_ms": Summary::of(&fresh).map(|s| s.json()),
        "ssh_controlmaster_true_ms": Summary::of(&floor).map(|s| s.json()),
        "watch_local_events_per_s": Summary::of(&local_rate).map(|s| s.json()),
        "watch_ssh_events_per_s": Summary::of(&ssh_rate).map(|s| s.json()),
    });
    Ok((rows, detail))
}
