//! The terminal: PTY output and input, interrupt, actions, `run`, resize, attach
//! bookkeeping and screen reads.

use super::{ReadAnswer, Reply, RunWaiter, SessionMsg, SessionReply, SessionState};
use crate::grid::{logical, SnapshotHead};
use crate::pty::{Pty, PumpEvent};
use crate::registry::RegistryMsg;
use crate::screen::ScreenEvent;
use crate::screen_model::{recent_rows, GridGuard};
use crate::stats::ReadCharge;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::{RUN_OUTPUT_MAX_BYTES, SCREEN_ANSWER_MAX_BYTES};
use maxx_protocol::request::{
    ActionKind, ActionParams, InterruptSignal, ReadKind, ReadParams, ScrollbackWindow,
};
use maxx_protocol::screen::{
    Foreground, InspectDoc, ResizeResult, RunResult, ScrollbackInfo, Size, SCREEN_SCHEMA,
};
use maxx_protocol::session::{Lifecycle, SessionView};
use nix::sys::signal::Signal;
use ractor::{ActorRef, RpcReplyPort};
use std::time::Duration;

impl SessionState {
    pub(super) fn on_pump(&mut self, myself: &ActorRef<SessionMsg>, event: PumpEvent) {
        match event {
            PumpEvent::Output(bytes, end, permit) => {
                // A person who cannot keep up is detached, never allowed to slow the child.
                // A chunk ends at or before an attachment's repaint (drawn from the grid
                // under the same lock the pump drains under) or begins after it, never
                // both: skip the ones the repaint already showed.
                self.attachers
                    .retain(|(_, upto, tx)| end <= *upto || tx.try_send(bytes.clone()).is_ok());
                drop(permit);
                self.attachers_changed();
            }
            PumpEvent::Screen(events) => {
                for event in events {
                    match event {
                        ScreenEvent::Title(title) => {
                            self.view.terminal_title = Some(title.clone());
                            self.mechanical("title", Some(serde_json::json!({ "title": title })));
                            self.touch();
                            self.publish();
                        }
                        ScreenEvent::CommandStarted => self.mechanical("command.started", None),
                        ScreenEvent::CommandFinished(code) => self.mechanical(
                            "command.finished",
                            Some(serde_json::json!({ "exit_code": code })),
                        ),
                    }
                }
            }
            PumpEvent::ChildExited => self.child_exited(myself),
        }
    }

    /// Ctrl-C through the tty (the line discipline turns it into SIGINT), or a signal to
    /// the foreground process group — never synthesised input for a signal.
    pub(super) fn interrupt(
        &self,
        signal: Option<InterruptSignal>,
    ) -> Result<SessionView, ErrorBody> {
        let pty = self.require_running("interrupt")?;
        match signal {
            None => {
                let mut written = pty.write(vec![0x03]);
                match written.try_recv() {
                    Ok(Err(e)) => input_result(Ok(Err(e)), self.view.clone()),
                    _ => Ok(self.view.clone()),
                }
            }
            Some(sig) => {
                let signal = match sig {
                    InterruptSignal::Int => Signal::SIGINT,
                    InterruptSignal::Term => Signal::SIGTERM,
                    InterruptSignal::Kill => Signal::SIGKILL,
                    InterruptSignal::Hup => Signal::SIGHUP,
                    InterruptSignal::Quit => Signal::SIGQUIT,
                };
                pty.signal_foreground(signal)
                    .map(|_| self.view.clone())
                    .map_err(|e| ErrorBody::internal(format!("signal failed: {e}")))
            }
        }
    }

    pub(super) fn require_running(&self, what: &str) -> Result<&Pty, ErrorBody> {
        match (&self.pty, self.view.lifecycle) {
            (Some(pty), Lifecycle::Running) => Ok(pty),
            (_, Lifecycle::Exited) => Err(ErrorBody::ended(
                &self.view.session_id,
                &format!("its child exited, so there is nothing to {what}"),
            )),
            _ => Err(ErrorBody::ended(&self.view.session_id, "it is closed")),
        }
    }

