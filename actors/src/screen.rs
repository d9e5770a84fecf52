//! The light pass over PTY output: a parser that tracks only what the daemon must know at
//! full drain speed — the title (OSC 0/2), bracketed-paste mode (DEC 2004),
//! application-cursor mode (DEC 1), the alternate screen (DEC 47/1047/1049), OSC 133 D
//! (command finished, with its exit code), whether the program ever marked input with
//! OSC 133 `B`, the kitty keyboard flags, the scroll region and origin mode — and every
//! query the program asks its terminal ([`Found`], answered by `answers.rs`), with the
//! stream offsets of its bytes so the copy forwarded to an attached terminal can leave it
//! out.
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
const TITLE_MAX_CHARS: usize = maxx_protocol::limits::TERMINAL_TITLE_MAX_CHARS;

/// Something the program announced with an escape sequence, reported as such.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScreenEvent {
    /// OSC 0/2 set the title.
    Title(String),
    /// OSC 133 C: a shell-integrated command started (its output begins).
    CommandStarted,
    /// OSC 133 D: a shell-integrated command finished, with its exit code if given.
    CommandFinished(Option<i32>),
}

use crate::answers::Query;

/// Most kitty keyboard flag sets kept per screen (`CSI > f u` pushes; the oldest is dropped
/// past this, as the protocol asks).
const KITTY_STACK_MAX: usize = 16;
/// Bytes of a DCS query's data kept (DECRQSS, XTGETTCAP); a longer one is not a query.
const DCS_QUERY_MAX: usize = 256;

/// A query found in the output: the answer, and the stream offsets `[start, end)` of its
/// bytes (from its ESC to its final byte, its ST's ESC included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Stream offset of the query's first byte.
    pub start: u64,
    /// Stream offset just past it: the answer is due once the output up to here is parsed.
    pub end: u64,
    /// What was asked.
    pub query: Query,
}

/// Which DCS the light pass is capturing the data of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum DcsQuery {
    #[default]
    None,
    /// `DCS $ q Pt ST` (DECRQSS).
    Setting,
    /// `DCS + q Pt ST` (XTGETTCAP).
    Capabilities,
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

/// State the light pass tracks only to answer queries.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct QueryState {
    /// Kitty keyboard flag stacks of the active and the inactive screen (each screen has
    /// its own, swapped with the alternate screen).
    kitty: Vec<u8>,
    kitty_inactive: Vec<u8>,
    /// DECSTBM as set (1-based top and bottom), `None` = the whole screen.
    region: Option<(u16, u16)>,
    /// DEC 6 (origin mode): CPR counts from the region's top.
    origin: bool,
    /// DEC 2026 (synchronized update).
    sync: bool,
    /// The last DECSCUSR parameter (`CSI Ps SP q`), 0 = never set.
    cursor_style: u16,
    /// Screen height, for DECSTBM's default bottom.
    rows: u16,
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
pub struct LightScreen {
    state: State,
    /// CSI/DCS: the private marker that came first (`?`, `>`, `<`, `=`), or 0.
    prefix: u8,
    /// CSI/DCS: the first intermediate byte, or 0.
    inter: u8,
    /// CSI/DCS: more than one intermediate byte (none of ours).
    inters: bool,
    params: Vec<u16>,
    param: Option<u16>,
    /// CSI/DCS: inside a `:` sub-parameter (only a group's first value counts).
    sub: bool,
    osc: Vec<u8>,
    /// The DCS whose data is being captured, and its data.
    dcs: DcsQuery,
    dcs_data: Vec<u8>,
    flags: ScreenFlags,
    queries_state: QueryState,
    /// Stream offset of the next byte.
    pos: u64,
    /// Stream offset of the ESC that began the current (or last) sequence.
    seq_start: u64,
    /// An OSC/DCS query just ended at an ESC: if the next byte (at this offset) is `\`,
    /// it is the query's ST and belongs to its bytes.
    st_at: Option<u64>,
    /// Queries found since the last [`LightScreen::take_found`].
    found: Vec<Found>,
    /// Extra byte ranges that belong to queries (an ST's `\` seen after the query ended).
    cuts: Vec<(u64, u64)>,
    /// Armed by [`LightScreen::watch_sequence_end`]: the offset where the sequence in
    /// progress then ended.
    sequence_end: Option<Option<u64>>,
}

