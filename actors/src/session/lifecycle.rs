//! A session's lifecycle: starting its actor, spawning and releasing its surface,
//! the child's exit, retiring to a dormant record, archive, restart and the restart
//! policy.

use super::restart::{self, RestartDecision};
use super::{
    new_id, random_secret, screen_model, Dormant, SessionArgs, SessionMsg, SessionStart,
    SessionState, SpawnContext, WatchLine,
};
use crate::audit_log::AuditLog;
use crate::bus::BusMsg;
use crate::persistence::{PersistMsg, Record};
use crate::pty::{ExitInfo, Keep, Pty, SpawnSpec};
use crate::registry::RegistryMsg;
use crate::screen_model::store::Store;
use crate::stats::Stats;
use maxx_protocol::audit::AuditKind;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::limits::DEFAULT_SCROLLBACK_LINES;
use maxx_protocol::request::Declaration;
use maxx_protocol::session::{Lifecycle, SessionView};
use maxx_protocol::time::now_rfc3339;
use ractor::{ActorProcessingErr, ActorRef};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// What a session keeps from one actor to the next (see [`Dormant`]), or starts with.
struct Kept {
    /// The audit log (empty for a new session).
    audit: AuditLog,
    /// The create-time env (memory only), for a restart in this run.
    env: Vec<(String, String)>,
    /// The history lines its screen keeps.
    scrollback_lines: usize,
    /// Automatic restarts within the restart policy's window.
    restart_times: VecDeque<Instant>,
}

/// The actors a session talks to and the daemon-wide spawn facts.
struct Links {
    registry: ActorRef<RegistryMsg>,
    bus: ActorRef<BusMsg>,
    persist: ActorRef<PersistMsg>,
    spawn: Arc<SpawnContext>,
}

