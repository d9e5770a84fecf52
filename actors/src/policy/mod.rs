//! `PolicyActor`: the typed capability policy. Every request resolves to a caller source
//! (wire field `caller`, CLI `--as`, default [`LOCAL_CLI`]) and the capabilities its method
//! needs; the policy answers allow, deny or confirm before any side effect runs.
//!
//! # Sources
//! A source has a kind (`local`, `external`, `webhook`, `token`), an `allow` list, a
//! `confirm` list and a `confirm_scope` (`always` or `once_per_source`). The built-ins
//! ([`builtin_sources`]) are always present and their ids are reserved:
//!
//! | id | kind | allow |
//! |---|---|---|
//! | `local-cli` | local | every capability except `output:read` and `automation:trigger` |
//! | `readonly-external` | external | `tabs:list`, `groups:list`, `profiles:list` |
//! | `declare-only` | token | `tabs:list`, `groups:list`, `state:set`, `metadata:set` |
//!
//! Each built-in is a subset of `local-cli`, so claiming one with `--as` only reduces a
//! caller's privileges. The user's policy file ([`policy_path`]) adds sources beside them.
//!
//! # Rules, in order, for one (source, capability)
//! 1. An unknown source is denied.
//! 2. A capability in [`UNAVAILABLE`] (no method uses it yet) is denied, as the seed says.
//! 3. In the source's `allow` list: allow. In its `confirm` list: confirm.
//! 4. `output:read` unlisted: deny. It needs an explicit opt-in in the policy file, for
//!    every source, `local-cli` included (see [`OUTPUT_READ_OPT_IN`]).
//! 5. An unlisted mutation ([`Capability::is_mutation`]): confirm for a `local` source, deny
//!    for `external`, `webhook` and `token` sources.
//! 6. An unlisted read: deny. A source reads only what it lists.
//!
//! A request needing several capabilities is denied if any is denied, else asks for
//! confirmation if any needs it, else is allowed; the decision names the capability that
//! decided. A confirmation is satisfied by `confirm: true` on the same request, or, for a
//! `once_per_source` source, by an earlier confirmed request for that capability during this
//! daemon's life (the memory lives in the [`PolicyGate`], never on disk).
//!
//! # Who decides
//! Every request is decided in its connection's task through the [`PolicyGate`]: the policy
//! in force and the once-per-source approvals behind one lock, held for the evaluation only
//! (no I/O, no await). The actor owns the file: it loads it at start and on `daemon.reload`
//! or SIGHUP and swaps what the gate holds; `policy.check` and `policy.sources` go through
//! it. A decision thus costs no hand-over to another task, and a reload is seen by the next
//! request after it.
//!
//! Decisions depend only on the caller, the capabilities and the target, never on terminal
//! output, process names, paths or idle time. Every decision is logged under the
//! `control_policy` tracing target with source, capability, target, method and reason,
//! never the request params.

use maxx_protocol::capability::Capability;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The trusted first-party local source: a request naming no `caller` is attributed to it.
pub const LOCAL_CLI: &str = "local-cli";
/// Built-in read-only external source: `tabs:list`, `groups:list`, `profiles:list`.
pub const READONLY_EXTERNAL: &str = "readonly-external";
/// Built-in token source for an agent that only declares facts about sessions: reads plus
/// `state:set` and `metadata:set`; it cannot spawn, type, close or read output.
pub const DECLARE_ONLY: &str = "declare-only";

/// Largest policy file read; checked before opening, after opening and while reading.
pub const POLICY_MAX_BYTES: u64 = 1024 * 1024;
/// The policy file version this daemon reads.
pub const POLICY_VERSION: u64 = 1;
/// Longest source id a policy file may declare (ids are typed on command lines and logged).
pub const SOURCE_ID_MAX_CHARS: usize = 64;
/// At most this many rejection reasons are kept, so a huge broken file cannot flood the log.
pub const MAX_REASONS: usize = 50;

