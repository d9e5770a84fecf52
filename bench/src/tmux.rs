//! A private tmux server (`tmux -L <name> -f /dev/null`), driven through its CLI (one
//! client process per command, like `maxx` CLI calls) and through a control-mode client
//! (`tmux -C`: one long-lived client, the closest tmux has to an in-process socket client).

use crate::util::{mono_ns, R};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Tmux {
    pub name: String,
    /// The server's socket file, removed on drop (kill-server leaves it behind).
    socket: Option<std::path::PathBuf>,
    /// The server's pid: SIGKILLed on drop if `kill-server` did not end it within 5 s (a
    /// server with 1,000 busy panes was seen to outlive `kill-server`, and SIGTERM).
    pid: Option<u32>,
}

impl Tmux {
    /// Start a server with one detached session `session` of `cols`x`rows`, whose first
    /// window just sleeps (it keeps the server and the session alive).
    pub fn start(session: &str, cols: u16, rows: u16) -> R<Tmux> {
        Tmux::start_nofile(session, cols, rows, None)
    }

    /// As [`Tmux::start`], the server forked under `RLIMIT_NOFILE` = `nofile` (soft and hard).
    pub fn start_nofile(session: &str, cols: u16, rows: u16, nofile: Option<u64>) -> R<Tmux> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let name = format!(
            "maxxbench-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut t = Tmux {
            name,
            socket: None,
            pid: None,
        };
        let mut cmd = t.command();
        if let Some(n) = nofile {
            crate::util::raise_nofile(&mut cmd, n);
        }
        let out = cmd
            .args(["-f", "/dev/null", "new-session", "-d", "-s", session])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()])
            .arg("exec sleep 1000000")
            .output()?;
        if !out.status.success() {
            return Err(
                format!("tmux new-session: {}", String::from_utf8_lossy(&out.stderr)).into(),
            );
        }
        t.socket = t
            .run(&["display-message", "-p", "#{socket_path}"])
            .ok()
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from);
        t.pid = t.server_pid().ok();
        Ok(t)
    }

    /// `tmux -L <name>` with the environment every tmux call gets: `/bin/sh` as the shell
    /// (maxx runs commands with `/bin/sh -c` too) and no inherited `$TMUX`.
    pub fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.name])
            .env("SHELL", "/bin/sh")
            .env_remove("TMUX")
            .stdin(Stdio::null());
        c
    }

    /// Run a CLI command; returns trimmed stdout or the error.
    pub fn run(&self, args: &[&str]) -> R<String> {
        let out = self.command().args(args).output()?;
        if !out.status.success() {
            return Err(format!("tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    pub fn server_pid(&self) -> R<u32> {
        Ok(self.run(&["display-message", "-p", "#{pid}"])?.parse()?)
    }

    /// Attach a control-mode client to `session`.
    pub fn control(&self, session: &str) -> R<Control> {
        let mut child = self
            .command()
            .args(["-C", "attach-session", "-t", session])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut c = Control {
            child,
            stdin,
            out: BufReader::with_capacity(256 * 1024, stdout),
            notes: VecDeque::new(),
        };
        // Blocks not sent by us (flags 0, e.g. the attach's own) are skipped by read_block.
        let lines = c.cmd("display-message -p BENCHSYNC")?;
        if !lines.iter().any(|l| l.contains("BENCHSYNC")) {
            return Err(format!("tmux control mode: could not sync (got {lines:?})").into());
        }
        c.notes.clear();
        Ok(c)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self
            .command()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(pid) = self.pid {
            let gone = || {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true)
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            while !gone() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !gone() {
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        if let Some(p) = &self.socket {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A control-mode client: commands in, `%begin`/`%end` blocks and `%notifications` out.
pub struct Control {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    /// Notifications read so far, with the CLOCK_MONOTONIC time they were read.
    pub notes: VecDeque<(u64, String)>,
}

impl Control {
    fn read_raw(&mut self, timeout: Duration) -> R<Option<String>> {
        if self.out.buffer().is_empty() {
            let mut pfd = libc::pollfd {
                fd: self.out.get_ref().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
            if n == 0 {
                return Ok(None);
            }
        }
        let mut buf = Vec::new();
        self.out.read_until(b'\n', &mut buf)?;
        if buf.is_empty() {
            return Err("tmux control client exited".into());
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }

    /// Read the next `%begin` … `%end|%error` block; notifications met on the way are queued.
    fn read_block(&mut self) -> R<Vec<String>> {
        loop {
            let line = self
                .read_raw(Duration::from_secs(120))?
                .ok_or("tmux control: no answer within 120 s")?;
            if line.starts_with("%begin ") {
                // `%begin TIME NUMBER FLAGS`: FLAGS is 1 for a command this client sent and 0
                // otherwise, e.g. the attach-session block, which can arrive after the first
                // commands. Only our own blocks answer `cmd`.
                let ours = line.split_whitespace().nth(3) != Some("0");
                let mut body = Vec::new();
                let failed = loop {
                    let l = self
                        .read_raw(Duration::from_secs(120))?
                        .ok_or("tmux control: block never ended")?;
                    if l.starts_with("%end ") {
                        break false;
                    }
                    if l.starts_with("%error ") {
                        break true;
                    }
                    body.push(l);
                };
                if !ours {
                    continue;
                }
                if failed {
                    return Err(format!("tmux control error: {}", body.join(" | ")).into());
                }
                return Ok(body);
            } else if line.starts_with("%exit") {
                return Err(format!("tmux control client detached: {line}").into());
            } else {
                self.notes.push_back((mono_ns(), line));
            }
        }
    }

    /// Send one command and return its output lines.
    pub fn cmd(&mut self, command: &str) -> R<Vec<String>> {
        self.stdin.write_all(command.as_bytes())?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()?;
        self.read_block()
    }

    /// Block until `count` notifications satisfying `pred` have been read (counting those
    /// already queued); returns the read time of the last one.
    pub fn wait_notes(
        &mut self,
        pred: impl Fn(&str) -> bool,
        count: usize,
        timeout: Duration,
    ) -> R<u64> {
        let deadline = Instant::now() + timeout;
        let mut seen = 0usize;
        let mut last = 0u64;
        while let Some((t, l)) = self.notes.pop_front() {
            if pred(&l) {
                seen += 1;
                last = t;
            }
        }
        while seen < count {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "tmux: saw {seen} of {count} notifications before the timeout"
                )
                .into());
            }
            if let Some(l) = self.read_raw(left)? {
                if pred(&l) {
                    seen += 1;
                    last = mono_ns();
                }
            }
        }
        Ok(last)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