impl SessionState {
    /// Build the state of a starting actor (the body of `pre_start`): a new
    /// session spawns its surface; a restored, recovered or woken one starts detached.
    pub(super) fn start(
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<SessionState, ActorProcessingErr> {
        let SessionArgs {
            session_id,
            start,
            registry,
            spawn,
            bus,
            persist,
        } = args;
        let links = Links {
            registry: registry.clone(),
            bus,
            persist,
            spawn,
        };
        let (params, cwd, caller, created) = match start {
            SessionStart::New {
                params,
                cwd,
                caller,
                created,
            } => (*params, cwd, caller, created),
            SessionStart::Restored(record) | SessionStart::Recovered(record) => {
                let Record { session, audit } = *record;
                let kept = Kept {
                    audit: AuditLog::from_entries(&audit),
                    env: Vec::new(),
                    scrollback_lines: DEFAULT_SCROLLBACK_LINES,
                    restart_times: Default::default(),
                };
                return Self::detached(myself, session, kept, links, true);
            }
            SessionStart::Readopted(record, survivor) => {
                return Self::readopted(myself, *record, *survivor, links);
            }
            SessionStart::Woken(dormant) => {
                let Dormant {
                    view,
                    audit,
                    env,
                    scrollback_lines,
                    restart_times,
                } = *dormant;
                let view = serde_json::from_str(view.get())
                    .map_err(|e| format!("a dormant record does not decode: {e}"))?;
                let kept = Kept {
                    audit,
                    env,
                    scrollback_lines,
                    restart_times,
                };
                return Self::detached(myself, view, kept, links, false);
            }
        };
        let now = now_rfc3339();
        let view = SessionView {
            session_id,
            surface_id: String::new(),
            title: params.title,
            command: params.command,
            cwd: cwd.display().to_string(),
            status: params.status,
            lifecycle: Lifecycle::Running,
            metadata: params.metadata,
            created_at: now.clone(),
            updated_at: now,
            pid: None,
            exit_code: None,
            exit_signal: None,
            location: params.location,
            split_target: params.split_target,
            split_direction: params.split_direction,
            focused: params.focus,
            restart_count: 0,
            terminal_title: None,
            cols: params.cols,
            rows: params.rows,
            restored: false,
            last_seen_at: None,
            archive_reason: None,
            group: params.group,
            parent_id: params.parent,
            workflow_state: None,
            workflow_state_at: None,
            workflow_state_source: None,
            summary: None,
            summary_at: None,
            summary_source: None,
            result: None,
            result_at: None,
            result_source: None,
            result_schema: params.result_schema,
            agent_type: None,
            agent_type_at: None,
            agent_type_source: None,
            ask: None,
            restart_policy: params.restart_policy,
            next_restart_at: None,
            restart_gave_up: false,
        };
        let kept = Kept {
            audit: AuditLog::default(),
            env: params.env,
            scrollback_lines: params.scrollback_lines.unwrap_or(DEFAULT_SCROLLBACK_LINES),
            restart_times: Default::default(),
        };
        let mut state = SessionState::new(&myself, view, kept, links, false);
        // Everything a create changes goes to the journal: its answer waits for it.
        state.journaled = true;
        state.spawn_surface(&myself)?;
        // A create emits `created` and, for a grouped launch, `group.joined`; create-time
        // metadata arrives in the record, not as events.
        state.mechanical("created", None);
        if let Some(group) = state.view.group.clone() {
            state.mechanical_in("group.joined", None, Some(group));
        }
        let _ = state
            .persist
            .cast(PersistMsg::Upsert(Arc::new(state.view.clone())));
        // A create-time agent type is a declaration like a later set-agent-type.
        if let Some(agent_type) = params.agent_type {
            state.apply(Declaration::AgentType { agent_type }, caller)?;
        }
        registry.cast(RegistryMsg::Register {
            view: Arc::new(state.view.clone()),
            actor: myself,
            focus: params.focus,
        })?;
        // The answer goes through the journal like any acknowledgement: queued behind the
        // record's line now, so the journal writes it while the supervisor answers.
        if let Some(created) = created {
            state.ack(created, Ok(state.view.clone()));
        }
        Ok(state)
    }

    /// A restored record on its own live program, which the keeper kept through the last
    /// daemon's death: `running` again with its session id, surface id, pid, registration
    /// secret, declarations and audit log. The create-time env was never on disk, so a later
    /// restart uses the daemon's own (as for any restored record). A program that ended
    /// while no daemon was there is reported by the pump at once and goes `exited` with its
    /// status, through the restart policy as any exit.
    fn readopted(
        myself: ActorRef<SessionMsg>,
        record: Record,
        survivor: crate::keeper_link::Survivor,
        links: Links,
    ) -> Result<SessionState, ActorProcessingErr> {
        let Record { session, audit } = record;
        let Some(keeper) = links.spawn.keeper.clone() else {
            return Err("a re-adoption without a keeper".into());
        };
        let mut view = session;
        view.lifecycle = Lifecycle::Running;
        view.pid = Some(survivor.pid);
        // Not a detached restoration: the program never stopped.
        view.restored = false;
        let kept = Kept {
            audit: AuditLog::from_entries(&audit),
            env: Vec::new(),
            scrollback_lines: DEFAULT_SCROLLBACK_LINES,
            restart_times: Default::default(),
        };
        let registry = links.registry.clone();
        let mut state = SessionState::new(&myself, view, kept, links, false);
        let generation =
            state
                .model
                .reset(state.view.cols, state.view.rows, state.scrollback_lines);
        let me = myself.clone();
        let crate::keeper_link::Survivor {
            surface_id,
            pid,
            token,
            master,
            screen,
            status,
            ..
        } = survivor;
        // The screen as the dead daemon left it, rebuilt before any new output is read.
        let screen = match screen.map(|fd| state.model.recover(generation, fd)) {
            Some(Ok(scrollback)) => {
                state.scrollback_lines = scrollback;
                "restored"
            }
            Some(Err(why)) => {
                tracing::warn!(
                    session_id = %state.view.session_id,
                    why,
                    "the screen memory the keeper handed over was refused; the screen starts empty"
                );
                "refused"
            }
            None => "none",
        };
        // Without a usable one, a fresh screen memory from here on (registered below), so
        // the next crash keeps what this daemon shows.
        let fresh = screen != "restored"
            && status.is_none()
            && match Store::create(state.view.cols, state.view.rows, state.scrollback_lines) {
                Ok(store) => {
                    state.model.keep_screen(generation, store);
                    true
                }
                Err(_) => false,
            };
        let session_id = state.view.session_id.clone();
        let surface = surface_id.clone();
        let mut pty = Pty::adopt(
            master,
            pid,
            status,
            state.view.command.is_some(),
            keeper.clone(),
            surface_id,
            state.model.clone(),
            generation,
            move |event| me.cast(SessionMsg::Pump(event)).is_ok(),
        )?;
        if fresh {
            pty.keep(
                keeper,
                &session_id,
                &surface,
                &token,
                state.model.screen_fd(),
            );
        }
        state.registration_token = token;
        state.pty = Some(pty);
        state.record(
            AuditKind::Lifecycle,
            Some("readopted".into()),
            None,
            Some(serde_json::json!({ "pid": pid, "screen": screen })),
            "maxx".into(),
        );
        state.touch();
        state.view.last_seen_at = Some(state.view.updated_at.clone());
        // One copy of the record for the journal and the registry.
        let view = Arc::new(state.view.clone());
        let _ = state.persist.cast(PersistMsg::Upsert(view.clone()));
        registry.cast(RegistryMsg::Register {
            view,
            actor: myself,
            focus: false,
        })?;
        Ok(state)
    }

    /// A detached session (restored, recovered or woken): no surface until restarted.
    fn detached(
        myself: ActorRef<SessionMsg>,
        view: SessionView,
        kept: Kept,
        links: Links,
        retire_on_start: bool,
    ) -> Result<SessionState, ActorProcessingErr> {
        let registry = links.registry.clone();
        let state = SessionState::new(&myself, view, kept, links, retire_on_start);
        registry.cast(RegistryMsg::Register {
            view: Arc::new(state.view.clone()),
            actor: myself,
            focus: false,
        })?;
        Ok(state)
    }

    /// The one constructor: the record, what the session keeps across actors, and the
    /// actors it talks to. It counts the session in the stats (its `Drop` uncounts it,
    /// also when a new session's spawn fails).
    fn new(
        myself: &ActorRef<SessionMsg>,
        view: SessionView,
        kept: Kept,
        links: Links,
        retire_on_start: bool,
    ) -> SessionState {
        let Kept {
            audit,
            env,
            scrollback_lines,
            restart_times,
        } = kept;
        let Links {
            registry,
            bus,
            persist,
            spawn,
        } = links;
        Stats::add(&spawn.stats.sessions, 1);
        SessionState {
            pty: None,
            view,
            model: screen_model(myself),
            scrollback_lines,
            runs: Vec::new(),
            watch_ids: Vec::new(),
            attachers: Vec::new(),
            restart_times,
            restart_generation: 0,
            restart_suppressed: false,
            last_exit: None,
            registration_token: String::new(),
            audit,
            waiters: Vec::new(),
            watchers: Vec::new(),
            next_id: 0,
            env,
            journaled: false,
            keeper_sent: None,
            retire_on_start,
            handled: 0,
            registry,
            bus,
            persist,
            spawn,
        }
    }

    /// Open a fresh PTY and start the recorded command in it, with a new surface id and
    /// registration secret.
    pub(super) fn spawn_surface(
        &mut self,
        myself: &ActorRef<SessionMsg>,
    ) -> Result<(), ActorProcessingErr> {
        let surface_id = new_id();
        let registration_token = random_secret()?;
        let spawn = &self.spawn;
        let mut env = self.env.clone();
        env.push(("TERM".into(), "xterm-256color".into()));
        // Maxx's own variables come last so a caller cannot override them.
        env.push((
            "MAXX_CONTROL_DIR".into(),
            spawn.control_dir.display().to_string(),
        ));
        env.push(("MAXX_SESSION_ID".into(), self.view.session_id.clone()));
        env.push(("MAXX_SURFACE_ID".into(), surface_id.clone()));
        env.push(("MAXX_REGISTRATION_TOKEN".into(), registration_token.clone()));
        if let Some(bin) = &spawn.bin_dir {
            let base = self
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var("PATH").ok())
                .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
            env.push(("PATH".into(), format!("{}:{base}", bin.display())));
        }
        let me = myself.clone();
        // A fresh terminal: output, modes and grid of an earlier surface are gone.
        let generation = self
            .model
            .reset(self.view.cols, self.view.rows, self.scrollback_lines);
        // The keeper holds the master from the spawn on, and the screen's memory from the
        // first output on (made by the pump before it reads a byte: see `Pty::spawn`), so a
        // daemon that dies leaves the next one this program and this screen.
        let keep = spawn.keeper.clone().map(|keeper| Keep {
            keeper,
            session_id: self.view.session_id.clone(),
            surface_id: surface_id.clone(),
            token: registration_token.clone(),
        });
        let pty = Pty::spawn(
            SpawnSpec {
                command: self.view.command.clone(),
                cwd: PathBuf::from(&self.view.cwd),
                env,
                cols: self.view.cols,
                rows: self.view.rows,
            },
            self.model.clone(),
            generation,
            keep,
            move |event| me.cast(SessionMsg::Pump(event)).is_ok(),
        )?;
        self.keeper_sent = spawn.keeper.as_ref().map(|k| k.flushed());
        self.view.surface_id = surface_id;
        self.view.pid = Some(pty.pid());
        self.registration_token = registration_token;
        self.pty = Some(pty);
        Ok(())
    }

