//! Issue 24: fleets across machines over SSH. `maxx proxy` driven directly over its
//! stdin/stdout, then the CLI's `--host`/`--hosts` against a real OpenSSH `sshd` on a
//! loopback port (host key and client keys made for the test), whose forced commands lead
//! two host aliases to two daemons on this machine. See docs/remote.md.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines of a child's stdout, read on a thread, taken with a deadline.
struct LineFeed {
    rx: mpsc::Receiver<String>,
}

impl LineFeed {
    fn new(out: impl Read + Send + 'static) -> LineFeed {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LineFeed { rx }
    }

    /// The next line as JSON; panics after `within`.
    fn next(&self, within: Duration) -> Value {
        let line = self
            .rx
            .recv_timeout(within)
            .unwrap_or_else(|e| panic!("no line within {within:?}: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    /// Lines until one satisfies `want` (returned); panics after `within`.
    fn until(&self, within: Duration, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.next(left.max(Duration::from_millis(1)));
            if want(&v) {
                return v;
            }
        }
    }
}

/// `maxx proxy` on `d`'s control dir, its stdin held by the test.
fn proxy(d: &Daemon, args: &[&str]) -> (Child, ChildStdin, LineFeed) {
    let mut child = Command::new(maxx_bin())
        .arg("proxy")
        .args(args)
        .env("MAXX_CONTROL_DIR", &d.control)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let feed = LineFeed::new(child.stdout.take().unwrap());
    (child, stdin, feed)
}

fn send(stdin: &mut ChildStdin, v: Value) {
    stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
}

/// Wait for a child with a deadline (polling its status, bounded).
fn exits_within(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    wait_for("the process to exit", within, || child.try_wait().unwrap())
}

const T: Duration = Duration::from_secs(20);

#[test]
fn proxy_serves_several_requests_told_apart_by_id() {
    let d = Daemon::start();
    let (mut child, mut stdin, feed) = proxy(&d, &[]);
    // A stream and two plain requests in flight at once; no token from the client, and a
    // wrong one is replaced by the machine's own.
    send(&mut stdin, json!({"method": "stream.watch", "id": "w"}));
    let hello = feed.until(T, |v| v["id"] == "w");
    assert_eq!(hello["type"], "hello", "{hello}");
    send(&mut stdin, json!({"method": "sessions.list", "id": 1}));
    send(
        &mut stdin,
        json!({"method": "daemon.whoami", "id": [2], "token": "not-the-token"}),
    );
    let answers = [feed.next(T), feed.next(T)];
    let by_id = |id: Value| {
        answers
            .iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("no answer with id {id}: {answers:?}"))
    };
    assert_eq!(by_id(json!([2]))["result"]["source"], "local-cli");
    assert_eq!(by_id(json!(1))["result"]["sessions"], json!([]));
    // The stream's lines carry its id too.
    let id = d.create(json!({"command": "sleep 30"}))["session_id"].clone();
    let event = feed.until(T, |v| v["type"] == "event");
    assert_eq!(event["id"], "w");
    assert_eq!(event["event"]["session_id"], id);
    // Bounded like the socket: an oversize line is refused (and skipped), the next served.
    let big = format!(
        "{{\"method\":\"sessions.list\",\"id\":9,\"params\":{{\"x\":\"{}\"}}}}\n",
        "a".repeat(1024 * 1024 + 10)
    );
    stdin.write_all(big.as_bytes()).unwrap();
    send(&mut stdin, json!({"method": "sessions.list", "id": 10}));
    let refused = feed.next(T);
    assert_eq!(refused["error"]["code"], "too_large", "{refused}");
    assert_eq!(feed.next(T)["id"], 10);
    // Malformed JSON is a typed error, never a crash.
    stdin.write_all(b"{not json\n").unwrap();
    assert_eq!(feed.next(T)["error"]["code"], "invalid_request");
    // EOF ends the proxy and closes its stream at the daemon.
    drop(stdin);
    assert!(exits_within(&mut child, T).success());
    d.wait_stat("long_lived", 0);
}

#[test]
fn proxy_bounds_requests_in_flight_and_pins_its_source() {
    let d = Daemon::start();
    let (mut child, mut stdin, feed) = proxy(&d, &[]);
    for i in 0..65 {
        send(&mut stdin, json!({"method": "stream.watch", "id": i}));
    }
    let busy = feed.until(T, |v| v["ok"] == false);
    assert_eq!(busy["error"]["code"], "busy", "{busy}");
    drop(stdin);
    assert!(exits_within(&mut child, T).success());

    // --as pins the source whatever the request claims.
    let (mut child, mut stdin, feed) = proxy(&d, &["--as", "readonly-external"]);
    send(
        &mut stdin,
        json!({"method": "daemon.whoami", "id": 1, "caller": "local-cli"}),
    );
    assert_eq!(feed.next(T)["result"]["source"], "readonly-external");
    send(
        &mut stdin,
        json!({"method": "sessions.create", "id": 2, "caller": "local-cli", "params": {"command": "true"}}),
    );
    let denied = feed.next(T);
    assert_eq!(denied["error"]["code"], "unauthorized", "{denied}");
    send(&mut stdin, json!({"method": "sessions.attach", "id": 3}));
    assert_eq!(feed.next(T)["error"]["code"], "unsupported");
    drop(stdin);
    assert!(exits_within(&mut child, T).success());
    assert_eq!(d.count(), 0);
}

// ----------------------------------------------------------------------------------------
// A real sshd.

/// An `sshd` on a loopback port, with a client config naming host aliases.
struct Sshd {
    dir: tempfile::TempDir,
    child: Child,
    /// `ssh -F <this>`.
    client_config: PathBuf,
}

/// One host alias: its name, and the forced command its key runs (None: the key is not
/// authorized, so the login is refused).
struct Alias<'a> {
    name: &'a str,
    command: Option<String>,
}

