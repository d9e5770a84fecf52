//! The light pass over PTY output: a parser that tracks only what the daemon must know at
//! full drain speed — the title (OSC 0/2), bracketed-paste mode (DEC 2004),
//! application-cursor mode (DEC 1), the alternate screen (DEC 47/1047/1049), OSC 133 D
//! (command finished, with its exit code) and whether the program ever marked input with
//! OSC 133 `B`.
//!
//! It keeps no grid, so it costs nothing per cell and no memory per session beyond a small
//! sequence buffer. Text between escape sequences is skipped with `memchr` for ESC: unlike a
//! general vte parser, it never decodes UTF-8 or looks at printable characters, which made
//! it the largest cost on the drain path. The sequence grammar follows vte's (ECMA-48 as
//! terminals implement it: CAN/SUB cancel, ESC aborts a sequence and starts the next, BEL or
//! ST ends an OSC, DCS/SOS/PM/APC strings are skipped to their ST); a test checks it against
//! vte itself on generated input. Everything here is a mechanical fact the program asked the
//! terminal for.

/// Longest title kept, in chars; longer titles are truncated.
const TITLE_MAX_CHARS: usize = 1024;

/// Something the program announced with an escape sequence, reported as such.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScreenEvent {
    /// OSC 0/2 set the title.
    Title(String),
    /// OSC 133 D: a shell-integrated command finished, with its exit code if given.
    CommandFinished(Option<i32>),
}

/// Terminal modes and title, as set by escape sequences.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ScreenFlags {
    /// Title from the last OSC 0 or OSC 2.
    pub title: Option<String>,
    /// DEC mode 2004: paste must be wrapped in `ESC[200~` … `ESC[201~`.
    pub bracketed_paste: bool,
    /// DEC mode 1: cursor keys send `ESC O A` instead of `ESC [ A`.
    pub app_cursor: bool,
    /// DEC 47/1047/1049: the alternate screen is active.
    pub alt_screen: bool,
    /// An OSC 133 `B` (input start) mark was seen: only then can `wait --output-only` leave
    /// anything out.
    pub input_marks: bool,
    /// The kitty keyboard protocol flags the program enabled on the active screen (`CSI > f u`
    /// pushes, `CSI < n u` pops, `CSI = f ; m u` sets); 0 = legacy xterm encoding.
    pub kitty_flags: u8,
}

/// Bytes of one OSC kept (vte keeps 1024); a longer one is cut there.
const OSC_MAX_BYTES: usize = 1024;
/// Parameters of one OSC (vte's limit, kept so titles read the same as the grid's).
const OSC_MAX_PARAMS: usize = 16;
/// Parameters of one CSI looked at (vte keeps 32).
const CSI_MAX_PARAMS: usize = 32;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Ground,
    Escape,
    EscapeIntermediate,
    Csi,
    /// A CSI that cannot be a mode change: skipped to its final byte.
    CsiIgnore,
    Osc,
    /// DCS before its final byte (parameters, intermediates).
    DcsHead,
    /// DCS whose head went wrong: skipped to ESC, CAN or SUB.
    DcsIgnore,
    /// DCS data: skipped to ESC (its ST), CAN, SUB or an 8-bit ST.
    DcsPassthrough,
    /// SOS, PM or APC: skipped to ESC (its ST), CAN or SUB.
    String,
}

/// The parser state plus the flags it maintains.
#[derive(Default)]
pub struct LightScreen {
    state: State,
    /// CSI: a `?` came first (a DEC private mode).
    private: bool,
    /// CSI: any intermediate byte (then it is not `CSI ? Pm h/l`).
    intermediate: bool,
    params: Vec<u16>,
    param: Option<u16>,
    /// CSI/DCS: inside a `:` sub-parameter (only a group's first value counts).
    sub: bool,
    osc: Vec<u8>,
    flags: ScreenFlags,
}

