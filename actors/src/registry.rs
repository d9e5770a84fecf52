//! `RegistryActor`: the session table. It maps session and surface ids to their
//! `SessionActor`s, keeps creation order and the focused session, and holds a copy of
//! every record (published by the session actors) so `get` and `list` never have to
//! visit 1,000 actors.

use crate::session::SessionMsg;
use maxx_protocol::request::MetadataFilter;
use maxx_protocol::session::{Lifecycle, SessionView};
use maxx_protocol::time::now_rfc3339;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::collections::HashMap;

/// Messages the registry handles.
pub enum RegistryMsg {
    /// A session actor started.
    Register {
        /// Its first record.
        view: Box<SessionView>,
        /// Where to route requests for it.
        actor: ActorRef<SessionMsg>,
        /// Whether it takes focus.
        focus: bool,
    },
    /// A session's record changed.
    Updated(Box<SessionView>),
    /// Make a session the focused one.
    Focus(String),
    /// A session actor failed; keep its record, detach it.
    Failed {
        /// Which session.
        session_id: String,
        /// Why, for the log.
        reason: String,
    },
    /// One record.
    Get(String, RpcReplyPort<Option<SessionView>>),
    /// Every record matching all filters, in creation order.
    List(Vec<MetadataFilter>, RpcReplyPort<Vec<SessionView>>),
    /// The actor and lifecycle of a session, to route a request to it.
    Resolve(String, RpcReplyPort<Option<Resolved>>),
    /// The actor owning a surface.
    ResolveSurface(String, RpcReplyPort<Option<ActorRef<SessionMsg>>>),
}

/// A routing answer.
pub struct Resolved {
    /// The session actor, or `None` if it failed.
    pub actor: Option<ActorRef<SessionMsg>>,
    /// Its lifecycle as last published.
    pub lifecycle: Lifecycle,
}

struct Entry {
    view: SessionView,
    actor: Option<ActorRef<SessionMsg>>,
}

/// Registry state.
#[derive(Default)]
pub struct RegistryState {
    sessions: HashMap<String, Entry>,
    /// Session ids in creation order.
    order: Vec<String>,
    /// surface_id → session_id.
    surfaces: HashMap<String, String>,
    focused: Option<String>,
}

impl RegistryState {
    /// Move focus to `id`, telling the previously focused session it lost it.
    fn focus(&mut self, id: String) {
        if let Some(prev) = self.focused.take() {
            if prev != id {
                if let Some(actor) = self.sessions.get(&prev).and_then(|e| e.actor.as_ref()) {
                    let _ = actor.cast(SessionMsg::Unfocused);
                }
            }
        }
        self.focused = Some(id);
    }

    fn view(&self, id: &str) -> Option<SessionView> {
        self.sessions.get(id).map(|e| {
            let mut v = e.view.clone();
            v.focused = self.focused.as_deref() == Some(id);
            v
        })
    }
}

/// The actor.
pub struct RegistryActor;

impl Actor for RegistryActor {
    type Msg = RegistryMsg;
    type State = RegistryState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<RegistryMsg>,
        _args: (),
    ) -> Result<RegistryState, ActorProcessingErr> {
        Ok(RegistryState::default())
    }

    async fn handle(
        &self,
        _myself: ActorRef<RegistryMsg>,
        msg: RegistryMsg,
        state: &mut RegistryState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RegistryMsg::Register { view, actor, focus } => {
                let id = view.session_id.clone();
                state.surfaces.insert(view.surface_id.clone(), id.clone());
                if state
                    .sessions
                    .insert(
                        id.clone(),
                        Entry {
                            view: *view,
                            actor: Some(actor),
                        },
                    )
                    .is_none()
                {
                    state.order.push(id.clone());
                }
                if focus {
                    state.focus(id);
                }
            }
            RegistryMsg::Updated(view) => {
                if let Some(entry) = state.sessions.get_mut(&view.session_id) {
                    if entry.view.surface_id != view.surface_id {
                        state.surfaces.remove(&entry.view.surface_id);
                        state
                            .surfaces
                            .insert(view.surface_id.clone(), view.session_id.clone());
                    }
                    entry.view = *view;
                }
            }
            RegistryMsg::Focus(id) => {
                if state.sessions.contains_key(&id) {
                    state.focus(id);
                }
            }
            RegistryMsg::Failed { session_id, reason } => {
                if let Some(entry) = state.sessions.get_mut(&session_id) {
                    tracing::error!(
                        session_id,
                        reason,
                        "session actor failed; record kept, surface closed"
                    );
                    entry.actor = None;
                    entry.view.lifecycle = Lifecycle::Closed;
                    entry.view.pid = None;
                    entry.view.updated_at = now_rfc3339();
                }
            }
            RegistryMsg::Get(id, reply) => {
                let _ = reply.send(state.view(&id));
            }
            RegistryMsg::List(filters, reply) => {
                let all = state
                    .order
                    .iter()
                    .filter(|id| {
                        state
                            .sessions
                            .get(*id)
                            .is_some_and(|e| filters.iter().all(|f| f.matches(&e.view.metadata)))
                    })
                    .filter_map(|id| state.view(id))
                    .collect();
                let _ = reply.send(all);
            }
            RegistryMsg::Resolve(id, reply) => {
                let _ = reply.send(state.sessions.get(&id).map(|e| Resolved {
                    actor: e.actor.clone(),
                    lifecycle: e.view.lifecycle,
                }));
            }
            RegistryMsg::ResolveSurface(surface, reply) => {
                let actor = state
                    .surfaces
                    .get(&surface)
                    .and_then(|id| state.sessions.get(id))
                    .and_then(|e| e.actor.clone());
                let _ = reply.send(actor);
            }
        }
        Ok(())
    }
}
