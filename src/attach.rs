//! `maxx attach [ID]`: join this terminal to a session's PTY, like `tmux attach`.
//!
//! The terminal goes into raw mode; its size is applied to the PTY on attach and on every
//! SIGWINCH; typed bytes go to the session as input frames; output comes back raw. The
//! detach key (default `Ctrl-\` then `d`) — or the session ending — restores the terminal
//! exactly as it was.
//!
//! This process reads the terminal in exactly one place, the input loop of [`run`], which
//! also waits on a signalfd for SIGWINCH: no other thread reads stdin or takes the signal
//! (`maxx top` parks its keyboard reader while it attaches, see `top.rs`).
//!
//! The status (who is attached, how to detach) is the terminal's title, not a row of the
//! screen: see [`TitleFilter`] and docs/human.md.

use crate::client::{send_request, ClientError, Target};
use maxx_protocol::attach::{FRAME_DETACH, FRAME_INPUT, FRAME_RESIZE};
use maxx_protocol::error::ErrorBody;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
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

/// How to attach.
pub struct Options {
    /// The prefix byte: prefix `d` detaches, prefix prefix sends one prefix byte, prefix
    /// and any other byte sends both.
    pub detach_key: u8,
    /// How the prefix is named in the status title (`C-\`).
    pub detach_key_name: String,
    /// Show the status in the terminal's title (`--no-status` turns it off).
    pub status: bool,
    /// Bytes the person typed that were read before attach began (`maxx top` read them
    /// in the same read as the Enter that attached): they go to the session first.
    pub initial: Vec<u8>,
}

/// Block SIGWINCH in the calling thread, so threads it spawns afterwards inherit the
/// block and the signal waits for a signalfd. `maxx top` calls this before it spawns any
/// thread; [`run`] calls it too.
pub fn block_winch() {
    let mut winch = SigSet::empty();
    winch.add(Signal::SIGWINCH);
    let _ = winch.thread_block();
}

/// A signalfd that becomes readable on SIGWINCH (blocked first, see [`block_winch`]).
pub fn winch_fd() -> std::io::Result<SignalFd> {
    block_winch();
    let mut winch = SigSet::empty();
    winch.add(Signal::SIGWINCH);
    SignalFd::with_flags(&winch, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(std::io::Error::from)
}

/// The prefix state machine: what the typed bytes send, and whether they detach.
#[derive(Debug, Default)]
pub struct Prefix {
    pending: bool,
}

impl Prefix {
    /// Feed typed bytes; returns the bytes to send and whether to detach after sending
    /// them. Bytes after a detach are dropped (the person left).
    pub fn feed(&mut self, key: u8, typed: &[u8]) -> (Vec<u8>, bool) {
        let mut input = Vec::with_capacity(typed.len() + 1);
        for &b in typed {
            if self.pending {
                self.pending = false;
                if b == b'd' {
                    return (input, true);
                }
                input.push(key);
                if b != key {
                    input.push(b);
                }
            } else if b == key {
                self.pending = true;
            } else {
                input.push(b);
            }
        }
        (input, false)
    }
}

/// Rewrites the title a program sets (OSC 0 and OSC 2) so the status stays in front of
/// it: `[maxx 1a2b3c4d build · C-\ d detaches] <the program's title>`. Every other byte
/// passes through unchanged and in order; a sequence split across reads is held until it
/// ends, so nothing is inserted inside one.
pub struct TitleFilter {
    status: String,
    state: TitleState,
    /// The OSC body seen so far (bounded: a longer one passes through unchanged).
    osc: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum TitleState {
    Ground,
    /// An ESC was seen and not yet passed on.
    Esc,
    /// Inside `ESC ]`.
    Osc,
    /// Inside a DCS, SOS, PM or APC string, or an OSC too long to hold: passed through
    /// until its ESC.
    Str,
}

/// The longest OSC held for rewriting; a longer one passes through as it is.
const OSC_HELD_MAX: usize = 4096;

impl TitleFilter {
    /// A filter showing `status` in the title.
    pub fn new(status: String) -> TitleFilter {
        TitleFilter {
            status,
            state: TitleState::Ground,
            osc: Vec::new(),
        }
    }

    /// The sequence that shows the status on its own (sent at attach).
    pub fn initial(&self) -> Vec<u8> {
        format!("\x1b]2;{}\x07", self.status).into_bytes()
    }

    fn finish_osc(&mut self, terminator: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(b"\x1b]");
        let osc = std::mem::take(&mut self.osc);
        match osc.split_first().zip(osc.get(1)) {
            Some(((c @ (b'0' | b'2'), rest), b';')) => {
                out.push(*c);
                out.push(b';');
                out.extend_from_slice(self.status.as_bytes());
                if rest.len() > 1 {
                    out.push(b' ');
                    out.extend_from_slice(&rest[1..]);
                }
            }
            _ => out.extend_from_slice(&osc),
        }
        out.extend_from_slice(terminator);
        self.osc = osc;
        self.osc.clear();
    }

    /// Filter one read of the program's output into `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            match self.state {
                TitleState::Ground | TitleState::Str => {
                    if b == 0x1b {
                        self.state = TitleState::Esc;
                    } else {
                        out.push(b);
                    }
                }
                TitleState::Esc => match b {
                    b']' => {
                        self.osc.clear();
                        self.state = TitleState::Osc;
                    }
                    0x1b => out.push(0x1b),
                    b'P' | b'X' | b'^' | b'_' => {
                        out.extend_from_slice(&[0x1b, b]);
                        self.state = TitleState::Str;
                    }
                    _ => {
                        out.extend_from_slice(&[0x1b, b]);
                        self.state = TitleState::Ground;
                    }
                },
                TitleState::Osc => match b {
                    0x07 => {
                        self.finish_osc(b"\x07", out);
                        self.state = TitleState::Ground;
                    }
                    // ST (`ESC \`) ends it; an ESC starting anything else ends it too (as a
                    // terminal aborts it), and the next byte is read as that sequence.
                    0x1b => {
                        self.finish_osc(b"", out);
                        self.state = TitleState::Esc;
                    }
                    _ if self.osc.len() >= OSC_HELD_MAX => {
                        out.extend_from_slice(b"\x1b]");
                        out.append(&mut self.osc);
                        out.push(b);
                        self.state = TitleState::Str;
                    }
                    _ => self.osc.push(b),
                },
            }
        }
    }
}