/// The forced command leading a key to `control`'s daemon, `maxx proxy` with `args`.
fn to_daemon(control: &Path, args: &str) -> Option<String> {
    Some(format!(
        "env MAXX_CONTROL_DIR={} {} proxy {args}",
        control.display(),
        maxx_bin()
    ))
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Sshd {
    /// Start sshd with a key per alias; None if this machine has no sshd (a failure in CI).
    fn start(aliases: &[Alias]) -> Option<Sshd> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !sshd.exists() || Command::new("ssh-keygen").arg("-?").output().is_err() {
            skip_or_fail("no /usr/sbin/sshd or ssh-keygen (Debian: openssh-server)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("maxx-ssh")
            .tempdir()
            .unwrap();
        let p = |name: &str| dir.path().join(name);
        let keygen = |file: &Path| {
            run_ok(
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                    .arg(file),
            )
        };
        keygen(&p("host_key"));
        let mut authorized = String::new();
        for a in aliases {
            keygen(&p(&format!("key_{}", a.name)));
            if let Some(command) = &a.command {
                let public = std::fs::read_to_string(p(&format!("key_{}.pub", a.name))).unwrap();
                authorized.push_str(&format!(
                    "command=\"{command}\",no-pty,no-port-forwarding {}",
                    public.trim()
                ));
                authorized.push('\n');
            }
        }
        std::fs::write(p("authorized_keys"), authorized).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nPermitRootLogin prohibit-password\nPidFile {}\n\
             PubkeyAuthentication yes\nLogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n",
            p("host_key").display(),
            p("authorized_keys").display(),
            p("sshd.pid").display(),
        );
        std::fs::write(p("sshd_config"), config).unwrap();
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(p("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(p("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        let mut client = String::new();
        for a in aliases {
            client.push_str(&format!(
                "Host {}\n  IdentityFile {}\n",
                a.name,
                p(&format!("key_{}", a.name)).display()
            ));
        }
        client.push_str(&format!(
            "Host *\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  \
             UserKnownHostsFile {}\n  StrictHostKeyChecking accept-new\n  \
             IdentitiesOnly yes\n  IdentityAgent none\n  LogLevel ERROR\n  \
             ControlMaster no\n",
            p("known_hosts").display()
        ));
        std::fs::write(p("ssh_config"), client).unwrap();
        let s = Sshd {
            client_config: p("ssh_config"),
            dir,
            child,
        };
        // Up when it greets: the banner is read, not waited for with a sleep.
        wait_for("sshd to accept", Duration::from_secs(10), || {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            let mut banner = [0u8; 4];
            c.read_exact(&mut banner).ok()?;
            (&banner == b"SSH-").then_some(())
        });
        Some(s)
    }

    /// `$MAXX_SSH` for the CLI.
    fn ssh(&self) -> String {
        format!("ssh -F {}", self.client_config.display())
    }

    /// The CLI with this ssh config, run from `local` (this machine's daemon, for `local`).
    fn cli(&self, local: &Daemon, args: &[&str]) -> Output {
        self.command(local, args).output().unwrap()
    }

    fn command(&self, local: &Daemon, args: &[&str]) -> Command {
        let mut c = Command::new(maxx_bin());
        c.args(args)
            .env("MAXX_SSH", self.ssh())
            .env("MAXX_CONTROL_DIR", &local.control)
            .env_remove("MAXX_HOST")
            .env_remove("MAXX_SESSION_ID")
            .stdin(Stdio::null());
        c
    }

    fn cli_ok(&self, local: &Daemon, args: &[&str]) -> Value {
        let out = self.cli(local, args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "maxx {args:?}: stdout={} stderr={} sshd.log={}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
        );
        serde_json::from_slice(&out.stdout).expect("stdout is JSON")
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The one JSON error a failed command prints on stderr.
fn stderr_error(out: &Output) -> Value {
    serde_json::from_slice(&out.stderr)
        .unwrap_or_else(|e| panic!("stderr {:?}: {e}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_seed_verbs_and_fleet_views_over_ssh() {
    let (a, b) = (Daemon::start(), Daemon::start());
    let Some(ssh) = Sshd::start(&[
        Alias {
            name: "alpha",
            command: to_daemon(&a.control, ""),
        },
        Alias {
            name: "beta",
            command: to_daemon(&b.control, ""),
        },
    ]) else {
        return;
    };
    // create, send-keys, wait --until, snapshot: on alpha, through ssh and maxx proxy.
    let created = ssh.cli_ok(
        &b,
        &[
            "--host",
            "alpha",
            "sessions",
            "create",
            "--title",
            "remote shell",
            "--command",
            "cat",
            "--group",
            "fleet",
        ],
    );
    let id = created["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(a.count(), 1, "created on alpha's daemon");
    assert_eq!(b.count(), 0);
    ssh.cli_ok(
        &b,
        &[
            "--host",
            "alpha",
            "sessions",
            "send-keys",
            &id,
            "hello-over-ssh",
            "Enter",
        ],
    );
    let waited = ssh.cli_ok(
        &b,
        &[
            "--host",
            "alpha",
            "--as",
            READER,
            "sessions",
            "wait",
            &id,
            "--until",
            "hello-over-ssh",
            "--timeout",
            "10s",
        ],
    );
    assert_eq!(waited["result"]["outcome"], "matched", "{waited}");
    let snap = ssh.cli_ok(
        &b,
        &[
            "--host", "alpha", "--as", READER, "sessions", "snapshot", &id,
        ],
    );
    assert!(snap.to_string().contains("hello-over-ssh"), "{snap}");
    // The supervisor flow: declare, read back, end, wait for the exit, read the code.
    ssh.cli_ok(
        &b,
        &[
            "--host",
            "alpha",
            "sessions",
            "declare-state",
            &id,
            "--state",
            "running",
        ],
    );
    ssh.cli_ok(
        &b,
        &[
            "--host",
            "alpha",
            "sessions",
            "set-metadata",
            &id,
            "--key",
            "step",
            "--value",
            "2",
        ],
    );
    let got = ssh.cli_ok(&b, &["--host", "alpha", "sessions", "get", &id]);
    assert_eq!(got["result"]["session"]["metadata"]["step"], "2", "{got}");
    ssh.cli_ok(
        &b,
        &["--host", "alpha", "sessions", "send-keys", &id, "C-d"],
    );
    let exited = ssh.cli_ok(
        &b,
        &[
            "--host",
            "alpha",
            "sessions",
            "wait",
            &id,
            "--lifecycle",
            "exited",
            "--timeout",
            "10s",
        ],
    );
    assert_eq!(exited["result"]["outcome"], "matched", "{exited}");
    assert_eq!(a.get(&id)["exit_code"], 0);
    // A wrong id over ssh is the same refusal as locally: exit 1, not_found.
    let out = ssh.cli(
        &b,
        &[
            "--host",
            "alpha",
            "sessions",
            "get",
            "00000000-0000-4000-8000-000000000000",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_error(&out)["error"]["code"], "not_found");

    // ls --hosts over both (and `local`, which is beta's control dir here).
    b.create(json!({"command": "sleep 30", "title": "on beta", "group": "fleet"}));
    let ls = ssh.cli_ok(&b, &["ls", "--hosts", "alpha,beta", "--json"]);
    let hosts: Vec<&str> = ls
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["alpha", "beta"], "{ls}");
    let local = ssh.cli_ok(&b, &["sessions", "list", "--hosts", "alpha,local"]);
    let sessions = local["result"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{local}");
    assert_eq!(sessions[1]["host"], Value::Null);
    assert_eq!(local["result"]["unreachable"], json!([]));
    let status = ssh.cli_ok(&b, &["status", "--hosts", "alpha,beta", "--json"]);
    assert_eq!(status["hosts"][1]["host"], "beta", "{status}");

    // A group wait spanning both: matched only once beta's member has exited too.
    let beta_short = b.create(json!({"command": "cat", "group": "fleet-2"}))["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let alpha_short = a.create(json!({"command": "true", "group": "fleet-2"}))["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for("alpha's member to exit", T, || {
        (a.get(&alpha_short)["lifecycle"] == "exited").then_some(())
    });
    let mut waiter = ssh
        .command(
            &b,
            &[
                "stream",
                "wait",
                "--group",
                "fleet-2",
                "--all",
                "exited",
                "--hosts",
                "alpha,beta",
                "--timeout",
                "30s",
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // alpha's wait matched at once; beta's holds (its slot is taken), and so does the whole.
    b.wait_stat("long_lived", 1);
    assert!(
        waiter.try_wait().unwrap().is_none(),
        "matched before beta's member exited"
    );
    b.ok(
        "sessions.send-keys",
        json!({"session_id": beta_short, "keys": ["C-d"]}),
    );
    let status = exits_within(&mut waiter, T);
    let mut out = String::new();
    waiter
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["result"]["outcome"], "matched", "{v}");
    assert_eq!(v["result"]["member_count"], 2, "{v}");
    assert_eq!(v["result"]["hosts"].as_array().unwrap().len(), 2);
}

#[test]
fn a_host_that_drops_mid_watch_is_listed_while_the_other_streams_on() {
    let (mut a, b) = (Daemon::start(), Daemon::start());
    let Some(ssh) = Sshd::start(&[
        Alias {
            name: "alpha",
            command: to_daemon(&a.control, ""),
        },
        Alias {
            name: "beta",
            command: to_daemon(&b.control, ""),
        },
    ]) else {
        return;
    };
    let mut watch = ssh
        .command(
            &b,
            &[
                "stream",
                "watch",
                "--hosts",
                "alpha,beta",
                "--timeout",
                "8s",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feed = LineFeed::new(watch.stdout.take().unwrap());
    let hello = feed.next(T);
    assert_eq!(hello["type"], "hello", "{hello}");
    assert!(hello["cursors"]["alpha"].is_u64(), "{hello}");
    assert!(hello["cursors"]["beta"].is_u64(), "{hello}");
    let first = b.create(json!({"command": "sleep 30"}))["session_id"].clone();
    let ev = feed.until(T, |v| v["type"] == "event");
    assert_eq!(
        (&ev["host"], &ev["event"]["session_id"]),
        (&json!("beta"), &first)
    );
    a.crash();
    let gone = feed.until(T, |v| v["type"] == "unreachable");
    assert_eq!(gone["host"], "alpha", "{gone}");
    let second = b.create(json!({"command": "sleep 30"}))["session_id"].clone();
    let ev = feed.until(T, |v| {
        v["type"] == "event" && v["event"]["session_id"] == second
    });
    assert_eq!(ev["host"], "beta");
    let status = exits_within(&mut watch, T);
    let mut err = String::new();
    watch
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(3), "{err}");
    let err: Value = serde_json::from_str(&err).unwrap();
    assert_eq!(err["error"]["unreachable"][0]["host"], "alpha", "{err}");

    // Resuming takes a cursor per host.
    let cursor = hello["cursors"]["beta"].as_u64().unwrap();
    let out = ssh.cli(
        &b,
        &[
            "stream",
            "watch",
            "--hosts",
            "beta",
            "--since",
            &format!("beta={cursor}"),
            "--timeout",
            "1s",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(first.as_str().unwrap()), "{text}");
}

#[test]
fn restricted_keys_and_unreachable_hosts_are_typed() {
    let a = Daemon::start();
    let missing = a.tmp.path().join("no-such-control-dir");
    let Some(ssh) = Sshd::start(&[
        Alias {
            name: "alpha",
            command: to_daemon(&a.control, ""),
        },
        Alias {
            name: "ro",
            command: to_daemon(&a.control, "--as readonly-external"),
        },
        Alias {
            name: "nodaemon",
            command: to_daemon(&missing, ""),
        },
        Alias {
            name: "nomaxx",
            command: Some("/nonexistent/maxx proxy".into()),
        },
        Alias {
            name: "refused",
            command: None,
        },
    ]) else {
        return;
    };
    // command="maxx proxy --as readonly-external": may list, may not create, whatever --as
    // the caller claims.
    ssh.cli_ok(&a, &["--host", "ro", "sessions", "list"]);
    for args in [
        &["--host", "ro", "sessions", "create", "--command", "true"][..],
        &[
            "--host",
            "ro",
            "--as",
            "local-cli",
            "sessions",
            "create",
            "--command",
            "true",
        ],
    ] {
        let out = ssh.cli(&a, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(stderr_error(&out)["error"]["code"], "unauthorized");
    }
    assert_eq!(a.count(), 0);

    // No daemon there (and --host never starts one), no maxx there, a refused login: exit
    // 3, typed, naming the host.
    for (host, code) in [
        ("nodaemon", "no_daemon"),
        ("nomaxx", "unreachable"),
        ("refused", "unreachable"),
    ] {
        let out = ssh.cli(
            &a,
            &["--host", host, "sessions", "create", "--command", "true"],
        );
        assert_eq!(out.status.code(), Some(3), "{host}");
        assert!(out.stdout.is_empty());
        let e = stderr_error(&out);
        assert_eq!(e["error"]["code"], code, "{host}: {e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(host),
            "{e}"
        );
        assert!(e["error"]["remedy"].is_string());
    }
    assert!(!missing.exists(), "--host must not start a daemon");
    // A partial fleet answer: what answered is printed, the rest listed, exit 3.
    let out = ssh.cli(&a, &["sessions", "list", "--hosts", "alpha,refused"]);
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["unreachable"][0]["host"], "refused", "{v}");
    assert_eq!(stderr_error(&out)["error"]["code"], "unreachable");
    // A host that would be an ssh option is refused before ssh runs.
    let out = ssh.cli(&a, &["--host", "-oProxyCommand=true", "sessions", "list"]);
    assert_eq!(out.status.code(), Some(2));
    // attach does not travel through the proxy: refused, typed.
    for args in [
        &["--host", "alpha", "attach"][..],
        &[
            "--host", "alpha", "sessions", "rec", "abcd", "--out", "x.cast",
        ],
    ] {
        let out = ssh.cli(&a, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr_error(&out)["error"]["code"],
            "unsupported",
            "{args:?}"
        );
    }
}