impl LightScreen {
    /// Feed PTY output; returns the announcements it carried, in order.
    pub fn advance(&mut self, bytes: &[u8]) -> Vec<ScreenEvent> {
        let mut events = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if self.state == State::Ground {
                match memchr::memchr(ESC, &bytes[i..]) {
                    Some(at) => {
                        i += at + 1;
                        self.state = State::Escape;
                    }
                    None => break,
                }
                continue;
            }
            let b = bytes[i];
            i += 1;
            self.step(b, &mut events);
        }
        events
    }

    /// Current flags.
    pub fn flags(&self) -> &ScreenFlags {
        &self.flags
    }

    /// One byte of a sequence (never called in the ground state).
    fn step(&mut self, b: u8, events: &mut Vec<ScreenEvent>) {
        // Anywhere in a sequence: CAN and SUB cancel it, ESC ends it and starts the next
        // (an OSC is dispatched first on either: `ESC \\` is its ST).
        match b {
            CAN | SUB => {
                if self.state == State::Osc {
                    self.osc_dispatch(events);
                }
                self.state = State::Ground;
                return;
            }
            ESC => {
                if self.state == State::Osc {
                    self.osc_dispatch(events);
                }
                self.state = State::Escape;
                return;
            }
            _ => {}
        }
        match self.state {
            State::Ground => {}
            State::Escape => match b {
                b'[' => {
                    self.state = State::Csi;
                    self.start_params();
                }
                b']' => {
                    self.state = State::Osc;
                    self.osc.clear();
                }
                b'P' => {
                    self.state = State::DcsHead;
                    self.start_params();
                }
                b'X' | b'^' | b'_' => self.state = State::String,
                0x20..=0x2f => self.state = State::EscapeIntermediate,
                0x30..=0x7e => self.state = State::Ground,
                _ => {} // C0 executed, DEL and 8-bit bytes ignored: the escape goes on
            },
            State::EscapeIntermediate => {
                if (0x30..=0x7e).contains(&b) {
                    self.state = State::Ground;
                }
            }
            State::Csi => match b {
                b'?' if !self.private && !self.intermediate && self.first() => self.private = true,
                0x30..=0x3b if !self.intermediate => self.param_byte(b),
                0x30..=0x3f => self.state = State::CsiIgnore,
                0x20..=0x2f => self.intermediate = true,
                0x40..=0x7e => {
                    self.state = State::Ground;
                    self.end_param();
                    if self.private && !self.intermediate && (b == b'h' || b == b'l') {
                        self.set_modes(b == b'h');
                    }
                }
                _ => {} // C0 executed, DEL and 8-bit bytes ignored
            },
            State::CsiIgnore => {
                if (0x40..=0x7e).contains(&b) {
                    self.state = State::Ground;
                }
            }
            State::Osc => match b {
                BEL => {
                    self.osc_dispatch(events);
                    self.state = State::Ground;
                }
                0x00..=0x1f => {} // ignored inside an OSC
                _ => {
                    if self.osc.len() < OSC_MAX_BYTES {
                        self.osc.push(b);
                    }
                }
            },
            State::DcsHead => match b {
                0x3c..=0x3f if !self.private && !self.intermediate && self.first() => {
                    self.private = true
                }
                0x30..=0x3b if !self.intermediate => self.param_byte(b),
                0x30..=0x3f => self.state = State::DcsIgnore,
                0x20..=0x2f => self.intermediate = true,
                0x40..=0x7e => self.state = State::DcsPassthrough,
                _ => {}
            },
            State::DcsPassthrough => {
                if b == 0x9c {
                    self.state = State::Ground;
                }
            }
            State::DcsIgnore | State::String => {}
        }
    }

    fn start_params(&mut self) {
        self.private = false;
        self.intermediate = false;
        self.params.clear();
        self.param = None;
        self.sub = false;
    }

    /// Nothing of the parameter string came yet (a private marker may only come first).
    fn first(&self) -> bool {
        self.params.is_empty() && self.param.is_none() && !self.sub
    }

    /// A digit, `;` or `:` of a CSI/DCS parameter string.
    fn param_byte(&mut self, b: u8) {
        match b {
            b'0'..=b'9' => {
                if !self.sub {
                    let p = self.param.unwrap_or(0);
                    self.param = Some(p.saturating_mul(10).saturating_add(u16::from(b - b'0')));
                }
            }
            b':' => {
                self.end_param();
                self.sub = true;
            }
            _ => {
                // `;`
                self.end_param();
                self.sub = false;
            }
        }
    }

    /// Close the current parameter (a sub-parameter belongs to the group already kept).
    fn end_param(&mut self) {
        if !self.sub && self.params.len() < CSI_MAX_PARAMS {
            self.params.push(self.param.unwrap_or(0));
        }
        self.param = None;
    }

    fn set_modes(&mut self, on: bool) {
        for p in &self.params {
            match p {
                2004 => self.flags.bracketed_paste = on,
                1 => self.flags.app_cursor = on,
                47 | 1047 | 1049 => self.flags.alt_screen = on,
                _ => {}
            }
        }
    }

    fn osc_dispatch(&mut self, events: &mut Vec<ScreenEvent>) {
        let mut osc = std::mem::take(&mut self.osc);
        // Like vte: at most OSC_MAX_PARAMS parameters; what follows the last one's `;` is
        // dropped.
        if let Some((cut, _)) = osc
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b';')
            .nth(OSC_MAX_PARAMS - 1)
        {
            osc.truncate(cut);
        }
        let mut parts = osc.splitn(2, |b| *b == b';');
        let (Some(kind), Some(rest)) = (parts.next(), parts.next()) else {
            osc.clear();
            self.osc = osc;
            return;
        };
        match kind {
            b"0" | b"2" => {
                let title: String = String::from_utf8_lossy(rest)
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(TITLE_MAX_CHARS)
                    .collect();
                if self.flags.title.as_deref() != Some(title.as_str()) {
                    self.flags.title = Some(title.clone());
                    events.push(ScreenEvent::Title(title));
                }
            }
            b"133" if rest.first() == Some(&b'B') => self.flags.input_marks = true,
            b"133" if rest.first() == Some(&b'D') => {
                let code = rest
                    .split(|b| *b == b';')
                    .nth(1)
                    .and_then(|c| std::str::from_utf8(c).ok())
                    .and_then(|c| c.parse().ok());
                events.push(ScreenEvent::CommandFinished(code));
            }
            _ => {}
        }
        // Keep the allocation for the next OSC.
        self.osc = osc;
        self.osc.clear();
    }
}