/// Run an attachment.
pub fn run(
    target: &Target,
    session: Option<String>,
    caller: Option<&str>,
    confirm: bool,
    opts: Options,
) -> Result<Outcome, ClientError> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    if !nix::unistd::isatty(stdin.as_fd()).unwrap_or(false) {
        return Err(ClientError::Usage(
            "attach needs a terminal on stdin".to_string(),
        ));
    }
    // Before any thread starts, so none of them takes the signal.
    let winch = winch_fd().map_err(io_failed)?;
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
    let view = answer
        .result
        .as_ref()
        .map(|r| r["session"].clone())
        .unwrap_or_default();
    let session_id = view["session_id"].as_str().unwrap_or("?").to_string();

    let _raw = RawMode::enter()
        .map_err(|e| ClientError::Usage(format!("cannot put the terminal in raw mode: {e}")))?;
    let writer = Arc::new(Mutex::new(stream));

    let mut title = opts.status.then(|| {
        let name = view["title"]
            .as_str()
            .or_else(|| view["command"].as_str())
            .unwrap_or("(shell)");
        TitleFilter::new(status_text(&session_id, name, &opts.detach_key_name))
    });
    if let Some(t) = &title {
        // Save the person's title (XTWINOPS push; a terminal without it ignores this).
        let mut out = stdout.lock();
        let _ = out.write_all(b"\x1b[22;0t");
        let _ = out.write_all(&t.initial());
        let _ = out.flush();
    }

    // Output: socket → stdout. When it ends, it says so through a pipe the input loop polls.
    let (done_r, done_w) = nix::unistd::pipe().map_err(|e| io_failed(e.into()))?;
    let output = std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        let mut buf = vec![0u8; 64 * 1024];
        let mut filtered = Vec::new();
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let bytes = match &mut title {
                        Some(t) => {
                            filtered.clear();
                            t.feed(&buf[..n], &mut filtered);
                            &filtered[..]
                        }
                        None => &buf[..n],
                    };
                    if out.write_all(bytes).is_err() {
                        break;
                    }
                    let _ = out.flush();
                }
            }
        }
        drop(done_w);
    });

    // Input: stdin → input frames, watching for the prefix; SIGWINCH → a resize frame.
    let mut prefix = Prefix::default();
    let send = |typed: &[u8], prefix: &mut Prefix| -> Option<Outcome> {
        let (input, detach) = prefix.feed(opts.detach_key, typed);
        let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
        if !input.is_empty() && w.write_all(&frame(FRAME_INPUT, &input)).is_err() {
            return Some(Outcome::Ended(session_id.clone()));
        }
        if detach {
            let _ = w.write_all(&frame(FRAME_DETACH, &[]));
            let _ = w.shutdown(std::net::Shutdown::Both);
            return Some(Outcome::Detached(session_id.clone()));
        }
        None
    };
    let mut buf = [0u8; 4096];
    let mut outcome = send(&opts.initial, &mut prefix);
    let outcome = loop {
        if let Some(o) = outcome.take() {
            break o;
        }
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(done_r.as_fd(), PollFlags::POLLIN),
            PollFd::new(winch.as_fd(), PollFlags::POLLIN),
        ];
        if poll(&mut fds, PollTimeout::NONE).is_err() {
            continue;
        }
        if fds[1].any().unwrap_or(false) {
            break Outcome::Ended(session_id.clone());
        }
        if fds[2].any().unwrap_or(false) {
            while let Ok(Some(_)) = winch.read_signal() {}
            if let Some((cols, rows)) = window_size(stdout.as_fd()) {
                let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
                if w.write_all(&resize_frame(cols, rows)).is_err() {
                    break Outcome::Ended(session_id.clone());
                }
            }
        }
        if !fds[0].any().unwrap_or(false) {
            continue;
        }
        let n = match nix::unistd::read(stdin.as_fd(), &mut buf) {
            Ok(0) | Err(_) => break Outcome::Detached(session_id.clone()),
            Ok(n) => n,
        };
        outcome = send(&buf[..n], &mut prefix);
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
    if opts.status {
        // An empty title, then the person's own back (XTWINOPS pop) where the terminal
        // saved it.
        let _ = out.write_all(b"\x1b]2;\x07\x1b[23;0t");
    }
    let _ = out.flush();
    Ok(outcome)
}

