//! `RegistryActor`: the session table. It maps session and surface ids to their
//! `SessionActor`s, keeps creation order and the focused session, and holds a copy of
//! every record (published by the session actors) so `get` and `list` never have to
//! visit 1,000 actors.
//!
//! Retention in memory: every live record is kept; of the closed/archived records whose
//! actor retired (dormant), the newest `--retain-records` (default 500) are kept and any
//! older than 14 days by `max(updated_at, last_seen_at)` are dropped — the same cutoffs the
//! durable registry applies, so a daemon running for weeks does not grow with every session
//! it ever had. A dropped record leaves its group (group waits re-check), loses focus, is
//! announced on the bus (`dropped`) and is forgotten by the durable registry.
//!
//! Routing: the registry alone decides which actor serves a session, and publishes each
//! live one in [`Routes`], which connections read to send a session request without
//! asking the registry first. A miss (a session starting, dormant, failed or unknown) or an
//! actor that stopped since goes the long way, a `Resolve`, which wakes, waits or answers
//! as the table says.

use crate::bus::BusMsg;
use crate::persistence::PersistMsg;
use crate::retention::{self, last_activity};
use crate::session::{Dormant, SessionMsg, SessionStart, StartSession};
use crate::stats::Stats;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use maxx_protocol::request::ListParams;
use maxx_protocol::selector::{Selector, AMBIGUOUS_LISTED_MAX};
use maxx_protocol::session::{Lifecycle, Outcome, SessionView, WorkflowState};
use maxx_protocol::stream::{AllCondition, StreamEvent};
use maxx_protocol::time::now_rfc3339;
use ractor::{Actor, ActorProcessingErr, ActorRef, DerivedActorRef, RpcReplyPort};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

/// Session id → its live actor, as the registry last set it: written by the registry alone
/// (an actor registered, woken, retired or failed), read by every connection to route a
/// session request without a round trip to the registry. A route can be stale only in one
/// direction, an actor that has just stopped, which a caller sees as a send error and
/// answers by asking the registry ([`RegistryMsg::Resolve`]).
#[derive(Clone, Default)]
pub struct Routes(Arc<RwLock<HashMap<String, ActorRef<SessionMsg>>>>);

impl Routes {
    /// The live actor of session `id`, if the registry has published one.
    pub fn get(&self, id: &str) -> Option<ActorRef<SessionMsg>> {
        let map = self.0.read().unwrap_or_else(PoisonError::into_inner);
        map.get(id).cloned()
    }

    fn set(&self, id: &str, actor: Option<&ActorRef<SessionMsg>>) {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        match actor {
            Some(actor) => {
                map.insert(id.to_string(), actor.clone());
            }
            None => {
                map.remove(id);
            }
        }
    }
}

/// Messages the registry handles.
pub enum RegistryMsg {
    /// A session actor started.
    Register {
        /// Its first record (shared with the journal's copy where both are sent).
        view: Arc<SessionView>,
        /// Where to route requests for it.
        actor: ActorRef<SessionMsg>,
        /// Whether it takes focus.
        focus: bool,
    },
    /// A session's record changed.
    Updated(Arc<SessionView>),
    /// A closed or archived session's actor is stopping: keep its record and state until a
    /// request needs an actor again.
    Retire {
        /// The stopping actor (ignored unless it is still the session's).
        actor: ActorRef<SessionMsg>,
        /// Its session.
        session_id: String,
        /// Its state (the registry's copy of the record is already up to date: every
        /// change was published).
        dormant: Box<Dormant>,
    },
    /// What waking a session actor needs (sent once, after the tree is built).
    Wire(Box<Waker>),
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
    List(ListParams, RpcReplyPort<Vec<SessionView>>),
    /// Check a parent edge (exists, not self, no cycle) and reserve it.
    ValidateParent {
        /// The child (`not_found` if there is none).
        child: String,
        /// The proposed parent; `None` detaches (always valid).
        parent: Option<String>,
        /// Answer.
        reply: RpcReplyPort<Result<(), ErrorBody>>,
    },
    /// `stream.wait --group G --all C`.
    GroupWait {
        /// The group.
        group: String,
        /// The condition every member must meet.
        condition: AllCondition,
        /// Refuse an empty group (`not_found`), and do not match while it is empty.
        require_members: bool,
        /// Give up after this long.
        timeout: Duration,
        /// Answer.
        reply: RpcReplyPort<Result<GroupAnswer, ErrorBody>>,
    },
    /// A group wait's timer fired.
    GroupWaitExpired(u64),
    /// A waiting caller hung up: drop every group waiter whose caller has gone.
    PruneWaiters,
    /// The focused session, if any.
    Focused(RpcReplyPort<Option<String>>),
    /// Answered once every message sent before it is handled: a caller that saw a create
    /// acknowledged then reads the counters with that session's record counted
    /// (`daemon.stats`; the actor registers it by a cast before it answers).
    Settled(RpcReplyPort<()>),
    /// The actor and lifecycle of a session, to route a request to it (waking the actor
    /// of a dormant record).
    Resolve(String, RpcReplyPort<Option<Resolved>>),
    /// The lifecycle of a session, if it exists (wakes nothing).
    Lifecycle(String, RpcReplyPort<Option<Lifecycle>>),
    /// The one session a selector (an id prefix or `%title`) names: `not_found` for none,
    /// `ambiguous` (listing candidates) for several. Wakes nothing.
    Select(Selector, RpcReplyPort<Result<String, ErrorBody>>),
    /// The actor owning a surface.
    ResolveSurface(String, RpcReplyPort<Option<ActorRef<SessionMsg>>>),
    /// A new session's actor is being started (sent before its program is spawned): a
    /// `Resolve`, `Get` or `Lifecycle` naming it waits for its `Register` instead of
    /// answering "no such session", so its own program, which may ask about itself at once,
    /// never finds it missing.
    Creating(String),
    /// That start failed: what waited for the session answers "no such session".
    CreateFailed(String),
}

