//! The rules: sources, decisions, and the [`Policy`] that evaluates one (source, capability,
//! target).

use super::config::LoadReport;
use super::{
    ATTACH_OPT_IN, DECLARE_ONLY, LOCAL_CLI, OUTPUT_READ_OPT_IN, READONLY_EXTERNAL, UNAVAILABLE,
};
use maxx_protocol::capability::Capability;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

/// The once-per-source approvals remembered for this daemon's life: (source id, capability).
pub type Approvals = HashSet<(String, Capability)>;

/// Kind of a policy source, serialised `local`, `external`, `webhook`, `token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// `local`: a same-user local caller; unlisted mutations ask for confirmation.
    Local,
    /// `external`: an outside integration; cannot mutate unless allowlisted.
    External,
    /// `webhook`: a webhook runner; cannot mutate unless allowlisted.
    Webhook,
    /// `token`: a holder of a delegated token; cannot mutate unless allowlisted.
    Token,
}

impl SourceKind {
    /// The wire name, e.g. `"webhook"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Local => "local",
            SourceKind::External => "external",
            SourceKind::Webhook => "webhook",
            SourceKind::Token => "token",
        }
    }

    pub(super) fn parse(s: &str) -> Option<SourceKind> {
        [
            SourceKind::Local,
            SourceKind::External,
            SourceKind::Webhook,
            SourceKind::Token,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// When a confirmation, once given, stops being asked: `always` or `once_per_source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmScope {
    /// `always`: every request needing confirmation must carry `confirm: true`.
    Always,
    /// `once_per_source`: after one confirmed request for a capability, the source is not
    /// asked again for it until the daemon restarts.
    OncePerSource,
}

impl ConfirmScope {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmScope::Always => "always",
            ConfirmScope::OncePerSource => "once_per_source",
        }
    }
}

/// One policy source, as the policy file declares it and as `policy.sources` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The id a request names with `caller` / `--as`.
    pub id: String,
    /// Decides the defaults for unlisted capabilities.
    pub kind: SourceKind,
    /// Capabilities granted outright.
    pub allow: BTreeSet<Capability>,
    /// Capabilities granted once the request carries `confirm: true`.
    pub confirm: BTreeSet<Capability>,
    /// Whether a confirmation is remembered for the daemon's life.
    pub confirm_scope: ConfirmScope,
    /// Built-in (reserved id, not from the policy file).
    pub builtin: bool,
}

/// The built-in sources, `local-cli` first. Each is a subset of `local-cli`.
pub fn builtin_sources() -> Vec<Source> {
    use Capability::*;
    let builtin = |id: &str, kind, allow: &[Capability]| Source {
        id: id.to_string(),
        kind,
        allow: allow.iter().copied().collect(),
        confirm: BTreeSet::new(),
        confirm_scope: ConfirmScope::Always,
        builtin: true,
    };
    vec![
        builtin(
            LOCAL_CLI,
            SourceKind::Local,
            &[
                TabsList,
                TabsSpawn,
                TabsRestart,
                TabsFocus,
                TabsClose,
                InputSend,
                KeysPress,
                StateSet,
                MetadataSet,
                GroupsCreate,
                ProfilesList,
                GroupsList,
                SurfaceAttach,
            ],
        ),
        builtin(
            READONLY_EXTERNAL,
            SourceKind::External,
            &[TabsList, GroupsList, ProfilesList],
        ),
        builtin(
            DECLARE_ONLY,
            SourceKind::Token,
            &[TabsList, GroupsList, StateSet, MetadataSet],
        ),
    ]
}

/// The three possible answers, as `policy.check` reports them: `allow`, `deny`, `confirm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// `allow`
    Allow,
    /// `deny`
    Deny,
    /// `confirm`
    Confirm,
}

impl DecisionKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allow => "allow",
            DecisionKind::Deny => "deny",
            DecisionKind::Confirm => "confirm",
        }
    }
}

/// The policy's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Allow {
        /// Why, for the debug log.
        reason: String,
    },
    /// Refused: answer `unauthorized`.
    Deny {
        /// The capability that was refused; `None` only when an unknown source asked for
        /// nothing at all.
        capability: Option<Capability>,
        /// Why, naming the source and capability.
        reason: String,
        /// What the caller can do about it.
        remedy: String,
    },
    /// Needs approval: answer `confirmation_required`; the same request with `confirm: true`
    /// proceeds.
    Confirm {
        /// The first capability needing confirmation.
        capability: Capability,
        /// Why it needs confirmation, for the log.
        reason: String,
        /// For a person: the source, the action (method), the target and the consequence.
        prompt: String,
    },
}

