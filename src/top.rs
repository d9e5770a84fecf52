//! `maxx top`: a live fleet dashboard. It reads the session table once, then follows
//! `stream.watch`: each event marks its session dirty and the next frame re-reads just
//! those sessions. Keyboard input and stream events arrive on one channel from two
//! blocking threads, so the loop sleeps until something happens — it never polls.
//!
//! Keys: ↑/↓ (k/j) select · Enter attach (Ctrl-\ d returns) · f focus · i interrupt ·
//! a archive · r restart · q quit. Interrupt, archive and restart ask for a `y` first,
//! naming the target and the consequence.
//!
//! One reader of the terminal at a time: the keyboard thread hands over each key and
//! waits until the main loop has applied it and drawn the next frame before it reads
//! again. So while Enter's attach runs, the keyboard thread is parked and `attach` is the
//! only reader; bytes read with the Enter go to the session, not to the dashboard. And a
//! `y` counts only if it was read after its prompt was drawn: when a prompt appears, the
//! rest of that read and the terminal's typeahead are discarded.

use crate::cli::{ActionArgs, ArchiveArgs, ListArgs, RestartArgs, SelfIdArg, StreamWatchArgs};
use crate::client::{self, Target};
use crate::exit;
use crate::request::{self, Request};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::request::ActionKind;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, FlushArg};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

/// Events kept per session for the detail pane.
const RECENT_EVENTS: usize = 8;

/// What the dashboard shows.
#[derive(Default)]
pub struct App {
    /// Sessions in creation order.
    pub sessions: Vec<Value>,
    /// Last few bus events per session id.
    pub recent: HashMap<String, VecDeque<Value>>,
    /// Selected row.
    pub selected: usize,
    /// A pending confirmation: (prompt, action).
    pub confirm: Option<(String, Action)>,
    /// The last error or notice.
    pub status_line: Option<String>,
    /// Bus cursor seen.
    pub cursor: u64,
}

/// A mutating key action.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Interrupt (Ctrl-C) the foreground job.
    Interrupt(String),
    /// Archive.
    Archive(String),
    /// Restart with the last command.
    Restart(String),
}

fn short(id: &str) -> String {
    id.chars().take(8).collect::<String>().to_lowercase()
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// A string field made safe for the terminal (see [`crate::views::escape_controls`]).
fn shown(v: &Value, k: &str) -> String {
    crate::views::escape_controls(s(v, k))
}

fn lifecycle_style(l: &str) -> Style {
    match l {
        "running" => Style::default().fg(Color::Green),
        "backoff" => Style::default().fg(Color::Yellow),
        _ => Style::default().add_modifier(Modifier::DIM),
    }
}

fn state_style(st: &str) -> Style {
    match st {
        "running" => Style::default().fg(Color::Cyan),
        "needsInput" => Style::default()
            .fg(Color::Yellow)
            .add_modifier(Modifier::BOLD),
        "blocked" => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        "complete" => Style::default().fg(Color::Green),
        "failed" => Style::default().fg(Color::Red),
        _ => Style::default(),
    }
}

impl App {
    fn selected_session(&self) -> Option<&Value> {
        self.sessions.get(self.selected)
    }

    /// Replace or add one session's record.
    pub fn upsert(&mut self, view: Value) {
        let id = s(&view, "session_id").to_string();
        match self.sessions.iter_mut().find(|v| s(v, "session_id") == id) {
            Some(slot) => *slot = view,
            None => self.sessions.push(view),
        }
    }

    /// Remember a bus event for the detail pane.
    pub fn remember(&mut self, event: &Value) {
        let id = s(event, "session_id").to_string();
        self.cursor = self.cursor.max(event["cursor"].as_u64().unwrap_or(0));
        let q = self.recent.entry(id).or_default();
        q.push_back(event.clone());
        while q.len() > RECENT_EVENTS {
            q.pop_front();
        }
    }

    fn confirmation_for(&self, key: char) -> Option<(String, Action)> {
        let v = self.selected_session()?;
        let id = s(v, "session_id").to_string();
        let name = crate::views::escape_controls(
            v["title"]
                .as_str()
                .or_else(|| v["command"].as_str())
                .unwrap_or("(shell)"),
        );
        let who = format!("{} ({name})", short(&id));
        Some(match key {
            'i' => (
                format!("Interrupt {who}? Ctrl-C goes to its foreground job. [y/N]"),
                Action::Interrupt(id),
            ),
            'a' => (
                format!("Archive {who}? Its surface closes (the child is hung up); the record stays. [y/N]"),
                Action::Archive(id),
            ),
            'r' => (
                format!("Restart {who}? A fresh run of its command replaces the current one. [y/N]"),
                Action::Restart(id),
            ),
            _ => return None,
        })
    }
}

/// Draw one frame.
pub fn draw(f: &mut Frame, app: &App, now: SystemTime) {
    let area = f.area();
    let detail_height = if area.height > 20 { 12 } else { 6 };
    let chunks = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Min(3),
            Constraint::Length(detail_height),
            Constraint::Length(1),
        ])
        .split(area);
    draw_table(f, app, chunks[0], now);
    draw_detail(f, app, chunks[1]);
    let footer = match (&app.confirm, &app.status_line) {
        (Some((prompt, _)), _) => Line::from(Span::styled(
            prompt.clone(),
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        )),
        (None, Some(msg)) => Line::from(msg.clone()),
        (None, None) => Line::from(Span::styled(
            "↑↓ select  ⏎ attach  f focus  i interrupt  a archive  r restart  q quit",
            Style::default().add_modifier(Modifier::DIM),
        )),
    };
    f.render_widget(Paragraph::new(footer), chunks[2]);
}