/// A request for a session whose actor is being started, answered when it registers.
enum Parked {
    Resolve(RpcReplyPort<Option<Resolved>>),
    Get(RpcReplyPort<Option<SessionView>>),
    Lifecycle(RpcReplyPort<Option<Lifecycle>>),
}

/// A routing answer.
pub struct Resolved {
    /// The session actor, or `None` if it failed.
    pub actor: Option<ActorRef<SessionMsg>>,
    /// Its lifecycle as last published.
    pub lifecycle: Lifecycle,
}

struct Entry {
    /// Behind a pointer: the table keeps a slot per record (and spare ones), so a record's
    /// size inline would be paid for every slot. Shared with the journal's copy of the same
    /// publication (one clone of the record per change, not two).
    view: Arc<SessionView>,
    /// The session's actor; `None` while dormant, or after it failed (until recovered).
    actor: Option<ActorRef<SessionMsg>>,
    /// A retired closed/archived session's state, from which an actor is woken.
    dormant: Option<Box<Dormant>>,
    /// While dormant: its place in [`RegistryState::dormant`] (its last activity).
    dormant_at: Option<SystemTime>,
    /// Its place in [`RegistryState::order`].
    seq: u64,
}

/// How the registry is configured.
pub struct RegistryArgs {
    /// Daemon-wide counters.
    pub stats: Arc<Stats>,
    /// Dormant closed/archived records kept (newest first).
    pub retain: usize,
    /// Where the registry publishes each session's live actor for the connections.
    pub routes: Routes,
}

/// How long waking a dormant session's actor may take (a detached start: no child).
const WAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the registry needs once the tree is built: who starts a dormant session's actor
/// (the session supervisor, which must exist before the registry can be its argument,
/// hence a message rather than an argument), and the actors retention tells.
pub struct Waker {
    /// Starts the woken session actors (the session supervisor, seen only as what it
    /// serves: the registry does not import it).
    pub starter: DerivedActorRef<StartSession>,
    /// The event bus.
    pub bus: ActorRef<BusMsg>,
    /// The durable registry.
    pub persist: ActorRef<PersistMsg>,
}

/// One member as a group wait reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Member {
    /// Session id.
    pub session_id: String,
    /// Its lifecycle.
    pub lifecycle: Lifecycle,
    /// Its declared workflow state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_state: Option<WorkflowState>,
    /// Its exit code, once exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Its killing signal, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_signal: Option<String>,
}

/// The answer to a group wait.
#[derive(Debug, Clone)]
pub struct GroupAnswer {
    /// matched or timeout.
    pub outcome: Outcome,
    /// The members when it was answered.
    pub members: Vec<Member>,
}

/// Counters that make a group condition O(1) to check, kept exact on every update.
#[derive(Debug, Default)]
struct GroupIndex {
    members: BTreeSet<String>,
    /// Members whose lifecycle is `running` or `backoff`.
    running: usize,
    /// Members per declared workflow state.
    declared: HashMap<WorkflowState, usize>,
}

impl GroupIndex {
    fn apply(&mut self, view: &SessionView, sign: i64) {
        if sign > 0 {
            self.members.insert(view.session_id.clone());
        } else {
            self.members.remove(&view.session_id);
        }
        self.count(view, sign);
    }

    /// The counts alone (a member that stays in the group changed).
    fn count(&mut self, view: &SessionView, sign: i64) {
        let bump = |n: &mut usize| *n = (*n as i64 + sign).max(0) as usize;
        // A member in backoff will run again: it has not exited.
        if matches!(view.lifecycle, Lifecycle::Running | Lifecycle::Backoff) {
            bump(&mut self.running);
        }
        if let Some(ws) = view.workflow_state {
            bump(self.declared.entry(ws).or_default());
        }
    }

    fn satisfied(&self, condition: &AllCondition) -> bool {
        let declared = |s: WorkflowState| self.declared.get(&s).copied().unwrap_or(0);
        match condition {
            AllCondition::Exited => self.running == 0,
            AllCondition::Idle => declared(WorkflowState::Running) == 0,
            AllCondition::Declared(s) => declared(*s) == self.members.len(),
        }
    }
}

/// Move `old` out of its group's index and `new` into its own. A member that stays in its
/// group only changes the counts (an exit of one of a thousand is not a set removal and
/// insertion).
fn index_groups(
    groups: &mut HashMap<String, GroupIndex>,
    old: Option<&SessionView>,
    new: Option<&SessionView>,
) {
    if let (Some(o), Some(n)) = (old, new) {
        if let (Some(g), true) = (&o.group, o.group == n.group) {
            if let Some(idx) = groups.get_mut(g) {
                idx.count(o, -1);
                idx.count(n, 1);
                return;
            }
        }
    }
    if let Some(old) = old {
        if let Some(g) = &old.group {
            if let Some(idx) = groups.get_mut(g) {
                idx.apply(old, -1);
                if idx.members.is_empty() {
                    groups.remove(g);
                }
            }
        }
    }
    if let Some(new) = new {
        if let Some(g) = &new.group {
            groups.entry(g.clone()).or_default().apply(new, 1);
        }
    }
}

struct GroupWaiter {
    id: u64,
    group: String,
    condition: AllCondition,
    /// Whether an empty group fails to match (`require_members`).
    require_members: bool,
    reply: RpcReplyPort<Result<GroupAnswer, ErrorBody>>,
}