    pub(super) fn action(&mut self, params: ActionParams, reply: Reply) {
        let result = match params.action {
            ActionKind::Focus => {
                if self.view.lifecycle.has_surface() {
                    if !self.view.focused {
                        self.view.focused = true;
                        self.mechanical("focus", None);
                        self.publish();
                    }
                    let _ = self
                        .registry
                        .cast(RegistryMsg::Focus(self.view.session_id.clone()));
                    Ok(self.view.clone())
                } else {
                    Err(ErrorBody::ended(&self.view.session_id, "it is closed"))
                }
            }
            ActionKind::Input | ActionKind::Submit => {
                let pty = match self.require_running("type into") {
                    Ok(pty) => pty,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                let text = params.input.unwrap_or_default();
                let mut bytes = if text.is_empty() {
                    Vec::new()
                } else {
                    paste_bytes(&text, self.model.flags().bracketed_paste)
                };
                if params.action == ActionKind::Submit {
                    bytes.push(b'\r');
                }
                let written = pty.write(bytes);
                let view = self.view.clone();
                // Answer once the bytes are in the kernel's tty queue, without holding
                // up this actor while a child that does not read its input catches up.
                tokio::spawn(async move {
                    let _ = reply.send(input_result(written.await, view).map(SessionReply::View));
                });
                return;
            }
            ActionKind::Interrupt => {
                // A person stopping a job is not a crash: this run's exit does not restart.
                if self.view.lifecycle == Lifecycle::Running {
                    self.restart_suppressed = true;
                }
                self.interrupt(params.signal)
            }
            ActionKind::Cancel | ActionKind::Close => {
                if self.view.lifecycle.has_surface() || self.view.lifecycle == Lifecycle::Backoff {
                    // A pending automatic restart must not fire after a close.
                    self.restart_generation += 1;
                    self.view.next_restart_at = None;
                    // Dropping the PTY hangs up the terminal, signals the child's group and
                    // reaps it (killing it after a grace period if it ignores the hangup).
                    self.release_surface();
                    self.view.lifecycle = Lifecycle::Closed;
                    self.view.pid = None;
                    self.mechanical("closed", None);
                    self.lifecycle_changed();
                }
                Ok(self.view.clone())
            }
        };
        self.ack(reply, result.map(SessionReply::View));
    }
}

/// Screen readback, `run`, keys and resize.
impl SessionState {
    /// The grid, materialised on first use and brought up to date.
    pub(super) fn grid(&self) -> GridGuard<'_> {
        self.model.grid()
    }

    /// The attachments changed: output is forwarded to the actor only while there are some.
    pub(super) fn attachers_changed(&mut self) {
        if self.attachers.is_empty() {
            self.model.detach_all();
        }
    }

    /// Logical lines of the viewport plus the `back` newest history rows.
    pub(super) fn recent_lines(&self, back: Option<usize>) -> Vec<String> {
        logical(&recent_rows(&self.grid(), back.unwrap_or(0)))
    }

