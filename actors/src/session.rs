//! `SessionActor`: one per session. It owns the session's PTY and child, the light
//! screen state fed from the PTY's bytes, the authoritative record, and its lifecycle.
//!
//! Every change to the record is published to the `RegistryActor` (which serves reads
//! from that copy) *before* the request that caused it is answered, so a caller always
//! reads its own writes.
//!
//! Lifecycle is mechanical: `running` until the kernel reports the child's exit through
//! its pidfd (`exited`, with code or signal), `closed` once a caller closes the surface.
//! Nothing here looks at output to decide anything.

use crate::control_dir::constant_time_eq;
use crate::pty::{ExitInfo, Pty, PumpEvent, SpawnSpec};
use crate::registry::RegistryMsg;
use crate::screen::LightScreen;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::request::{ActionKind, ActionParams, CreateParams, WaitCondition};
use maxx_protocol::session::{Lifecycle, Outcome, SessionView};
use maxx_protocol::time::now_rfc3339;
use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Daemon-wide facts every session needs to build its child's environment.
#[derive(Debug, Clone)]
pub struct SpawnContext {
    /// Exported as `MAXX_CONTROL_DIR`.
    pub control_dir: PathBuf,
    /// Folder of the `maxx` binary, put first on the child's `PATH`.
    pub bin_dir: Option<PathBuf>,
}

/// Everything needed to start a session.
pub struct SessionArgs {
    /// Minted session id.
    pub session_id: String,
    /// Validated create params (env included; it is kept in memory only).
    pub params: CreateParams,
    /// Resolved, existing working directory.
    pub cwd: PathBuf,
    /// Where record changes are published.
    pub registry: ActorRef<RegistryMsg>,
    /// Daemon-wide spawn facts.
    pub spawn: Arc<SpawnContext>,
}

/// A wait's answer.
#[derive(Debug, Clone)]
pub struct WaitAnswer {
    /// matched / timeout / ended.
    pub outcome: Outcome,
    /// The record when the wait ended.
    pub session: SessionView,
}

/// Messages a `SessionActor` handles.
pub enum SessionMsg {
    /// From the pump.
    Pump(PumpEvent),
    /// The current record.
    View(RpcReplyPort<SessionView>),
    /// `sessions.update`: status and/or metadata merge.
    Update {
        /// New status.
        status: Option<String>,
        /// Keys to merge.
        metadata: Option<Map<String, Value>>,
        /// Answer.
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    },
    /// `sessions.action` / `sessions.cancel`.
    Action(ActionParams, RpcReplyPort<Result<SessionView, ErrorBody>>),
    /// `sessions.wait`.
    Wait {
        /// Condition.
        condition: WaitCondition,
        /// When to give up.
        timeout: Duration,
        /// Answer.
        reply: RpcReplyPort<WaitAnswer>,
    },
    /// A wait's timer fired.
    WaitExpired(u64),
    /// Another session took focus.
    Unfocused,
    /// `sessions.register-current`: check the per-surface proof.
    Register {
        /// The caller's `MAXX_REGISTRATION_TOKEN`.
        registration_token: String,
        /// Answer.
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    },
}

/// The actor (stateless configuration; see [`SessionState`]).
pub struct SessionActor;

struct Waiter {
    id: u64,
    condition: WaitCondition,
    reply: RpcReplyPort<WaitAnswer>,
}

/// Mutable state of one session.
pub struct SessionState {
    // Field order is drop order: the PTY (and its child) goes first.
    /// Live PTY; `None` once the surface is closed.
    pty: Option<Pty>,
    /// The record, authoritative.
    view: SessionView,
    /// Title and terminal modes from the light vte pass.
    screen: LightScreen,
    /// Secret proof for `register-current`; exported to the child only.
    registration_token: String,
    /// Pending waits.
    waiters: Vec<Waiter>,
    next_waiter: u64,
    registry: ActorRef<RegistryMsg>,
}