impl Default for LightScreen {
    fn default() -> Self {
        LightScreen::new(24)
    }
}

impl LightScreen {
    /// A fresh terminal of `rows` rows.
    pub fn new(rows: u16) -> LightScreen {
        LightScreen {
            state: State::Ground,
            prefix: 0,
            inter: 0,
            inters: false,
            params: Vec::new(),
            param: None,
            sub: false,
            osc: Vec::new(),
            dcs: DcsQuery::None,
            dcs_data: Vec::new(),
            flags: ScreenFlags::default(),
            queries_state: QueryState {
                rows,
                ..QueryState::default()
            },
            pos: 0,
            seq_start: 0,
            st_at: None,
            found: Vec::new(),
            cuts: Vec::new(),
            sequence_end: None,
        }
    }

    /// Feed PTY output; returns the announcements it carried, in order (queries are kept
    /// for [`LightScreen::take_found`]).
    pub fn advance(&mut self, bytes: &[u8]) -> Vec<ScreenEvent> {
        let mut events = Vec::new();
        let base = self.pos;
        let mut i = 0;
        while i < bytes.len() {
            if self.state == State::Ground {
                match memchr::memchr(ESC, &bytes[i..]) {
                    Some(at) => {
                        i += at + 1;
                        self.state = State::Escape;
                        self.seq_start = base + (i - 1) as u64;
                        if let Some(None) = self.sequence_end {
                            // The watched sequence was over before this one began.
                            self.sequence_end = Some(Some(self.seq_start));
                        }
                    }
                    None => break,
                }
                continue;
            }
            let b = bytes[i];
            let at = base + i as u64;
            i += 1;
            self.pos = at + 1;
            let before = self.seq_start;
            self.step(b, at, &mut events);
            if let Some(None) = self.sequence_end {
                if self.state == State::Ground {
                    self.sequence_end = Some(Some(at + 1));
                } else if self.seq_start != before {
                    self.sequence_end = Some(Some(at));
                }
            }
        }
        self.pos = base + bytes.len() as u64;
        events
    }

    /// Current flags.
    pub fn flags(&self) -> &ScreenFlags {
        &self.flags
    }

    /// The queries found since the last call, in order, and the extra byte ranges that
    /// belong to queries.
    pub fn take_found(&mut self) -> (Vec<Found>, Vec<(u64, u64)>) {
        (
            std::mem::take(&mut self.found),
            std::mem::take(&mut self.cuts),
        )
    }

    /// Whether a query was found since the last [`LightScreen::take_found`].
    pub fn found_any(&self) -> bool {
        !self.found.is_empty() || !self.cuts.is_empty()
    }

    /// Where the sequence in progress began, if the output is inside one now.
    pub fn in_sequence(&self) -> Option<u64> {
        (self.state != State::Ground).then_some(self.seq_start)
    }

    /// Start watching for the end of the sequence in progress ([`LightScreen::sequence_end`]).
    pub fn watch_sequence_end(&mut self) {
        self.sequence_end = if self.state == State::Ground {
            Some(Some(self.pos))
        } else {
            Some(None)
        };
    }

    /// Where the watched sequence ended, once it has (then the watch is over).
    pub fn sequence_end(&mut self) -> Option<u64> {
        match self.sequence_end {
            Some(Some(end)) => {
                self.sequence_end = None;
                Some(end)
            }
            _ => None,
        }
    }