fn draw_table(f: &mut Frame, app: &App, area: Rect, now: SystemTime) {
    let narrow = area.width < 80;
    let header: Vec<&str> = if narrow {
        vec!["ID", "LIFECYCLE", "STATE", "TITLE"]
    } else {
        vec![
            "ID",
            "TITLE",
            "LIFECYCLE",
            "STATE",
            "GROUP",
            "PARENT",
            "RST",
            "AGE",
            "SUMMARY",
        ]
    };
    let rows: Vec<Row> = app
        .sessions
        .iter()
        .map(|v| {
            let id = format!(
                "{}{}",
                short(s(v, "session_id")),
                if v["focused"] == true { "*" } else { "" }
            );
            let title = crate::views::escape_controls(
                v["title"]
                    .as_str()
                    .or_else(|| v["command"].as_str())
                    .unwrap_or("(shell)"),
            );
            let lifecycle = s(v, "lifecycle");
            let lc_text = match (lifecycle, &v["exit_code"], &v["exit_signal"]) {
                ("exited", Value::Number(n), _) => format!("exited({n})"),
                ("exited", _, Value::String(sig)) => format!("exited({sig})"),
                (l, _, _) => l.to_string(),
            };
            let state = s(v, "workflow_state");
            let lc = Cell::from(lc_text).style(lifecycle_style(lifecycle));
            let asking = v["ask"].is_object();
            let st_text = match (state.is_empty(), asking) {
                (true, true) => "?".to_string(),
                (true, false) => "-".to_string(),
                (false, true) => format!("?{state}"),
                (false, false) => state.to_string(),
            };
            let st = Cell::from(st_text).style(state_style(state));
            if narrow {
                Row::new(vec![Cell::from(id), lc, st, Cell::from(title)])
            } else {
                Row::new(vec![
                    Cell::from(id),
                    Cell::from(title),
                    lc,
                    st,
                    Cell::from(crate::views::escape_controls(
                        v["group"].as_str().unwrap_or("-"),
                    ))
                    .style(Style::default().fg(Color::Magenta)),
                    Cell::from(
                        v["parent_id"]
                            .as_str()
                            .map(short)
                            .unwrap_or_else(|| "-".into()),
                    ),
                    Cell::from(v["restart_count"].to_string()),
                    Cell::from(crate::views::age(s(v, "created_at"), now)),
                    Cell::from(crate::views::ask_line(v).unwrap_or_else(|| shown(v, "summary"))),
                ])
            }
        })
        .collect();
    let widths: Vec<Constraint> = if narrow {
        vec![
            Constraint::Length(9),
            Constraint::Length(11),
            Constraint::Length(10),
            Constraint::Min(5),
        ]
    } else {
        vec![
            Constraint::Length(9),
            Constraint::Length(16),
            Constraint::Length(16),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(8),
            Constraint::Length(3),
            Constraint::Length(4),
            Constraint::Min(10),
        ]
    };
    let title = format!(
        " maxx top — {} sessions · cursor {} ",
        app.sessions.len(),
        app.cursor
    );
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
        .block(Block::default().borders(Borders::ALL).title(title))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default();
    if !app.sessions.is_empty() {
        state.select(Some(app.selected.min(app.sessions.len() - 1)));
    }
    f.render_stateful_widget(table, area, &mut state);
}