/// Registry state.
pub struct RegistryState {
    stats: Arc<Stats>,
    sessions: HashMap<String, Entry>,
    /// Session ids by creation order (a number per record, never reused).
    order: BTreeMap<u64, String>,
    /// surface_id → session_id.
    surfaces: HashMap<String, String>,
    focused: Option<String>,
    groups: HashMap<String, GroupIndex>,
    group_waiters: Vec<GroupWaiter>,
    next_waiter: u64,
    waker: Option<Box<Waker>>,
    /// Dormant records by last activity, oldest first: what retention drops.
    dormant: BTreeSet<(SystemTime, String)>,
    /// How many of them are kept.
    retain: usize,
    /// New sessions whose actors are starting, with the requests waiting for them.
    creating: HashMap<String, Vec<Parked>>,
    /// Each entry's `actor`, published for the connections.
    routes: Routes,
}

impl RegistryState {
    /// An empty table that keeps `retain` dormant records, not wired to the rest of the
    /// daemon yet ([`RegistryMsg::Wire`]).
    fn new(stats: Arc<Stats>, retain: usize, routes: Routes) -> RegistryState {
        RegistryState {
            stats,
            sessions: HashMap::new(),
            order: BTreeMap::new(),
            surfaces: HashMap::new(),
            focused: None,
            groups: HashMap::new(),
            group_waiters: Vec::new(),
            next_waiter: 0,
            waker: None,
            dormant: BTreeSet::new(),
            retain,
            creating: HashMap::new(),
            routes,
        }
    }

    /// Answer a request that waited for a starting session, from the table as it is now.
    fn answer_parked(&self, id: &str, parked: Parked) {
        match parked {
            Parked::Resolve(reply) => {
                let _ = reply.send(self.sessions.get(id).map(|e| Resolved {
                    actor: e.actor.clone(),
                    lifecycle: e.view.lifecycle,
                }));
            }
            Parked::Get(reply) => {
                let _ = reply.send(self.view(id));
            }
            Parked::Lifecycle(reply) => {
                let _ = reply.send(self.sessions.get(id).map(|e| e.view.lifecycle));
            }
        }
    }

    /// Move a record's contribution from its old group to its new one.
    fn index(&mut self, old: Option<&SessionView>, new: Option<&SessionView>) {
        index_groups(&mut self.groups, old, new);
    }

    fn members(&self, group: &str) -> Vec<Member> {
        let Some(idx) = self.groups.get(group) else {
            return Vec::new();
        };
        idx.members
            .iter()
            .filter_map(|id| self.sessions.get(id))
            .map(|e| Member {
                session_id: e.view.session_id.clone(),
                lifecycle: e.view.lifecycle,
                workflow_state: e.view.workflow_state,
                exit_code: e.view.exit_code,
                exit_signal: e.view.exit_signal.clone(),
            })
            .collect()
    }

    /// Whether `group` meets `condition`. An empty (or unknown) group meets every
    /// condition ("every member" of no members holds) unless `require_members`.
    fn group_satisfied(
        &self,
        group: &str,
        condition: &AllCondition,
        require_members: bool,
    ) -> bool {
        match self.groups.get(group) {
            Some(idx) => idx.satisfied(condition),
            None => !require_members,
        }
    }

    /// Answer every group waiter on `group` whose condition now holds.
    fn settle_group(&mut self, group: &str) {
        if !self.group_waiters.iter().any(|w| w.group == group) {
            return;
        }
        let waiters = std::mem::take(&mut self.group_waiters);
        for w in waiters {
            if w.group == group && self.group_satisfied(group, &w.condition, w.require_members) {
                Stats::add(&self.stats.waiters, -1);
                let _ = w.reply.send(Ok(GroupAnswer {
                    outcome: Outcome::Matched,
                    members: self.members(group),
                }));
            } else {
                self.group_waiters.push(w);
            }
        }
    }

    /// Whether making `parent` the parent of `child` would close a cycle.
    fn would_cycle(&self, child: &str, parent: &str) -> bool {
        let mut cursor = Some(parent.to_string());
        let mut steps = 0;
        while let Some(id) = cursor {
            if id == child || steps > self.sessions.len() {
                return true;
            }
            steps += 1;
            cursor = self
                .sessions
                .get(&id)
                .and_then(|e| e.view.parent_id.clone());
        }
        false
    }

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