/// Capabilities in the model that no method uses yet (`groups:list`, `automation:trigger`):
/// denied for every source, as the seed says, even where a source lists them. Remove one
/// from here when a method starts using it.
pub const UNAVAILABLE: &[Capability] = &[Capability::GroupsList, Capability::AutomationTrigger];

/// An example source granting `output:read`, quoted in remedies.
///
/// Built-in ids are reserved, so `local-cli` itself never reads output. The user declares a
/// configured source of kind `local` that allows `output:read` (plus whatever else it
/// should hold; an unlisted mutation by a local source still asks for confirmation) and
/// names it with `--as`, e.g. `maxx sessions snapshot <id> --as local-reader`. The grant is
/// thus explicit in the file, visible in `maxx policy sources`, and opt-in per invocation.
pub const OUTPUT_READ_OPT_IN: &str =
    r#"{"id":"local-reader","kind":"local","allow":["output:read","tabs:list"]}"#;

/// The one policy-file source line that lets a person attach (`maxx attach --as
/// local-attach`): attaching shows the screen, so it needs `output:read` beside
/// `surface:attach`, which no built-in source holds. Quoted by the refusal's remedy.
pub const ATTACH_OPT_IN: &str =
    r#"{"id":"local-attach","kind":"local","allow":["surface:attach","output:read","tabs:list"]}"#;

/// The tracing target every decision is logged under (the seed's `ControlPolicy` category).
const LOG_TARGET: &str = "control_policy";

mod config;
mod rules;
#[cfg(test)]
mod tests;

pub use config::*;
pub use rules::*;

/// Messages the policy actor handles.
pub enum PolicyMsg {
    /// `policy.check`: what a request would get; nothing is recorded.
    Check {
        /// The source to evaluate; `None` = `local-cli`.
        caller: Option<String>,
        /// The capability to evaluate.
        capability: Capability,
        /// The target, if any.
        target: Option<String>,
        /// Answer.
        reply: RpcReplyPort<CheckResult>,
    },
    /// `policy.sources`: the active sources and the fate of the policy file.
    Sources(RpcReplyPort<SourcesReport>),
    /// `daemon.reload` / SIGHUP: read the policy file again, with the rules of a start. A
    /// refused file keeps the policy in force (at start there is none to keep, so only the
    /// built-ins are).
    Reload(RpcReplyPort<ReloadReport>),
}

/// What a reload did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadReport {
    /// The file as it reads now: loaded, missing, rejected (with reasons).
    pub config: LoadReport,
    /// Whether the policy in force changed to what the file says (false: the file was
    /// refused and the previous policy stays).
    pub applied: bool,
    /// Configured sources the reload added, removed or changed (by id).
    pub added: Vec<String>,
    /// See `added`.
    pub removed: Vec<String>,
    /// See `added`.
    pub changed: Vec<String>,
}

/// The policy in force and the `once_per_source` approvals given under it, shared by the
/// policy actor (which alone replaces the policy, on reload) and every connection (which
/// decides its own requests with [`PolicyGate::evaluate`]). Cloning shares it.
#[derive(Clone)]
pub struct PolicyGate(Arc<Mutex<Gate>>);

/// What the gate's lock guards.
struct Gate {
    /// The active policy.
    policy: Policy,
    /// `once_per_source` approvals; in memory only, so they end with the daemon.
    approved: Approvals,
}

impl Default for PolicyGate {
    /// The built-in sources only, nothing approved.
    fn default() -> Self {
        PolicyGate(Arc::new(Mutex::new(Gate {
            policy: Policy::builtin(),
            approved: Approvals::new(),
        })))
    }
}

