//! `--host H`: one request to the daemon on H, carried by the system `ssh` to `maxx proxy`
//! there (`docs/remote.md`). Nothing of our own listens on a network: ssh authenticates,
//! encrypts and multiplexes (`~/.ssh/config`, the agent, ProxyJump, ControlMaster all apply),
//! the far side's `maxx proxy` adds that machine's token, and that daemon's policy decides.
//!
//! A [`Channel`] is one `ssh -T -o BatchMode=yes -- H maxx proxy` child per request (or
//! stream): the request line on its stdin, the answer on its stdout, byte for byte what the
//! socket would have said (the CLI sends no `id`, so the proxy adds none). When no answer
//! comes, ssh's exit status says why: 255 ssh itself failed (refused login, unknown host,
//! no route), 127 no `maxx` on the far side; both are `unreachable` (exit 3) naming the host.
//! `$MAXX_SSH` replaces the `ssh` command (split on whitespace: `ssh -F test_config`), and
//! `$MAXX_REMOTE_MAXX` the far side's `maxx` (a path, when it is not on a non-interactive
//! shell's PATH).

use crate::client::ClientError;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::thread::JoinHandle;

/// The variable naming the ssh command (default `ssh`), split on whitespace.
pub const SSH_ENV: &str = "MAXX_SSH";
/// The variable naming `maxx` on the far side (default `maxx`).
pub const REMOTE_MAXX_ENV: &str = "MAXX_REMOTE_MAXX";
/// How much of ssh's stderr is kept to explain a failure (its last lines).
const STDERR_TAIL_MAX: usize = 4096;
/// The longest host name taken (an ssh alias, `user@host`, or an address).
const HOST_MAX_BYTES: usize = 255;

/// Whether `host` can be handed to ssh as one argument naming a destination: not empty,
/// not an option (`-oProxyCommand=...` must never reach ssh's option parser), no
/// whitespace or control characters, at most 255 bytes.
pub fn check_host(host: &str) -> Result<(), ErrorBody> {
    let why = if host.is_empty() {
        Some("is empty")
    } else if host.starts_with('-') {
        Some("starts with '-' (it would be read as an ssh option)")
    } else if host.len() > HOST_MAX_BYTES {
        Some("is longer than 255 bytes")
    } else if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("contains whitespace or a control character")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(ErrorBody::invalid(format!(
            "host {:?} {why}",
            crate::views::escape_controls(host)
        ))
        .with_remedy("name a host as ssh does: an alias from ~/.ssh/config, host or user@host")),
    }
}

/// The refusal for a verb that speaks more than NDJSON on its connection (attach, rec,
/// mcp), which `maxx proxy` does not carry.
pub fn local_only(host: &str, method: &str) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::Unsupported,
        format!("{method} does not run over --host (asked for {host}): its connection carries raw terminal bytes, which maxx proxy does not relay"),
    )
    .with_remedy(format!(
        "run it on the host itself (`ssh -t {host} maxx attach ID`), or read the session as JSON with `maxx --host {host} sessions snapshot ID`"
    ))
}

/// The ssh command line for `host`: `$MAXX_SSH` (or `ssh`), then `-T -o BatchMode=yes --
/// HOST maxx proxy`. `--` ends ssh's options, so the host is only ever a destination.
fn ssh_argv(host: &str) -> Vec<String> {
    let ssh = std::env::var(SSH_ENV).unwrap_or_default();
    let mut argv: Vec<String> = ssh.split_whitespace().map(str::to_string).collect();
    if argv.is_empty() {
        argv.push("ssh".into());
    }
    let remote = std::env::var(REMOTE_MAXX_ENV)
        .ok()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| "maxx".into());
    argv.extend(
        ["-T", "-o", "BatchMode=yes", "--", host, &remote, "proxy"]
            .iter()
            .map(|s| s.to_string()),
    );
    argv
}

/// One `ssh HOST maxx proxy` carrying one request (or stream). Dropping it closes the
/// request's write side (which ends a stream) and stops the ssh child.
pub struct Channel {
    /// The host as given, for every message that names it.
    host: String,
    /// The ssh child; its exit status explains a missing answer.
    child: Child,
    /// The request's write side; closed to half-close (the proxy then ends when the answer
    /// is out) or to end a stream.
    stdin: Option<ChildStdin>,
    /// ssh's stderr, drained on its own thread (a full pipe must never stall ssh), the
    /// last [`STDERR_TAIL_MAX`] bytes kept.
    stderr: Option<JoinHandle<Vec<u8>>>,
}