impl Decision {
    /// `allow`, `deny` or `confirm`.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Allow { .. } => DecisionKind::Allow,
            Decision::Deny { .. } => DecisionKind::Deny,
            Decision::Confirm { .. } => DecisionKind::Confirm,
        }
    }

    /// Whether the request may proceed.
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    /// The error a refused request answers with: `unauthorized` for a deny,
    /// `confirmation_required` (the prompt as message) for a confirm; `None` for an allow.
    pub fn to_error(&self) -> Option<ErrorBody> {
        match self {
            Decision::Allow { .. } => None,
            Decision::Deny { reason, remedy, .. } => {
                Some(ErrorBody::new(ErrorCode::Unauthorized, reason.clone()).with_remedy(remedy))
            }
            Decision::Confirm { prompt, .. } => Some(
                ErrorBody::new(ErrorCode::ConfirmationRequired, prompt.clone()).with_remedy(
                    "re-send the same request with --confirm (wire field confirm: true)",
                ),
            ),
        }
    }

    /// `Ok(())` for an allow, else the error of [`Decision::to_error`].
    pub fn into_result(self) -> Result<(), ErrorBody> {
        match self.to_error() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

/// The answer of `policy.check`: what a request would get, with nothing recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// The source evaluated (`local-cli` when the caller named none).
    pub source: String,
    /// Its kind; `null` for an unknown source.
    pub source_kind: Option<SourceKind>,
    /// The capability evaluated.
    pub capability: Capability,
    /// The target, as given.
    pub target: Option<String>,
    /// `allow`, `deny` or `confirm`.
    pub decision: DecisionKind,
    /// Why.
    pub reason: String,
    /// For `confirm`: the prompt a real request would get.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// For `deny`: what to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

/// One remembered `once_per_source` approval.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Approval {
    /// The source.
    pub source: String,
    /// The capability it was confirmed for.
    pub capability: Capability,
}

/// The answer of `policy.sources`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourcesReport {
    /// Whether the policy file was loaded, missing or rejected, and why.
    pub config: LoadReport,
    /// Every active source, built-ins first.
    pub sources: Vec<Source>,
    /// `once_per_source` approvals given so far in this daemon's life.
    pub approved_once: Vec<Approval>,
}

/// The policy: built-ins plus the configured sources. Pure: evaluating has no side effects;
/// the once-per-source memory is passed in by its holder ([`PolicyGate`](super::PolicyGate)).
#[derive(Debug, Clone)]
pub struct Policy {
    /// Built-ins first, then configured sources in file order.
    sources: Vec<Source>,
    /// id → index in `sources`.
    index: HashMap<String, usize>,
    /// The policy file path, named in remedies.
    file: Option<PathBuf>,
}

/// The per-capability rule before any confirmation is applied.
enum Rule {
    Allow(String),
    Confirm(String),
    Deny { reason: String, remedy: String },
}

/// The per-capability outcome once `confirm` and the approvals are applied.
enum Verdict {
    Allow(String),
    Confirm { reason: String, prompt: String },
    Deny { reason: String, remedy: String },
}

impl Policy {
    /// The built-in sources only.
    pub fn builtin() -> Policy {
        Policy::with_configured(Vec::new(), None)
    }

    /// Built-ins plus already-validated configured sources (see [`load_policy`]).
    pub(super) fn with_configured(configured: Vec<Source>, file: Option<PathBuf>) -> Policy {
        let sources: Vec<Source> = builtin_sources().into_iter().chain(configured).collect();
        let index = sources
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        Policy {
            sources,
            index,
            file,
        }
    }

    /// Every active source, built-ins first.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// The source with this id.
    pub fn source(&self, id: &str) -> Option<&Source> {
        self.index.get(id).map(|&i| &self.sources[i])
    }