    /// The surface is gone for good (closed or archived): drop what only a surface needs —
    /// the raw-output ring, the screen model, attachments — and spare audit capacity, so a
    /// record kept for the daemon's life costs its record and audit log, not a terminal.
    /// Screen reads of such a session answer `already_ended`; a restart starts afresh.
    pub(super) fn release_surface(&mut self) {
        self.pty = None;
        self.model
            .reset(self.view.cols, self.view.rows, self.scrollback_lines);
        self.attachers = Vec::new();
        self.audit.shrink_to_fit();
        crate::memory::churn(&self.spawn.stats, crate::memory::SURFACE_CHURN);
    }

    /// Nothing here needs an actor: no surface, and nobody waiting, watching or running.
    pub(super) fn retirable(&self) -> bool {
        self.view.lifecycle.is_terminal()
            && self.pty.is_none()
            && self.waiters.is_empty()
            && self.watchers.is_empty()
            && self.runs.is_empty()
            && self.attachers.is_empty()
    }

    /// Hand the record to the registry as [`Dormant`] and stop. A request already routed
    /// here and not yet handled is dropped with the mailbox; its sender sees the actor
    /// gone and resolves the session again, which wakes a new actor.
    pub(super) fn retire(&mut self, myself: &ActorRef<SessionMsg>) {
        let Ok(view) = serde_json::value::to_raw_value(&self.view) else {
            return;
        };
        let dormant = Box::new(Dormant {
            view,
            audit: std::mem::take(&mut self.audit),
            env: std::mem::take(&mut self.env),
            scrollback_lines: self.scrollback_lines,
            restart_times: std::mem::take(&mut self.restart_times),
        });
        match self.registry.cast(RegistryMsg::Retire {
            actor: myself.clone(),
            session_id: self.view.session_id.clone(),
            dormant,
        }) {
            Ok(()) => myself.stop(None),
            Err(ractor::MessagingErr::SendErr(RegistryMsg::Retire { dormant, .. })) => {
                // The registry is gone (daemon stopping): stay as we are.
                self.audit = dormant.audit;
                self.env = dormant.env;
                self.restart_times = dormant.restart_times;
            }
            Err(_) => {}
        }
    }

