//! `send-keys`: tmux-shaped key names, encoded for the terminal's current mode.
//!
//! A token is a key when it is a known name (`Enter`, `Escape`, `Tab`, `BSpace`, `Space`,
//! `Up`/`Down`/`Left`/`Right`, `Home`/`End`, `PageUp`/`PageDown` (`PPage`/`NPage`),
//! `Insert`/`Delete` (`IC`/`DC`), `F1`–`F12`) or a chord (`C-x`, `ctrl+x`, `M-x`, `alt+x`,
//! `C-M-x`). A token that starts with an upper-case letter and is otherwise alphanumeric
//! looks like a key name: if it is not a known one it is refused (before any byte is
//! written) rather than typed. Anything else is literal text, typed as is.

use crate::error::ErrorBody;

/// One parsed `send-keys` token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyToken {
    /// Text typed as is.
    Literal(String),
    /// A named key, possibly with modifiers.
    Key {
        /// The key.
        key: NamedKey,
        /// Ctrl held.
        ctrl: bool,
        /// Alt (Meta) held: the bytes are prefixed with ESC.
        alt: bool,
    },
}

/// Keys with no text form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedKey {
    /// A character (for chords like `C-c`).
    Char(char),
    /// Enter (CR).
    Enter,
    /// Escape.
    Escape,
    /// Tab.
    Tab,
    /// Backspace (DEL).
    BSpace,
    /// Space.
    Space,
    /// Cursor up.
    Up,
    /// Cursor down.
    Down,
    /// Cursor left.
    Left,
    /// Cursor right.
    Right,
    /// Home.
    Home,
    /// End.
    End,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Insert.
    Insert,
    /// Delete.
    Delete,
    /// F1–F12.
    F(u8),
}

fn named(name: &str) -> Option<NamedKey> {
    let lower = name.to_ascii_lowercase();
    Some(match lower.as_str() {
        "enter" | "return" | "cr" => NamedKey::Enter,
        "escape" | "esc" => NamedKey::Escape,
        "tab" => NamedKey::Tab,
        "bspace" | "backspace" => NamedKey::BSpace,
        "space" => NamedKey::Space,
        "up" => NamedKey::Up,
        "down" => NamedKey::Down,
        "left" => NamedKey::Left,
        "right" => NamedKey::Right,
        "home" => NamedKey::Home,
        "end" => NamedKey::End,
        "pageup" | "ppage" | "pgup" => NamedKey::PageUp,
        "pagedown" | "npage" | "pgdn" => NamedKey::PageDown,
        "insert" | "ic" => NamedKey::Insert,
        "delete" | "dc" => NamedKey::Delete,
        f if f.starts_with('f') && f.len() <= 3 => {
            let n: u8 = f[1..].parse().ok()?;
            if (1..=12).contains(&n) {
                NamedKey::F(n)
            } else {
                return None;
            }
        }
        _ => return None,
    })
}

fn unknown(token: &str) -> ErrorBody {
    ErrorBody::invalid(format!("unknown key {token:?}"))
        .with_remedy("use a key name (Enter, Escape, Up, F1, C-c, M-x, ...) or send text with `maxx sessions paste`")
}

/// Parse one token.
pub fn parse_token(token: &str) -> Result<KeyToken, ErrorBody> {
    if token.is_empty() {
        return Err(ErrorBody::invalid("empty key"));
    }
    // Chords: C-x, M-x, C-M-x, ctrl+x, alt+x.
    let mut rest = token;
    let (mut ctrl, mut alt) = (false, false);
    loop {
        let lower = rest.to_ascii_lowercase();
        if rest.len() > 2 && (lower.starts_with("c-")) {
            ctrl = true;
            rest = &rest[2..];
        } else if rest.len() > 2 && lower.starts_with("m-") {
            alt = true;
            rest = &rest[2..];
        } else if rest.len() > 5 && lower.starts_with("ctrl+") {
            ctrl = true;
            rest = &rest[5..];
        } else if rest.len() > 4 && lower.starts_with("alt+") {
            alt = true;
            rest = &rest[4..];
        } else {
            break;
        }
    }
    if ctrl || alt {
        let mut chars = rest.chars();
        let key = match (chars.next(), chars.next()) {
            (Some(c), None) => NamedKey::Char(c),
            _ => named(rest).ok_or_else(|| unknown(token))?,
        };
        if ctrl {
            if let NamedKey::Char(c) = key {
                if ctrl_byte(c).is_none() {
                    return Err(unknown(token));
                }
            }
        }
        return Ok(KeyToken::Key { key, ctrl, alt });
    }
    if let Some(key) = named(token) {
        return Ok(KeyToken::Key {
            key,
            ctrl: false,
            alt: false,
        });
    }
    let looks_like_a_name = token.starts_with(|c: char| c.is_ascii_uppercase())
        && token.chars().all(|c| c.is_ascii_alphanumeric())
        && token.len() > 1;
    if looks_like_a_name {
        return Err(unknown(token));
    }
    Ok(KeyToken::Literal(token.to_string()))
}