    /// Decide a request: `caller` (`None` = [`LOCAL_CLI`]) asks for every capability in
    /// `capabilities` on `target` through `method`, approving confirmations if `confirm`.
    /// `approved` holds the once-per-source approvals given so far. No side effects.
    pub fn evaluate(
        &self,
        caller: Option<&str>,
        capabilities: &[Capability],
        target: Option<&str>,
        method: &str,
        confirm: bool,
        approved: &Approvals,
    ) -> Decision {
        let id = caller.unwrap_or(LOCAL_CLI);
        let Some(source) = self.source(id) else {
            let (reason, remedy) = self.unknown_source(id);
            return Decision::Deny {
                capability: capabilities.first().copied(),
                reason,
                remedy,
            };
        };
        let mut first_confirm = None;
        let mut allowed = Vec::new();
        for &cap in capabilities {
            match self.verdict(source, cap, target, Some(method), confirm, approved) {
                Verdict::Deny { reason, remedy } => {
                    let remedy = if method == "sessions.attach" && cap.needs_opt_in() {
                        self.attach_remedy()
                    } else {
                        remedy
                    };
                    return Decision::Deny {
                        capability: Some(cap),
                        reason,
                        remedy,
                    };
                }
                Verdict::Confirm { reason, prompt } => {
                    if first_confirm.is_none() {
                        first_confirm = Some((cap, reason, prompt));
                    }
                }
                Verdict::Allow(reason) => allowed.push(reason),
            }
        }
        if let Some((capability, reason, prompt)) = first_confirm {
            return Decision::Confirm {
                capability,
                reason,
                prompt,
            };
        }
        let reason = if allowed.is_empty() {
            format!("{} asked for no capability", shown(id))
        } else {
            allowed.join("; ")
        };
        Decision::Allow { reason }
    }

    /// What `caller` would get for one `capability` on `target`, without `confirm` and with
    /// nothing recorded (`policy.check`).
    pub fn check(
        &self,
        caller: Option<&str>,
        capability: Capability,
        target: Option<&str>,
        approved: &Approvals,
    ) -> CheckResult {
        let id = caller.unwrap_or(LOCAL_CLI);
        let mut result = CheckResult {
            source: id.to_string(),
            source_kind: None,
            capability,
            target: target.map(str::to_string),
            decision: DecisionKind::Deny,
            reason: String::new(),
            prompt: None,
            remedy: None,
        };
        let Some(source) = self.source(id) else {
            let (reason, remedy) = self.unknown_source(id);
            result.reason = reason;
            result.remedy = Some(remedy);
            return result;
        };
        result.source_kind = Some(source.kind);
        match self.verdict(source, capability, target, None, false, approved) {
            Verdict::Allow(reason) => {
                result.decision = DecisionKind::Allow;
                result.reason = reason;
            }
            Verdict::Confirm { reason, prompt } => {
                result.decision = DecisionKind::Confirm;
                result.reason = reason;
                result.prompt = Some(prompt);
            }
            Verdict::Deny { reason, remedy } => {
                result.reason = reason;
                result.remedy = Some(remedy);
            }
        }
        result
    }

    /// The approvals a confirmed, allowed request earns: each capability that needed
    /// confirmation, if the source's scope is `once_per_source`.
    pub fn once_approvals(
        &self,
        caller: Option<&str>,
        capabilities: &[Capability],
    ) -> Vec<(String, Capability)> {
        let Some(source) = self.source(caller.unwrap_or(LOCAL_CLI)) else {
            return Vec::new();
        };
        if source.confirm_scope != ConfirmScope::OncePerSource {
            return Vec::new();
        }
        capabilities
            .iter()
            .filter(|&&cap| matches!(self.rule(source, cap), Rule::Confirm(_)))
            .map(|&cap| (source.id.clone(), cap))
            .collect()
    }

    /// The rule for one capability, before confirmation.
    fn rule(&self, source: &Source, cap: Capability) -> Rule {
        let id = shown(&source.id);
        if UNAVAILABLE.contains(&cap) {
            return Rule::Deny {
                reason: format!(
                    "{cap} is unavailable: no method uses it yet, so it is denied to every source"
                ),
                remedy: "nothing to grant yet; `maxx policy sources` lists the active policy"
                    .into(),
            };
        }
        if source.allow.contains(&cap) {
            return Rule::Allow(format!("{cap} is on the allow list of {id}"));
        }
        if source.confirm.contains(&cap) {
            return Rule::Confirm(format!("{cap} is on the confirm list of {id}"));
        }
        if cap.needs_opt_in() {
            return Rule::Deny {
                reason: format!(
                    "{cap} needs an explicit opt-in in the policy file and {id} does not list it"
                ),
                remedy: format!(
                    "add a source of kind local that allows {cap} to {}, e.g. \
                     {OUTPUT_READ_OPT_IN}, and name it with --as local-reader",
                    self.file_name()
                ),
            };
        }
        if cap.is_mutation() {
            if source.kind == SourceKind::Local {
                return Rule::Confirm(format!(
                    "{cap} is not listed for local source {id}, and an unlisted mutation by a local source needs confirmation"
                ));
            }
            return Rule::Deny {
                reason: format!(
                    "{cap} is not allowlisted for {} source {id}, and {} sources cannot mutate unless allowlisted",
                    source.kind.as_str(),
                    source.kind.as_str()
                ),
                remedy: self.grant_remedy(source, cap),
            };
        }
        Rule::Deny {
            reason: format!("{cap} is not listed for {id}, and a source reads only what it lists"),
            remedy: self.grant_remedy(source, cap),
        }
    }

