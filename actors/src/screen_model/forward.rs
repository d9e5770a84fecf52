//! The copy of a session's output that attached terminals see: the program's queries are cut
//! out (the daemon answers them, once), and an escape sequence in progress is held back
//! until it is known not to be one.

use crate::screen::LightScreen;

/// Longest escape sequence held back from an attached terminal until it is known not to be
/// a query (queries are far shorter).
const HOLD_MAX: u64 = 4096;

/// The copy of the output forwarded to attached terminals, minus the queries in it.
#[derive(Default)]
pub(super) struct Forwarder {
    /// Bytes of an escape sequence in progress, held until it is known not to be a query.
    held: Vec<u8>,
    /// Stream offset of `held[0]`.
    held_start: u64,
    /// Byte ranges (stream offsets) that belong to queries and are never forwarded.
    pub(super) cuts: Vec<(u64, u64)>,
    /// Forwarding began inside a sequence: its rest is dropped (the attached terminal never
    /// saw its start), up to where the light pass says it ended.
    pub(super) skipping: bool,
    skip_to: u64,
}

impl Forwarder {
    /// The chunk at stream offset `at`, as an attached terminal may see it.
    pub(super) fn filter(&mut self, light: &mut LightScreen, at: u64, bytes: &[u8]) -> Vec<u8> {
        let end = at + bytes.len() as u64;
        if self.skipping {
            match light.sequence_end() {
                Some(e) => {
                    self.skipping = false;
                    self.skip_to = e;
                }
                None => self.skip_to = end,
            }
        }
        if self.held.is_empty() {
            self.held_start = at;
        }
        self.held.extend_from_slice(bytes);
        let hold_from = match light.in_sequence() {
            Some(s) if end - s <= HOLD_MAX && s >= self.held_start => s,
            _ => end,
        };
        let mut out = Vec::with_capacity((hold_from - self.held_start) as usize);
        let mut pos = self.held_start.max(self.skip_to);
        let mut cuts: Vec<(u64, u64)> = self.cuts.clone();
        cuts.sort_unstable();
        for (cs, ce) in cuts
            .iter()
            .copied()
            .chain(std::iter::once((hold_from, hold_from)))
        {
            let stop = cs.min(hold_from);
            if stop > pos {
                let a = (pos - self.held_start) as usize;
                let b = (stop - self.held_start) as usize;
                out.extend_from_slice(&self.held[a..b]);
            }
            pos = pos.max(ce);
            if pos >= hold_from {
                break;
            }
        }
        self.held.drain(..(hold_from - self.held_start) as usize);
        self.held_start = hold_from;
        self.cuts.retain(|c| c.1 > hold_from);
        out
    }
}