fn draw_detail(f: &mut Frame, app: &App, area: Rect) {
    let mut lines: Vec<Line> = Vec::new();
    match app.selected_session() {
        None => lines.push(Line::from(
            "no sessions — create one with `maxx sessions create`",
        )),
        Some(v) => {
            let id = s(v, "session_id");
            lines.push(Line::from(vec![
                Span::styled(
                    id.to_string(),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::raw(format!(
                    "  {}",
                    crate::views::escape_controls(v["command"].as_str().unwrap_or("(shell)"))
                )),
            ]));
            if let Some(m) = v["metadata"].as_object().filter(|m| !m.is_empty()) {
                let chips: Vec<String> = m
                    .iter()
                    .map(|(k, val)| {
                        let k = crate::views::escape_controls(k);
                        format!("{k}={}", crate::views::json_text(val))
                    })
                    .collect();
                lines.push(Line::from(format!("metadata: {}", chips.join("  "))));
            }
            if let Some(r) = v["result"].as_str() {
                lines.push(Line::from(format!(
                    "result: {}",
                    crate::views::escape_controls(r)
                )));
            }
            if let Some(q) = app.recent.get(id) {
                for e in q.iter().rev() {
                    lines.push(Line::from(format!(
                        "#{} {} {} {} {}",
                        e["cursor"],
                        shown(e, "source_kind"),
                        shown(e, "kind"),
                        shown(e, "name"),
                        if e["payload"].is_null() {
                            String::new()
                        } else {
                            crate::views::json_text(&e["payload"])
                        }
                    )));
                }
            }
        }
    }
    let detail = Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .block(Block::default().borders(Borders::ALL).title(" detail "));
    f.render_widget(detail, area);
}

/// A key the dashboard knows; every other key is read and ignored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Key {
    Up,
    Down,
    Enter,
    Esc,
    CtrlC,
    Char(char),
}

/// The first key in `bytes` (a raw-mode read) and how many bytes it took. An escape
/// sequence the dashboard has no use for, a control byte or a non-ASCII character is
/// consumed as `None`.
pub fn parse_key(bytes: &[u8]) -> (Option<Key>, usize) {
    match bytes {
        [] => (None, 0),
        [0x1b] => (Some(Key::Esc), 1),
        [0x1b, b'[', rest @ ..] => {
            // CSI: parameter and intermediate bytes, then a final byte 0x40..=0x7e.
            match rest.iter().position(|b| (0x40..=0x7e).contains(b)) {
                Some(i) => {
                    let key = match (&rest[..i], rest[i]) {
                        ([], b'A') => Some(Key::Up),
                        ([], b'B') => Some(Key::Down),
                        _ => None,
                    };
                    (key, i + 3)
                }
                None => (None, bytes.len()),
            }
        }
        [0x1b, b'O', k, ..] => (
            match k {
                b'A' => Some(Key::Up),
                b'B' => Some(Key::Down),
                _ => None,
            },
            3,
        ),
        // Alt-something, or an incomplete SS3.
        [0x1b, _, ..] => (None, 2),
        [b'\r' | b'\n', ..] => (Some(Key::Enter), 1),
        [0x03, ..] => (Some(Key::CtrlC), 1),
        [b, ..] if b.is_ascii_graphic() || *b == b' ' => (Some(Key::Char(*b as char)), 1),
        [b, ..] if *b < 0x80 => (None, 1),
        // A UTF-8 character: its lead byte says how long it is.
        [b, ..] => (
            None,
            (b.leading_ones() as usize).clamp(1, 4).min(bytes.len()),
        ),
    }
}

