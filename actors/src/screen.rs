//! The light pass over PTY output: a vte parser that tracks only what the daemon must
//! know at full drain speed — the title (OSC 0/2), bracketed-paste mode (DEC 2004),
//! application-cursor mode (DEC 1), the alternate screen (DEC 47/1047/1049), and whether the
//! program ever marked input with OSC 133 `B`.
//!
//! It keeps no grid, so it costs nothing per cell and no memory per session beyond the
//! parser. Everything here is a mechanical fact the program asked the terminal for.

use vte::{Params, Parser, Perform};

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
}

/// The parser plus the flags it maintains.
pub struct LightScreen {
    parser: Parser,
    flags: ScreenFlags,
}

impl Default for LightScreen {
    fn default() -> Self {
        LightScreen {
            parser: Parser::new(),
            flags: ScreenFlags::default(),
        }
    }
}

impl LightScreen {
    /// Feed PTY output; returns the announcements it carried, in order.
    pub fn advance(&mut self, bytes: &[u8]) -> Vec<ScreenEvent> {
        let mut performer = FlagsPerformer {
            flags: &mut self.flags,
            events: Vec::new(),
        };
        self.parser.advance(&mut performer, bytes);
        performer.events
    }

    /// Current flags.
    pub fn flags(&self) -> &ScreenFlags {
        &self.flags
    }
}

struct FlagsPerformer<'a> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