/// The status title: who is attached and how to leave. The session's title is someone
/// else's text: its controls are shown escaped.
fn status_text(session_id: &str, name: &str, key: &str) -> String {
    let short: String = session_id
        .chars()
        .take(8)
        .collect::<String>()
        .to_lowercase();
    format!(
        "[maxx {short} {} · {key} d detaches]",
        crate::views::escape_controls(name)
    )
}

fn io_failed(e: std::io::Error) -> ClientError {
    ClientError::Failed(ErrorBody::internal(format!("attach failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(chunks: &[&[u8]]) -> (Vec<u8>, bool) {
        let mut p = Prefix::default();
        let mut sent = Vec::new();
        for c in chunks {
            let (input, detach) = p.feed(0x1c, c);
            sent.extend(input);
            if detach {
                return (sent, true);
            }
        }
        (sent, false)
    }

    #[test]
    fn the_prefix_twice_sends_one_prefix_byte_and_stays() {
        assert_eq!(typed(&[b"\x1c\x1cx"]), (b"\x1cx".to_vec(), false));
        assert_eq!(typed(&[b"\x1c", b"\x1c", b"d"]), (b"\x1cd".to_vec(), false));
        assert_eq!(typed(&[b"\x1c\x1c\x1c\x1c"]), (b"\x1c\x1c".to_vec(), false));
        assert_eq!(typed(&[b"\x1cx"]), (b"\x1cx".to_vec(), false));
        assert_eq!(typed(&[b"ab\x1c", b"dzz"]), (b"ab".to_vec(), true));
        assert_eq!(typed(&[b"\x1c\x1c\x1cd"]), (b"\x1c".to_vec(), true));
    }

    fn filtered(chunks: &[&[u8]]) -> Vec<u8> {
        let mut f = TitleFilter::new("[S]".into());
        let mut out = Vec::new();
        for c in chunks {
            f.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn the_status_stays_in_front_of_the_programs_title() {
        assert_eq!(filtered(&[b"a\x1b]2;vim\x07b"]), b"a\x1b]2;[S] vim\x07b");
        assert_eq!(
            filtered(&[b"\x1b", b"]0", b";x\x1b", b"\\\x1b[2J"]),
            b"\x1b]0;[S] x\x1b\\\x1b[2J"
        );
        // Other OSCs, CSIs and strings pass through byte for byte.
        let other: &[u8] = b"\x1b]52;c;aGk=\x07\x1b[1;31mred\x1bP+q\x1b\\\x1b]1;icon\x07\xc3\xbc";
        assert_eq!(filtered(&[other]), other);
        assert_eq!(filtered(&[b"\x1b]2;\x07"]), b"\x1b]2;[S]\x07");
    }
}
