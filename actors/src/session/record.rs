//! Recording: declarations and updates applied to the record, audit entries, bus
//! events, publishing the record, and acknowledging through the journal.

use super::{SessionState, WaitAnswer, WatchLine};
use crate::bus::BusMsg;
use crate::persistence::PersistMsg;
use crate::pty::Pty;
use crate::registry::RegistryMsg;
use crate::stats::Stats;
use maxx_protocol::audit::{AuditEntry, AuditKind};
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::request::{AnswerReply, Declaration};
use maxx_protocol::session::{Ask, SessionView};
use maxx_protocol::stream::StreamEvent;
use maxx_protocol::time::now_rfc3339;
use ractor::RpcReplyPort;
use serde_json::{Map, Value};
use std::sync::Arc;

/// How long an acknowledgement waits for the keeper to have a new surface's master.
const KEEPER_SENT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl SessionState {
    /// Answer a mutating request once everything it changed is in the journal, so an
    /// acknowledged mutation survives a crash of the daemon. If what it changed could not be
    /// written (disk full), a success becomes `persistence_failed`: never `ok` for a change
    /// that is only in memory.
    pub(super) fn ack<T: Send + 'static>(
        &mut self,
        reply: RpcReplyPort<Result<T, ErrorBody>>,
        value: Result<T, ErrorBody>,
    ) {
        let journaled = std::mem::take(&mut self.journaled);
        let keeper_sent = self.keeper_sent.take();
        let runtime = tokio::runtime::Handle::current();
        let send = Box::new(move |durable: Result<(), ErrorBody>| {
            let value = match (value, durable) {
                (Ok(_), Err(e)) if journaled => Err(e),
                (value, _) => value,
            };
            let mut pending = keeper_sent;
            // Sent long before the journal's write returned, nearly always.
            if let Some(sent) = pending.as_mut() {
                use tokio::sync::oneshot::error::TryRecvError;
                if !matches!(sent.try_recv(), Err(TryRecvError::Empty)) {
                    pending = None;
                }
            }
            match pending {
                Some(sent) => {
                    runtime.spawn(async move {
                        // Bounded: a keeper that stopped reading must not hold answers.
                        if tokio::time::timeout(KEEPER_SENT_WAIT, sent).await.is_err() {
                            tracing::warn!(
                                "the keeper has not taken a new session's master within 5 s; \
                                 answering anyway: that session may not survive a daemon crash"
                            );
                        }
                        let _ = reply.send(value);
                    });
                }
                _ => {
                    let _ = reply.send(value);
                }
            }
        });
        if let Err(ractor::MessagingErr::SendErr(PersistMsg::Ack(send))) =
            self.persist.cast(PersistMsg::Ack(send))
        {
            send(Ok(()));
        }
    }

    pub(super) fn touch(&mut self) {
        self.view.updated_at = now_rfc3339();
    }

    /// Send the record to the registry and settle any waits it satisfies.
    pub(super) fn publish(&mut self) {
        if self.pty.is_some() {
            self.view.last_seen_at = Some(self.view.updated_at.clone());
        }
        self.journaled = true;
        let view = Arc::new(self.view.clone());
        let _ = self.persist.cast(PersistMsg::Upsert(view.clone()));
        let _ = self.registry.cast(RegistryMsg::Updated(view));
        if self.waiters.is_empty() {
            return;
        }
        let waiters = std::mem::take(&mut self.waiters);
        for waiter in waiters {
            match self.check(&waiter.condition) {
                Some((outcome, event)) => {
                    Stats::add(&self.spawn.stats.waiters, -1);
                    let _ = waiter.reply.send(WaitAnswer {
                        outcome,
                        session: self.view.clone(),
                        event,
                        input_marks: self.model.flags().input_marks,
                    });
                }
                None => self.waiters.push(waiter),
            }
        }
    }

    /// Append an audit entry and deliver it to watchers.
    pub(super) fn record(
        &mut self,
        kind: AuditKind,
        name: Option<String>,
        message: Option<String>,
        payload: Option<Value>,
        source: String,
    ) -> AuditEntry {
        let entry = AuditEntry {
            seq: self.last_seq() + 1,
            kind,
            name,
            message,
            payload,
            source,
            created_at: now_rfc3339(),
            session_id: self.view.session_id.clone(),
            surface_id: self.view.surface_id.clone(),
            pid: self.pty.as_ref().and_then(Pty::foreground_pgrp),
        };
        if let Some(encoded) = self.audit.push(&entry, &self.spawn.stats) {
            self.journaled = true;
            let _ = self.persist.cast(PersistMsg::Audit {
                session_id: entry.session_id.clone(),
                seq: entry.seq,
                entry: encoded,
            });
        }
        self.broadcast(|_| WatchLine::Event(Box::new(entry.clone())));
        let _ = self.bus.cast(BusMsg::Publish(Box::new(StreamEvent::audited(
            &entry,
            self.view.group.clone(),
        ))));
        entry
    }

    /// Put a maxx-owned lifecycle event on the bus (no audit entry).
    pub(super) fn mechanical(&self, name: &str, payload: Option<Value>) {
        self.mechanical_in(name, payload, self.view.group.clone());
    }

    /// [`Self::mechanical`] with an explicit group (the affected one for joins/leaves).
    pub(super) fn mechanical_in(&self, name: &str, payload: Option<Value>, group: Option<String>) {
        let pid = self.pty.as_ref().and_then(Pty::foreground_pgrp);
        self.put_on_bus(name, payload, group, pid);
    }

    /// The `exited` event. Its `pid` (the terminal's foreground group) is null without
    /// asking the terminal: the child is the session leader, and the kernel takes the
    /// terminal from its session (`disassociate_ctty`) before the exit can be observed, so
    /// the answer would be "none" (an `ioctl` per exit saved, 1,000 at once in a group).
    pub(super) fn exited_event(&self, payload: Value) {
        self.put_on_bus("exited", Some(payload), self.view.group.clone(), None);
    }

    fn put_on_bus(
        &self,
        name: &str,
        payload: Option<Value>,
        group: Option<String>,
        pid: Option<i32>,
    ) {
        let _ = self.bus.cast(BusMsg::Publish(Box::new(StreamEvent {
            payload,
            group,
            pid,
            ..StreamEvent::mechanical(name, &self.view)
        })));
    }

    pub(super) fn update(
        &mut self,
        status: Option<String>,
        metadata: Option<Map<String, Value>>,
        source: String,
    ) -> Result<SessionView, ErrorBody> {
        if let Some(merge) = metadata {
            let mut merged = self.view.metadata.clone();
            for (k, v) in &merge {
                merged.insert(k.clone(), v.clone());
            }
            // The merge result must obey the same bounds as any map.
            maxx_protocol::request::validate_metadata_map(&merged)?;
            self.view.metadata = merged;
            for (k, v) in merge {
                self.record(AuditKind::Metadata, Some(k), None, Some(v), source.clone());
            }
        }
        if let Some(status) = status {
            self.view.status = Some(status);
        }
        self.touch();
        self.publish();
        Ok(self.view.clone())
    }

    /// Apply a declaration: validate it against the record, change the record, append the
    /// audit entry, publish. A rejected declaration changes nothing.
    pub(super) fn apply(
        &mut self,
        declaration: Declaration,
        source: String,
    ) -> Result<SessionView, ErrorBody> {
        let now = now_rfc3339();
        match declaration {
            Declaration::State { state, message } => {
                self.view.status = Some(state.clone());
                self.record(AuditKind::State, Some(state), message, None, source);
            }
            Declaration::Event {
                event,
                payload,
                message,
            } => {
                self.record(AuditKind::Event, Some(event), message, payload, source);
            }
            Declaration::SetMetadata { key, value } => {
                let mut merged = self.view.metadata.clone();
                merged.insert(key.clone(), value.clone());
                maxx_protocol::request::validate_metadata_map(&merged)?;
                self.view.metadata = merged;
                self.record(AuditKind::Metadata, Some(key), None, Some(value), source);
            }
            Declaration::RemoveMetadata { keys } => {
                for key in keys {
                    if self.view.metadata.shift_remove(&key).is_some() {
                        self.record(
                            AuditKind::Metadata,
                            Some(key),
                            Some("removed".into()),
                            None,
                            source.clone(),
                        );
                    }
                }
            }
            Declaration::ClearMetadata => {
                self.view.metadata.clear();
                self.record(
                    AuditKind::Metadata,
                    Some("*".into()),
                    Some("cleared".into()),
                    None,
                    source,
                );
            }
            Declaration::WorkflowState { state, message } => {
                self.view.workflow_state = Some(state);
                self.view.workflow_state_at = Some(now);
                self.view.workflow_state_source = Some(source.clone());
                self.record(
                    AuditKind::WorkflowState,
                    Some(state.as_str().into()),
                    message,
                    None,
                    source,
                );
            }
            Declaration::Summary { summary } => {
                self.view.summary = Some(summary.clone());
                self.view.summary_at = Some(now);
                self.view.summary_source = Some(source.clone());
                self.record(AuditKind::Summary, None, Some(summary), None, source);
            }
            Declaration::SetResult { result } => {
                if let Some(schema) = &self.view.result_schema {
                    let parsed: Value = serde_json::from_str(&result).map_err(|e| {
                        ErrorBody::invalid(format!(
                            "the session declares a result schema, and this result is not JSON: {e}"
                        ))
                    })?;
                    maxx_protocol::schema::check(schema, &parsed).map_err(|e| {
                        ErrorBody::invalid(format!(
                            "result does not satisfy the declared schema: {e}"
                        ))
                    })?;
                }
                self.view.result = Some(result.clone());
                self.view.result_at = Some(now);
                self.view.result_source = Some(source.clone());
                self.record(
                    AuditKind::Result,
                    Some("result.set".into()),
                    None,
                    Some(Value::String(result)),
                    source,
                );
            }
            Declaration::ClearResult => {
                self.view.result = None;
                self.view.result_at = None;
                self.view.result_source = None;
                self.record(
                    AuditKind::Result,
                    Some("result.cleared".into()),
                    None,
                    None,
                    source,
                );
            }
            Declaration::SetResultSchema { schema } => {
                self.view.result_schema = Some(schema.clone());
                self.record(
                    AuditKind::ResultSchema,
                    Some("result_schema.set".into()),
                    None,
                    Some(schema),
                    source,
                );
            }
            Declaration::ClearResultSchema => {
                self.view.result_schema = None;
                self.record(
                    AuditKind::ResultSchema,
                    Some("result_schema.cleared".into()),
                    None,
                    None,
                    source,
                );
            }
            Declaration::AgentType { agent_type } => {
                self.view.agent_type = Some(agent_type.clone());
                self.view.agent_type_at = Some(now);
                self.view.agent_type_source = Some(source.clone());
                self.record(AuditKind::AgentType, Some(agent_type), None, None, source);
            }
            Declaration::Ask {
                question,
                suggestions,
            } => {
                // A new ask replaces an unanswered one (the log keeps both).
                let payload = serde_json::json!({ "suggestions": suggestions });
                let entry = self.record(
                    AuditKind::Ask,
                    Some("asked".into()),
                    Some(question.clone()),
                    Some(payload),
                    source.clone(),
                );
                self.view.ask = Some(Ask {
                    id: entry.seq,
                    question,
                    suggestions,
                    source,
                    asked_at: now,
                });
            }
            Declaration::Answer { ask_id, reply } => {
                let Some(ask) = self.view.ask.clone() else {
                    return Err(ErrorBody::new(
                        ErrorCode::NotFound,
                        "this session has no open ask to answer",
                    )
                    .with_remedy("`maxx ls` marks sessions that ask with ?"));
                };
                if ask_id.is_some_and(|id| id != ask.id) {
                    return Err(ErrorBody::new(
                        ErrorCode::NotFound,
                        format!(
                            "ask {} is no longer open; the open one is {}",
                            ask_id.unwrap_or_default(),
                            ask.id
                        ),
                    )
                    .with_remedy("read the session's ask (sessions get) and answer that one"));
                }
                let (answer, choice) = match reply {
                    AnswerReply::Text(text) => (text, None),
                    AnswerReply::Choice(n) => match ask.suggestions.get(n as usize - 1) {
                        Some(text) => (text.clone(), Some(n)),
                        None => {
                            return Err(ErrorBody::invalid(format!(
                                "choice {n}: the ask has {} suggestion(s)",
                                ask.suggestions.len()
                            )))
                        }
                    },
                };
                let mut payload = serde_json::json!({ "ask_id": ask.id, "question": ask.question });
                if let Some(n) = choice {
                    payload["choice"] = n.into();
                }
                self.view.ask = None;
                self.record(
                    AuditKind::Ask,
                    Some("answered".into()),
                    Some(answer),
                    Some(payload),
                    source,
                );
            }
        }
        self.touch();
        self.publish();
        Ok(self.view.clone())
    }
}