    /// The one session `selector` names, in creation order among candidates.
    fn select(&self, selector: &Selector) -> Result<String, ErrorBody> {
        let shown = selector.to_wire();
        let mut found = self.order.values().filter_map(|id| {
            let view: &SessionView = &self.sessions.get(id)?.view;
            selector.matches(id, view.title.as_deref()).then_some(view)
        });
        let Some(first) = found.next() else {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!("no session matches {shown:?}"),
            )
            .with_remedy("`maxx ls` shows each session's id prefix and title"));
        };
        let rest: Vec<&SessionView> = found.collect();
        if rest.is_empty() {
            return Ok(first.session_id.clone());
        }
        let count = rest.len() + 1;
        let listed: Vec<String> = std::iter::once(first)
            .chain(rest)
            .take(AMBIGUOUS_LISTED_MAX)
            .map(|v| {
                format!(
                    "{} ({}, {})",
                    v.session_id,
                    v.title
                        .as_deref()
                        .map_or("untitled".into(), |t| format!("{t:?}")),
                    v.lifecycle.as_str()
                )
            })
            .collect();
        let more = if count > AMBIGUOUS_LISTED_MAX {
            format!(" and {} more", count - AMBIGUOUS_LISTED_MAX)
        } else {
            String::new()
        };
        Err(ErrorBody::new(
            ErrorCode::Ambiguous,
            format!(
                "{shown:?} matches {count} sessions: {}{more}",
                listed.join(", ")
            ),
        )
        .with_remedy("give more of the id (or the whole id) to name one session"))
    }

    /// Start an actor for a dormant session, so a request can be routed to it.
    async fn wake(&mut self, id: &str) {
        let Some(waker) = self.waker.as_ref() else {
            return;
        };
        let Some(entry) = self.sessions.get_mut(id) else {
            return;
        };
        let Some(dormant) = entry.dormant.take() else {
            return;
        };
        if let Some(at) = entry.dormant_at.take() {
            self.dormant.remove(&(at, id.to_string()));
        }
        let start = SessionStart::Woken(dormant);
        match StartSession::ask(&waker.starter, id.to_string(), start, WAKE_TIMEOUT).await {
            Ok(actor) => {
                self.routes.set(id, Some(&actor));
                entry.actor = Some(actor);
            }
            // The state went with the failed start; the record stays readable.
            Err(e) => {
                tracing::error!(session_id = id, error = %e, "could not wake a session actor")
            }
        }
    }

    /// Drop the dormant records retention no longer keeps: past the count cap (oldest
    /// first) or older than [`retention::RETENTION_AGE`]. Live records are never dropped.
    fn enforce_retention(&mut self, now: SystemTime) {
        let mut dropped = Vec::new();
        while let Some((at, _)) = self.dormant.first() {
            let aged = retention::aged(*at, now);
            if self.dormant.len() <= self.retain && !aged {
                break;
            }
            let Some((_, id)) = self.dormant.pop_first() else {
                break;
            };
            if let Some(entry) = self.sessions.remove(&id) {
                self.order.remove(&entry.seq);
                dropped.push((entry.view, aged));
            }
        }
        if dropped.is_empty() {
            return;
        }
        let mut groups = BTreeSet::new();
        for (view, aged) in &dropped {
            self.surfaces.remove(&view.surface_id);
            if self.focused.as_deref() == Some(view.session_id.as_str()) {
                self.focused = None;
            }
            self.index(Some(view), None);
            groups.extend(view.group.clone());
            if let Some(waker) = &self.waker {
                let _ = waker
                    .bus
                    .cast(BusMsg::Publish(Box::new(dropped_event(view, *aged))));
            }
        }
        for g in groups {
            self.settle_group(&g);
        }
        let n = dropped.len() as i64;
        let ids = dropped
            .into_iter()
            .map(|(v, _)| v.session_id.clone())
            .collect();
        if let Some(waker) = &self.waker {
            let _ = waker.persist.cast(PersistMsg::Drop(ids));
        }
        Stats::add(&self.stats.records, -n);
        Stats::add(&self.stats.records_dropped, n);
        crate::memory::churn(&self.stats, n * crate::memory::RETIRE_CHURN);
    }

    fn view(&self, id: &str) -> Option<SessionView> {
        self.sessions.get(id).map(|e| {
            let mut v = (*e.view).clone();
            v.focused = self.focused.as_deref() == Some(id);
            v
        })
    }
}

/// The mechanical event announcing that retention dropped a record.
fn dropped_event(view: &SessionView, aged: bool) -> StreamEvent {
    StreamEvent {
        payload: Some(serde_json::json!({"reason": if aged { "age" } else { "count" }})),
        ..StreamEvent::mechanical("dropped", view)
    }
}

/// The actor.
pub struct RegistryActor;