/// What the main loop tells the keyboard thread once a key is applied and drawn.
enum Ack {
    /// Go on with the rest of this read.
    Next,
    /// Drop the rest of this read: attach took it, or a prompt appeared (typeahead must
    /// not answer it).
    DropRest,
}

enum Input {
    /// A key, the bytes read after it in the same read, and where to say "applied".
    Key {
        key: Key,
        rest: Vec<u8>,
        ack: mpsc::Sender<Ack>,
    },
    Resize,
    Stream(Value),
    StreamEnded,
}

/// The keyboard thread: reads stdin (the only reader while the dashboard shows) and
/// SIGWINCH, and hands over one key at a time.
fn keyboard(tx: mpsc::Sender<Input>) {
    let Ok(winch) = crate::attach::winch_fd() else {
        return;
    };
    let stdin = std::io::stdin();
    let mut buf = [0u8; 4096];
    loop {
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(winch.as_fd(), PollFlags::POLLIN),
        ];
        if poll(&mut fds, PollTimeout::NONE).is_err() {
            continue;
        }
        if fds[1].any().unwrap_or(false) {
            while let Ok(Some(_)) = winch.read_signal() {}
            if tx.send(Input::Resize).is_err() {
                return;
            }
        }
        if !fds[0].any().unwrap_or(false) {
            continue;
        }
        let n = match nix::unistd::read(stdin.as_fd(), &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut at = 0;
        while at < n {
            let (key, used) = parse_key(&buf[at..n]);
            at += used.max(1);
            let Some(key) = key else { continue };
            let (ack, applied) = mpsc::channel();
            let rest = buf[at..n].to_vec();
            if tx.send(Input::Key { key, rest, ack }).is_err() {
                return;
            }
            match applied.recv() {
                Ok(Ack::Next) => {}
                Ok(Ack::DropRest) => break,
                Err(_) => return,
            }
        }
    }
}

/// One request; the dashboard waits at most 30 s for any answer.
fn request(target: &Target, caller: &Option<String>, req: Request) -> Result<Value, ErrorBody> {
    match client::request(
        target,
        req.method,
        req.params,
        caller.as_deref(),
        false,
        Duration::from_secs(30),
    ) {
        Ok(r) if r.ok => Ok(r.result.unwrap_or(Value::Null)),
        Ok(r) => Err(r
            .error
            .unwrap_or_else(|| ErrorBody::internal("ok:false without an error"))),
        Err(crate::client::ClientError::NoDaemon(e) | crate::client::ClientError::Failed(e)) => {
            Err(e)
        }
        Err(crate::client::ClientError::Usage(m)) => Err(ErrorBody::invalid(m)),
    }
}

/// An error as the status line shows it.
fn status_text(e: &ErrorBody) -> String {
    crate::views::escape_controls(&format!("{}: {}", e.code, e.message))
}