impl Channel {
    /// Start ssh and write `line` (one request). With `half_close`, close the write side
    /// after it. Returns the channel and the stdout to read the answer from.
    pub fn open(
        host: &str,
        line: &[u8],
        half_close: bool,
    ) -> Result<(Channel, ChildStdout), ClientError> {
        check_host(host).map_err(|e| ClientError::Usage(e.message))?;
        let argv = ssh_argv(host);
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                unreachable_error(
                    host,
                    format!("cannot run {:?} to reach {host}: {e}", argv[0]),
                    "install OpenSSH's client, or point MAXX_SSH at the ssh command to use",
                )
            })?;
        let stdout = child.stdout.take().expect("piped");
        let mut stderr_pipe = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut tail = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > STDERR_TAIL_MAX {
                    tail.drain(..tail.len() - STDERR_TAIL_MAX);
                }
            }
            tail
        });
        let mut channel = Channel {
            host: host.to_string(),
            child,
            stdin: None,
            stderr: Some(stderr),
        };
        let mut stdin = channel.child.stdin.take().expect("piped");
        // ssh that failed before reading closes its stdin: the exit status says why.
        if let Err(e) = stdin.write_all(line).and_then(|()| stdin.flush()) {
            drop(stdin);
            drop(stdout);
            return Err(channel.ended(ClientError::NoDaemon(ErrorBody::new(
                ErrorCode::Unreachable,
                format!("writing the request to ssh failed: {e}"),
            ))));
        }
        if !half_close {
            channel.stdin = Some(stdin);
        }
        Ok((channel, stdout))
    }

    /// The answer never came (or a stream stopped without its end): why, from ssh's exit
    /// status and the last lines it wrote on stderr. Always exit 3 (`unreachable`).
    pub fn ended(&mut self, otherwise: ClientError) -> ClientError {
        self.stdin = None;
        let status = self.child.wait().ok();
        let stderr = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let said = String::from_utf8_lossy(&stderr);
        let said: Vec<&str> = said
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let said = crate::views::escape_controls(&said[said.len().saturating_sub(3)..].join("; "));
        let with_said = |m: String| {
            if said.is_empty() {
                m
            } else {
                format!("{m}: {said}")
            }
        };
        let host = &self.host;
        match status.and_then(|s| s.code()) {
            Some(255) => unreachable_error(
                host,
                with_said(format!("ssh could not reach or log in to {host}")),
                &format!(
                    "check `ssh {host} true` works without a prompt (BatchMode: a key or an \
                     agent, a known host key); ssh's own message is quoted"
                ),
            ),
            Some(127) => unreachable_error(
                host,
                with_said(format!(
                    "maxx was not found on {host} (the remote command exited 127)"
                )),
                &format!(
                    "install maxx on {host}, or set {REMOTE_MAXX_ENV} to its path there \
                     (a non-interactive ssh shell may not have ~/.cargo/bin on PATH)"
                ),
            ),
            code => {
                let base = match otherwise {
                    ClientError::NoDaemon(e) | ClientError::Failed(e) => e.message,
                    ClientError::Usage(m) => m,
                };
                let exit =
                    code.map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}"));
                unreachable_error(
                    host,
                    with_said(format!(
                        "the connection to {host} ended without an answer ({base}; ssh {exit})"
                    )),
                    "retry; if it persists, see what `ssh HOST maxx status` says",
                )
            }
        }
    }

    /// An error line from the far side that means no daemon could be reached there
    /// (`no_daemon`, `daemon_restarted`, `unreachable`): the same code, naming the host, as
    /// a [`ClientError::NoDaemon`] (exit 3). `--host` never starts a daemon there.
    pub fn unreached(&self, error: &ErrorBody) -> Option<ClientError> {
        if !matches!(
            error.code,
            ErrorCode::NoDaemon | ErrorCode::DaemonRestarted | ErrorCode::Unreachable
        ) {
            return None;
        }
        let host = &self.host;
        let mut e = ErrorBody::new(error.code, format!("on {host}: {}", error.message));
        e.remedy = Some(match error.code {
            ErrorCode::NoDaemon => format!(
                "start one there with `ssh {host} maxx daemon --detach` (--host never starts a daemon)"
            ),
            _ => error
                .remedy
                .clone()
                .unwrap_or_else(|| error.code.default_remedy().to_string()),
        });
        Some(ClientError::NoDaemon(e))
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.stdin = None;
        // The answer is in (or nobody wants it): the far side's proxy sees the channel close.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `unreachable` error (exit 3) naming `host`.
fn unreachable_error(host: &str, message: String, remedy: &str) -> ClientError {
    debug_assert!(message.contains(host));
    ClientError::NoDaemon(ErrorBody::new(ErrorCode::Unreachable, message).with_remedy(remedy))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_could_be_options_are_refused() {
        for bad in [
            "",
            "-oProxyCommand=touch /tmp/x",
            "-p",
            "a b",
            "a\nb",
            &"h".repeat(256),
        ] {
            assert!(check_host(bad).is_err(), "{bad:?}");
        }
        for good in ["build-1", "me@gpu.example.org", "10.0.0.7", "[::1]"] {
            check_host(good).unwrap();
        }
    }

    #[test]
    fn the_host_follows_double_dash() {
        let argv = ssh_argv("box");
        let dd = argv.iter().position(|a| a == "--").unwrap();
        assert_eq!(argv[dd + 1], "box");
        assert!(argv.contains(&"BatchMode=yes".to_string()));
        assert!(argv.contains(&"-T".to_string()));
    }
}
