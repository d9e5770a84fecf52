//! `maxx attach [ID]`: join this terminal to a session's PTY, like `tmux attach`.
//!
//! The terminal goes into raw mode; its size is applied to the PTY on attach and on every
//! SIGWINCH; typed bytes go to the session as input frames; output comes back raw. The
//! detach key (default `Ctrl-\` then `d`) — or the session ending — restores the terminal
//! exactly as it was.

use crate::client::{send_request, ClientError, Target};
use maxx_protocol::attach::{FRAME_DETACH, FRAME_INPUT, FRAME_RESIZE};
use maxx_protocol::error::ErrorBody;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::termios::{self, SetArg, Termios};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::{Arc, Mutex};

/// What the terminal is sent when attach ends: SGR, scroll region, cursor keys, keypad,
/// mouse and focus reporting, bracketed paste, autowrap and cursor on, the kitty keyboard
/// flags popped, cursor style default, and the alternate screen left.
const DETACH_RESET: &[u8] = b"\x1b[0m\x1b[r\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\
\x1b[?1004l\x1b[?1005l\x1b[?1006l\x1b[?2004l\x1b[?7h\x1b[?25h\x1b[<99u\x1b[0 q\x1b[?1049l";

/// Restores the terminal's settings when dropped, however attach ends.
struct RawMode {
    saved: Termios,
}

impl RawMode {
    fn enter() -> nix::Result<RawMode> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd())?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.saved);
    }
}

fn window_size(fd: BorrowedFd<'_>) -> Option<(u16, u16)> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills a winsize struct we own.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(payload.len() + 5);
    f.push(kind);
    f.extend((payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn resize_frame(cols: u16, rows: u16) -> Vec<u8> {
    let mut p = cols.to_be_bytes().to_vec();
    p.extend(rows.to_be_bytes());
    frame(FRAME_RESIZE, &p)
}

/// Parse `--detach-key` (a key name or chord that encodes to one byte, e.g. `C-\`, `C-a`).
pub fn parse_detach_key(text: &str) -> Result<u8, String> {
    let token = maxx_protocol::keys::parse_token(text).map_err(|e| e.message)?;
    match maxx_protocol::keys::encode(&[token], Default::default()).as_slice() {
        [b] => Ok(*b),
        _ => Err(format!(
            "--detach-key {text:?} must be a single-byte key like C-\\ or C-a"
        )),
    }
}

/// How attach ended.
pub enum Outcome {
    /// The person pressed the detach key.
    Detached(String),
    /// The session ended or the daemon went away.
    Ended(String),
}

/// Run an attachment. Returns the exit code.
pub fn run(
    target: &Target,
    session: Option<String>,
    caller: Option<&str>,
    confirm: bool,
    detach_key: u8,
) -> Result<Outcome, ClientError> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    if !nix::unistd::isatty(stdin.as_fd()).unwrap_or(false) {
        return Err(ClientError::Usage(
            "attach needs a terminal on stdin".to_string(),
        ));
    }
    let req = crate::request::sessions_attach(session, window_size(stdout.as_fd()));
    let stream = send_request(target, req.method, req.params, caller, confirm, false)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(io_failed)?);
    let mut first = Vec::new();
    (&mut reader)
        .take(1 << 20)
        .read_until(b'\n', &mut first)
        .map_err(io_failed)?;
    let answer: maxx_protocol::Response = serde_json::from_slice(&first)
        .map_err(|e| ClientError::Failed(ErrorBody::internal(format!("bad answer: {e}"))))?;
    if !answer.ok {
        return Err(ClientError::Failed(
            answer
                .error
                .unwrap_or_else(|| ErrorBody::internal("attach refused")),
        ));
    }
    let session_id = answer
        .result
        .as_ref()
        .and_then(|r| r["session"]["session_id"].as_str())
        .unwrap_or("?")
        .to_string();

    // SIGWINCH is consumed by a signalfd-free watcher thread: block it everywhere, then
    // sigwait for it in one thread.
    let mut winch = SigSet::empty();
    winch.add(Signal::SIGWINCH);
    let _ = winch.thread_block();

    let _raw = RawMode::enter()
        .map_err(|e| ClientError::Usage(format!("cannot put the terminal in raw mode: {e}")))?;
    let writer = Arc::new(Mutex::new(stream));

    // Output: socket → stdout. When it ends, it says so through a pipe the input loop polls.
    let (done_r, done_w) = nix::unistd::pipe().map_err(|e| io_failed(e.into()))?;
    let output = std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    let _ = out.flush();
                }
            }
        }
        drop(done_w);
    });
    {
        let writer = writer.clone();
        std::thread::spawn(move || loop {
            if winch.wait().is_err() {
                return;
            }
            if let Some((cols, rows)) = window_size(std::io::stdout().as_fd()) {
                let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
                if w.write_all(&resize_frame(cols, rows)).is_err() {
                    return;
                }
            }
        });
    }

    // Input: stdin → input frames, watching for the detach key.
    let mut pending_prefix = false;
    let mut buf = [0u8; 4096];
    let outcome = loop {
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(done_r.as_fd(), PollFlags::POLLIN),
        ];
        if poll(&mut fds, PollTimeout::NONE).is_err() {
            continue;
        }
        if fds[1].any().unwrap_or(false) {
            break Outcome::Ended(session_id.clone());
        }
        let n = match nix::unistd::read(stdin.as_fd(), &mut buf) {
            Ok(0) | Err(_) => break Outcome::Detached(session_id.clone()),
            Ok(n) => n,
        };
        let mut input = Vec::with_capacity(n + 1);
        let mut detach = false;
        for &b in &buf[..n] {
            if pending_prefix {
                pending_prefix = false;
                if b == b'd' {
                    detach = true;
                    break;
                }
                input.push(detach_key);
                if b == detach_key {
                    pending_prefix = true;
                    continue;
                }
                input.push(b);
            } else if b == detach_key {
                pending_prefix = true;
            } else {
                input.push(b);
            }
        }
        let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
        if !input.is_empty() && w.write_all(&frame(FRAME_INPUT, &input)).is_err() {
            break Outcome::Ended(session_id.clone());
        }
        if detach {
            let _ = w.write_all(&frame(FRAME_DETACH, &[]));
            let _ = w.shutdown(std::net::Shutdown::Both);
            break Outcome::Detached(session_id.clone());
        }
    };
    if let Ok(w) = writer.lock() {
        let _ = w.shutdown(std::net::Shutdown::Both);
    }
    let _ = output.join();
    // The repaint and the program may have switched modes on this terminal (alternate
    // screen, mouse reporting, bracketed paste, kitty keyboard flags, a scroll region):
    // hand it back in its defaults, so the shell it returns to reads keys as before.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(DETACH_RESET);
    let _ = out.flush();
    Ok(outcome)
}

fn io_failed(e: std::io::Error) -> ClientError {
    ClientError::Failed(ErrorBody::internal(format!("attach failed: {e}")))
}