/// A fresh 128-bit secret, hex.
pub fn random_secret() -> Result<String, ActorProcessingErr> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("getrandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A fresh uppercase UUID, the seed's id format.
pub fn new_id() -> String {
    uuid::Uuid::new_v4()
        .hyphenated()
        .to_string()
        .to_ascii_uppercase()
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<SessionState, ActorProcessingErr> {
        let SessionArgs {
            session_id,
            params,
            cwd,
            registry,
            spawn,
        } = args;
        let surface_id = new_id();
        let registration_token = random_secret()?;
        let mut env = params.env.clone();
        env.push(("TERM".into(), "xterm-256color".into()));
        // Maxx's own variables come last so a caller cannot override them.
        env.push((
            "MAXX_CONTROL_DIR".into(),
            spawn.control_dir.display().to_string(),
        ));
        env.push(("MAXX_SESSION_ID".into(), session_id.clone()));
        env.push(("MAXX_SURFACE_ID".into(), surface_id.clone()));
        env.push(("MAXX_REGISTRATION_TOKEN".into(), registration_token.clone()));
        if let Some(bin) = &spawn.bin_dir {
            let base = params
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
        let pty = Pty::spawn(
            SpawnSpec {
                command: params.command.clone(),
                cwd: cwd.clone(),
                env,
                cols: params.cols,
                rows: params.rows,
            },
            move |event| me.cast(SessionMsg::Pump(event)).is_ok(),
        )?;
        let now = now_rfc3339();
        let view = SessionView {
            session_id,
            surface_id,
            title: params.title,
            command: params.command,
            cwd: cwd.display().to_string(),
            status: params.status,
            lifecycle: Lifecycle::Running,
            metadata: params.metadata,
            created_at: now.clone(),
            updated_at: now,
            pid: Some(pty.pid()),
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
        };
        registry.cast(RegistryMsg::Register {
            view: Box::new(view.clone()),
            actor: myself,
            focus: params.focus,
        })?;
        Ok(SessionState {
            pty: Some(pty),
            view,
            screen: LightScreen::default(),
            registration_token,
            waiters: Vec::new(),
            next_waiter: 0,
            registry,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::Pump(event) => state.on_pump(event),
            SessionMsg::View(reply) => {
                let _ = reply.send(state.view.clone());
            }
            SessionMsg::Update {
                status,
                metadata,
                reply,
            } => {
                let result = state.update(status, metadata);
                let _ = reply.send(result);
            }
            SessionMsg::Action(params, reply) => state.action(params, reply),
            SessionMsg::Wait {
                condition,
                timeout,
                reply,
            } => {
                if let Some(outcome) = state.check(&condition) {
                    let _ = reply.send(WaitAnswer {
                        outcome,
                        session: state.view.clone(),
                    });
                    return Ok(());
                }
                state.waiters.retain(|w| !w.reply.is_closed());
                state.next_waiter += 1;
                let id = state.next_waiter;
                state.waiters.push(Waiter {
                    id,
                    condition,
                    reply,
                });
                myself.send_after(timeout, move || SessionMsg::WaitExpired(id));
            }
            SessionMsg::Unfocused => {
                if state.view.focused {
                    state.view.focused = false;
                    state.publish();
                }
            }
            SessionMsg::WaitExpired(id) => {
                if let Some(pos) = state.waiters.iter().position(|w| w.id == id) {
                    let waiter = state.waiters.swap_remove(pos);
                    let _ = waiter.reply.send(WaitAnswer {
                        outcome: Outcome::Timeout,
                        session: state.view.clone(),
                    });
                }
            }
            SessionMsg::Register {
                registration_token,
                reply,
            } => {
                let ok = constant_time_eq(
                    registration_token.as_bytes(),
                    state.registration_token.as_bytes(),
                ) && state.pty.is_some();
                let _ = reply.send(if ok {
                    Ok(state.view.clone())
                } else {
                    Err(registration_refused())
                });
            }
        }
        Ok(())
    }
}

/// The one answer for any failed registration, so it reveals nothing about which part
/// was wrong or whether the surface exists.
pub fn registration_refused() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::Unauthenticated,
        "registration proof does not match a live surface",
    )
    .with_remedy(
        "run `maxx sessions register-current` from inside a session maxx spawned; \
         it sends MAXX_SURFACE_ID and MAXX_REGISTRATION_TOKEN",
    )
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

impl SessionState {
    fn touch(&mut self) {
        self.view.updated_at = now_rfc3339();
    }

    /// Send the record to the registry and settle any waits it satisfies.
    fn publish(&mut self) {
        let _ = self
            .registry
            .cast(RegistryMsg::Updated(Box::new(self.view.clone())));
        if self.waiters.is_empty() {
            return;
        }
        let waiters = std::mem::take(&mut self.waiters);
        for waiter in waiters {
            match self.check(&waiter.condition) {
                Some(outcome) => {
                    let _ = waiter.reply.send(WaitAnswer {
                        outcome,
                        session: self.view.clone(),
                    });
                }
                None => self.waiters.push(waiter),
            }
        }
    }

    /// `Some(outcome)` when a wait on `condition` is settled by the current record.
    fn check(&self, condition: &WaitCondition) -> Option<Outcome> {
        match condition {
            WaitCondition::Lifecycle(wanted) => {
                let current = self.view.lifecycle;
                let rank = |l: Lifecycle| match l {
                    Lifecycle::Running => 0,
                    Lifecycle::Exited => 1,
                    Lifecycle::Closed | Lifecycle::Archived => 2,
                };
                if current == *wanted {
                    Some(Outcome::Matched)
                } else if current.is_terminal() || rank(current) > rank(*wanted) {
                    Some(Outcome::Ended)
                } else {
                    None
                }
            }
        }
    }

    fn on_pump(&mut self, event: PumpEvent) {
        match event {
            PumpEvent::Output(bytes, permit) => {
                let title_changed = self.screen.advance(&bytes);
                drop(permit);
                if title_changed {
                    self.view.terminal_title = self.screen.flags().title.clone();
                    self.touch();
                    self.publish();
                }
            }
            PumpEvent::OutputClosed => {}
            PumpEvent::ChildExited => {
                let Some(pty) = self.pty.as_mut() else { return };
                let Some(exit) = pty.reap() else { return };
                match exit {
                    ExitInfo::Code(code) => self.view.exit_code = Some(code),
                    ExitInfo::Signal(sig) => self.view.exit_signal = Some(sig),
                }
                self.view.pid = None;
                if self.view.lifecycle == Lifecycle::Running {
                    self.view.lifecycle = Lifecycle::Exited;
                }
                self.touch();
                self.publish();
            }
        }
    }

    fn update(
        &mut self,
        status: Option<String>,
        metadata: Option<Map<String, Value>>,
    ) -> Result<SessionView, ErrorBody> {
        if let Some(merge) = &metadata {
            let mut merged = self.view.metadata.clone();
            for (k, v) in merge {
                merged.insert(k.clone(), v.clone());
            }
            // The merge result must obey the same bounds as any map.
            maxx_protocol::request::validate_metadata_map(&merged)?;
            self.view.metadata = merged;
        }
        if let Some(status) = status {
            self.view.status = Some(status);
        }
        self.touch();
        self.publish();
        Ok(self.view.clone())
    }

    fn require_running(&self, what: &str) -> Result<&Pty, ErrorBody> {
        match (&self.pty, self.view.lifecycle) {
            (Some(pty), Lifecycle::Running) => Ok(pty),
            (_, Lifecycle::Exited) => Err(ErrorBody::ended(
                &self.view.session_id,
                &format!("its child exited, so there is nothing to {what}"),
            )),
            _ => Err(ErrorBody::ended(&self.view.session_id, "it is closed")),
        }
    }

    fn action(
        &mut self,
        params: ActionParams,
        reply: RpcReplyPort<Result<SessionView, ErrorBody>>,
    ) {
        let result = match params.action {
            ActionKind::Focus => {
                if self.view.lifecycle.has_surface() {
                    if !self.view.focused {
                        self.view.focused = true;
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
                    paste_bytes(&text, self.screen.flags().bracketed_paste)
                };
                if params.action == ActionKind::Submit {
                    bytes.push(b'\r');
                }
                let written = pty.write(bytes);
                let view = self.view.clone();
                // Answer once the bytes are in the kernel's tty queue, without holding
                // up this actor while a child that does not read its input catches up.
                tokio::spawn(async move {
                    let result = match written.await {
                        Ok(Ok(())) => Ok(view),
                        _ => Err(ErrorBody::ended(&view.session_id, "its terminal closed")),
                    };
                    let _ = reply.send(result);
                });
                return;
            }
            ActionKind::Interrupt => match self.require_running("interrupt") {
                Ok(pty) => match params.signal {
                    None => {
                        // Ctrl-C through the tty: the line discipline turns it into SIGINT.
                        drop(pty.write(vec![0x03]));
                        Ok(self.view.clone())
                    }
                    Some(sig) => {
                        let signal = match sig {
                            maxx_protocol::request::InterruptSignal::Int => Signal::SIGINT,
                            maxx_protocol::request::InterruptSignal::Term => Signal::SIGTERM,
                            maxx_protocol::request::InterruptSignal::Kill => Signal::SIGKILL,
                            maxx_protocol::request::InterruptSignal::Hup => Signal::SIGHUP,
                            maxx_protocol::request::InterruptSignal::Quit => Signal::SIGQUIT,
                        };
                        pty.signal_foreground(signal)
                            .map(|_| self.view.clone())
                            .map_err(|e| ErrorBody::internal(format!("signal failed: {e}")))
                    }
                },
                Err(e) => Err(e),
            },
            ActionKind::Cancel | ActionKind::Close => {
                if self.view.lifecycle.has_surface() {
                    // Dropping the PTY hangs up the terminal, signals the child's group and
                    // reaps it (killing it after a grace period if it ignores the hangup).
                    self.pty = None;
                    self.view.lifecycle = Lifecycle::Closed;
                    self.view.pid = None;
                    self.touch();
                    self.publish();
                }
                Ok(self.view.clone())
            }
        };
        let _ = reply.send(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
