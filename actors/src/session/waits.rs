//! Waits and watches: record conditions checked on every publish, screen conditions
//! matched by the grid workers, and `watch` subscribers.

use super::{SessionState, WaitAnswer, WatchLine};
use crate::grid::{logical, output_lines};
use crate::screen_model::{recent_rows, Watch};
use crate::stats::Stats;
use maxx_protocol::audit::AuditEntry;
use maxx_protocol::request::{TextWait, WaitCondition};
use maxx_protocol::session::{Lifecycle, Outcome};
use ractor::RpcReplyPort;
use tokio::sync::mpsc;

pub(super) struct Waiter {
    pub(super) id: u64,
    pub(super) condition: WaitCondition,
    pub(super) reply: RpcReplyPort<WaitAnswer>,
}

pub(super) struct Watcher {
    pub(super) id: u64,
    pub(super) lines: mpsc::Sender<WatchLine>,
}

impl SessionState {
    /// Drop waiters whose caller has gone.
    pub(super) fn prune_waiters(&mut self) {
        let before = self.waiters.len();
        self.waiters.retain(|w| !w.reply.is_closed());
        Stats::add(
            &self.spawn.stats.waiters,
            self.waiters.len() as i64 - before as i64,
        );
    }

    pub(super) fn last_seq(&self) -> u64 {
        self.audit.last_seq()
    }

    /// Send a line to every watcher; a watcher that is gone or too far behind is dropped
    /// (its stream then ends with reason `dropped`). The line is made only if there is a
    /// watcher (a burst of exits has none, and a line copies the whole view).
    pub(super) fn broadcast(&mut self, line: impl FnOnce(&Self) -> WatchLine) {
        if self.watchers.is_empty() {
            return;
        }
        let line = line(self);
        let before = self.watchers.len();
        let end = matches!(line, WatchLine::End);
        self.watchers
            .retain(|w| w.lines.try_send(line.clone()).is_ok() && !end);
        Stats::add(
            &self.spawn.stats.watchers,
            self.watchers.len() as i64 - before as i64,
        );
    }

    /// `Some(outcome)` when a wait on `condition` is settled by the current record.
    pub(super) fn check(&self, condition: &WaitCondition) -> Option<(Outcome, Option<AuditEntry>)> {
        // A declared state or event can no longer be expected once the run is over.
        let ended = || {
            self.view
                .lifecycle
                .has_ended()
                .then_some((Outcome::Ended, None))
        };
        match condition {
            WaitCondition::Lifecycle(wanted) => {
                lifecycle_wait(self.view.lifecycle, *wanted).map(|outcome| (outcome, None))
            }
            WaitCondition::State(wanted) => {
                if self.view.status.as_deref() == Some(wanted.as_str()) {
                    Some((Outcome::Matched, None))
                } else {
                    ended()
                }
            }
            // Matching is done by the grid workers (`ScreenMatched`); here only the end.
            WaitCondition::Text(_) => ended(),
            WaitCondition::Event { name, since } => {
                let since = since.unwrap_or(0);
                match self.audit.find_event(since, name) {
                    Some(e) => Some((Outcome::Matched, Some(e))),
                    None => ended(),
                }
            }
        }
    }

    /// Whether a text wait matches a logical line of the viewport (and `back` history rows);
    /// `output_only` leaves out the lines holding OSC 133 input cells.
    pub(super) fn screen_matches(&self, text: &TextWait, back: Option<usize>) -> bool {
        let rows = recent_rows(&self.grid(), back.unwrap_or(0));
        let lines = if text.output_only {
            output_lines(&rows)
        } else {
            logical(&rows)
        };
        lines.iter().any(|l| text.pattern.matches(l))
    }

    /// Give the grid workers the patterns of the pending text waits and runs, if they
    /// changed since the last call.
    pub(super) fn sync_watches(&mut self) {
        let text_waits = self.waiters.iter().filter_map(|w| match w.condition {
            WaitCondition::Text(_) => Some(w.id),
            _ => None,
        });
        let current = text_waits.chain(self.runs.iter().map(|r| r.id));
        if current.eq(self.watch_ids.iter().copied()) {
            return;
        }
        let mut watches = Vec::new();
        for w in &self.waiters {
            if let WaitCondition::Text(p) = &w.condition {
                watches.push((w.id, Watch::Text(p.clone())));
            }
        }
        for r in &self.runs {
            watches.push((r.id, Watch::Run(r.end.clone())));
        }
        self.watch_ids = watches.iter().map(|(id, _)| *id).collect();
        self.model.set_watches(watches);
    }

    /// A grid worker saw these waits' or runs' patterns: answer them (a run cuts its
    /// output from the screen now).
    pub(super) fn screen_matched(&mut self, ids: Vec<u64>) {
        for id in ids {
            if let Some(pos) = self.waiters.iter().position(|w| w.id == id) {
                let w = self.waiters.swap_remove(pos);
                Stats::add(&self.spawn.stats.waiters, -1);
                let _ = w.reply.send(WaitAnswer {
                    outcome: Outcome::Matched,
                    session: self.view.clone(),
                    event: None,
                    input_marks: self.model.flags().input_marks,
                });
            } else if let Some(pos) = self.runs.iter().position(|r| r.id == id) {
                let run = self.runs.swap_remove(pos);
                let result = self.finish_run(&run);
                let _ = run.reply.send(Ok(result));
            }
        }
    }
}

/// How far along the lifecycle a state is: a session only moves forward (`running` and
/// `backoff` alternate at the start; a restart starts over, and a wait then sees `running`).
fn lifecycle_rank(lifecycle: Lifecycle) -> u8 {
    match lifecycle {
        Lifecycle::Running | Lifecycle::Backoff => 0,
        Lifecycle::Exited => 1,
        Lifecycle::Closed | Lifecycle::Archived => 2,
    }
}

/// A wait for lifecycle `wanted` while the session is `current`: `Matched`, `Ended` (it
/// can no longer be reached without a restart), or `None` (still pending).
pub(super) fn lifecycle_wait(current: Lifecycle, wanted: Lifecycle) -> Option<Outcome> {
    // A closed session can still be archived; nothing else follows a terminal one.
    let still_possible = current == Lifecycle::Closed && wanted == Lifecycle::Archived;
    if current == wanted {
        Some(Outcome::Matched)
    } else if !still_possible
        && (current.is_terminal() || lifecycle_rank(current) > lifecycle_rank(wanted))
    {
        Some(Outcome::Ended)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Lifecycle::{Archived, Backoff, Closed, Exited, Running};

    #[test]
    fn a_lifecycle_wait_matches_waits_or_ends() {
        const M: Option<Outcome> = Some(Outcome::Matched);
        const E: Option<Outcome> = Some(Outcome::Ended);
        const W: Option<Outcome> = None;
        let all = [Running, Backoff, Exited, Closed, Archived];
        // Rows: current; columns: wanted, in the order of `all`.
        let expected = [
            [M, W, W, W, W], // running: anything may still come
            [W, M, W, W, W], // backoff: a restart brings running back
            [E, E, M, W, W], // exited: no way back to running without a restart
            [E, E, E, M, W], // closed: only an archive may follow
            [E, E, E, E, M], // archived: final
        ];
        for (current, row) in all.iter().zip(expected) {
            for (wanted, want) in all.iter().zip(row) {
                assert_eq!(
                    lifecycle_wait(*current, *wanted),
                    want,
                    "current {current:?}, wanted {wanted:?}"
                );
            }
        }
    }
}