    pub(super) fn start_run(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        command: String,
        timeout: Option<Duration>,
        started: std::time::Instant,
        reply: RpcReplyPort<Result<RunResult, ErrorBody>>,
    ) {
        let remaining = timeout.map(|t| t.checked_sub(started.elapsed()));
        if let Some(None) = remaining {
            // Input is never started once the budget is spent.
            let _ = reply.send(Err(ErrorBody::new(
                ErrorCode::Timeout,
                "run's budget was spent before its input could start",
            )
            .with_remedy("raise --timeout (0 means no limit)")));
            return;
        }
        let pty = match self.require_running("run a command in") {
            Ok(pty) => pty,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        // The wrapper is shell syntax: typed into anything but the session's own program
        // it would edit a file, answer a prompt or feed a REPL. The kernel says who holds
        // the terminal.
        if !pty.foreground_is_own() {
            let child = pty.pid();
            let holder = match pty.foreground_pgrp() {
                Some(pgrp) => format!(
                    "process group {pgrp} ({:?})",
                    proc_cmdline(pgrp).unwrap_or_default()
                ),
                None => "no process group".to_string(),
            };
            let _ = reply.send(Err(ErrorBody::new(
                ErrorCode::ForegroundBusy,
                format!(
                    "run needs the session's own program (pid {child}, a POSIX shell at its \
                     prompt) in the foreground, but {holder} holds the terminal; nothing was typed"
                ),
            )
            .with_remedy(
                "wait for the foreground program to finish (e.g. `maxx sessions wait --until`), \
                 or drive it with `maxx sessions send-keys`",
            )));
            return;
        }
        let mut nonce = [0u8; 6];
        let _ = getrandom::fill(&mut nonce);
        let tag: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        // The markers are printed from two pieces, so the echoed command line (which has
        // them with a space in between) can never match them.
        let line = format!(
            "printf '%s_%s\\n' __MAXX_BEGIN {tag}; ({command}); printf '%s_%s:%d\\n' __MAXX_END {tag} \"$?\"\r"
        );
        let end = regex::Regex::new(&format!("__MAXX_END_{tag}:(-?[0-9]+)"))
            .expect("static pattern compiles");
        let mut written = pty.write(line.into_bytes());
        if let Ok(Err(e)) = written.try_recv() {
            // Refused at once (the program is not reading its input): say so now rather
            // than wait out the budget for a command that was never typed.
            let refused = input_result(Ok(Err(e)), self.view.clone())
                .err()
                .unwrap_or_else(|| ErrorBody::internal("input refused"));
            let _ = reply.send(Err(refused));
            return;
        }
        // Track the screen from now on.
        let _ = self.grid();
        // A run whose caller left (say one with no limit) stops being watched.
        self.runs.retain(|r| !r.reply.is_closed());
        self.next_id += 1;
        let id = self.next_id;
        self.runs.push(RunWaiter {
            id,
            command,
            begin: format!("__MAXX_BEGIN_{tag}"),
            end,
            started,
            reply,
        });
        if let Some(Some(remaining)) = remaining {
            myself.send_after(remaining, move || SessionMsg::RunExpired(id));
        }
    }

    /// The program ended: a pending `run` answers now (with its result if its end marker
    /// is on the screen) instead of waiting for a marker that cannot come — a run with no
    /// limit would wait forever.
    pub(super) fn end_runs(&mut self) {
        for run in std::mem::take(&mut self.runs) {
            let shown = self
                .recent_lines(Some(usize::MAX))
                .iter()
                .any(|l| run.end.is_match(l));
            let answer = if shown {
                Ok(self.finish_run(&run))
            } else {
                Err(ErrorBody::ended(
                    &self.view.session_id,
                    "its program ended before the run's end marker appeared",
                ))
            };
            let _ = run.reply.send(answer);
        }
    }

    /// Cut the output between a run's markers out of the retained screen.
    pub(super) fn finish_run(&self, run: &RunWaiter) -> RunResult {
        let lines = self.recent_lines(Some(usize::MAX));
        let cut = cut_run_output(&lines, &run.begin, &run.end, RUN_OUTPUT_MAX_BYTES);
        RunResult {
            command: run.command.clone(),
            exit_code: cut.exit_code,
            output: cut.output,
            duration_ms: run.started.elapsed().as_millis() as u64,
            truncated: cut.truncated,
        }
    }

    /// Write input bytes; answer once they are in the tty queue.
    pub(super) fn write_input(&self, bytes: Vec<u8>, what: &str, reply: Reply) {
        let pty = match self.require_running(what) {
            Ok(pty) => pty,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let written = pty.write(bytes);
        let view = self.view.clone();
        tokio::spawn(async move {
            let _ = reply.send(input_result(written.await, view).map(SessionReply::View));
        });
    }

    pub(super) fn resize(&mut self, size: Size) -> Result<ResizeResult, ErrorBody> {
        let Some(pty) = &self.pty else {
            return Err(ErrorBody::ended(&self.view.session_id, "it is closed"));
        };
        // Refused before anything changes: the screen may not pass GRID_MAX_CELLS.
        maxx_protocol::request::check_grid(size.cols, size.rows, self.scrollback_lines)?;
        let applied = pty
            .resize(size.cols, size.rows)
            .map_err(|e| ErrorBody::internal(format!("resize failed: {e}")))?;
        let changed = (self.view.cols, self.view.rows) != (applied.cols, applied.rows);
        self.view.cols = applied.cols;
        self.view.rows = applied.rows;
        self.model.resize(applied.cols, applied.rows);
        self.touch();
        self.publish();
        if changed {
            self.mechanical(
                "resized",
                Some(serde_json::json!({ "cols": applied.cols, "rows": applied.rows })),
            );
        }
        Ok(ResizeResult {
            schema_version: SCREEN_SCHEMA,
            session_id: self.view.session_id.clone(),
            requested: size,
            applied,
            held: applied == size,
        })
    }

    /// A screen read, answered as the bytes of its JSON `result` (see `grid/answer.rs`):
    /// at most `SCREEN_ANSWER_MAX_BYTES`, charged to the daemon's budget for answers in
    /// flight before it is written (`busy` when it does not fit).
    pub(super) fn read(&mut self, p: &ReadParams) -> Result<ReadAnswer, ErrorBody> {
        let stats = self.spawn.stats.clone();
        let method = match p.kind {
            ReadKind::Snapshot => "sessions.snapshot",
            ReadKind::Dump => "sessions.dump",
            ReadKind::Inspect => "sessions.inspect",
        };
        let charge = |bytes: usize| ReadCharge::take(&stats, bytes, method);
        let (json, charge) = match p.kind {
            ReadKind::Snapshot => self.snapshot(p, charge)?,
            ReadKind::Dump => {
                let grid = self.grid();
                let history = match p.scrollback {
                    ScrollbackWindow::None => 0,
                    ScrollbackWindow::All => grid.history(),
                    ScrollbackWindow::Last(n) => n.min(grid.history()),
                };
                grid.dump_json(history, p.start_row, SCREEN_ANSWER_MAX_BYTES, charge)?
            }
            ReadKind::Inspect => {
                let flags = self.model.flags();
                let foreground =
                    self.pty
                        .as_ref()
                        .and_then(Pty::foreground_pgrp)
                        .map(|pid| Foreground {
                            pid,
                            command: proc_cmdline(pid),
                        });
                let backlog_bytes = self.model.backlog() as u64;
                let exited = self.view.exit_code.is_some() || self.view.exit_signal.is_some();
                let (session_id, title) = (
                    self.view.session_id.clone(),
                    self.view.terminal_title.clone(),
                );
                let grid = self.grid();
                let doc = InspectDoc {
                    schema_version: SCREEN_SCHEMA,
                    session_id,
                    grid: Size {
                        cols: grid.cols(),
                        rows: grid.rows(),
                    },
                    scrollback: ScrollbackInfo {
                        total: (grid.history() + grid.rows() as usize) as u32,
                        offset: 0,
                        len: grid.rows() as u32,
                    },
                    alt_screen: grid.alt_screen(),
                    bracketed_paste: flags.bracketed_paste,
                    app_cursor: flags.app_cursor,
                    foreground,
                    exited,
                    title,
                    backlog_bytes,
                };
                drop(grid);
                let json = serde_json::to_vec(&doc)
                    .map_err(|e| ErrorBody::internal(format!("encoding inspect: {e}")))?;
                let charge = charge(json.len())?;
                (json, charge)
            }
        };
        Ok(ReadAnswer { json, charge })
    }

    /// `sessions.snapshot`'s ScreenState, encoded from the grid.
    fn snapshot<C>(
        &mut self,
        p: &ReadParams,
        charge: impl FnOnce(usize) -> Result<C, ErrorBody>,
    ) -> Result<(Vec<u8>, C), ErrorBody> {
        let session_id = self.view.session_id.clone();
        let title = self.view.terminal_title.clone();
        let scrollback_cap = self.scrollback_lines;
        let grid = self.grid();
        let rows = grid.rows() as usize;
        let history = grid.history();
        let mut window = p.scrollback;
        if let (ScrollbackWindow::None, Some(tail)) = (window, p.tail) {
            // The viewport is a floor: --tail N adds history rows to make N.
            if tail > rows {
                window = ScrollbackWindow::Last(tail - rows);
            }
        }
        // `All` asks for every row ever scrolled off: more than the history holds once
        // the scrollback limit has dropped some.
        let (want, asked) = match window {
            ScrollbackWindow::None => (0, 0),
            ScrollbackWindow::All => (history, history + 1),
            ScrollbackWindow::Last(n) => (n.min(history), n),
        };
        // Every byte was parsed: history is short of what was asked only when the
        // scrollback limit dropped rows (a full history is taken to have dropped some),
        // or when there never were that many.
        let lost_history = history >= scrollback_cap;
        let head = SnapshotHead {
            session_id: &session_id,
            title: title.as_deref(),
            history: want,
            cells: p.cells,
            unwrap: p.unwrap,
            start_row: p.start_row,
            history_truncated: asked > history && lost_history,
        };
        grid.snapshot_json(&head, SCREEN_ANSWER_MAX_BYTES, charge)
    }
}

/// Encode text as a paste: newlines become CR (what a terminal sends for a pasted line
/// break), and with bracketed paste on, the block is wrapped in `ESC[200~`…`ESC[201~`
/// after removing any end marker inside it, so pasted text cannot escape the bracket.
pub fn paste_bytes(text: &str, bracketed: bool) -> Vec<u8> {
    let normalized = text.replace("\r\n", "\r").replace('\n', "\r");
    if !bracketed {
        return normalized.into_bytes();
    }
    let inner = normalized.replace("\x1b[201~", "").replace("\x1b[200~", "");
    let mut out = Vec::with_capacity(inner.len() + 12);
    out.extend_from_slice(b"\x1b[200~");
    out.extend_from_slice(inner.as_bytes());
    out.extend_from_slice(b"\x1b[201~");
    out
}

/// A run's output as cut from the screen's logical lines.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RunCut {
    /// The code printed in the end marker; -1 when there is no end marker or no code.
    pub(super) exit_code: i32,
    /// The lines between the markers (the newest `max_bytes` of them, cut on a character
    /// boundary), plus whatever preceded the end marker on its own line.
    pub(super) output: String,
    /// The begin marker is not on the screen any more: the output's start is lost.
    pub(super) truncated: bool,
}

/// Cut a run's output out of `lines`: after the last line holding `begin` before the last
/// line `end` matches (whose first group is the exit code), bounded to `max_bytes`.
pub(super) fn cut_run_output(
    lines: &[String],
    begin: &str,
    end: &regex::Regex,
    max_bytes: usize,
) -> RunCut {
    let end_idx = lines.iter().rposition(|l| end.is_match(l));
    let (exit_code, end_idx, end_prefix) = match end_idx {
        Some(i) => {
            let caps = end.captures(&lines[i]);
            let code = caps
                .as_ref()
                .and_then(|c| c.get(1))
                .and_then(|m| m.as_str().parse().ok())
                .unwrap_or(-1);
            let prefix = caps
                .and_then(|c| c.get(0))
                .map(|m| lines[i][..m.start()].to_string())
                .unwrap_or_default();
            (code, i, prefix)
        }
        None => (-1, lines.len(), String::new()),
    };
    // The printed marker can only come from printf (the echoed command line has a space
    // where it has `_`), but a prompt printed late may share its line.
    let begin_idx = lines[..end_idx].iter().rposition(|l| l.contains(begin));
    let mut output: Vec<&str> = match begin_idx {
        Some(b) => lines[b + 1..end_idx].iter().map(String::as_str).collect(),
        None => lines[..end_idx].iter().map(String::as_str).collect(),
    };
    if !end_prefix.is_empty() {
        output.push(&end_prefix);
    }
    let mut text = output.join("\n");
    if text.len() > max_bytes {
        let cut = text.len() - max_bytes;
        let cut = (cut..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(cut);
        text.drain(..cut);
    }
    RunCut {
        exit_code,
        output: text,
        truncated: begin_idx.is_none(),
    }
}

/// The answer to an input write: the record, or why the bytes were not delivered.
fn input_result(
    written: Result<std::io::Result<()>, tokio::sync::oneshot::error::RecvError>,
    view: SessionView,
) -> Result<SessionView, ErrorBody> {
    match written {
        Ok(Ok(())) => Ok(view),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Err(ErrorBody::new(
            ErrorCode::Unsupported,
            format!(
                "session {}: the program is not reading its input ({} bytes are already queued)",
                view.session_id,
                crate::pty::INPUT_QUEUE_MAX
            ),
        )
        .with_remedy("nothing was written; retry once the program reads, or interrupt it")),
        _ => Err(ErrorBody::ended(&view.session_id, "its terminal closed")),
    }
}

/// `/proc/<pid>/cmdline`, space-joined, bounded (a kernel fact, not an inference).
fn proc_cmdline(pid: i32) -> Option<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .ok()?
        .take(4096)
        .read_to_end(&mut buf)
        .ok()?;
    let text: String = String::from_utf8_lossy(&buf)
        .split('\0')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    fn cut(text: &str, max_bytes: usize) -> RunCut {
        let end = regex::Regex::new("__MAXX_END_ab12:(-?[0-9]+)").unwrap();
        cut_run_output(&lines(text), "__MAXX_BEGIN_ab12", &end, max_bytes)
    }

    #[test]
    fn a_run_is_cut_between_its_printed_markers() {
        // The echoed command line has the markers with a space: it is not a marker.
        let screen = "$ printf '%s_%s\\n' __MAXX_BEGIN ab12; (ls); printf '%s_%s:%d\\n' __MAXX_END ab12 \"$?\"\n\
                      __MAXX_BEGIN_ab12\n\
                      one\n\
                      two\n\
                      __MAXX_END_ab12:3\n\
                      $ ";
        let got = cut(screen, 1 << 20);
        assert_eq!(
            got,
            RunCut {
                exit_code: 3,
                output: "one\ntwo".into(),
                truncated: false
            }
        );
    }

    #[test]
    fn output_without_a_final_newline_keeps_its_last_piece() {
        let got = cut("__MAXX_BEGIN_ab12\npartial__MAXX_END_ab12:-2", 1 << 20);
        assert_eq!(got.exit_code, -2);
        assert_eq!(got.output, "partial");
    }

    #[test]
    fn a_begin_marker_scrolled_away_truncates() {
        let got = cut("x\ny\n__MAXX_END_ab12:0\n$ ", 1 << 20);
        assert_eq!(
            got,
            RunCut {
                exit_code: 0,
                output: "x\ny".into(),
                truncated: true
            }
        );
    }

    #[test]
    fn without_an_end_marker_the_code_is_minus_one() {
        let got = cut("__MAXX_BEGIN_ab12\nstill going", 1 << 20);
        assert_eq!((got.exit_code, got.output.as_str()), (-1, "still going"));
    }

    #[test]
    fn the_last_end_marker_and_the_begin_before_it_win() {
        let screen = "__MAXX_BEGIN_ab12\nold\n__MAXX_END_ab12:1\n\
                      __MAXX_BEGIN_ab12\nnew\n__MAXX_END_ab12:0";
        let got = cut(screen, 1 << 20);
        assert_eq!((got.exit_code, got.output.as_str()), (0, "new"));
    }

    #[test]
    fn long_output_keeps_its_newest_bytes_on_a_char_boundary() {
        // 6 bytes of two-byte characters, 3 allowed: the cut moves up to a boundary.
        let got = cut(
            "__MAXX_BEGIN_ab12\n\u{e9}\u{e9}\u{e9}\n__MAXX_END_ab12:0",
            3,
        );
        assert_eq!(got.output, "\u{e9}");
        assert!(
            !got.truncated,
            "`truncated` says the start was lost, not the cap"
        );
    }

    #[test]
    fn paste_encoding() {
        assert_eq!(paste_bytes("a\nb", false), b"a\rb");
        assert_eq!(paste_bytes("a\r\nb", true), b"\x1b[200~a\rb\x1b[201~");
        assert_eq!(
            paste_bytes("x\x1b[201~rm -rf /\n", true),
            b"\x1b[200~xrm -rf /\r\x1b[201~"
        );
    }
}