impl PolicyGate {
    /// Decide a request before it runs: `caller` (`None` = `local-cli`) asks for every
    /// capability in `capabilities` on `target` through `method`. A confirmed, allowed
    /// request records the `once_per_source` approvals it earns. Logged (never the params).
    pub fn evaluate(
        &self,
        caller: Option<&str>,
        capabilities: &[Capability],
        target: Option<&str>,
        method: &'static str,
        confirm: bool,
    ) -> Decision {
        let decision = {
            let mut gate = self.lock();
            let decision = gate.policy.evaluate(
                caller,
                capabilities,
                target,
                method,
                confirm,
                &gate.approved,
            );
            if confirm && decision.is_allow() {
                let earned = gate.policy.once_approvals(caller, capabilities);
                gate.approved.extend(earned);
            }
            decision
        };
        // An allow is logged at debug, off by default: its line is not built on every request.
        if decision.is_allow() && !tracing::enabled!(target: LOG_TARGET, tracing::Level::DEBUG) {
            return decision;
        }
        let (capability, reason) = match &decision {
            Decision::Allow { reason } => (joined(capabilities), reason.as_str()),
            Decision::Deny {
                capability, reason, ..
            } => (
                capability.map_or("-".to_string(), |c| c.to_string()),
                reason.as_str(),
            ),
            Decision::Confirm {
                capability, reason, ..
            } => (capability.to_string(), reason.as_str()),
        };
        log_decision(
            caller.unwrap_or(LOCAL_CLI),
            &capability,
            target,
            method,
            decision.kind(),
            reason,
        );
        decision
    }

    /// The gate's state. A panic while it was held cannot leave it half-changed (the
    /// policy is replaced whole, approvals are inserted whole), so a poisoned lock is used.
    fn lock(&self) -> MutexGuard<'_, Gate> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The policy actor's arguments.
pub struct PolicyArgs {
    /// The policy file ([`policy_path`]), loaded at start and again on `daemon.reload` or
    /// SIGHUP.
    pub path: Option<PathBuf>,
    /// The gate the connections decide through; the actor loads the file into it.
    pub gate: PolicyGate,
}

/// The policy actor: owns the policy file and what the [`PolicyGate`] holds.
pub struct PolicyActor;

/// Policy actor state.
pub struct PolicyState {
    /// The policy file, read again on reload.
    path: Option<PathBuf>,
    /// The policy in force and the approvals, shared with the connections.
    gate: PolicyGate,
    /// What became of the policy file, for `policy.sources`.
    report: LoadReport,
}

impl Actor for PolicyActor {
    type Msg = PolicyMsg;
    type State = PolicyState;
    type Arguments = PolicyArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<PolicyMsg>,
        PolicyArgs { path, gate }: PolicyArgs,
    ) -> Result<PolicyState, ActorProcessingErr> {
        let (policy, report) = load_policy(path.as_deref());
        let shown_path = report.path.as_deref().unwrap_or("-");
        match report.status {
            ConfigStatus::Rejected => tracing::warn!(
                target: LOG_TARGET,
                path = shown_path,
                reasons = %report.reasons.join("; "),
                "policy file rejected; enforcing the built-in sources only"
            ),
            ConfigStatus::Loaded => tracing::info!(
                target: LOG_TARGET,
                path = shown_path,
                sources = policy.sources().len(),
                "policy file loaded"
            ),
            ConfigStatus::Missing | ConfigStatus::NoPath => tracing::info!(
                target: LOG_TARGET,
                path = shown_path,
                "no policy file; enforcing the built-in sources only"
            ),
        }
        {
            let mut held = gate.lock();
            held.policy = policy;
            held.approved.clear();
        }
        Ok(PolicyState { path, gate, report })
    }

