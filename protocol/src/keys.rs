//! `send-keys`: tmux-shaped key names and chords, encoded for the terminal's current mode.
//!
//! A word is a key when it is a known name (`Enter`, `Escape`, `Tab`, `BTab`, `BSpace`,
//! `Space`, `Up`/`Down`/`Left`/`Right`, `Home`/`End`, `PageUp`/`PageDown` (`PPage`/`NPage`),
//! `Insert`/`Delete` (`IC`/`DC`), `F1`–`F12`; any case) or a chord: one or more modifier
//! prefixes — `C-`/`ctrl+`, `M-`/`alt+`/`meta+`, `S-`/`shift+`, any case — before a key name
//! or one character (`C-c`, `M-x`, `S-Tab`, `C-S-Up`, `ctrl+alt+f5`).
//!
//! Two shapes are refused before any byte is written, so a typo is never typed as text:
//! a word shaped like a chord (it starts with a modifier prefix) that is not a valid one
//! (`S-Upp`, `C-é`, `S-1`, `M-`), and a word that looks like a key name (an upper-case
//! letter, then only letters and digits: `Entr`, `F13`). Anything else is literal text;
//! `literal: true` (`--literal`) makes every word text.
//!
//! [`encode`] turns keys into bytes for a [`KeyMode`]: xterm's encoding (modifier parameter
//! `m = 1 + shift 1 + alt 2 + ctrl 4`, e.g. `C-Up` = `ESC [ 1 ; 5 A`; modified Enter, Tab,
//! Backspace and Escape in modifyOtherKeys form `ESC [ 27 ; m ; code ~`) or, once the program
//! enabled it, the kitty keyboard protocol (`CSI code ; m u`). It is pure: the session hands
//! it the modes the program set.

use crate::error::ErrorBody;

/// One parsed `send-keys` word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyToken {
    /// Text typed as is (under kitty flag 8 each character is reported as a key).
    Literal(String),
    /// A named key or a character, possibly with modifiers.
    Key {
        /// The key.
        key: NamedKey,
        /// Modifiers held.
        mods: Mods,
    },
}

impl KeyToken {
    /// Whether the token types text rather than pressing a key: literal text, or a
    /// character with neither Ctrl nor Alt held. Text is input (`input:send`).
    pub fn is_text(&self) -> bool {
        match self {
            KeyToken::Literal(_) => true,
            KeyToken::Key {
                key: NamedKey::Char(_),
                mods,
            } => !mods.ctrl && !mods.alt,
            KeyToken::Key { .. } => false,
        }
    }
}

/// Modifiers of a chord; [`Mods::param`] is the xterm/kitty modifier parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mods {
    /// `S-` / `shift+`.
    pub shift: bool,
    /// `M-` / `alt+` / `meta+`.
    pub alt: bool,
    /// `C-` / `ctrl+`.
    pub ctrl: bool,
}

impl Mods {
    /// `1 + shift 1 + alt 2 + ctrl 4`; 1 means no modifier.
    pub fn param(self) -> u8 {
        1 + u8::from(self.shift) + 2 * u8::from(self.alt) + 4 * u8::from(self.ctrl)
    }

    fn none(self) -> bool {
        self == Mods::default()
    }

    fn only_shift(self) -> bool {
        self == Mods {
            shift: true,
            ..Mods::default()
        }
    }

    fn only_alt(self) -> bool {
        self == Mods {
            alt: true,
            ..Mods::default()
        }
    }

    fn only_ctrl(self) -> bool {
        self == Mods {
            ctrl: true,
            ..Mods::default()
        }
    }
}

/// Keys with no text form, and characters (for chords like `C-c`).
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

/// What the program asked of the terminal's keyboard, as the screen's light pass tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyMode {
    /// DEC mode 1 (DECCKM): unmodified cursor keys and Home/End send `ESC O x`.
    pub app_cursor: bool,
    /// kitty keyboard protocol flags (`CSI > f u`); 0 = xterm encoding. Honoured: 1
    /// disambiguate, 8 report all keys as escape codes, 16 embed text (with 8). Only press
    /// events are sent and no alternate keys, whatever flags 2 and 4 say.
    pub kitty_flags: u8,
}

/// kitty flag 1: disambiguate escape codes.
const KITTY_DISAMBIGUATE: u8 = 1;
/// kitty flag 2: report event types (only its effect on legacy cursor keys applies here).
const KITTY_EVENT_TYPES: u8 = 2;
/// kitty flag 8: report all keys as escape codes.
const KITTY_ALL_KEYS: u8 = 8;
/// kitty flag 16: report associated text (only with flag 8).
const KITTY_TEXT: u8 = 16;