    /// `archive`: close the surface, keep the record; a second archive changes nothing.
    pub(super) fn archive(&mut self, reason: Option<String>) {
        if self.view.lifecycle == Lifecycle::Archived {
            return;
        }
        self.release_surface();
        self.view.pid = None;
        self.restart_generation += 1;
        self.view.next_restart_at = None;
        self.view.lifecycle = Lifecycle::Archived;
        self.view.archive_reason = reason.clone();
        self.record(
            AuditKind::Lifecycle,
            Some("archived".into()),
            reason,
            None,
            "maxx".into(),
        );
        self.lifecycle_changed();
    }

    /// `restart`: a fresh surface and child under the same session id. Per-run declared
    /// fields (workflow state, summary, result) are cleared; status, metadata, result
    /// schema, group and parent are kept. A split comes back as a tab.
    pub(super) fn restart(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        command: Option<String>,
        automatic: Option<Value>,
    ) -> Result<SessionView, ErrorBody> {
        let Some(command) = command.or_else(|| self.view.command.clone()) else {
            return Err(ErrorBody::new(
                ErrorCode::Unsupported,
                "this session has no recorded command to restart",
            )
            .with_remedy("pass --command to restart it with one"));
        };
        if !std::path::Path::new(&self.view.cwd).is_dir() {
            return Err(ErrorBody::invalid(format!(
                "the session's cwd {} no longer exists",
                self.view.cwd
            )));
        }
        // End the previous run, if any.
        self.pty = None;
        let previous = (self.view.command.clone(), self.view.surface_id.clone());
        self.view.command = Some(command);
        if let Err(e) = self.spawn_surface(myself) {
            self.view.command = previous.0;
            self.view.surface_id = previous.1;
            self.view.lifecycle = Lifecycle::Closed;
            self.view.pid = None;
            self.lifecycle_changed();
            return Err(match crate::pty::pty_exhausted(e.as_ref()) {
                Some(p) => ErrorBody::new(ErrorCode::PtyExhausted, format!("restart failed: {p}")),
                None => ErrorBody::internal(format!("restart failed: {e}")),
            });
        }
        let v = &mut self.view;
        v.lifecycle = Lifecycle::Running;
        v.restart_count += 1;
        v.restored = false;
        v.exit_code = None;
        v.exit_signal = None;
        v.archive_reason = None;
        v.terminal_title = None;
        if v.location == maxx_protocol::session::Location::Split {
            v.location = maxx_protocol::session::Location::Tab;
            v.split_target = None;
            v.split_direction = None;
        }
        v.workflow_state = None;
        v.workflow_state_at = None;
        v.workflow_state_source = None;
        v.summary = None;
        v.summary_at = None;
        v.summary_source = None;
        v.result = None;
        v.result_at = None;
        v.result_source = None;
        v.ask = None;
        v.next_restart_at = None;
        v.restart_gave_up = false;
        let restart_count = v.restart_count;
        // Any pending automatic restart is superseded by this one.
        self.restart_generation += 1;
        self.restart_suppressed = false;
        let mut payload = automatic.unwrap_or_else(|| serde_json::json!({ "automatic": false }));
        payload["restart_count"] = restart_count.into();
        self.record(
            AuditKind::Lifecycle,
            Some("restarted".into()),
            None,
            Some(payload),
            "maxx".into(),
        );
        self.lifecycle_changed();
        Ok(self.view.clone())
    }