    async fn handle(
        &self,
        _myself: ActorRef<PolicyMsg>,
        msg: PolicyMsg,
        state: &mut PolicyState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PolicyMsg::Check {
                caller,
                capability,
                target,
                reply,
            } => {
                let result = {
                    let gate = state.gate.lock();
                    gate.policy.check(
                        caller.as_deref(),
                        capability,
                        target.as_deref(),
                        &gate.approved,
                    )
                };
                log_decision(
                    &result.source,
                    capability.as_str(),
                    target.as_deref(),
                    "policy.check",
                    result.decision,
                    &result.reason,
                );
                let _ = reply.send(result);
            }
            PolicyMsg::Reload(reply) => {
                let _ = reply.send(state.reload());
            }
            PolicyMsg::Sources(reply) => {
                let (sources, mut approved_once) = {
                    let gate = state.gate.lock();
                    let approved: Vec<Approval> = gate
                        .approved
                        .iter()
                        .map(|(source, capability)| Approval {
                            source: source.clone(),
                            capability: *capability,
                        })
                        .collect();
                    (gate.policy.sources().to_vec(), approved)
                };
                approved_once.sort();
                let _ = reply.send(SourcesReport {
                    config: state.report.clone(),
                    sources,
                    approved_once,
                });
            }
        }
        Ok(())
    }
}

impl PolicyState {
    fn reload(&mut self) -> ReloadReport {
        let (policy, report) = load_policy(self.path.as_deref());
        let shown_path = report.path.clone().unwrap_or_else(|| "-".into());
        if report.status == ConfigStatus::Rejected {
            tracing::warn!(
                target: LOG_TARGET,
                path = shown_path,
                reasons = %report.reasons.join("; "),
                "policy reload refused the file; the policy in force is unchanged"
            );
            return ReloadReport {
                config: report,
                applied: false,
                added: Vec::new(),
                removed: Vec::new(),
                changed: Vec::new(),
            };
        }
        let configured = |p: &Policy| -> Vec<Source> {
            p.sources().iter().filter(|s| !s.builtin).cloned().collect()
        };
        let mut gate = self.gate.lock();
        let (old, new) = (configured(&gate.policy), configured(&policy));
        let find = |list: &[Source], id: &str| list.iter().find(|s| s.id == id).cloned();
        let added: Vec<String> = new
            .iter()
            .filter(|s| find(&old, &s.id).is_none())
            .map(|s| s.id.clone())
            .collect();
        let removed: Vec<String> = old
            .iter()
            .filter(|s| find(&new, &s.id).is_none())
            .map(|s| s.id.clone())
            .collect();
        let changed: Vec<String> = new
            .iter()
            .filter(|s| find(&old, &s.id).is_some_and(|o| o != **s))
            .map(|s| s.id.clone())
            .collect();
        // A once-per-source approval was given under the old rules of its source.
        gate.approved
            .retain(|(source, _)| !removed.contains(source) && !changed.contains(source));
        gate.policy = policy;
        drop(gate);
        tracing::info!(
            target: LOG_TARGET,
            path = shown_path,
            added = added.len(),
            removed = removed.len(),
            changed = changed.len(),
            "policy reloaded"
        );
        self.report = report.clone();
        ReloadReport {
            config: report,
            applied: true,
            added,
            removed,
            changed,
        }
    }
}

/// One log line per decision: info for deny and confirm, debug for allow. Source,
/// capability, target, method and reason only, never params.
fn log_decision(
    source: &str,
    capability: &str,
    target: Option<&str>,
    method: &str,
    kind: DecisionKind,
    reason: &str,
) {
    let source = shown(source);
    let target = target.map(shown).unwrap_or_else(|| "-".into());
    let decision = kind.as_str();
    match kind {
        DecisionKind::Allow => tracing::debug!(
            target: LOG_TARGET,
            source,
            capability,
            "target" = target,
            method,
            decision,
            reason,
            "policy decision"
        ),
        DecisionKind::Deny | DecisionKind::Confirm => tracing::info!(
            target: LOG_TARGET,
            source,
            capability,
            "target" = target,
            method,
            decision,
            reason,
            "policy decision"
        ),
    }
}

fn joined(capabilities: &[Capability]) -> String {
    capabilities
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(",")
}