/// Run the dashboard until `q`.
pub fn run(target: &Target, caller: &Option<String>) -> i32 {
    // Before any thread starts: SIGWINCH is read from signalfds (the keyboard thread's,
    // or attach's while attached), never delivered to a thread at random.
    crate::attach::block_winch();
    let (tx, rx) = mpsc::channel::<Input>();
    // The stream first, so nothing between the list and the stream is missed.
    {
        let tx = tx.clone();
        let target = target.clone();
        let caller = caller.clone();
        std::thread::spawn(move || {
            let watch = request::stream_watch(StreamWatchArgs::default()).expect("no --since");
            let res = client::stream_lines(
                &target,
                watch.method,
                watch.params,
                caller.as_deref(),
                false,
                |line| {
                    let _ = tx.send(Input::Stream(line));
                },
            );
            let _ = res;
            let _ = tx.send(Input::StreamEnded);
        });
    }
    let mut app = App::default();
    match request(target, caller, request::sessions_list(ListArgs::default())) {
        Ok(r) => app.sessions = r["sessions"].as_array().cloned().unwrap_or_default(),
        Err(e) => {
            eprintln!(
                "{}",
                crate::views::json_text(&json!({ "ok": false, "error": e }))
            );
            return if e.code == ErrorCode::NoDaemon {
                exit::NO_DAEMON
            } else {
                exit::FAILED
            };
        }
    }
    {
        let tx = tx.clone();
        std::thread::spawn(move || keyboard(tx));
    }
    let mut terminal = match enter() {
        Ok(t) => t,
        Err(e) => {
            let e = ErrorBody::new(
                ErrorCode::Unsupported,
                format!("cannot start the dashboard: {e}"),
            )
            .with_remedy("run `maxx top` in an interactive terminal");
            eprintln!(
                "{}",
                crate::views::json_text(&json!({ "ok": false, "error": e }))
            );
            return exit::USAGE;
        }
    };
    let mut dirty: BTreeSet<String> = BTreeSet::new();
    // The key applied last, answered once its frame is drawn.
    let mut applied: Option<(mpsc::Sender<Ack>, Ack)> = None;
    loop {
        // Re-read the sessions events touched since the last frame.
        for id in std::mem::take(&mut dirty) {
            if let Ok(r) = request(
                target,
                caller,
                request::sessions_get(SelfIdArg { session_id: id }),
            ) {
                app.upsert(r["session"].clone());
            }
        }
        let _ = terminal.draw(|f| draw(f, &app, SystemTime::now()));
        // The keyboard thread reads on only once the key's effect is on the terminal.
        if let Some((ack, what)) = applied.take() {
            let _ = ack.send(what);
        }
        let Ok(first) = rx.recv() else { break };
        // Take everything already queued before redrawing (a burst becomes one frame).
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut quit = false;
        for input in batch {
            match input {
                Input::Stream(line) if line["type"] == "event" => {
                    let e = &line["event"];
                    app.remember(e);
                    dirty.insert(s(e, "session_id").to_string());
                }
                Input::Stream(line) if line["type"] == "hello" => {
                    app.cursor = line["cursor"].as_u64().unwrap_or(0);
                }
                Input::Stream(_) | Input::Resize => {}
                Input::StreamEnded => {
                    app.status_line = Some("the event stream ended (daemon gone?)".into())
                }
                Input::Key { key, rest, ack } => {
                    let mut rest = Some(rest);
                    if handle_key(&mut app, key, &mut rest, target, caller, &mut terminal) {
                        quit = true;
                    }
                    let what = if app.confirm.is_some() {
                        // A prompt appears with the next frame: only a key typed after that
                        // answers it. What was typed ahead (the rest of this read, and what
                        // the terminal holds unread) is discarded before it is drawn.
                        let _ = termios::tcflush(std::io::stdin().as_fd(), FlushArg::TCIFLUSH);
                        Ack::DropRest
                    } else if rest.is_none() {
                        Ack::DropRest
                    } else {
                        Ack::Next
                    };
                    applied = Some((ack, what));
                }
            }
        }
        if quit {
            break;
        }
    }
    leave(&mut terminal);
    0
}

type Term = ratatui::Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>;

fn enter() -> std::io::Result<Term> {
    enable_raw_mode()?;
    execute!(std::io::stdout(), EnterAlternateScreen)?;
    ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))
}

fn leave(terminal: &mut Term) {
    let _ = disable_raw_mode();
    let _ = execute!(terminal.backend_mut(), LeaveAlternateScreen);
    let _ = terminal.show_cursor();
}