    /// What the restart policy says about the exit that just happened (nothing when a
    /// caller interrupted this run).
    fn restart_decision(&mut self) -> RestartDecision {
        let Some(policy) = &self.view.restart_policy else {
            return RestartDecision::None;
        };
        if self.restart_suppressed {
            return RestartDecision::None;
        }
        restart::decide(
            policy,
            self.view.exit_code,
            self.view.exit_signal.is_some(),
            &mut self.restart_times,
            std::time::Instant::now(),
        )
    }

    /// A lifecycle transition happened: publish it, tell watchers, and end their streams
    /// once the run is over (the lifecycle left `running`).
    pub(super) fn lifecycle_changed(&mut self) {
        self.touch();
        self.publish();
        if self.view.lifecycle.has_ended() {
            // Closing their queues ends every attachment.
            self.attachers.clear();
            self.attachers_changed();
            self.end_runs();
        }
        self.broadcast(|s| WatchLine::Lifecycle(Box::new(s.view.clone())));
        if self.view.lifecycle.has_ended() {
            self.broadcast(|_| WatchLine::End);
        }
    }

    /// The kernel reported the child's exit: record it, and let the restart policy decide
    /// between `exited` and `backoff`.
    pub(super) fn child_exited(&mut self, myself: &ActorRef<SessionMsg>) {
        let Some(pty) = self.pty.as_mut() else { return };
        let Some(exit) = pty.reap() else { return };
        match &exit {
            ExitInfo::Code(code) => self.view.exit_code = Some(*code),
            ExitInfo::Signal(sig) => self.view.exit_signal = Some(sig.clone()),
            // Neither field is set: nobody could observe how it ended.
            ExitInfo::Unknown => {}
        }
        let mut payload = exit_payload(&exit);
        self.last_exit = Some(exit);
        self.view.pid = None;
        if self.view.lifecycle == Lifecycle::Running {
            // Decide before anyone sees `exited`: a session its policy will restart
            // goes straight to `backoff`, and its `exited` event says so, so streams
            // following the session do not end on it.
            let decision = self.restart_decision();
            if matches!(decision, RestartDecision::Restart(_)) {
                payload["restart_pending"] = Value::Bool(true);
            }
            self.exited_event(payload);
            match decision {
                RestartDecision::Restart(delay) => {
                    self.view.lifecycle = Lifecycle::Backoff;
                    self.view.next_restart_at = Some(maxx_protocol::time::rfc3339(
                        std::time::SystemTime::now() + delay,
                    ));
                    self.restart_generation += 1;
                    let generation = self.restart_generation;
                    myself.send_after(delay, move || SessionMsg::AutoRestart(generation));
                }
                RestartDecision::GaveUp(restarts, window) => {
                    self.view.lifecycle = Lifecycle::Exited;
                    self.view.restart_gave_up = true;
                    self.record(
                        AuditKind::Lifecycle,
                        Some("restart.gave_up".into()),
                        None,
                        Some(serde_json::json!({
                            "restarts": restarts, "window_secs": window
                        })),
                        "maxx".into(),
                    );
                }
                RestartDecision::None => self.view.lifecycle = Lifecycle::Exited,
            }
            self.lifecycle_changed();
        } else {
            self.exited_event(payload);
            self.touch();
            self.publish();
        }
    }
}

/// How a run ended, as the payload of its `exited` event (and of the `restarted` event an
/// automatic restart after it makes).
pub(super) fn exit_payload(exit: &ExitInfo) -> Value {
    match exit {
        ExitInfo::Code(code) => serde_json::json!({ "exit_code": code }),
        ExitInfo::Signal(sig) => serde_json::json!({ "exit_signal": sig }),
        ExitInfo::Unknown => serde_json::json!({ "exit_status": "unknown" }),
    }
}