/// The reference for the light pass: vte's own parser with the same rules (tests only).
#[cfg(test)]
mod oracle {
    use super::{ScreenEvent, ScreenFlags, TITLE_MAX_CHARS};
    use vte::{Params, Parser, Perform};

    /// vte plus the flags, as the light pass was first written.
    #[derive(Default)]
    pub struct VteScreen {
        parser: Parser,
        pub flags: ScreenFlags,
    }

    impl VteScreen {
        pub fn advance(&mut self, bytes: &[u8]) -> Vec<ScreenEvent> {
            let mut performer = FlagsPerformer {
                flags: &mut self.flags,
                events: Vec::new(),
            };
            self.parser.advance(&mut performer, bytes);
            performer.events
        }
    }

    pub struct FlagsPerformer<'a> {
        flags: &'a mut ScreenFlags,
        events: Vec<ScreenEvent>,
    }

    impl Perform for FlagsPerformer<'_> {
        fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
            match params {
                [b"0" | b"2", rest @ ..] if !rest.is_empty() => {
                    // A title may itself contain ';', which vte splits on.
                    let joined = rest.join(&b';');
                    let title: String = String::from_utf8_lossy(&joined)
                        .chars()
                        .filter(|c| !c.is_control())
                        .take(TITLE_MAX_CHARS)
                        .collect();
                    if self.flags.title.as_deref() != Some(title.as_str()) {
                        self.flags.title = Some(title.clone());
                        self.events.push(ScreenEvent::Title(title));
                    }
                }
                [b"133", mark, rest @ ..] if mark.first() == Some(&b'D') => {
                    let code = rest
                        .first()
                        .and_then(|c| std::str::from_utf8(c).ok())
                        .and_then(|c| c.parse().ok());
                    self.events.push(ScreenEvent::CommandFinished(code));
                }
                [b"133", mark, ..] if mark.first() == Some(&b'B') => self.flags.input_marks = true,
                _ => {}
            }
        }

        fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, c: char) {
            if intermediates != b"?" || !(c == 'h' || c == 'l') {
                return;
            }
            let on = c == 'h';
            for param in params.iter() {
                match param.first().copied() {
                    Some(2004) => self.flags.bracketed_paste = on,
                    Some(1) => self.flags.app_cursor = on,
                    Some(47 | 1047 | 1049) => self.flags.alt_screen = on,
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pieces that make up real and broken escape sequences.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"\x1b".to_vec()),
            Just(b"[".to_vec()),
            Just(b"]".to_vec()),
            Just(b"?".to_vec()),
            Just(b";".to_vec()),
            Just(b":".to_vec()),
            Just(b"h".to_vec()),
            Just(b"l".to_vec()),
            Just(b"\x07".to_vec()),
            Just(b"\x1b\\".to_vec()),
            Just(b"\x18".to_vec()),
            Just(b"\x1a".to_vec()),
            Just(b"P".to_vec()),
            Just(b"_".to_vec()),
            Just(b" ".to_vec()),
            Just(b"(".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"1".to_vec()),
            Just(b"2004".to_vec()),
            Just(b"1049".to_vec()),
            Just(b"47".to_vec()),
            Just(b"\x1b[?2004h".to_vec()),
            Just(b"\x1b[?1;1049l".to_vec()),
            Just(b"\x1b]0;".to_vec()),
            Just(b"\x1b]2;".to_vec()),
            Just(b"\x1b]133;D;".to_vec()),
            Just(b"\x1b]133;A".to_vec()),
            Just(b"\x1b]133;B".to_vec()),
            Just("naïve 数据 ✓".as_bytes().to_vec()),
            "[a-z0-9 ]{1,8}".prop_map(String::into_bytes),
            any::<u8>().prop_map(|b| vec![b]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1000),
            rng_seed: proptest::test_runner::RngSeed::Fixed(133),
            ..ProptestConfig::default()
        })]

        /// The light pass reports exactly what vte's parser reports, however the bytes are
        /// split into chunks.
        #[test]
        fn agrees_with_vte(pieces in prop::collection::vec(piece(), 0..40), cut in 0usize..64) {
            let bytes: Vec<u8> = pieces.concat();
            let mut ours = LightScreen::default();
            let mut theirs = oracle::VteScreen::default();
            let cut = cut.min(bytes.len());
            let mut got = ours.advance(&bytes[..cut]);
            got.extend(ours.advance(&bytes[cut..]));
            let want = theirs.advance(&bytes);
            prop_assert_eq!(&got, &want, "input {:?}", String::from_utf8_lossy(&bytes));
            prop_assert_eq!(ours.flags(), &theirs.flags, "input {:?}", String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn title_and_modes() {
        let mut s = LightScreen::default();
        assert_eq!(
            s.advance(b"hello\x1b]2;my; title\x07 more"),
            [ScreenEvent::Title("my; title".into())]
        );
        assert_eq!(s.flags().title.as_deref(), Some("my; title"));
        assert!(s.advance(b"\x1b[?2004h\x1b[?1;1049h").is_empty());
        assert!(s.flags().bracketed_paste && s.flags().app_cursor && s.flags().alt_screen);
        // Split across chunks.
        s.advance(b"\x1b[?20");
        s.advance(b"04l");
        assert!(!s.flags().bracketed_paste);
        assert_eq!(s.advance(b"\x1b]0;x\x1b\\").len(), 1);
        assert_eq!(s.flags().title.as_deref(), Some("x"));
        assert!(
            s.advance(b"\x1b]0;x\x07").is_empty(),
            "same title: no event"
        );
        assert_eq!(
            s.advance(b"\x1b]133;D;7\x07\x1b]133;D\x07"),
            [
                ScreenEvent::CommandFinished(Some(7)),
                ScreenEvent::CommandFinished(None)
            ]
        );
        assert!(!s.flags().input_marks);
        s.advance(b"\x1b]133;A\x07$ \x1b]133;B\x07");
        assert!(s.flags().input_marks);
    }
}
