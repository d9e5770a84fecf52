//! Shared by the example programs the integration tests run in sessions (`tests/terminal.rs`):
//! named terminal queries, escaping for reports, raw mode on the controlling terminal, and a
//! splitter that cuts a terminal's replies into whole escape sequences.
//!
//! Not an example itself: each example includes it with `#[path = "shared/mod.rs"] mod shared;`
//! (cargo only builds `examples/*.rs` and `examples/*/main.rs`).

#![allow(dead_code)]

use nix::sys::termios::{self, SetArg, Termios};
use std::fs::File;
use std::os::fd::AsFd;

/// The named queries (what a program sends to learn about its terminal).
pub const NAMED: &[(&str, &[u8])] = &[
    ("cpr", b"\x1b[6n"),
    ("decxcpr", b"\x1b[?6n"),
    ("dsr5", b"\x1b[5n"),
    ("da1", b"\x1b[c"),
    ("da1-0", b"\x1b[0c"),
    ("da2", b"\x1b[>c"),
    ("da2-0", b"\x1b[>0c"),
    ("da3", b"\x1b[=c"),
    ("xtversion", b"\x1b[>q"),
    ("xtversion-0", b"\x1b[>0q"),
    ("decrqm-2004", b"\x1b[?2004$p"),
    ("decrqm-1049", b"\x1b[?1049$p"),
    ("decrqm-25", b"\x1b[?25$p"),
    ("decrqm-9999", b"\x1b[?9999$p"),
    ("decrqm-irm", b"\x1b[4$p"),
    ("decrqss-sgr", b"\x1bP$qm\x1b\\"),
    ("decrqss-stbm", b"\x1bP$qr\x1b\\"),
    ("decrqss-decscusr", b"\x1bP$q q\x1b\\"),
    ("decrqss-other", b"\x1bP$qz\x1b\\"),
    ("osc10", b"\x1b]10;?\x07"),
    ("osc10-st", b"\x1b]10;?\x1b\\"),
    ("osc11", b"\x1b]11;?\x07"),
    ("osc12", b"\x1b]12;?\x07"),
    ("osc4-1", b"\x1b]4;1;?\x07"),
    ("xtwinops14", b"\x1b[14t"),
    ("xtwinops16", b"\x1b[16t"),
    ("xtwinops18", b"\x1b[18t"),
    ("xtwinops19", b"\x1b[19t"),
    // XTGETTCAP names in hex: TN, Co, and one no terminal knows ("zz").
    ("xtgettcap-tn", b"\x1bP+q544E\x1b\\"),
    ("xtgettcap-co", b"\x1bP+q436F\x1b\\"),
    ("xtgettcap-unknown", b"\x1bP+q7A7A\x1b\\"),
    ("kitty", b"\x1b[?u"),
];

/// A query by name, or a sequence written with escapes (`\e`, `\x1b`, `\a`, `\\`).
pub fn query(word: &str) -> (String, Vec<u8>) {
    match NAMED.iter().find(|(n, _)| *n == word) {
        Some((n, bytes)) => (n.to_string(), bytes.to_vec()),
        None => (escape(&unescape(word)), unescape(word)),
    }
}

/// `\e`, `\x1b`/`\xNN`, `\a`, `\r`, `\n`, `\\` to bytes; anything else as is.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'e' => out.push(0x1b),
                b'a' => out.push(0x07),
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 4 <= b.len() => {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).ok();
                    match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        Some(v) => {
                            out.push(v);
                            i += 4;
                            continue;
                        }
                        None => out.extend_from_slice(b"\\x"),
                    }
                }
                other => {
                    out.push(b'\\');
                    out.push(other);
                }
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Bytes as readable text: `\e` for ESC, `\a` for BEL, `\\` for a backslash, `\xNN` for other
/// control or non-ASCII bytes.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &c in bytes {
        match c {
            0x1b => s.push_str("\\e"),
            0x07 => s.push_str("\\a"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s
}

/// The controlling terminal, opened read-write, in raw mode until dropped.
pub struct RawTty {
    pub file: File,
    saved: Termios,
}

impl RawTty {
    pub fn open() -> Result<RawTty, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|e| format!("cannot open /dev/tty: {e}"))?;
        let saved = termios::tcgetattr(file.as_fd()).map_err(|e| format!("tcgetattr: {e}"))?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(file.as_fd(), SetArg::TCSANOW, &raw)
            .map_err(|e| format!("tcsetattr: {e}"))?;
        Ok(RawTty { file, saved })
    }
}

impl Drop for RawTty {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(self.file.as_fd(), SetArg::TCSANOW, &self.saved);
    }
}

/// Cuts a byte stream into whole escape sequences (CSI, OSC/DCS/SOS/PM/APC strings ended by
/// BEL or ST, two-byte escapes) and single other bytes.
#[derive(Default)]
pub struct Splitter {
    cur: Vec<u8>,
}

impl Splitter {
    /// Feed one byte; a finished unit comes back.
    pub fn push(&mut self, c: u8) -> Option<Vec<u8>> {
        if self.cur.is_empty() {
            if c == 0x1b {
                self.cur.push(c);
                return None;
            }
            return Some(vec![c]);
        }
        self.cur.push(c);
        let done = match self.cur[1] {
            _ if self.cur.len() == 2 => !matches!(c, b'[' | b']' | b'P' | b'X' | b'^' | b'_'),
            b'[' => (0x40..=0x7e).contains(&c),
            _ => c == 0x07 || (c == b'\\' && self.cur[self.cur.len() - 2] == 0x1b),
        };
        done.then(|| std::mem::take(&mut self.cur))
    }

    /// The bytes of a sequence partly read.
    pub fn cur_bytes(&self) -> Vec<u8> {
        self.cur.clone()
    }
}