    /// The scroll region (1-based top and bottom) if the program set one.
    pub fn region(&self) -> Option<(u16, u16)> {
        self.queries_state.region
    }

    /// The state as a checkpoint (`grid/checkpoint.rs` holds the codec), or `None` inside a
    /// sequence: a checkpoint is only taken in the ground state, where the parser's scratch
    /// fields are empty.
    pub fn checkpoint(&self) -> Option<Vec<u8>> {
        if self.state != State::Ground {
            return None;
        }
        let mut w = crate::grid::Writer::default();
        let f = &self.flags;
        match &f.title {
            None => w.u8(0),
            Some(t) => {
                w.u8(1);
                w.bytes(t.as_bytes());
            }
        }
        for b in [f.bracketed_paste, f.app_cursor, f.alt_screen, f.input_marks] {
            w.u8(b as u8);
        }
        w.u8(f.kitty_flags);
        let q = &self.queries_state;
        for stack in [&q.kitty, &q.kitty_inactive] {
            w.bytes(stack);
        }
        match q.region {
            None => w.u8(0),
            Some((t, b)) => {
                w.u8(1);
                w.var(t as u64);
                w.var(b as u64);
            }
        }
        w.u8(q.origin as u8);
        w.u8(q.sync as u8);
        w.var(q.cursor_style as u64);
        w.var(q.rows as u64);
        w.var(self.pos);
        Some(w.0)
    }