/// Parse every token; the first bad one refuses the whole batch.
pub fn parse_keys(tokens: &[String]) -> Result<Vec<KeyToken>, ErrorBody> {
    if tokens.is_empty() {
        return Err(ErrorBody::invalid("send-keys needs at least one key"));
    }
    tokens.iter().map(|t| parse_token(t)).collect()
}

fn ctrl_byte(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c as u8 - b'A' + 1),
        '@' | ' ' | '2' => Some(0),
        '[' | '3' => Some(0x1b),
        '\\' | '4' => Some(0x1c),
        ']' | '5' => Some(0x1d),
        '^' | '6' => Some(0x1e),
        '_' | '7' | '/' => Some(0x1f),
        '?' | '8' => Some(0x7f),
        _ => None,
    }
}

/// Encode tokens. `app_cursor` is DEC mode 1 (cursor keys send `ESC O x`).
pub fn encode(tokens: &[KeyToken], app_cursor: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for t in tokens {
        match t {
            KeyToken::Literal(s) => out.extend_from_slice(s.as_bytes()),
            KeyToken::Key { key, ctrl, alt } => {
                if *alt {
                    out.push(0x1b);
                }
                let cursor = |c: u8| {
                    if app_cursor {
                        vec![0x1b, b'O', c]
                    } else {
                        vec![0x1b, b'[', c]
                    }
                };
                let bytes: Vec<u8> = match key {
                    NamedKey::Char(c) if *ctrl => vec![ctrl_byte(*c).unwrap_or(0)],
                    NamedKey::Char(c) => c.to_string().into_bytes(),
                    NamedKey::Enter => vec![b'\r'],
                    NamedKey::Escape => vec![0x1b],
                    NamedKey::Tab => vec![b'\t'],
                    NamedKey::BSpace => vec![0x7f],
                    NamedKey::Space if *ctrl => vec![0],
                    NamedKey::Space => vec![b' '],
                    NamedKey::Up => cursor(b'A'),
                    NamedKey::Down => cursor(b'B'),
                    NamedKey::Right => cursor(b'C'),
                    NamedKey::Left => cursor(b'D'),
                    NamedKey::Home => cursor(b'H'),
                    NamedKey::End => cursor(b'F'),
                    NamedKey::PageUp => b"\x1b[5~".to_vec(),
                    NamedKey::PageDown => b"\x1b[6~".to_vec(),
                    NamedKey::Insert => b"\x1b[2~".to_vec(),
                    NamedKey::Delete => b"\x1b[3~".to_vec(),
                    NamedKey::F(n @ 1..=4) => vec![0x1b, b'O', b'P' + (n - 1)],
                    NamedKey::F(n) => {
                        let code = match n {
                            5 => 15,
                            6 => 17,
                            7 => 18,
                            8 => 19,
                            9 => 20,
                            10 => 21,
                            11 => 23,
                            _ => 24,
                        };
                        format!("\x1b[{code}~").into_bytes()
                    }
                };
                out.extend(bytes);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(tokens: &[&str], app: bool) -> Vec<u8> {
        let t: Vec<String> = tokens.iter().map(|s| s.to_string()).collect();
        encode(&parse_keys(&t).unwrap(), app)
    }

    #[test]
    fn names_chords_literals() {
        assert_eq!(enc(&["ls -la", "Enter"], false), b"ls -la\r");
        assert_eq!(enc(&["Up"], false), b"\x1b[A");
        assert_eq!(enc(&["Up"], true), b"\x1bOA");
        assert_eq!(enc(&["C-c"], false), b"\x03");
        assert_eq!(enc(&["ctrl+\\"], false), b"\x1c");
        assert_eq!(enc(&["M-x"], false), b"\x1bx");
        assert_eq!(enc(&["C-M-a"], false), b"\x1b\x01");
        assert_eq!(enc(&["F1", "F5", "F12"], false), b"\x1bOP\x1b[15~\x1b[24~");
        assert_eq!(enc(&["BSpace", "Tab", "Escape"], false), b"\x7f\t\x1b");
        assert_eq!(enc(&["hello"], false), b"hello");
    }

    #[test]
    fn unknown_names_are_refused() {
        for bad in ["Entr", "F13", "C-Foo", "Hello", "C-é"] {
            assert!(parse_token(bad).is_err(), "{bad}");
        }
        assert!(parse_keys(&[]).is_err());
    }
}