/// Apply a key; true to quit. Enter's attach takes `rest` (what was read after the
/// Enter goes to the session).
fn handle_key(
    app: &mut App,
    k: Key,
    rest: &mut Option<Vec<u8>>,
    target: &Target,
    caller: &Option<String>,
    terminal: &mut Term,
) -> bool {
    if let Some((_, action)) = app.confirm.take() {
        if k == Key::Char('y') {
            let req = match action {
                Action::Interrupt(session_id) => request::sessions_action(ActionArgs {
                    session_id,
                    action: ActionKind::Interrupt,
                    input: None,
                    signal: None,
                }),
                Action::Archive(session_id) => request::sessions_archive(ArchiveArgs {
                    session_id,
                    reason: None,
                }),
                Action::Restart(session_id) => request::sessions_restart(RestartArgs {
                    session_id,
                    last_command: true,
                    command: None,
                }),
            };
            let method = req.method;
            app.status_line = Some(match request(target, caller, req) {
                Ok(_) => format!("done: {method}"),
                Err(e) => status_text(&e),
            });
        } else {
            app.status_line = Some("cancelled".into());
        }
        return false;
    }
    app.status_line = None;
    match k {
        Key::Char('q') | Key::Esc | Key::CtrlC => return true,
        Key::Down | Key::Char('j') => {
            app.selected = (app.selected + 1).min(app.sessions.len().saturating_sub(1));
        }
        Key::Up | Key::Char('k') => app.selected = app.selected.saturating_sub(1),
        Key::Char('f') => {
            if let Some(v) = app.selected_session() {
                let id = s(v, "session_id").to_string();
                app.status_line = Some(
                    match request(
                        target,
                        caller,
                        request::sessions_action(ActionArgs {
                            session_id: id.clone(),
                            action: ActionKind::Focus,
                            input: None,
                            signal: None,
                        }),
                    ) {
                        Ok(_) => format!("focused {}", short(&id)),
                        Err(e) => status_text(&e),
                    },
                );
            }
        }
        Key::Char(c @ ('i' | 'a' | 'r')) => app.confirm = app.confirmation_for(c),
        Key::Enter => {
            if let Some(v) = app.selected_session() {
                let id = s(v, "session_id").to_string();
                leave(terminal);
                let opts = crate::attach::Options {
                    detach_key: 0x1c,
                    detach_key_name: "C-\\".into(),
                    status: true,
                    initial: rest.take().unwrap_or_default(),
                };
                let outcome = crate::attach::run(target, Some(id), caller.as_deref(), false, opts);
                if let Ok(t) = enter() {
                    *terminal = t;
                }
                let _ = terminal.clear();
                app.status_line = Some(match outcome {
                    Ok(_) => "back from attach".into(),
                    // Say why and what to do: a refused attach names the policy line to add.
                    Err(
                        crate::client::ClientError::Failed(e)
                        | crate::client::ClientError::NoDaemon(e),
                    ) => match &e.remedy {
                        Some(r) => {
                            let r = crate::views::escape_controls(r);
                            format!("attach failed: {} — {r}", status_text(&e))
                        }
                        None => format!("attach failed: {}", status_text(&e)),
                    },
                    Err(_) => "attach failed".into(),
                });
            }
        }
        _ => {}
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn frame(app: &App, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        let now = humantime::parse_rfc3339("2026-06-14T12:10:00Z").unwrap();
        t.draw(|f| draw(f, app, now)).unwrap();
        let buf = t.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..buf.area.height {
            let mut line = String::new();
            for x in 0..buf.area.width {
                line.push_str(buf[(x, y)].symbol());
            }
            out.push_str(&format!("{:>2} {}\n", y, line.trim_end()));
        }
        out
    }

    fn session(n: u32, lifecycle: &str, extra: Value) -> Value {
        let mut v = json!({
            "session_id": format!("{n:08X}-0000-4000-8000-000000000000"),
            "title": format!("job-{n}"), "command": "make", "lifecycle": lifecycle,
            "metadata": {}, "created_at": "2026-06-14T12:00:00Z", "restart_count": 0,
            "focused": false,
        });
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        v
    }

    fn fleet() -> App {
        let mut app = App {
            sessions: vec![
                session(
                    1,
                    "running",
                    json!({"workflow_state": "running", "group": "release", "focused": true, "summary": "building artifacts"}),
                ),
                session(
                    2,
                    "exited",
                    json!({"exit_code": 3, "workflow_state": "failed", "group": "release"}),
                ),
                session(3, "exited", json!({"exit_signal": "SIGKILL"})),
                session(4, "closed", json!({"workflow_state": "complete"})),
                session(5, "archived", json!({"workflow_state": "blocked"})),
                session(
                    6,
                    "backoff",
                    json!({"restart_count": 2, "workflow_state": "needsInput"}),
                ),
                session(
                    7,
                    "running",
                    json!({"parent_id": "00000001-0000-4000-8000-000000000000", "metadata": {"pr.url": "https://x/1"}, "result": "ship it"}),
                ),
            ],
            ..App::default()
        };
        app.remember(&json!({"cursor": 41, "session_id": "00000001-0000-4000-8000-000000000000", "source_kind": "agent", "kind": "event", "name": "tests.green", "payload": {"n": 3}}));
        app.cursor = 41;
        app
    }

    fn snap(name: &str, text: String) {
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/maxx-top"));
        settings.set_prepend_module_to_snapshot(false);
        settings.bind(|| insta::assert_snapshot!(name, text));
    }

    #[test]
    fn session_data_is_shown_escaped() {
        let mut app = App::default();
        app.upsert(session(
            1,
            "running",
            json!({"title": "\x1b]0;PWNED\x07", "summary": "\x1b]52;c;aGk=\x07",
                   "command": "make\u{9b}2J", "metadata": {"k": "v\x7f"}, "result": "r\x1b[2J"}),
        ));
        let text = frame(&app, 160, 24);
        assert!(
            !text.chars().any(|c| c != '\n' && c.is_control()),
            "{text:?}"
        );
        assert!(text.contains(r"\x1b]0;PWNED\x07"), "{text}");
        assert!(text.contains(r"make\u{9b}2J"), "{text}");
        assert!(text.contains(r#"k="v\u007f""#), "{text}");
        let (prompt, _) = app.confirmation_for('a').unwrap();
        assert!(prompt.contains(r"\x1b]0;PWNED\x07"), "{prompt}");
    }

    #[test]
    fn keys_are_parsed_one_at_a_time() {
        let all = |mut b: &[u8]| {
            let mut keys = Vec::new();
            while !b.is_empty() {
                let (k, n) = parse_key(b);
                keys.extend(k);
                b = &b[n.max(1)..];
            }
            keys
        };
        assert_eq!(
            all(b"ay\r\x1b[A\x1bOB\x1b[1;5C\x03\xc3\xbcq"),
            vec![
                Key::Char('a'),
                Key::Char('y'),
                Key::Enter,
                Key::Up,
                Key::Down,
                Key::CtrlC,
                Key::Char('q')
            ]
        );
        assert_eq!(all(b"\x1b"), vec![Key::Esc]);
    }

    #[test]
    fn empty_daemon() {
        snap("top_empty", frame(&App::default(), 100, 16));
    }

    #[test]
    fn mixed_fleet() {
        snap("top_fleet", frame(&fleet(), 120, 24));
    }

    #[test]
    fn narrow_terminal() {
        snap("top_narrow", frame(&fleet(), 60, 16));
    }

    #[test]
    fn confirmations_name_target_and_consequence() {
        let mut app = fleet();
        app.selected = 1;
        let (prompt, action) = app.confirmation_for('a').unwrap();
        assert!(prompt.contains("00000002 (job-2)") && prompt.contains("record stays"));
        assert_eq!(
            action,
            Action::Archive("00000002-0000-4000-8000-000000000000".into())
        );
        app.confirm = Some((prompt, action));
        snap("top_confirm", frame(&app, 120, 24));
    }
}