    fn verdict(
        &self,
        source: &Source,
        cap: Capability,
        target: Option<&str>,
        method: Option<&str>,
        confirm: bool,
        approved: &Approvals,
    ) -> Verdict {
        match self.rule(source, cap) {
            Rule::Allow(reason) => Verdict::Allow(reason),
            Rule::Deny { reason, remedy } => Verdict::Deny { reason, remedy },
            Rule::Confirm(reason) => {
                if confirm {
                    Verdict::Allow(format!("{reason}; confirmed by the request"))
                } else if source.confirm_scope == ConfirmScope::OncePerSource
                    && approved.contains(&(source.id.clone(), cap))
                {
                    Verdict::Allow(format!(
                        "{reason}; already confirmed once for {} (once_per_source)",
                        shown(&source.id)
                    ))
                } else {
                    Verdict::Confirm {
                        reason,
                        prompt: prompt(source, cap, target, method),
                    }
                }
            }
        }
    }

    fn unknown_source(&self, id: &str) -> (String, String) {
        (
            format!(
                "unknown source {}: not a built-in or configured policy source",
                shown(id)
            ),
            format!(
                "name a source listed by `maxx policy sources` (or omit --as for {LOCAL_CLI}), \
                 or declare this one in {}",
                self.file_name()
            ),
        )
    }

    fn grant_remedy(&self, source: &Source, cap: Capability) -> String {
        if source.builtin {
            format!(
                "built-in sources cannot be changed: use a source that holds {cap} \
                 (`maxx policy sources`), or declare one in {}",
                self.file_name()
            )
        } else {
            format!(
                "add \"{cap}\" to the allow or confirm list of {} in {}",
                shown(&source.id),
                self.file_name()
            )
        }
    }

    /// The remedy of an attach refused for want of `output:read`: the one line to add.
    fn attach_remedy(&self) -> String {
        format!(
            "attaching shows the screen, which needs output:read: add the source \
             {ATTACH_OPT_IN} to the \"sources\" of {}, then run `maxx attach --as local-attach`",
            self.file_name()
        )
    }

    fn file_name(&self) -> String {
        match &self.file {
            Some(p) => format!("the policy file {}", p.display()),
            None => "a policy file named by $MAXX_CONTROL_POLICY_FILE".to_string(),
        }
    }
}

/// A confirmation prompt: the source, the action (the method; `None` from `policy.check`,
/// which knows only the capability), the target and the consequence.
fn prompt(source: &Source, cap: Capability, target: Option<&str>, method: Option<&str>) -> String {
    let target = match target {
        Some(t) => format!("on {}", shown(t)),
        None => "with no target".to_string(),
    };
    let action = match method {
        Some(m) => format!("run {m} {target}, which needs {cap}"),
        None => format!("use {cap} {target}"),
    };
    let mut text = format!(
        "{} source {} asks to {action}: it {}. \
         Re-send the same request with confirm: true (--confirm) to approve.",
        source.kind.as_str(),
        shown(&source.id),
        cap.consequence(),
    );
    if source.confirm_scope == ConfirmScope::OncePerSource {
        text.push_str(&format!(
            " Once approved, {} is not asked again for {cap} until the daemon restarts.",
            shown(&source.id)
        ));
    }
    text
}

/// A caller-supplied string, quoted and bounded, for messages and logs.
pub(super) fn shown(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() > MAX {
        let head: String = s.chars().take(MAX).collect();
        format!("{head:?}…")
    } else {
        format!("{s:?}")
    }
}