fn named(name: &str) -> Option<(NamedKey, bool)> {
    let lower = name.to_ascii_lowercase();
    let key = match lower.as_str() {
        "enter" | "return" | "cr" => NamedKey::Enter,
        "escape" | "esc" => NamedKey::Escape,
        "tab" => NamedKey::Tab,
        // tmux's back-tab: Shift+Tab.
        "btab" => return Some((NamedKey::Tab, true)),
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
    };
    Some((key, false))
}

fn unknown(token: &str) -> ErrorBody {
    ErrorBody::invalid(format!("unknown key {token:?}")).with_remedy(
        "use a key name (Enter, Escape, Up, F1, C-c, M-x, S-Tab, ...), or send the words as text \
         with `maxx sessions send-keys --literal` (wire: literal: true) or `maxx sessions paste`",
    )
}

fn bad_chord(token: &str, why: &str) -> ErrorBody {
    ErrorBody::invalid(format!(
        "{token:?} looks like a key chord but is not one: {why}"
    ))
    .with_remedy(
        "a chord is C-, M-, S- (or ctrl+, alt+, meta+, shift+) before a key name or one \
             character, e.g. C-c, M-x, S-Tab, C-S-Up, ctrl+f5; to type the word as text use \
             `maxx sessions send-keys --literal` (wire: literal: true) or `maxx sessions paste`",
    )
}

/// The modifier a word starts with (case-insensitive) and the prefix's length.
fn modifier_prefix(word: &str) -> Option<(u8, usize)> {
    const PREFIXES: [(&str, u8); 7] = [
        ("c-", 4),
        ("m-", 2),
        ("s-", 1),
        ("ctrl+", 4),
        ("alt+", 2),
        ("meta+", 2),
        ("shift+", 1),
    ];
    PREFIXES.iter().find_map(|(p, bit)| {
        let head = word.get(..p.len())?;
        head.eq_ignore_ascii_case(p).then_some((*bit, p.len()))
    })
}