impl Actor for RegistryActor {
    type Msg = RegistryMsg;
    type State = RegistryState;
    type Arguments = RegistryArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<RegistryMsg>,
        args: RegistryArgs,
    ) -> Result<RegistryState, ActorProcessingErr> {
        Ok(RegistryState::new(args.stats, args.retain, args.routes))
    }

    async fn handle(
        &self,
        myself: ActorRef<RegistryMsg>,
        msg: RegistryMsg,
        state: &mut RegistryState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RegistryMsg::Register { view, actor, focus } => {
                let id = view.session_id.clone();
                state.surfaces.insert(view.surface_id.clone(), id.clone());
                // A replacement actor (after a failure) re-registers an existing record.
                let old = state.sessions.get(&id).map(|e| (*e.view).clone());
                state.index(old.as_ref(), Some(&view));
                let group = view.group.clone();
                let (seq, fresh) = match state.sessions.get(&id) {
                    Some(e) => (e.seq, false),
                    None => (state.order.last_key_value().map_or(0, |(k, _)| k + 1), true),
                };
                state.routes.set(&id, Some(&actor));
                match state.sessions.insert(
                    id.clone(),
                    Entry {
                        view,
                        actor: Some(actor),
                        dormant: None,
                        dormant_at: None,
                        seq,
                    },
                ) {
                    None => {
                        debug_assert!(fresh);
                        state.order.insert(seq, id.clone());
                        Stats::add(&state.stats.records, 1);
                        // Age-based retention needs no timer: it runs as records come and go.
                        state.enforce_retention(SystemTime::now());
                    }
                    Some(old) => {
                        if let Some(at) = old.dormant_at {
                            state.dormant.remove(&(at, id.clone()));
                        }
                    }
                }
                for parked in state.creating.remove(&id).unwrap_or_default() {
                    state.answer_parked(&id, parked);
                }
                if focus {
                    state.focus(id);
                }
                if let Some(g) = group {
                    state.settle_group(&g);
                }
            }
            RegistryMsg::Updated(view) => {
                let Some(entry) = state.sessions.get_mut(&view.session_id) else {
                    return Ok(());
                };
                let old = std::mem::replace(&mut entry.view, view);
                let new = &*entry.view;
                if old.surface_id != new.surface_id {
                    state.surfaces.remove(&old.surface_id);
                    state
                        .surfaces
                        .insert(new.surface_id.clone(), new.session_id.clone());
                }
                index_groups(&mut state.groups, Some(&*old), Some(new));
                // Settled once each: its group before, and its new one if it moved.
                let joined = if new.group != old.group {
                    new.group.clone()
                } else {
                    None
                };
                for g in [old.group.clone(), joined].into_iter().flatten() {
                    state.settle_group(&g);
                }
            }
            RegistryMsg::ValidateParent {
                child,
                parent,
                reply,
            } => {
                // One message checks both ends: the child first, as a caller expects.
                let result = match &parent {
                    _ if !state.sessions.contains_key(&child) => Err(ErrorBody::no_session(&child)),
                    None => Ok(()),
                    Some(p) if *p == child => {
                        Err(ErrorBody::invalid("a session cannot be its own parent"))
                    }
                    Some(p) if !state.sessions.contains_key(p) => Err(ErrorBody::no_session(p)),
                    Some(p) if state.would_cycle(&child, p) => Err(ErrorBody::invalid(format!(
                        "making {p} the parent of {child} would form a cycle"
                    ))),
                    Some(_) => Ok(()),
                };
                if result.is_ok() {
                    match state.sessions.get_mut(&child) {
                        // Reserve the edge now so a concurrent request sees it.
                        Some(entry) => Arc::make_mut(&mut entry.view).parent_id = parent,
                        None => {
                            let _ = reply.send(Err(ErrorBody::no_session(&child)));
                            return Ok(());
                        }
                    }
                }
                let _ = reply.send(result);
            }
            RegistryMsg::GroupWait {
                group,
                condition,
                require_members,
                timeout,
                reply,
            } => {
                if require_members && !state.groups.contains_key(&group) {
                    let _ = reply.send(Err(ErrorBody::new(
                        ErrorCode::NotFound,
                        format!("group {group:?} has no members"),
                    )
                    .with_remedy(
                        "check the group's name (`maxx ls --group G`), or create its sessions \
                         before waiting on them",
                    )));
                    return Ok(());
                }
                if state.group_satisfied(&group, &condition, require_members) {
                    let _ = reply.send(Ok(GroupAnswer {
                        outcome: Outcome::Matched,
                        members: state.members(&group),
                    }));
                    return Ok(());
                }
                let before = state.group_waiters.len();
                state.group_waiters.retain(|w| !w.reply.is_closed());
                Stats::add(
                    &state.stats.waiters,
                    state.group_waiters.len() as i64 - before as i64 + 1,
                );
                state.next_waiter += 1;
                let id = state.next_waiter;
                state.group_waiters.push(GroupWaiter {
                    id,
                    group,
                    condition,
                    require_members,
                    reply,
                });
                myself.send_after(timeout, move || RegistryMsg::GroupWaitExpired(id));
            }
            RegistryMsg::Focused(reply) => {
                let _ = reply.send(state.focused.clone());
            }
            RegistryMsg::Settled(reply) => {
                let _ = reply.send(());
            }
            RegistryMsg::PruneWaiters => {
                let before = state.group_waiters.len();
                state.group_waiters.retain(|w| !w.reply.is_closed());
                Stats::add(
                    &state.stats.waiters,
                    state.group_waiters.len() as i64 - before as i64,
                );
            }
            RegistryMsg::GroupWaitExpired(id) => {
                if let Some(pos) = state.group_waiters.iter().position(|w| w.id == id) {
                    let w = state.group_waiters.swap_remove(pos);
                    Stats::add(&state.stats.waiters, -1);
                    let members = state.members(&w.group);
                    let _ = w.reply.send(Ok(GroupAnswer {
                        outcome: Outcome::Timeout,
                        members,
                    }));
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
                    state.routes.set(&session_id, None);
                    let old = entry.view.clone();
                    let view = Arc::make_mut(&mut entry.view);
                    if view.lifecycle != Lifecycle::Archived {
                        view.lifecycle = Lifecycle::Closed;
                    }
                    view.pid = None;
                    view.updated_at = now_rfc3339();
                    let new = entry.view.clone();
                    // Keep the group counters exact, and wake group waits this settles.
                    state.index(Some(&old), Some(&new));
                    if let Some(g) = new.group.clone() {
                        state.settle_group(&g);
                    }
                }
            }
            RegistryMsg::Get(id, reply) => match state.creating.get_mut(&id) {
                Some(parked) => parked.push(Parked::Get(reply)),
                None => {
                    let _ = reply.send(state.view(&id));
                }
            },
            RegistryMsg::List(p, reply) => {
                // A group filter starts from the group's members (a supervisor listing its
                // group pays for the group, not for every record the daemon keeps).
                let candidates: Vec<&String> = match &p.group {
                    Some(g) => {
                        let mut members: Vec<(u64, &String)> = state
                            .groups
                            .get(g)
                            .into_iter()
                            .flat_map(|idx| idx.members.iter())
                            .filter_map(|id| state.sessions.get(id).map(|e| (e.seq, id)))
                            .collect();
                        members.sort_unstable_by_key(|(seq, _)| *seq);
                        members.into_iter().map(|(_, id)| id).collect()
                    }
                    None => state.order.values().collect(),
                };
                let all = candidates
                    .into_iter()
                    .filter(|id| {
                        state.sessions.get(*id).is_some_and(|e| {
                            p.metadata_filter
                                .iter()
                                .all(|f| f.matches(&e.view.metadata))
                                && p.group
                                    .as_ref()
                                    .is_none_or(|g| e.view.group.as_ref() == Some(g))
                                && p.parent
                                    .as_ref()
                                    .is_none_or(|par| e.view.parent_id.as_ref() == Some(par))
                        })
                    })
                    .filter_map(|id| state.view(id))
                    .collect();
                let _ = reply.send(all);
            }
            RegistryMsg::Select(selector, reply) => {
                let _ = reply.send(state.select(&selector));
            }
            RegistryMsg::Resolve(id, reply) if state.creating.contains_key(&id) => {
                if let Some(parked) = state.creating.get_mut(&id) {
                    parked.push(Parked::Resolve(reply));
                }
            }
            RegistryMsg::Resolve(id, reply) => {
                state.wake(&id).await;
                let _ = reply.send(state.sessions.get(&id).map(|e| Resolved {
                    actor: e.actor.clone(),
                    lifecycle: e.view.lifecycle,
                }));
            }
            RegistryMsg::Retire {
                actor,
                session_id,
                dormant,
            } => {
                if let Some(entry) = state.sessions.get_mut(&session_id) {
                    if entry
                        .actor
                        .as_ref()
                        .is_some_and(|a| a.get_id() == actor.get_id())
                    {
                        entry.actor = None;
                        state.routes.set(&session_id, None);
                        entry.dormant = Some(dormant);
                        let at = last_activity(&entry.view);
                        entry.dormant_at = Some(at);
                        state.dormant.insert((at, session_id));
                        crate::memory::churn(&state.stats, crate::memory::RETIRE_CHURN);
                        state.enforce_retention(SystemTime::now());
                        crate::memory::idle(&state.stats);
                    }
                }
            }
            RegistryMsg::Wire(waker) => state.waker = Some(waker),
            RegistryMsg::Lifecycle(id, reply) if state.creating.contains_key(&id) => {
                if let Some(parked) = state.creating.get_mut(&id) {
                    parked.push(Parked::Lifecycle(reply));
                }
            }
            RegistryMsg::Lifecycle(id, reply) => {
                let _ = reply.send(state.sessions.get(&id).map(|e| e.view.lifecycle));
            }
            RegistryMsg::Creating(id) => {
                state.creating.entry(id).or_default();
            }
            RegistryMsg::CreateFailed(id) => {
                for parked in state.creating.remove(&id).unwrap_or_default() {
                    state.answer_parked(&id, parked);
                }
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

#[cfg(test)]
mod tests {
    //! The registry's bookkeeping without actors: group counters, the parent cycle check and
    //! the order retention drops dormant records in. Self-contained (its own fixtures), so it
    //! can move with the code it tests.

    use super::*;
    use serde_json::json;
    use std::sync::atomic::Ordering;

    fn view(id: &str, group: Option<&str>, lifecycle: &str) -> SessionView {
        serde_json::from_value(json!({
            "session_id": id, "surface_id": format!("surface-{id}"), "title": null,
            "command": null, "cwd": "/", "status": null, "lifecycle": lifecycle,
            "metadata": {}, "created_at": "2026-01-01T00:00:00.000Z",
            "updated_at": "2026-01-01T00:00:00.000Z", "pid": null, "location": "tab",
            "focused": false, "restart_count": 0, "cols": 80, "rows": 24, "group": group
        }))
        .unwrap()
    }

    fn declared(mut v: SessionView, state: WorkflowState) -> SessionView {
        v.workflow_state = Some(state);
        v
    }

    fn with_parent(mut v: SessionView, parent: &str) -> SessionView {
        v.parent_id = Some(parent.into());
        v
    }

    /// Add a record as `Register` does (no actor); `dormant_at` also files it as dormant,
    /// as `Retire` does.
    fn add(state: &mut RegistryState, v: SessionView, dormant_at: Option<SystemTime>) {
        let id = v.session_id.clone();
        state.surfaces.insert(v.surface_id.clone(), id.clone());
        state.index(None, Some(&v));
        let seq = state.order.last_key_value().map_or(0, |(k, _)| k + 1);
        state.order.insert(seq, id.clone());
        Stats::add(&state.stats.records, 1);
        if let Some(at) = dormant_at {
            state.dormant.insert((at, id.clone()));
        }
        state.sessions.insert(
            id,
            Entry {
                view: Arc::new(v),
                actor: None,
                dormant: None,
                dormant_at,
                seq,
            },
        );
    }

    fn state(retain: usize) -> RegistryState {
        RegistryState::new(Arc::new(Stats::default()), retain, Routes::default())
    }

    #[test]
    fn a_selector_names_one_session_or_lists_the_candidates_in_creation_order() {
        let mut s = state(10);
        let ids = [
            "AAAA1111-0000-4000-8000-000000000001",
            "AAAA2222-0000-4000-8000-000000000002",
            "BBBB1111-0000-4000-8000-000000000003",
        ];
        for (i, id) in ids.iter().enumerate() {
            let mut v = view(id, None, "running");
            v.title = Some(if i == 2 { "solo" } else { "twin" }.into());
            add(&mut s, v, None);
        }
        let select = |s: &RegistryState, text: &str| s.select(&Selector::parse(text).unwrap());
        assert_eq!(select(&s, "aaaa1").unwrap(), ids[0]);
        assert_eq!(select(&s, "%solo").unwrap(), ids[2]);
        assert_eq!(select(&s, "bbbb").unwrap(), ids[2]);
        for text in ["aaaa", "%twin"] {
            let e = select(&s, text).unwrap_err();
            assert_eq!(e.code, ErrorCode::Ambiguous, "{text}");
            let first = e.message.find(ids[0]).expect("first listed");
            let second = e.message.find(ids[1]).expect("second listed");
            assert!(first < second, "creation order: {}", e.message);
            assert!(e.message.contains("matches 2 sessions"), "{}", e.message);
        }
        for text in ["cccc", "%nobody", "%Twin"] {
            assert_eq!(
                select(&s, text).unwrap_err().code,
                ErrorCode::NotFound,
                "{text}"
            );
        }
        // Many candidates: the first ten are listed, the rest counted.
        let mut s = state(100);
        for i in 0..12 {
            add(
                &mut s,
                view(
                    &format!("CCCC{i:04}-0000-4000-8000-000000000000"),
                    None,
                    "closed",
                ),
                None,
            );
        }
        let e = select(&s, "cccc").unwrap_err();
        assert!(e.message.contains("matches 12 sessions"), "{}", e.message);
        assert!(e.message.ends_with("and 2 more"), "{}", e.message);
    }

    #[test]
    fn group_counters_follow_lifecycle_and_declared_state() {
        let mut idx = GroupIndex::default();
        let running = view("a", Some("g"), "running");
        let backoff = declared(view("b", Some("g"), "backoff"), WorkflowState::Running);
        let exited = declared(view("c", Some("g"), "exited"), WorkflowState::Complete);
        for v in [&running, &backoff, &exited] {
            idx.apply(v, 1);
        }
        assert_eq!(idx.members.len(), 3);
        // A member in backoff will run again: it counts as running.
        assert_eq!(idx.running, 2);
        assert!(!idx.satisfied(&AllCondition::Exited));
        assert!(!idx.satisfied(&AllCondition::Idle));
        assert!(!idx.satisfied(&AllCondition::Declared(WorkflowState::Complete)));

        idx.apply(&running, -1);
        idx.apply(&backoff, -1);
        assert_eq!(idx.running, 0);
        assert!(idx.satisfied(&AllCondition::Exited));
        assert!(idx.satisfied(&AllCondition::Idle));
        assert!(idx.satisfied(&AllCondition::Declared(WorkflowState::Complete)));
        assert!(!idx.satisfied(&AllCondition::Declared(WorkflowState::Failed)));

        // Removing more than was added never wraps a counter below zero.
        idx.apply(&running, -1);
        assert_eq!(idx.running, 0);
    }

    #[test]
    fn index_moves_a_member_between_groups_and_forgets_an_empty_group() {
        let mut s = state(10);
        let old = view("a", Some("g1"), "running");
        s.index(None, Some(&old));
        assert!(!s.group_satisfied("g1", &AllCondition::Exited, false));

        let mut new = old.clone();
        new.group = Some("g2".into());
        new.lifecycle = Lifecycle::Exited;
        s.index(Some(&old), Some(&new));
        assert!(!s.groups.contains_key("g1"));
        assert_eq!(s.groups["g2"].members.len(), 1);
        assert_eq!(s.groups["g2"].running, 0);
        // An empty or unknown group meets every condition, unless members are required.
        assert!(s.group_satisfied("g1", &AllCondition::Exited, false));
        assert!(!s.group_satisfied("g1", &AllCondition::Exited, true));
        let failed = AllCondition::Declared(WorkflowState::Failed);
        assert!(s.group_satisfied("nobody", &failed, false));
        assert!(s.group_satisfied("g2", &AllCondition::Exited, false));
        assert!(s.group_satisfied("g2", &AllCondition::Exited, true));

        s.index(Some(&new), None);
        assert!(s.groups.is_empty());
    }

    /// A member that stays in its group changes only the counts: running -> exited ->
    /// backoff (will run again) -> running, with a declared state set and cleared.
    #[test]
    fn index_counts_a_member_that_stays_in_its_group() {
        let mut s = state(10);
        let a = view("a", Some("g"), "running");
        let b = view("b", Some("g"), "exited");
        s.index(None, Some(&a));
        s.index(None, Some(&b));
        assert_eq!(s.groups["g"].running, 1);
        let mut steps = vec![a.clone()];
        for (lifecycle, ws) in [
            (Lifecycle::Exited, Some(WorkflowState::Failed)),
            (Lifecycle::Backoff, None),
            (Lifecycle::Running, Some(WorkflowState::Running)),
            (Lifecycle::Exited, None),
        ] {
            let mut next = steps.last().unwrap().clone();
            next.lifecycle = lifecycle;
            next.workflow_state = ws;
            s.index(steps.last(), Some(&next));
            let idx = &s.groups["g"];
            assert_eq!(idx.members.len(), 2);
            let running = usize::from(matches!(lifecycle, Lifecycle::Running | Lifecycle::Backoff));
            assert_eq!(idx.running, running, "{lifecycle:?}");
            assert_eq!(
                idx.declared.values().sum::<usize>(),
                usize::from(ws.is_some())
            );
            steps.push(next);
        }
        assert!(s.group_satisfied("g", &AllCondition::Exited, true));
    }

    #[test]
    fn parent_edges_that_would_close_a_cycle_are_found() {
        let mut s = state(10);
        // root <- mid <- leaf
        add(&mut s, view("root", None, "running"), None);
        add(
            &mut s,
            with_parent(view("mid", None, "running"), "root"),
            None,
        );
        add(
            &mut s,
            with_parent(view("leaf", None, "running"), "mid"),
            None,
        );
        add(&mut s, view("other", None, "running"), None);

        assert!(
            s.would_cycle("root", "root"),
            "a session is not its own parent"
        );
        assert!(
            s.would_cycle("root", "leaf"),
            "an ancestor under its descendant"
        );
        assert!(s.would_cycle("mid", "leaf"));
        assert!(
            !s.would_cycle("leaf", "root"),
            "re-parenting down the chain is fine"
        );
        assert!(!s.would_cycle("other", "leaf"));
        assert!(!s.would_cycle("root", "other"));
        // A parent that is not a record ends the walk.
        assert!(!s.would_cycle("root", "gone"));

        // A cycle already in the table (never made by the registry) still ends the walk.
        add(&mut s, with_parent(view("x", None, "running"), "y"), None);
        add(&mut s, with_parent(view("y", None, "running"), "x"), None);
        assert!(s.would_cycle("other", "x"));
    }

    #[test]
    fn retention_drops_the_oldest_dormant_records_first_and_never_a_live_one() {
        let now = SystemTime::now();
        let at = |mins: u64| now - Duration::from_secs(60 * mins);
        let mut s = state(2);
        // A live record older than every dormant one.
        add(&mut s, view("live", Some("g"), "running"), None);
        // Filed out of order: retention goes by last activity, not by creation.
        add(&mut s, view("d3", Some("g"), "closed"), Some(at(3)));
        add(&mut s, view("d1", Some("g"), "closed"), Some(at(5)));
        add(&mut s, view("d4", Some("g"), "closed"), Some(at(1)));
        add(&mut s, view("d2", Some("g"), "closed"), Some(at(4)));
        s.focused = Some("d1".into());

        s.enforce_retention(now);

        let mut kept: Vec<&str> = s.sessions.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["d3", "d4", "live"]);
        assert_eq!(
            s.order.values().map(String::as_str).collect::<Vec<_>>(),
            ["live", "d3", "d4"],
            "creation order of what is kept"
        );
        assert_eq!(
            s.dormant
                .iter()
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>(),
            ["d3", "d4"],
            "oldest first"
        );
        assert!(!s.surfaces.contains_key("surface-d1"));
        assert_eq!(s.focused, None, "a dropped record loses the focus");
        assert_eq!(s.groups["g"].members.len(), 3);
        assert_eq!(s.stats.records.load(Ordering::Relaxed), 3);
        assert_eq!(s.stats.records_dropped.load(Ordering::Relaxed), 2);

        // Within the cap nothing more goes.
        s.enforce_retention(now);
        assert_eq!(s.sessions.len(), 3);
    }

    #[test]
    fn retention_drops_an_aged_dormant_record_under_the_cap() {
        let now = SystemTime::now();
        let mut s = state(10);
        let old = now - retention::RETENTION_AGE - Duration::from_secs(1);
        add(&mut s, view("aged", None, "closed"), Some(old));
        add(&mut s, view("fresh", None, "closed"), Some(now));
        add(&mut s, view("live", None, "running"), None);
        s.enforce_retention(now);
        let mut kept: Vec<&str> = s.sessions.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(kept, ["fresh", "live"]);
        assert_eq!(s.stats.records_dropped.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_starting_session_is_waited_for_not_reported_missing() {
        let routes = Routes::default();
        let (registry, _) = Actor::spawn(
            None,
            RegistryActor,
            RegistryArgs {
                stats: Arc::new(Stats::default()),
                retain: 10,
                routes: routes.clone(),
            },
        )
        .await
        .unwrap();
        let ask_resolve = |id: &str| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            registry
                .cast(RegistryMsg::Resolve(id.into(), tx.into()))
                .unwrap();
            rx
        };
        let ask_get = |id: &str| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            registry
                .cast(RegistryMsg::Get(id.into(), tx.into()))
                .unwrap();
            rx
        };
        // Anything answered after a request was sent means that request was handled.
        let handled = || async {
            ractor::call!(registry, RegistryMsg::Focused).unwrap();
        };

        registry.cast(RegistryMsg::Creating("new".into())).unwrap();
        handled().await;
        assert!(routes.get("new").is_none(), "no route before it registers");
        let mut resolve = ask_resolve("new");
        let mut get = ask_get("new");
        // A session nobody is creating is missing at once.
        let unknown = ask_resolve("other");
        handled().await;
        assert!(unknown.await.unwrap().is_none());
        assert!(resolve.try_recv().is_err(), "held until it registers");
        assert!(get.try_recv().is_err(), "held until it registers");

        let actor: ActorRef<SessionMsg> = crate::test_actors::sink().await;
        registry
            .cast(RegistryMsg::Register {
                view: Arc::new(view("new", None, "running")),
                actor: actor.clone(),
                focus: false,
            })
            .unwrap();
        let resolved = resolve.await.unwrap().expect("found once registered");
        assert_eq!(resolved.actor.map(|a| a.get_id()), Some(actor.get_id()));
        assert_eq!(get.await.unwrap().unwrap().session_id, "new");
        // Registered: answered at once from now on, and routed without asking.
        assert!(ask_resolve("new").await.unwrap().is_some());
        assert_eq!(routes.get("new").map(|a| a.get_id()), Some(actor.get_id()));
        // A failed actor is no route: requests go the long way and hear `already_ended`.
        registry
            .cast(RegistryMsg::Failed {
                session_id: "new".into(),
                reason: "test".into(),
            })
            .unwrap();
        handled().await;
        assert!(routes.get("new").is_none());

        // A start that fails: what waited answers "no such session".
        registry
            .cast(RegistryMsg::Creating("doomed".into()))
            .unwrap();
        let mut waiting = ask_resolve("doomed");
        handled().await;
        assert!(waiting.try_recv().is_err());
        registry
            .cast(RegistryMsg::CreateFailed("doomed".into()))
            .unwrap();
        assert!(waiting.await.unwrap().is_none());
        assert!(ask_resolve("doomed").await.unwrap().is_none());
        actor.stop(None);
        registry.stop(None);
    }
}