    /// A light pass in the ground state rebuilt from [`LightScreen::checkpoint`] (hostile
    /// input: bounded, refused whole if anything is off).
    pub(crate) fn restore(r: &mut crate::grid::Reader) -> Result<LightScreen, &'static str> {
        let mut light = LightScreen::default();
        let title = match r.u8()? {
            0 => None,
            1 => Some(
                std::str::from_utf8(r.bytes(4 * TITLE_MAX_CHARS)?)
                    .map_err(|_| "a bad title")?
                    .to_string(),
            ),
            _ => return Err("a bad title"),
        };
        let flags = ScreenFlags {
            title,
            bracketed_paste: r.bool()?,
            app_cursor: r.bool()?,
            alt_screen: r.bool()?,
            input_marks: r.bool()?,
            kitty_flags: r.u8()?,
        };
        let kitty = r.bytes(KITTY_STACK_MAX)?.to_vec();
        let kitty_inactive = r.bytes(KITTY_STACK_MAX)?.to_vec();
        let region = match r.u8()? {
            0 => None,
            1 => Some((
                r.upto(u16::MAX as u64)? as u16,
                r.upto(u16::MAX as u64)? as u16,
            )),
            _ => return Err("a bad region"),
        };
        light.queries_state = QueryState {
            kitty,
            kitty_inactive,
            region,
            origin: r.bool()?,
            sync: r.bool()?,
            cursor_style: r.upto(u16::MAX as u64)? as u16,
            rows: r.upto(u16::MAX as u64)? as u16,
        };
        light.flags = flags;
        light.pos = r.var()?;
        light.seq_start = light.pos;
        Ok(light)
    }

    /// Stream offset of the next byte.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The PTY was resized to `rows` rows: like a terminal, reset the scroll region.
    pub fn resized(&mut self, rows: u16) {
        self.queries_state.rows = rows;
        self.queries_state.region = None;
    }

    fn record(&mut self, query: Query, end: u64) {
        self.found.push(Found {
            start: self.seq_start,
            end,
            query,
        });
    }

    /// One byte of a sequence (never called in the ground state), at stream offset `at`.
    fn step(&mut self, b: u8, at: u64, events: &mut Vec<ScreenEvent>) {
        // Anywhere in a sequence: CAN and SUB cancel it, ESC ends it and starts the next
        // (an OSC or DCS is dispatched first on either: `ESC \\` is its ST).
        match b {
            CAN | SUB => {
                self.string_end(at + 1, false, events);
                self.state = State::Ground;
                return;
            }
            ESC => {
                if self.string_end(at + 1, true, events) {
                    self.st_at = Some(at + 1);
                }
                self.state = State::Escape;
                self.seq_start = at;
                return;
            }
            _ => {}
        }
        if let Some(st) = self.st_at.take() {
            if st == at && b == b'\\' && self.state == State::Escape {
                self.cuts.push((at, at + 1));
                self.state = State::Ground;
                return;
            }
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
                b'c' => {
                    self.state = State::Ground;
                    self.full_reset();
                }
                0x30..=0x7e => self.state = State::Ground,
                _ => {} // C0 executed, DEL and 8-bit bytes ignored: the escape goes on
            },
            State::EscapeIntermediate => {
                if (0x30..=0x7e).contains(&b) {
                    self.state = State::Ground;
                }
            }
            State::Csi => match b {
                0x3c..=0x3f if self.prefix == 0 && self.inter == 0 && self.first() => {
                    self.prefix = b
                }
                0x30..=0x3b if self.inter == 0 => self.param_byte(b),
                0x30..=0x3f => self.state = State::CsiIgnore,
                0x20..=0x2f => self.intermediate(b),
                0x40..=0x7e => {
                    self.state = State::Ground;
                    self.end_param();
                    if !self.inters {
                        self.csi_dispatch(b, at + 1);
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
                    self.osc_dispatch(events, Some(false), at + 1);
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
                0x3c..=0x3f if self.prefix == 0 && self.inter == 0 && self.first() => {
                    self.prefix = b
                }
                0x30..=0x3b if self.inter == 0 => self.param_byte(b),
                0x30..=0x3f => self.state = State::DcsIgnore,
                0x20..=0x2f => self.intermediate(b),
                0x40..=0x7e => {
                    self.state = State::DcsPassthrough;
                    self.dcs_data.clear();
                    self.dcs = match (self.prefix, self.inter, self.inters, b) {
                        (0, b'$', false, b'q') => DcsQuery::Setting,
                        (0, b'+', false, b'q') => DcsQuery::Capabilities,
                        _ => DcsQuery::None,
                    };
                }
                _ => {}
            },
            State::DcsPassthrough => {
                if b == 0x9c {
                    self.string_end(at + 1, true, events);
                    self.state = State::Ground;
                } else if self.dcs != DcsQuery::None && (0x20..0x7f).contains(&b) {
                    if self.dcs_data.len() < DCS_QUERY_MAX {
                        self.dcs_data.push(b);
                    } else {
                        self.dcs = DcsQuery::None;
                    }
                }
            }
            State::DcsIgnore | State::String => {}
        }
    }

    fn start_params(&mut self) {
        self.prefix = 0;
        self.inter = 0;
        self.inters = false;
        self.params.clear();
        self.param = None;
        self.sub = false;
    }

    fn intermediate(&mut self, b: u8) {
        if self.inter == 0 {
            self.inter = b;
        } else {
            self.inters = true;
        }
    }

    /// An OSC or DCS string ends here (at ESC, CAN, SUB or 8-bit ST; `end` just past that
    /// byte); true if it was a query (its ST's `\\` may follow).
    fn string_end(&mut self, end: u64, st: bool, events: &mut Vec<ScreenEvent>) -> bool {
        let before = self.found.len();
        match self.state {
            State::Osc => self.osc_dispatch(events, Some(st), end),
            State::DcsPassthrough => {
                let data = std::mem::take(&mut self.dcs_data);
                match self.dcs {
                    DcsQuery::Setting => {
                        let region = self.queries_state.region;
                        let cursor_style = self.queries_state.cursor_style;
                        self.record(
                            Query::Setting {
                                pt: data.clone(),
                                region,
                                cursor_style,
                            },
                            end,
                        );
                    }
                    DcsQuery::Capabilities => {
                        let names = data.split(|b| *b == b';').map(<[u8]>::to_vec).collect();
                        self.record(Query::Capabilities(names), end);
                    }
                    DcsQuery::None => {}
                }
                self.dcs = DcsQuery::None;
                self.dcs_data = data;
                self.dcs_data.clear();
            }
            _ => {}
        }
        self.found.len() > before
    }

    /// RIS (`ESC c`): the terminal's modes go back to their defaults.
    fn full_reset(&mut self) {
        self.flags.bracketed_paste = false;
        self.flags.app_cursor = false;
        self.flags.alt_screen = false;
        self.flags.kitty_flags = 0;
        let rows = self.queries_state.rows;
        self.queries_state = QueryState {
            rows,
            ..QueryState::default()
        };
    }

    /// A complete CSI with final byte `b` (not more than one intermediate); `end` is just
    /// past it.
    fn csi_dispatch(&mut self, b: u8, end: u64) {
        let p0 = self.params.first().copied().unwrap_or(0);
        let q = &mut self.queries_state;
        let query = match (self.prefix, self.inter, b) {
            (b'?', 0, b'h' | b'l') => {
                self.set_modes(b == b'h');
                return;
            }
            (0, 0, b'r') => {
                // DECSTBM, as alacritty applies it: an empty region is ignored.
                let top = if p0 == 0 { 1 } else { p0 };
                let bottom = match self.params.get(1) {
                    Some(&b) if b != 0 => b,
                    _ => q.rows,
                };
                if top < bottom {
                    let (top, bottom) = (top.min(q.rows.saturating_add(1)), bottom.min(q.rows));
                    q.region = (top != 1 || bottom != q.rows).then_some((top, bottom));
                }
                return;
            }
            (0, 0, b'n') if p0 == 6 => Query::CursorPosition {
                private: false,
                origin_top: q.origin.then(|| q.region.map_or(0, |(t, _)| t - 1)),
            },
            (b'?', 0, b'n') if p0 == 6 => Query::CursorPosition {
                private: true,
                origin_top: q.origin.then(|| q.region.map_or(0, |(t, _)| t - 1)),
            },
            (0, b' ', b'q') => {
                q.cursor_style = p0;
                return;
            }
            (0, 0, b'n') if p0 == 5 => Query::Status,
            (0, 0, b'c') if p0 == 0 => Query::PrimaryAttributes,
            (b'>', 0, b'c') if p0 == 0 => Query::SecondaryAttributes,
            (b'=', 0, b'c') if p0 == 0 => Query::TertiaryAttributes,
            (b'>', 0, b'q') if p0 == 0 => Query::Version,
            (b'?' | 0, b'$', b'p') => Query::Mode {
                private: self.prefix == b'?',
                mode: p0,
                sync: q.sync,
            },
            (0, 0, b't') if matches!(p0, 14 | 16 | 18 | 19) => Query::Window(p0),
            (b'?', 0, b'u') => Query::Keyboard(self.flags.kitty_flags),
            (b'>', 0, b'u') => {
                if q.kitty.len() >= KITTY_STACK_MAX {
                    q.kitty.remove(0);
                }
                q.kitty.push((p0 & 0x1f) as u8);
                self.sync_kitty();
                return;
            }
            (b'<', 0, b'u') => {
                let n = if p0 == 0 { 1 } else { p0 as usize };
                let keep = q.kitty.len().saturating_sub(n);
                q.kitty.truncate(keep);
                self.sync_kitty();
                return;
            }
            (b'=', 0, b'u') => {
                let flags = (p0 & 0x1f) as u8;
                let current = q.kitty.last().copied().unwrap_or(0);
                let new = match self.params.get(1).copied().unwrap_or(1) {
                    2 => current | flags,
                    3 => current & !flags,
                    _ => flags,
                };
                match q.kitty.last_mut() {
                    Some(top) => *top = new,
                    None => q.kitty.push(new),
                }
                self.sync_kitty();
                return;
            }
            _ => return,
        };
        self.record(query, end);
    }

    fn sync_kitty(&mut self) {
        self.flags.kitty_flags = self.queries_state.kitty.last().copied().unwrap_or(0);
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
        for i in 0..self.params.len() {
            match self.params[i] {
                2004 => self.flags.bracketed_paste = on,
                1 => self.flags.app_cursor = on,
                6 => self.queries_state.origin = on,
                2026 => self.queries_state.sync = on,
                47 | 1047 | 1049 => {
                    if self.flags.alt_screen != on {
                        let q = &mut self.queries_state;
                        std::mem::swap(&mut q.kitty, &mut q.kitty_inactive);
                        self.sync_kitty();
                    }
                    self.flags.alt_screen = on;
                }
                _ => {}
            }
        }
    }

    /// An OSC ended (`st`: with ESC/ST rather than BEL; `None` when it cannot be a query);
    /// `end` is just past its terminator.
    fn osc_dispatch(&mut self, events: &mut Vec<ScreenEvent>, st: Option<bool>, end: u64) {
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
            b"10" | b"11" | b"12" => {
                if let Some(st) = st {
                    let first = if kind == b"10" {
                        10
                    } else if kind == b"11" {
                        11
                    } else {
                        12
                    };
                    for (i, part) in rest.split(|b| *b == b';').enumerate() {
                        let code = first + i as u8;
                        if part == b"?" && code <= 12 {
                            self.record(Query::Color { code, index: 0, st }, end);
                        }
                    }
                }
            }
            b"4" => {
                if let Some(st) = st {
                    let mut parts = rest.split(|b| *b == b';');
                    while let (Some(index), Some(spec)) = (parts.next(), parts.next()) {
                        let index = std::str::from_utf8(index).ok().and_then(|i| i.parse().ok());
                        if let (Some(index), b"?") = (index, spec) {
                            self.record(Query::Color { code: 4, index, st }, end);
                        }
                    }
                }
            }
            b"133" if rest.first() == Some(&b'B') => self.flags.input_marks = true,
            b"133" if rest.first() == Some(&b'C') => events.push(ScreenEvent::CommandStarted),
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
        kitty: [Vec<u8>; 2],
    }

    impl VteScreen {
        pub fn advance(&mut self, bytes: &[u8]) -> Vec<ScreenEvent> {
            let mut performer = FlagsPerformer {
                flags: &mut self.flags,
                kitty: &mut self.kitty,
                events: Vec::new(),
            };
            self.parser.advance(&mut performer, bytes);
            performer.events
        }
    }

    pub struct FlagsPerformer<'a> {
        flags: &'a mut ScreenFlags,
        /// Kitty keyboard stacks: active screen, inactive screen.
        kitty: &'a mut [Vec<u8>; 2],
        events: Vec<ScreenEvent>,
    }

    impl FlagsPerformer<'_> {
        fn sync_kitty(&mut self) {
            self.flags.kitty_flags = self.kitty[0].last().copied().unwrap_or(0);
        }
    }

    impl Perform for FlagsPerformer<'_> {
        fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
            if intermediates.is_empty() && byte == b'c' {
                self.flags.bracketed_paste = false;
                self.flags.app_cursor = false;
                self.flags.alt_screen = false;
                *self.kitty = Default::default();
                self.sync_kitty();
            }
        }

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
                [b"133", mark, ..] if mark.first() == Some(&b'C') => {
                    self.events.push(ScreenEvent::CommandStarted)
                }
                _ => {}
            }
        }

        fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, c: char) {
            let first = params
                .iter()
                .next()
                .and_then(|p| p.first().copied())
                .unwrap_or(0);
            if c == 'u' && !ignore {
                let stack = &mut self.kitty[0];
                match intermediates {
                    b">" => {
                        if stack.len() >= super::KITTY_STACK_MAX {
                            stack.remove(0);
                        }
                        stack.push((first & 0x1f) as u8);
                    }
                    b"<" => {
                        let n = if first == 0 { 1 } else { first as usize };
                        stack.truncate(stack.len().saturating_sub(n));
                    }
                    b"=" => {
                        let flags = (first & 0x1f) as u8;
                        let mode = params.iter().nth(1).and_then(|p| p.first().copied());
                        let current = stack.last().copied().unwrap_or(0);
                        let new = match mode.unwrap_or(1) {
                            2 => current | flags,
                            3 => current & !flags,
                            _ => flags,
                        };
                        match stack.last_mut() {
                            Some(top) => *top = new,
                            None => stack.push(new),
                        }
                    }
                    _ => {}
                }
                self.sync_kitty();
                return;
            }
            if intermediates != b"?" || !(c == 'h' || c == 'l') {
                return;
            }
            let on = c == 'h';
            for param in params.iter() {
                match param.first().copied() {
                    Some(2004) => self.flags.bracketed_paste = on,
                    Some(1) => self.flags.app_cursor = on,
                    Some(47 | 1047 | 1049) => {
                        if self.flags.alt_screen != on {
                            self.kitty.swap(0, 1);
                            self.sync_kitty();
                        }
                        self.flags.alt_screen = on;
                    }
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
            Just(b"\x1b]133;C".to_vec()),
            Just(b"\x1bc".to_vec()),
            Just(b"\x1b[>5u".to_vec()),
            Just(b"\x1b[<u".to_vec()),
            Just(b"\x1b[=3;2u".to_vec()),
            Just(b">".to_vec()),
            Just(b"u".to_vec()),
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

    #[test]
    fn queries_are_found_with_their_byte_ranges() {
        let mut s = LightScreen::new(24);
        s.advance(b"ab\x1b[6n\x1b[?1049h\x1b[2;9r\x1b[?6h\x1b[6n\x1b[>1u\x1b[?u");
        let (found, cuts) = s.take_found();
        let kinds: Vec<_> = found
            .iter()
            .map(|f| (f.start, f.end, f.query.clone()))
            .collect();
        assert_eq!(
            kinds,
            [
                (
                    2,
                    6,
                    Query::CursorPosition {
                        private: false,
                        origin_top: None
                    }
                ),
                (
                    25,
                    29,
                    Query::CursorPosition {
                        private: false,
                        origin_top: Some(1)
                    }
                ),
                (34, 38, Query::Keyboard(1)),
            ]
        );
        assert!(cuts.is_empty());
        assert_eq!(s.flags().kitty_flags, 1);
        // Leaving the alternate screen brings back the main screen's (empty) kitty stack.
        s.advance(b"\x1b[?1049l");
        assert_eq!(s.flags().kitty_flags, 0);
        // An ST-terminated OSC query split before its `\\`: the backslash is cut too.
        s.advance(b"\x1b]11;?\x1b");
        let (found, _) = s.take_found();
        assert_eq!(found.len(), 1);
        let osc_end = found[0].end;
        s.advance(b"\\x\x1bP$qm\x1b\\\x1bP+q544E\x07");
        let (found, cuts) = s.take_found();
        // The OSC's backslash, and the DECRQSS's own ST backslash.
        assert_eq!(cuts[0], (osc_end, osc_end + 1));
        assert_eq!(cuts[1].1 - cuts[1].0, 1);
        assert!(matches!(&found[0].query, Query::Setting { pt, .. } if pt == b"m"));
        // A DCS is not ended by BEL: XTGETTCAP waits for its ST.
        assert_eq!(found.len(), 1);
        s.advance(b"\x1b\\");
        let (found, _) = s.take_found();
        assert_eq!(found[0].query, Query::Capabilities(vec![b"544E".to_vec()]));
        // A full reset puts the modes back.
        s.advance(b"\x1b[?2004h\x1bc");
        assert!(!s.flags().bracketed_paste);
    }
}