/// Parse one word as a key, a chord or text (see the module doc).
pub fn parse_token(token: &str) -> Result<KeyToken, ErrorBody> {
    if token.is_empty() {
        return Err(ErrorBody::invalid("empty key")
            .with_remedy("drop the empty word, or send a space with Space"));
    }
    let mut rest = token;
    let mut mods = Mods::default();
    let mut chord = false;
    // `C--` is Ctrl+`-`: a prefix is only taken while something follows it.
    while let Some((bit, len)) = modifier_prefix(rest) {
        chord = true;
        match bit {
            4 => mods.ctrl = true,
            2 => mods.alt = true,
            _ => mods.shift = true,
        }
        rest = &rest[len..];
        if rest.len() == 1 {
            break;
        }
    }
    if chord {
        return parse_chord(token, rest, mods);
    }
    if let Some((key, shift)) = named(token) {
        return Ok(KeyToken::Key {
            key,
            mods: Mods {
                shift,
                ..Mods::default()
            },
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

fn parse_chord(token: &str, rest: &str, mut mods: Mods) -> Result<KeyToken, ErrorBody> {
    let mut chars = rest.chars();
    let key = match (chars.next(), chars.next()) {
        (None, _) => return Err(bad_chord(token, "no key after the modifier")),
        (Some(c), None) => NamedKey::Char(c),
        _ => match named(rest) {
            Some((key, shift)) => {
                mods.shift |= shift;
                key
            }
            None => return Err(bad_chord(token, &format!("{rest:?} is not a key name"))),
        },
    };
    if let NamedKey::Char(c) = key {
        if mods.ctrl && ctrl_byte(c).is_none() {
            return Err(bad_chord(
                token,
                &format!("Ctrl with {c:?} has no terminal encoding"),
            ));
        }
        if mods.shift && !c.is_ascii_alphabetic() && c != ' ' {
            return Err(bad_chord(
                token,
                &format!("Shift goes with a letter or a key name, not {c:?}: type the shifted character itself"),
            ));
        }
    }
    Ok(KeyToken::Key { key, mods })
}

/// Parse every word; the first bad one refuses the whole batch. With `literal`, every word
/// is text.
pub fn parse_keys(tokens: &[String], literal: bool) -> Result<Vec<KeyToken>, ErrorBody> {
    if tokens.is_empty() {
        return Err(ErrorBody::invalid("send-keys needs at least one key")
            .with_remedy("name a key or some text, e.g. `maxx sessions send-keys ID 'ls' Enter`"));
    }
    if literal {
        return Ok(tokens
            .iter()
            .map(|t| KeyToken::Literal(t.clone()))
            .collect());
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

/// Encode keys for a terminal in `mode`.
pub fn encode(tokens: &[KeyToken], mode: KeyMode) -> Vec<u8> {
    let mut out = Vec::new();
    for t in tokens {
        match t {
            KeyToken::Literal(s) if mode.kitty_flags & KITTY_ALL_KEYS != 0 => {
                for c in s.chars() {
                    let (key, mods) = key_of_char(c);
                    encode_key(key, mods, mode, &mut out);
                }
            }
            KeyToken::Literal(s) => out.extend_from_slice(s.as_bytes()),
            KeyToken::Key { key, mods } => encode_key(*key, *mods, mode, &mut out),
        }
    }
    out
}

/// The key that types `c` (under kitty flag 8 text is reported key by key).
fn key_of_char(c: char) -> (NamedKey, Mods) {
    let ctrl = Mods {
        ctrl: true,
        ..Mods::default()
    };
    match c {
        '\r' => (NamedKey::Enter, Mods::default()),
        '\t' => (NamedKey::Tab, Mods::default()),
        '\x7f' => (NamedKey::BSpace, Mods::default()),
        '\x1b' => (NamedKey::Escape, Mods::default()),
        '\0' => (NamedKey::Space, ctrl),
        c if (c as u32) < 0x20 => (NamedKey::Char(char::from(c as u8 | 0x60)), ctrl),
        c => (NamedKey::Char(c), Mods::default()),
    }
}

fn encode_key(key: NamedKey, mods: Mods, mode: KeyMode, out: &mut Vec<u8>) {
    match key {
        NamedKey::Char(c) => encode_text_key(c, mods, mode, out),
        NamedKey::Space => encode_text_key(' ', mods, mode, out),
        _ if mode.kitty_flags == 0 => encode_xterm(key, mods, mode.app_cursor, out),
        _ => encode_kitty_functional(key, mods, mode, out),
    }
}

/// `ESC [ num ; m final`: the number is left out when it is 1 and nothing follows it (as
/// xterm's `ESC [ A` and kitty's `CSI P`), `; m` when there is no modifier.
fn csi(out: &mut Vec<u8>, num: u32, m: u8, fin: u8) {
    out.extend_from_slice(b"\x1b[");
    if m > 1 {
        out.extend_from_slice(format!("{num};{m}").as_bytes());
    } else if num != 1 || fin == b'u' || fin == b'~' {
        out.extend_from_slice(num.to_string().as_bytes());
    }
    out.push(fin);
}

/// The CSI number and final byte of a functional key (xterm's table; kitty's differs only
/// for F3 and the `u` keys).
fn functional(key: NamedKey) -> (u32, u8) {
    match key {
        NamedKey::Up => (1, b'A'),
        NamedKey::Down => (1, b'B'),
        NamedKey::Right => (1, b'C'),
        NamedKey::Left => (1, b'D'),
        NamedKey::Home => (1, b'H'),
        NamedKey::End => (1, b'F'),
        NamedKey::Insert => (2, b'~'),
        NamedKey::Delete => (3, b'~'),
        NamedKey::PageUp => (5, b'~'),
        NamedKey::PageDown => (6, b'~'),
        NamedKey::F(n @ 1..=4) => (1, b'P' + (n - 1)),
        NamedKey::F(n) => (
            match n {
                5 => 15,
                6 => 17,
                7 => 18,
                8 => 19,
                9 => 20,
                10 => 21,
                11 => 23,
                _ => 24,
            },
            b'~',
        ),
        NamedKey::Escape => (27, b'u'),
        NamedKey::Enter => (13, b'u'),
        NamedKey::Tab => (9, b'u'),
        NamedKey::BSpace => (127, b'u'),
        NamedKey::Space => (32, b'u'),
        NamedKey::Char(c) => (c as u32, b'u'),
    }
}

/// Enter, Tab, Backspace, Escape unmodified.
fn legacy_byte(key: NamedKey) -> Option<u8> {
    match key {
        NamedKey::Enter => Some(b'\r'),
        NamedKey::Tab => Some(b'\t'),
        NamedKey::BSpace => Some(0x7f),
        NamedKey::Escape => Some(0x1b),
        _ => None,
    }
}

fn is_cursor_key(key: NamedKey) -> bool {
    matches!(
        key,
        NamedKey::Up
            | NamedKey::Down
            | NamedKey::Left
            | NamedKey::Right
            | NamedKey::Home
            | NamedKey::End
    )
}

/// xterm: cursor/editing/function keys with `; m`, DECCKM for unmodified cursor keys only,
/// modifyOtherKeys form for Ctrl/Shift-modified Enter/Tab/Backspace/Escape (Shift+Tab is
/// `CSI Z`; Alt alone is `ESC` before the key).
fn encode_xterm(key: NamedKey, mods: Mods, app_cursor: bool, out: &mut Vec<u8>) {
    let m = mods.param();
    if let Some(byte) = legacy_byte(key) {
        if mods.none() {
            out.push(byte);
        } else if key == NamedKey::Tab && mods.only_shift() {
            out.extend_from_slice(b"\x1b[Z");
        } else if mods.only_alt() {
            // What terminals send by default (xterm's metaSendsEscape, tmux): ESC before
            // the key. Programs read `ESC CR` as Alt-Enter and `ESC DEL` as Alt-Backspace
            // (readline's backward-kill-word); few parse the modifyOtherKeys form.
            out.extend_from_slice(&[0x1b, byte]);
        } else {
            out.extend_from_slice(format!("\x1b[27;{m};{byte}~").as_bytes());
        }
        return;
    }
    let (num, fin) = functional(key);
    let ss3 =
        mods.none() && (matches!(key, NamedKey::F(1..=4)) || (is_cursor_key(key) && app_cursor));
    if ss3 {
        out.extend_from_slice(&[0x1b, b'O', fin]);
    } else {
        csi(out, num, m, fin);
    }
}

/// kitty's functional keys: legacy bytes where the flags keep them, else `CSI num ; m final`.
fn encode_kitty_functional(key: NamedKey, mods: Mods, mode: KeyMode, out: &mut Vec<u8>) {
    let flags = mode.kitty_flags;
    let disambiguate = flags & KITTY_DISAMBIGUATE != 0;
    let all_keys = flags & KITTY_ALL_KEYS != 0;
    if mode.app_cursor
        && !disambiguate
        && flags & KITTY_EVENT_TYPES == 0
        && mods.none()
        && (is_cursor_key(key) || matches!(key, NamedKey::F(1..=4)))
    {
        out.extend_from_slice(&[0x1b, b'O', functional(key).1]);
        return;
    }
    if let Some(byte) = legacy_byte(key) {
        let legacy = if mods.none() {
            // Unmodified Enter/Tab/Backspace stay plain so `reset` can still be typed after
            // a program died with the protocol on; Escape only without disambiguation.
            !all_keys && (key != NamedKey::Escape || !disambiguate)
        } else {
            false
        };
        if legacy {
            out.push(byte);
            return;
        }
        if !disambiguate && key != NamedKey::Escape {
            if mods.only_alt() {
                out.extend_from_slice(&[0x1b, byte]);
                return;
            }
            if key == NamedKey::Tab && mods.only_shift() {
                out.extend_from_slice(b"\x1b[Z");
                return;
            }
            if key == NamedKey::BSpace && mods.only_ctrl() {
                out.push(0x08);
                return;
            }
        }
    }
    let (num, fin) = match key {
        // `CSI R` would read as a cursor position report.
        NamedKey::F(3) => (13, b'~'),
        k => functional(k),
    };
    csi(out, num, mods.param(), fin);
}

/// A character key, possibly modified.
fn encode_text_key(c: char, mut mods: Mods, mode: KeyMode, out: &mut Vec<u8>) {
    let flags = mode.kitty_flags;
    // An upper-case letter is Shift + the letter (`C-A` stays Ctrl+a, as tmux reads it).
    let base = if c.is_ascii_uppercase() {
        mods.shift |= !mods.ctrl;
        c.to_ascii_lowercase()
    } else {
        c
    };
    let text = || {
        if mods.shift {
            base.to_ascii_uppercase()
        } else {
            base
        }
    };
    if flags & KITTY_ALL_KEYS != 0 {
        let m = mods.param();
        let produces_text = !mods.ctrl && !mods.alt;
        if flags & KITTY_TEXT != 0 && produces_text {
            let mods_field = if m > 1 { m.to_string() } else { String::new() };
            out.extend_from_slice(
                format!("\x1b[{};{mods_field};{}u", base as u32, text() as u32).as_bytes(),
            );
        } else {
            csi(out, base as u32, m, b'u');
        }
        return;
    }
    if mods.none() || mods.only_shift() {
        let mut buf = [0u8; 4];
        out.extend_from_slice(text().encode_utf8(&mut buf).as_bytes());
        return;
    }
    if flags & KITTY_DISAMBIGUATE != 0 {
        csi(out, base as u32, mods.param(), b'u');
        return;
    }
    // xterm (and kitty without flag 1): ESC for Alt, the control byte for Ctrl, Shift on
    // letters only.
    if mods.alt {
        out.push(0x1b);
    }
    if mods.ctrl {
        out.push(ctrl_byte(base).unwrap_or(0));
    } else {
        let mut buf = [0u8; 4];
        out.extend_from_slice(text().encode_utf8(&mut buf).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XTERM: KeyMode = KeyMode {
        app_cursor: false,
        kitty_flags: 0,
    };

    fn enc_in(mode: KeyMode, tokens: &[&str]) -> Vec<u8> {
        let t: Vec<String> = tokens.iter().map(|s| s.to_string()).collect();
        encode(&parse_keys(&t, false).unwrap(), mode)
    }

    fn enc(tokens: &[&str], app_cursor: bool) -> Vec<u8> {
        enc_in(
            KeyMode {
                app_cursor,
                kitty_flags: 0,
            },
            tokens,
        )
    }

    fn kitty(flags: u8, tokens: &[&str]) -> Vec<u8> {
        enc_in(
            KeyMode {
                app_cursor: false,
                kitty_flags: flags,
            },
            tokens,
        )
    }

    fn show(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).replace('\x1b', "ESC")
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
        assert_eq!(enc(&["C-Space", "M-Space", "Space"], false), b"\0\x1b  ");
    }

    /// The xterm table (docs/screen.md "Keys"), every row.
    #[test]
    fn xterm_modifier_encoding() {
        let cases: &[(&str, &[u8])] = &[
            ("C-Up", b"\x1b[1;5A"),
            ("M-Up", b"\x1b[1;3A"),
            ("S-Up", b"\x1b[1;2A"),
            ("C-M-S-Up", b"\x1b[1;8A"),
            ("C-Left", b"\x1b[1;5D"),
            ("ctrl+right", b"\x1b[1;5C"),
            ("shift+DOWN", b"\x1b[1;2B"),
            ("S-Home", b"\x1b[1;2H"),
            ("C-End", b"\x1b[1;5F"),
            ("M-Insert", b"\x1b[2;3~"),
            ("C-Delete", b"\x1b[3;5~"),
            ("S-PageUp", b"\x1b[5;2~"),
            ("C-NPage", b"\x1b[6;5~"),
            ("S-F1", b"\x1b[1;2P"),
            ("C-F2", b"\x1b[1;5Q"),
            ("M-F3", b"\x1b[1;3R"),
            ("C-S-F4", b"\x1b[1;6S"),
            ("C-F5", b"\x1b[15;5~"),
            ("alt+f12", b"\x1b[24;3~"),
            ("S-Tab", b"\x1b[Z"),
            ("BTab", b"\x1b[Z"),
            ("shift+tab", b"\x1b[Z"),
            ("SHIFT+TAB", b"\x1b[Z"),
            ("C-Tab", b"\x1b[27;5;9~"),
            ("C-S-Tab", b"\x1b[27;6;9~"),
            ("C-Enter", b"\x1b[27;5;13~"),
            ("S-Enter", b"\x1b[27;2;13~"),
            ("M-Enter", b"\x1b\r"),
            ("C-BSpace", b"\x1b[27;5;127~"),
            ("M-Escape", b"\x1b\x1b"),
            ("meta+x", b"\x1bx"),
            ("S-a", b"A"),
            ("M-S-a", b"\x1bA"),
            ("C-S-a", b"\x01"),
            ("m-X", b"\x1bX"),
            ("C-/", b"\x1f"),
            ("M--", b"\x1b-"),
        ];
        for (word, bytes) in cases {
            assert_eq!(
                show(&enc(&[word], false)),
                show(bytes),
                "{word} (normal cursor mode)"
            );
        }
    }

    #[test]
    fn application_cursor_mode_only_for_unmodified_cursor_keys() {
        assert_eq!(enc(&["Up", "Home", "End"], true), b"\x1bOA\x1bOH\x1bOF");
        assert_eq!(enc(&["C-Up", "S-Home"], true), b"\x1b[1;5A\x1b[1;2H");
        assert_eq!(enc(&["F1", "PageUp"], true), b"\x1bOP\x1b[5~");
    }

    #[test]
    fn kitty_disambiguate() {
        let cases: &[(&str, &[u8])] = &[
            ("Escape", b"\x1b[27u"),
            ("M-Escape", b"\x1b[27;3u"),
            ("Enter", b"\r"),
            ("Tab", b"\t"),
            ("BSpace", b"\x7f"),
            ("C-Enter", b"\x1b[13;5u"),
            ("S-Enter", b"\x1b[13;2u"),
            ("S-Tab", b"\x1b[9;2u"),
            ("M-BSpace", b"\x1b[127;3u"),
            ("C-c", b"\x1b[99;5u"),
            ("M-x", b"\x1b[120;3u"),
            ("C-S-a", b"\x1b[97;6u"),
            ("M-A", b"\x1b[97;4u"),
            ("C-Space", b"\x1b[32;5u"),
            ("S-a", b"A"),
            ("x", b"x"),
            ("Up", b"\x1b[A"),
            ("C-Up", b"\x1b[1;5A"),
            ("F1", b"\x1b[P"),
            ("F3", b"\x1b[13~"),
            ("S-F3", b"\x1b[13;2~"),
            ("C-F5", b"\x1b[15;5~"),
            ("Delete", b"\x1b[3~"),
        ];
        for (word, bytes) in cases {
            assert_eq!(show(&kitty(1, &[word])), show(bytes), "{word} with flags 1");
        }
        // Disambiguation turns DECCKM's SS3 off, as kitty does.
        let mode = KeyMode {
            app_cursor: true,
            kitty_flags: 1,
        };
        assert_eq!(enc_in(mode, &["Up"]), b"\x1b[A");
    }

    #[test]
    fn kitty_all_keys_as_escape_codes() {
        let cases: &[(&str, &[u8])] = &[
            ("Enter", b"\x1b[13u"),
            ("Tab", b"\x1b[9u"),
            ("BSpace", b"\x1b[127u"),
            ("Escape", b"\x1b[27u"),
            ("a", b"\x1b[97u"),
            ("S-a", b"\x1b[97;2u"),
            ("C-a", b"\x1b[97;5u"),
            ("Space", b"\x1b[32u"),
            ("S-Tab", b"\x1b[9;2u"),
            ("Up", b"\x1b[A"),
        ];
        for (word, bytes) in cases {
            assert_eq!(
                show(&kitty(1 | 8, &[word])),
                show(bytes),
                "{word} with flags 9"
            );
        }
        // Literal text is typed key by key; upper case is Shift.
        assert_eq!(
            show(&kitty(9, &["hI"])),
            show(b"\x1b[104u\x1b[105;2u"),
            "text with flags 9"
        );
        // Flag 16 embeds the text a key produces.
        assert_eq!(
            show(&kitty(1 | 8 | 16, &["hI", "C-a"])),
            show(b"\x1b[104;;104u\x1b[105;2;73u\x1b[97;5u"),
        );
        // Event types and alternate keys are not sent: flags 2 and 4 change nothing here.
        assert_eq!(
            kitty(1 | 2 | 4, &["C-c", "Enter"]),
            kitty(1, &["C-c", "Enter"])
        );
    }

    #[test]
    fn literal_sends_every_word_as_text() {
        let words: Vec<String> = ["S-Up", "Enter", "Hello"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let keys = parse_keys(&words, true).unwrap();
        assert_eq!(encode(&keys, XTERM), b"S-UpEnterHello");
    }

    #[test]
    fn unknown_names_and_bad_chords_are_refused() {
        for bad in [
            "Entr",
            "F13",
            "C-Foo",
            "Hello",
            "C-é",
            "S-Upp",
            "s-expression",
            "ctrl+",
            "M-",
            "C-M-",
            "C--",
            "S-1",
            "shift+!",
            "alt+nothing",
            "Meta+Uup",
            "C-S-é",
        ] {
            let e = parse_token(bad).expect_err(bad);
            assert_eq!(e.code, crate::ErrorCode::InvalidRequest, "{bad}");
            assert!(e.remedy.is_some(), "{bad}");
        }
        assert!(parse_keys(&[], false).is_err());
        // Not chord-shaped: text.
        for text in ["hello", "ls -la", "é", "-", "x-y", "co-op"] {
            assert_eq!(
                parse_token(text).unwrap(),
                KeyToken::Literal(text.to_string()),
                "{text}"
            );
        }
    }
}
