//! The handlers of the methods a session's actor serves ([`Serve::Session`]): one arm per
//! method, each reading or changing this session's state and answering once the change
//! is durable (`ack`). The connection sends every such method here the same way, so a new
//! session verb needs its protocol family entry and its arm here, nothing between.
//!
//! [`Serve::Session`]: maxx_protocol::request::Serve::Session

use super::terminal::paste_bytes;
use super::{ReadAnswer, SessionMsg, SessionState};
use crate::audit_log::EventsPage;
use maxx_protocol::error::ErrorBody;
use maxx_protocol::request::{ActionKind, ActionParams, Call, RecordsCall, ScreenCall, WaitCall};
use maxx_protocol::screen::ResizeResult;
use maxx_protocol::session::{Lifecycle, SessionView};
use ractor::{ActorRef, RpcReplyPort};

/// What a session's actor answers a request with (the connection makes it JSON). Nearly
/// every answer is a `View`, so it is the one variant not boxed.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum SessionReply {
    /// The session's record after the request.
    View(SessionView),
    /// `sessions.snapshot` / `dump` / `inspect`.
    Read(ReadAnswer),
    /// `sessions.resize`.
    Resized(ResizeResult),
    /// `sessions.events`: one page of the log.
    Events(EventsPage),
}

/// Where a request's answer goes.
pub type Reply = RpcReplyPort<Result<SessionReply, ErrorBody>>;

impl SessionState {
    /// Serve one request: the method's handler.
    pub(super) fn request(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        call: Call,
        caller: String,
        reply: Reply,
    ) {
        use SessionReply::View;
        match call {
            Call::Records(RecordsCall::Update(p)) => {
                let result = self.update(p.status, p.metadata, caller);
                self.ack(reply, result.map(View));
            }
            Call::Records(RecordsCall::Action(params)) => self.action(params, reply),
            Call::Records(RecordsCall::Cancel(r)) => self.action(
                ActionParams {
                    session_id: r.session_id,
                    action: ActionKind::Cancel,
                    input: None,
                    signal: None,
                },
                reply,
            ),
            Call::Declare(p) => {
                let source = p.source.unwrap_or(caller);
                let result = self.apply(p.declaration, source);
                self.ack(reply, result.map(View));
            }
            Call::Records(RecordsCall::SetGroup { group, .. }) => {
                if self.view.group != group {
                    if let Some(old) = self.view.group.take() {
                        self.mechanical_in("group.left", None, Some(old));
                    }
                    self.view.group = group.clone();
                    if let Some(new) = group {
                        self.mechanical_in("group.joined", None, Some(new));
                    }
                    self.touch();
                    self.publish();
                }
                self.ack(reply, Ok(View(self.view.clone())));
            }
            // The registry has checked the edge.
            Call::Records(RecordsCall::SetParent { parent, .. }) => {
                // Re-setting the same parent is a no-op: no event, no updated_at bump.
                if self.view.parent_id != parent {
                    self.view.parent_id = parent.clone();
                    match parent {
                        Some(p) => self
                            .mechanical("parent.set", Some(serde_json::json!({ "parent_id": p }))),
                        None => self.mechanical("parent.cleared", None),
                    }
                    self.touch();
                    self.publish();
                }
                self.ack(reply, Ok(View(self.view.clone())));
            }
            Call::Records(RecordsCall::Archive { reason, .. }) => {
                self.archive(reason);
                self.ack(reply, Ok(View(self.view.clone())));
            }
            Call::Records(RecordsCall::Restart { command, .. }) => {
                let result = self.restart(myself, command, None);
                self.ack(reply, result.map(View));
            }
            Call::Records(RecordsCall::SetRestartPolicy { policy, .. }) => {
                let result = self.set_restart_policy(policy);
                self.ack(reply, result.map(View));
            }
            Call::Wait(WaitCall::Events(p)) => {
                let page = self.audit.page(
                    p.since,
                    p.limit,
                    maxx_protocol::limits::EVENTS_PAGE_MAX_BYTES,
                );
                let _ = reply.send(Ok(SessionReply::Events(page)));
            }
            Call::Screen(ScreenCall::Read(params)) => {
                // A bug in the terminal emulator's readback must not take the session (and
                // its program) down with the actor: the read fails, the session goes on.
                let read =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.read(&params)));
                let _ = reply.send(match read {
                    Ok(answer) => answer.map(SessionReply::Read),
                    Err(_) => {
                        tracing::error!(session = %self.view.session_id, "a screen read panicked");
                        Err(ErrorBody::internal(
                            "reading the screen failed (a bug; the session runs on)",
                        ))
                    }
                });
            }
            Call::Screen(ScreenCall::SendKeys { keys, .. }) => {
                let flags = self.model.flags();
                let mode = maxx_protocol::keys::KeyMode {
                    app_cursor: flags.app_cursor,
                    kitty_flags: flags.kitty_flags,
                };
                let bytes = maxx_protocol::keys::encode(&keys, mode);
                self.write_input(bytes, "send keys to", reply);
            }
            Call::Screen(ScreenCall::Paste { text, .. }) => {
                let bytes = paste_bytes(&text, self.model.flags().bracketed_paste);
                self.write_input(bytes, "paste into", reply);
            }
            Call::Screen(ScreenCall::Resize { size, .. }) => {
                let result = self.resize(size);
                self.ack(reply, result.map(SessionReply::Resized));
            }
            other => {
                let _ = reply.send(Err(ErrorBody::internal(format!(
                    "{} is not served by a session",
                    other.method()
                ))));
            }
        }
    }

    /// `sessions.set-restart-policy`.
    fn set_restart_policy(
        &mut self,
        policy: Option<maxx_protocol::session::RestartPolicy>,
    ) -> Result<SessionView, ErrorBody> {
        if policy.is_some() && self.view.command.is_none() {
            return Err(ErrorBody::invalid(
                "a restart policy needs a session with a command",
            ));
        }
        self.view.restart_policy = policy;
        if self.view.restart_policy.is_none() && self.view.lifecycle == Lifecycle::Backoff {
            // Turning the policy off cancels a pending restart.
            self.restart_generation += 1;
            self.view.lifecycle = Lifecycle::Exited;
            self.view.next_restart_at = None;
            self.lifecycle_changed();
        } else {
            self.touch();
            self.publish();
        }
        Ok(self.view.clone())
    }
}
