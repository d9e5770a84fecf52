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
//! daemon's life (the memory lives in the actor, never on disk).
//!
//! Decisions depend only on the caller, the capabilities and the target, never on terminal
//! output, process names, paths or idle time. Every decision is logged under the
//! `control_policy` tracing target with source, capability, target, method and reason,
//! never the request params.

use maxx_protocol::capability::Capability;
use maxx_protocol::error::{ErrorBody, ErrorCode};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

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

    fn parse(s: &str) -> Option<SourceKind> {
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

/// What became of the policy file at startup, serialised `no_path`, `missing`, `loaded`,
/// `rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigStatus {
    /// No path could be resolved (no `$MAXX_CONTROL_POLICY_FILE`, `$XDG_CONFIG_HOME` or
    /// `$HOME`): built-ins only.
    NoPath,
    /// The file does not exist: built-ins only.
    Missing,
    /// The file was read and its sources are active beside the built-ins.
    Loaded,
    /// The file was refused as a whole (see `reasons`): built-ins only.
    Rejected,
}

/// The outcome of loading the policy file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    /// The file consulted.
    pub path: Option<String>,
    /// What became of it.
    pub status: ConfigStatus,
    /// Why it was rejected (empty otherwise).
    pub reasons: Vec<String>,
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

/// The answer of an offline `policy validate`: the configured sources the file declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigSummary {
    /// The file validated.
    pub path: String,
    /// Its version.
    pub version: u64,
    /// Its sources (the built-ins are not repeated).
    pub sources: Vec<Source>,
}

/// The policy: built-ins plus the configured sources. Pure: evaluating has no side effects;
/// the once-per-source memory is passed in by the owner ([`PolicyActor`]).
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
    fn with_configured(configured: Vec<Source>, file: Option<PathBuf>) -> Policy {
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
fn shown(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() > MAX {
        let head: String = s.chars().take(MAX).collect();
        format!("{head:?}…")
    } else {
        format!("{s:?}")
    }
}

/// The policy file the environment names: `$MAXX_CONTROL_POLICY_FILE`, else
/// `$XDG_CONFIG_HOME/maxx/control-policy.json`, else `~/.config/maxx/control-policy.json`.
/// `None` if none of those variables is set.
pub fn policy_path() -> Option<PathBuf> {
    policy_path_from(|name| std::env::var_os(name))
}

fn policy_path_from(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(p) = set("MAXX_CONTROL_POLICY_FILE") {
        return Some(PathBuf::from(p));
    }
    let base = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("maxx").join("control-policy.json"))
}

/// Load the policy the daemon enforces. Fail-closed: a missing file (or no path) means the
/// built-ins; any problem with the file rejects it as a whole, with reasons, and the
/// built-ins are used.
pub fn load_policy(path: Option<&Path>) -> (Policy, LoadReport) {
    let Some(path) = path else {
        return (
            Policy::builtin(),
            LoadReport {
                path: None,
                status: ConfigStatus::NoPath,
                reasons: Vec::new(),
            },
        );
    };
    let report = |status, reasons| LoadReport {
        path: Some(path.display().to_string()),
        status,
        reasons,
    };
    let builtins = Policy::with_configured(Vec::new(), Some(path.to_path_buf()));
    match read_bounded(path) {
        Ok(None) => (builtins, report(ConfigStatus::Missing, Vec::new())),
        Err(reason) => (builtins, report(ConfigStatus::Rejected, vec![reason])),
        Ok(Some(bytes)) => match parse_config(&bytes) {
            Ok((_, sources)) => (
                Policy::with_configured(sources, Some(path.to_path_buf())),
                report(ConfigStatus::Loaded, Vec::new()),
            ),
            Err(reasons) => (builtins, report(ConfigStatus::Rejected, reasons)),
        },
    }
}

/// Validate a policy file offline (`maxx policy validate --config FILE`, no daemon): its
/// configured sources, or every reason it would be rejected. A missing file is an error.
pub fn validate_config_file(path: &Path) -> Result<ConfigSummary, Vec<String>> {
    let bytes = match read_bounded(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(vec![format!("{} does not exist", path.display())]),
        Err(reason) => return Err(vec![reason]),
    };
    let (version, sources) = parse_config(&bytes)?;
    Ok(ConfigSummary {
        path: path.display().to_string(),
        version,
        sources,
    })
}

/// Read the file (links followed: it is the user's own config), bounded by `fstat` before
/// reading and while reading, never blocking on a FIFO. `Ok(None)` if it does not exist.
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use crate::control_dir::{read_regular_bounded, ReadBoundedError};
    read_regular_bounded(path, POLICY_MAX_BYTES, true).map_err(|e| match e {
        ReadBoundedError::NotRegular(_) => format!("{} is not a regular file", path.display()),
        ReadBoundedError::TooLarge(len) => format!(
            "{} is {len} bytes, larger than the {POLICY_MAX_BYTES}-byte limit",
            path.display()
        ),
        ReadBoundedError::Grew => format!(
            "{} grew past the {POLICY_MAX_BYTES}-byte limit while being read",
            path.display()
        ),
        ReadBoundedError::Io(e) => format!("cannot read {}: {e}", path.display()),
    })
}

/// The file's shape, strict about fields (a typo such as `alow` must not silently grant
/// less or more than the user meant); values are checked one by one below so every problem
/// is reported.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a policy object {\"version\": 1, \"sources\": [...]}"
)]
struct RawConfig {
    version: Option<Value>,
    sources: Option<Vec<RawSource>>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a source object {\"id\", \"kind\", \"allow\", \"confirm\", \"confirm_scope\"}"
)]
struct RawSource {
    id: Option<Value>,
    kind: Option<Value>,
    allow: Option<Value>,
    confirm: Option<Value>,
    confirm_scope: Option<Value>,
}

/// Parse and validate a policy document into its configured sources, or every reason it
/// is rejected.
fn parse_config(bytes: &[u8]) -> Result<(u64, Vec<Source>), Vec<String>> {
    let raw: RawConfig = serde_json::from_slice(bytes).map_err(|e| {
        vec![match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                format!("invalid JSON: {e}")
            }
            _ => format!("unexpected structure: {e}"),
        }]
    })?;
    let mut reasons = Vec::new();
    let version = match &raw.version {
        None => {
            reasons.push(format!("missing \"version\" (expected {POLICY_VERSION})"));
            0
        }
        Some(Value::Number(n)) if n.as_u64() == Some(POLICY_VERSION) => POLICY_VERSION,
        Some(other) => {
            reasons.push(format!(
                "unsupported version {} (this maxx reads version {POLICY_VERSION})",
                bounded_json(other)
            ));
            0
        }
    };
    let Some(raw_sources) = raw.sources else {
        reasons.push("missing \"sources\" (an array of sources, possibly empty)".into());
        return Err(reasons);
    };
    let reserved: HashSet<String> = builtin_sources().into_iter().map(|s| s.id).collect();
    let mut seen = HashSet::new();
    let mut sources = Vec::new();
    for (i, raw) in raw_sources.into_iter().enumerate() {
        let before = reasons.len();
        let id = match &raw.id {
            Some(Value::String(id)) => Some(id.clone()),
            Some(_) | None => {
                reasons.push(format!("sources[{i}]: \"id\" must be a string"));
                None
            }
        };
        let at = match &id {
            Some(id) => format!("sources[{i}] ({})", shown(id)),
            None => format!("sources[{i}]"),
        };
        if let Some(id) = &id {
            if let Err(why) = check_id(id) {
                reasons.push(format!("{at}: {why}"));
            } else if reserved.contains(id) {
                reasons.push(format!(
                    "{at}: id is reserved by a built-in source and cannot be replaced"
                ));
            } else if !seen.insert(id.clone()) {
                reasons.push(format!("{at}: duplicate id"));
            }
        }
        let kind = match &raw.kind {
            Some(Value::String(k)) => SourceKind::parse(k).or_else(|| {
                reasons.push(format!(
                    "{at}: unknown kind {} (expected local, external, webhook or token)",
                    shown(k)
                ));
                None
            }),
            _ => {
                reasons.push(format!(
                    "{at}: \"kind\" must be one of local, external, webhook, token"
                ));
                None
            }
        };
        let allow = capability_list(&at, "allow", raw.allow.as_ref(), &mut reasons);
        let confirm = capability_list(&at, "confirm", raw.confirm.as_ref(), &mut reasons);
        let overlap: Vec<&str> = allow.intersection(&confirm).map(|c| c.as_str()).collect();
        if !overlap.is_empty() {
            reasons.push(format!(
                "{at}: ambiguous: {} on both allow and confirm",
                overlap.join(", ")
            ));
        }
        let confirm_scope = match &raw.confirm_scope {
            None => Some(ConfirmScope::Always),
            Some(Value::String(s)) if s == "always" => Some(ConfirmScope::Always),
            Some(Value::String(s)) if s == "once_per_source" => Some(ConfirmScope::OncePerSource),
            Some(other) => {
                reasons.push(format!(
                    "{at}: unknown confirm_scope {} (expected always or once_per_source)",
                    bounded_json(other)
                ));
                None
            }
        };
        if reasons.len() == before {
            if let (Some(id), Some(kind), Some(confirm_scope)) = (id, kind, confirm_scope) {
                sources.push(Source {
                    id,
                    kind,
                    allow,
                    confirm,
                    confirm_scope,
                    builtin: false,
                });
            }
        }
    }
    if reasons.is_empty() {
        Ok((version, sources))
    } else {
        if reasons.len() > MAX_REASONS {
            let more = reasons.len() - MAX_REASONS;
            reasons.truncate(MAX_REASONS);
            reasons.push(format!("... and {more} more"));
        }
        Err(reasons)
    }
}

fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("id is empty".into());
    }
    if id.chars().count() > SOURCE_ID_MAX_CHARS {
        return Err(format!(
            "id is longer than {SOURCE_ID_MAX_CHARS} characters"
        ));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err("id may hold only ASCII letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}

fn capability_list(
    at: &str,
    field: &str,
    value: Option<&Value>,
    reasons: &mut Vec<String>,
) -> BTreeSet<Capability> {
    let mut set = BTreeSet::new();
    let items = match value {
        None => return set,
        Some(Value::Array(items)) => items,
        Some(_) => {
            reasons.push(format!(
                "{at}: \"{field}\" must be an array of capability names"
            ));
            return set;
        }
    };
    for item in items {
        match item {
            Value::String(name) => match Capability::parse(name) {
                Ok(c) => {
                    set.insert(c);
                }
                Err(_) => reasons.push(format!(
                    "{at}: unknown capability {} in {field}",
                    shown(name)
                )),
            },
            other => reasons.push(format!(
                "{at}: {field} holds {}, not a capability name",
                bounded_json(other)
            )),
        }
    }
    set
}

/// A JSON value for a message, bounded.
fn bounded_json(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 64 {
        let head: String = text.chars().take(64).collect();
        format!("{head}…")
    } else {
        text
    }
}

/// Messages the policy actor handles.
pub enum PolicyMsg {
    /// Decide a request before it runs. A confirmed, allowed request records the
    /// `once_per_source` approvals it earns.
    Evaluate {
        /// The request's `caller`; `None` = `local-cli`.
        caller: Option<String>,
        /// Every capability the method needs (e.g. `create --group`: `tabs:spawn` and
        /// `groups:create`).
        capabilities: Vec<Capability>,
        /// What the request acts on, for the prompt and the log (a session id, a group).
        target: Option<String>,
        /// The method, e.g. `sessions.close`, for the prompt and the log.
        method: &'static str,
        /// The request's `confirm`.
        confirm: bool,
        /// Answer.
        reply: RpcReplyPort<Decision>,
    },
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
}

/// The policy actor. Arguments: the policy file path ([`policy_path`]), loaded once at
/// start; edits apply on the next daemon start.
pub struct PolicyActor;

/// Policy actor state.
pub struct PolicyState {
    /// The active policy.
    policy: Policy,
    /// What became of the policy file, for `policy.sources`.
    report: LoadReport,
    /// `once_per_source` approvals; in memory only, so they end with the daemon.
    approved: Approvals,
}

impl Actor for PolicyActor {
    type Msg = PolicyMsg;
    type State = PolicyState;
    type Arguments = Option<PathBuf>;

    async fn pre_start(
        &self,
        _myself: ActorRef<PolicyMsg>,
        path: Option<PathBuf>,
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
        Ok(PolicyState {
            policy,
            report,
            approved: Approvals::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<PolicyMsg>,
        msg: PolicyMsg,
        state: &mut PolicyState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PolicyMsg::Evaluate {
                caller,
                capabilities,
                target,
                method,
                confirm,
                reply,
            } => {
                let caller = caller.as_deref();
                let decision = state.policy.evaluate(
                    caller,
                    &capabilities,
                    target.as_deref(),
                    method,
                    confirm,
                    &state.approved,
                );
                if confirm && decision.is_allow() {
                    state
                        .approved
                        .extend(state.policy.once_approvals(caller, &capabilities));
                }
                let (capability, reason) = match &decision {
                    Decision::Allow { reason } => (joined(&capabilities), reason.as_str()),
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
                    target.as_deref(),
                    method,
                    decision.kind(),
                    reason,
                );
                let _ = reply.send(decision);
            }
            PolicyMsg::Check {
                caller,
                capability,
                target,
                reply,
            } => {
                let result = state.policy.check(
                    caller.as_deref(),
                    capability,
                    target.as_deref(),
                    &state.approved,
                );
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
            PolicyMsg::Sources(reply) => {
                let mut approved_once: Vec<Approval> = state
                    .approved
                    .iter()
                    .map(|(source, capability)| Approval {
                        source: source.clone(),
                        capability: *capability,
                    })
                    .collect();
                approved_once.sort();
                let _ = reply.send(SourcesReport {
                    config: state.report.clone(),
                    sources: state.policy.sources().to_vec(),
                    approved_once,
                });
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use Capability::*;
    use DecisionKind::{Allow as A, Confirm as C, Deny as D};

    /// A file under the temp dir, removed on drop (the actors crate has no tempfile dep).
    struct TempPath(PathBuf);

    impl TempPath {
        fn new() -> TempPath {
            static N: AtomicUsize = AtomicUsize::new(0);
            TempPath(std::env::temp_dir().join(format!(
                "maxx-policy-test-{}-{}.json",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            )))
        }

        fn with(contents: &str) -> TempPath {
            let t = TempPath::new();
            std::fs::write(&t.0, contents).unwrap();
            t
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    const CONFIG: &str = r#"{
      "version": 1,
      "sources": [
        {"id": "linear-webhook", "kind": "webhook",
         "allow": ["tabs:spawn", "groups:create", "state:set"], "confirm": [],
         "confirm_scope": "always"},
        {"id": "ext-reader", "kind": "external", "allow": ["tabs:list"]},
        {"id": "bare-token", "kind": "token"},
        {"id": "local-reader", "kind": "local", "allow": ["output:read", "tabs:list"]},
        {"id": "careful-local", "kind": "local", "allow": ["tabs:list"],
         "confirm": ["tabs:close", "output:read"], "confirm_scope": "once_per_source"},
        {"id": "hook-confirm", "kind": "webhook", "confirm": ["input:send"]},
        {"id": "attach-hook", "kind": "webhook", "allow": ["surface:attach"]},
        {"id": "ext-readout", "kind": "external", "allow": ["output:read"]}
      ]
    }"#;

    fn configured() -> (Policy, TempPath) {
        let file = TempPath::with(CONFIG);
        let (policy, report) = load_policy(Some(&file.0));
        assert_eq!(report.status, ConfigStatus::Loaded, "{:?}", report.reasons);
        (policy, file)
    }

    fn decide(policy: &Policy, caller: Option<&str>, cap: Capability) -> DecisionKind {
        policy
            .evaluate(
                caller,
                &[cap],
                Some("S1"),
                "test.method",
                false,
                &Approvals::new(),
            )
            .kind()
    }

    fn assert_table(policy: &Policy, table: &[(Option<&str>, Capability, DecisionKind)]) {
        for &(caller, cap, want) in table {
            let got = decide(policy, caller, cap);
            assert_eq!(got, want, "{caller:?} asking for {cap}");
            // policy.check agrees with a real (unconfirmed) evaluation.
            let check = policy.check(caller, cap, Some("S1"), &Approvals::new());
            assert_eq!(
                check.decision, want,
                "check {caller:?} {cap}: {}",
                check.reason
            );
            assert!(!check.reason.is_empty());
        }
    }

    #[test]
    fn built_in_safe_defaults() {
        let p = Policy::builtin();
        let long = "x".repeat(5000);
        let mut table = vec![
            // The default source is local-cli.
            (None, TabsSpawn, A),
            (None, OutputRead, D),
            (Some(LOCAL_CLI), OutputRead, D),
            (Some(LOCAL_CLI), SurfaceAttach, A),
            // No method behind them yet: denied to everyone.
            (Some(LOCAL_CLI), GroupsList, D),
            (Some(LOCAL_CLI), AutomationTrigger, D),
            (Some(READONLY_EXTERNAL), TabsList, A),
            (Some(READONLY_EXTERNAL), ProfilesList, A),
            (Some(READONLY_EXTERNAL), TabsClose, D),
            (Some(READONLY_EXTERNAL), TabsSpawn, D),
            (Some(READONLY_EXTERNAL), InputSend, D),
            (Some(READONLY_EXTERNAL), OutputRead, D),
            (Some(READONLY_EXTERNAL), SurfaceAttach, D),
            (Some(DECLARE_ONLY), StateSet, A),
            (Some(DECLARE_ONLY), MetadataSet, A),
            (Some(DECLARE_ONLY), TabsList, A),
            (Some(DECLARE_ONLY), TabsSpawn, D),
            (Some(DECLARE_ONLY), KeysPress, D),
            (Some(DECLARE_ONLY), ProfilesList, D),
            (Some(DECLARE_ONLY), OutputRead, D),
            (Some(DECLARE_ONLY), SurfaceAttach, D),
        ];
        for &cap in Capability::ALL {
            let want = if cap == OutputRead || UNAVAILABLE.contains(&cap) {
                D
            } else {
                A
            };
            table.push((Some(LOCAL_CLI), cap, want));
            // Unknown sources are denied everything, however they are spelled.
            for unknown in ["nobody", "", "LOCAL-CLI", "local-cli ", &long] {
                table.push((Some(unknown), cap, D));
            }
        }
        assert_table(&p, &table);
    }

    #[test]
    fn configured_safe_defaults() {
        let (p, _file) = configured();
        assert_table(
            &p,
            &[
                (Some("linear-webhook"), TabsSpawn, A),
                (Some("linear-webhook"), GroupsCreate, A),
                (Some("linear-webhook"), StateSet, A),
                // Webhooks cannot mutate unless allowlisted.
                (Some("linear-webhook"), TabsClose, D),
                (Some("linear-webhook"), MetadataSet, D),
                (Some("linear-webhook"), InputSend, D),
                (Some("linear-webhook"), SurfaceAttach, D),
                // Reads are what a source lists, nothing more.
                (Some("linear-webhook"), TabsList, D),
                (Some("linear-webhook"), OutputRead, D),
                (Some("ext-reader"), TabsList, A),
                (Some("ext-reader"), ProfilesList, D),
                (Some("ext-reader"), TabsSpawn, D),
                (Some("ext-reader"), SurfaceAttach, D),
                (Some("bare-token"), TabsSpawn, D),
                (Some("bare-token"), TabsList, D),
                (Some("bare-token"), SurfaceAttach, D),
                // The output:read opt-in: a configured local source used via --as.
                (Some("local-reader"), OutputRead, A),
                (Some("local-reader"), TabsList, A),
                (Some("local-reader"), ProfilesList, D),
                // An unlisted mutation by a local source asks.
                (Some("local-reader"), TabsSpawn, C),
                (Some("local-reader"), SurfaceAttach, C),
                // local-cli still lacks output:read with a loaded config.
                (None, OutputRead, D),
                (Some(LOCAL_CLI), OutputRead, D),
                (Some("careful-local"), TabsClose, C),
                (Some("careful-local"), OutputRead, C),
                (Some("careful-local"), InputSend, C),
                (Some("hook-confirm"), InputSend, C),
                (Some("hook-confirm"), KeysPress, D),
                (Some("attach-hook"), SurfaceAttach, A),
                (Some("ext-readout"), OutputRead, A),
                (Some("ext-readout"), TabsList, D),
                // A source the file does not declare is still unknown.
                (Some("not-configured"), TabsList, D),
            ],
        );
        assert_eq!(p.sources().len(), builtin_sources().len() + 8);
    }

    #[test]
    fn unavailable_capabilities_are_denied_even_when_listed() {
        let file = TempPath::with(
            r#"{"version":1,"sources":[{"id":"g","kind":"local","allow":["groups:list","automation:trigger"]}]}"#,
        );
        let (p, report) = load_policy(Some(&file.0));
        assert_eq!(report.status, ConfigStatus::Loaded);
        assert_table(
            &p,
            &[
                (Some("g"), GroupsList, D),
                (Some("g"), AutomationTrigger, D),
            ],
        );
        let check = p.check(Some("g"), GroupsList, None, &Approvals::new());
        assert!(check.reason.contains("unavailable"), "{}", check.reason);
    }

    #[test]
    fn confirm_true_approves_and_never_lifts_a_deny() {
        let (p, _file) = configured();
        let none = Approvals::new();
        let d = p.evaluate(
            Some("careful-local"),
            &[TabsClose],
            Some("S1"),
            "sessions.close",
            true,
            &none,
        );
        assert!(d.is_allow(), "{d:?}");
        let d = p.evaluate(
            Some("linear-webhook"),
            &[TabsClose],
            Some("S1"),
            "sessions.close",
            true,
            &none,
        );
        assert_eq!(d.kind(), D);
        let d = p.evaluate(
            None,
            &[OutputRead],
            Some("S1"),
            "sessions.snapshot",
            true,
            &none,
        );
        assert_eq!(d.kind(), D);
    }

    #[test]
    fn several_capabilities_deny_beats_confirm_beats_allow() {
        let (p, _file) = configured();
        let none = Approvals::new();
        let eval = |caller, caps: &[Capability]| {
            p.evaluate(Some(caller), caps, None, "sessions.create", false, &none)
        };
        // create --group needs both.
        assert!(eval("linear-webhook", &[TabsSpawn, GroupsCreate]).is_allow());
        // The deny is reported even after an allowed one.
        match eval("linear-webhook", &[TabsSpawn, MetadataSet, TabsClose]) {
            Decision::Deny { capability, .. } => assert_eq!(capability, Some(MetadataSet)),
            other => panic!("{other:?}"),
        }
        // Deny wins over an earlier confirm.
        match eval("local-reader", &[TabsSpawn, ProfilesList]) {
            Decision::Deny { capability, .. } => assert_eq!(capability, Some(ProfilesList)),
            other => panic!("{other:?}"),
        }
        // The first capability needing confirmation is named.
        match eval("careful-local", &[TabsList, InputSend, TabsClose]) {
            Decision::Confirm { capability, .. } => assert_eq!(capability, InputSend),
            other => panic!("{other:?}"),
        }
        // No capability: allowed for a known source, denied for an unknown one.
        assert!(eval("linear-webhook", &[]).is_allow());
        match eval("nobody", &[]) {
            Decision::Deny { capability, .. } => assert_eq!(capability, None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn once_per_source_is_remembered_per_source_and_capability() {
        let (p, _file) = configured();
        let mut approved = Approvals::new();
        let eval = |caller, cap, confirm, approved: &Approvals| {
            p.evaluate(Some(caller), &[cap], Some("S1"), "m", confirm, approved)
                .kind()
        };
        assert_eq!(eval("careful-local", TabsClose, false, &approved), C);
        assert_eq!(
            p.once_approvals(Some("careful-local"), &[TabsList, TabsClose]),
            vec![("careful-local".to_string(), TabsClose)]
        );
        approved.extend(p.once_approvals(Some("careful-local"), &[TabsClose]));
        assert_eq!(eval("careful-local", TabsClose, false, &approved), A);
        // Another capability of the same source still asks.
        assert_eq!(eval("careful-local", OutputRead, false, &approved), C);
        // An `always` source earns no approvals.
        assert!(p
            .once_approvals(Some("hook-confirm"), &[InputSend])
            .is_empty());
        assert!(p.once_approvals(Some("nobody"), &[InputSend]).is_empty());
        // A forged approval does nothing for an `always` source.
        approved.insert(("hook-confirm".into(), InputSend));
        assert_eq!(eval("hook-confirm", InputSend, false, &approved), C);
    }

    #[test]
    fn built_ins_are_subsets_of_local_cli() {
        let p = Policy::builtin();
        let local = p.source(LOCAL_CLI).unwrap().clone();
        let rank = |k: DecisionKind| match k {
            D => 0,
            C => 1,
            A => 2,
        };
        for s in builtin_sources() {
            assert!(s.builtin);
            assert!(s.allow.is_subset(&local.allow), "{}", s.id);
            assert!(s
                .confirm
                .iter()
                .all(|c| local.allow.contains(c) || local.confirm.contains(c)));
            for &cap in Capability::ALL {
                let mine = decide(&p, Some(&s.id), cap);
                let theirs = decide(&p, Some(LOCAL_CLI), cap);
                assert!(
                    rank(mine) <= rank(theirs),
                    "{} {cap}: {mine:?} > {theirs:?}",
                    s.id
                );
            }
            assert!(!s.allow.contains(&OutputRead), "{} holds output:read", s.id);
        }
        // Only local-cli holds surface:attach among the built-ins.
        for s in builtin_sources().iter().filter(|s| s.id != LOCAL_CLI) {
            assert!(!s.allow.contains(&SurfaceAttach), "{}", s.id);
            assert_ne!(
                s.kind,
                SourceKind::Local,
                "{} would confirm mutations",
                s.id
            );
        }
    }

    #[test]
    fn malformed_configs_are_rejected_whole_and_built_ins_still_work() {
        let good = r#"{"id":"ok-source","kind":"webhook","allow":["tabs:spawn"]}"#;
        let cases: &[(&str, String, &str)] = &[
            ("invalid json", "{".into(), "invalid JSON"),
            ("trailing garbage", r#"{"version":1,"sources":[]} x"#.into(), "invalid JSON"),
            ("empty file", String::new(), "invalid JSON"),
            ("not an object", "[]".into(), "policy object"),
            ("unsupported version", format!(r#"{{"version":2,"sources":[{good}]}}"#), "unsupported version 2"),
            ("string version", format!(r#"{{"version":"1","sources":[{good}]}}"#), "unsupported version"),
            ("missing version", format!(r#"{{"sources":[{good}]}}"#), "missing \"version\""),
            ("missing sources", r#"{"version":1}"#.into(), "missing \"sources\""),
            ("sources not array", r#"{"version":1,"sources":{}}"#.into(), "unexpected structure"),
            ("unknown top field", format!(r#"{{"version":1,"sources":[{good}],"extra":1}}"#), "unknown field"),
            ("unknown source field", r#"{"version":1,"sources":[{"id":"a","kind":"local","alow":["tabs:list"]}]}"#.into(), "unknown field `alow`"),
            ("duplicate field", r#"{"version":1,"sources":[{"id":"a","id":"b","kind":"local"}]}"#.into(), "duplicate field"),
            ("reserved local-cli", format!(r#"{{"version":1,"sources":[{good},{{"id":"local-cli","kind":"local","allow":["output:read"]}}]}}"#), "reserved"),
            ("reserved readonly-external", r#"{"version":1,"sources":[{"id":"readonly-external","kind":"external"}]}"#.into(), "reserved"),
            ("duplicate id", format!(r#"{{"version":1,"sources":[{good},{good}]}}"#), "duplicate id"),
            ("unknown capability in allow", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":["tabs:explode"]}]}"#.into(), "unknown capability \"tabs:explode\" in allow"),
            ("unknown capability in confirm", r#"{"version":1,"sources":[{"id":"a","kind":"local","confirm":["output:write"]}]}"#.into(), "in confirm"),
            ("capability not a string", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":[1]}]}"#.into(), "not a capability name"),
            ("allow not an array", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":"tabs:list"}]}"#.into(), "must be an array"),
            ("overlap", r#"{"version":1,"sources":[{"id":"a","kind":"local","allow":["tabs:close","tabs:list"],"confirm":["tabs:close"]}]}"#.into(), "ambiguous: tabs:close"),
            ("bad kind", r#"{"version":1,"sources":[{"id":"a","kind":"remote"}]}"#.into(), "unknown kind \"remote\""),
            ("missing kind", r#"{"version":1,"sources":[{"id":"a"}]}"#.into(), "\"kind\" must be"),
            ("missing id", r#"{"version":1,"sources":[{"kind":"local"}]}"#.into(), "\"id\" must be a string"),
            ("empty id", r#"{"version":1,"sources":[{"id":"","kind":"local"}]}"#.into(), "id is empty"),
            ("bad id chars", r#"{"version":1,"sources":[{"id":"a b\n","kind":"local"}]}"#.into(), "may hold only"),
            ("long id", format!(r#"{{"version":1,"sources":[{{"id":"{}","kind":"local"}}]}}"#, "a".repeat(65)), "longer than 64"),
            ("bad confirm_scope", r#"{"version":1,"sources":[{"id":"a","kind":"local","confirm_scope":"sometimes"}]}"#.into(), "unknown confirm_scope \"sometimes\""),
        ];
        for (name, text, want) in cases {
            let file = TempPath::with(text);
            let (p, report) = load_policy(Some(&file.0));
            assert_eq!(report.status, ConfigStatus::Rejected, "{name}");
            assert!(
                report.reasons.iter().any(|r| r.contains(want)),
                "{name}: wanted {want:?} in {:?}",
                report.reasons
            );
            // The whole file is refused: not even its good source is active.
            assert!(p.source("ok-source").is_none(), "{name}");
            assert_eq!(p.sources(), builtin_sources().as_slice(), "{name}");
            assert_eq!(decide(&p, None, TabsSpawn), A, "{name}");
            assert_eq!(decide(&p, Some(READONLY_EXTERNAL), TabsList), A, "{name}");
            assert_eq!(decide(&p, Some("a"), TabsList), D, "{name}");
            assert_eq!(decide(&p, Some(LOCAL_CLI), OutputRead), D, "{name}");
            // The offline validator reports the same problem.
            let reasons = validate_config_file(&file.0).unwrap_err();
            assert!(
                reasons.iter().any(|r| r.contains(want)),
                "{name}: {reasons:?}"
            );
        }
    }

    #[test]
    fn every_problem_is_reported_at_once_and_bounded() {
        let file = TempPath::with(
            r#"{"version":3,"sources":[
                {"id":"local-cli","kind":"local"},
                {"id":"a","kind":"remote","allow":["nope"],"confirm_scope":"x"}]}"#,
        );
        let reasons = validate_config_file(&file.0).unwrap_err();
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        let many: Vec<String> = (0..500)
            .map(|i| format!(r#"{{"id":"s{i}","kind":"bad"}}"#))
            .collect();
        let file = TempPath::with(&format!(
            r#"{{"version":1,"sources":[{}]}}"#,
            many.join(",")
        ));
        let reasons = validate_config_file(&file.0).unwrap_err();
        assert_eq!(reasons.len(), MAX_REASONS + 1);
        assert!(reasons.last().unwrap().contains("450 more"));
    }

    #[test]
    fn missing_oversized_and_odd_files() {
        let missing = TempPath::new();
        let (p, report) = load_policy(Some(&missing.0));
        assert_eq!(report.status, ConfigStatus::Missing);
        assert!(report.reasons.is_empty());
        assert_eq!(p.sources(), builtin_sources().as_slice());
        assert!(validate_config_file(&missing.0).unwrap_err()[0].contains("does not exist"));

        let (_, report) = load_policy(None);
        assert_eq!(report.status, ConfigStatus::NoPath);

        // Just over the bound: refused before reading, with no JSON parse attempted.
        let mut big = String::from(r#"{"version":1,"sources":[]}"#);
        big.push_str(&" ".repeat(POLICY_MAX_BYTES as usize));
        let file = TempPath::with(&big);
        let (p, report) = load_policy(Some(&file.0));
        assert_eq!(report.status, ConfigStatus::Rejected);
        assert!(
            report.reasons[0].contains("larger than"),
            "{:?}",
            report.reasons
        );
        assert_eq!(p.sources(), builtin_sources().as_slice());
        // Exactly at the bound is fine.
        big.truncate(POLICY_MAX_BYTES as usize);
        let file = TempPath::with(&big);
        assert_eq!(load_policy(Some(&file.0)).1.status, ConfigStatus::Loaded);

        let dir = TempPath::new();
        std::fs::create_dir(&dir.0).unwrap();
        let (_, report) = load_policy(Some(&dir.0));
        assert_eq!(report.status, ConfigStatus::Rejected);
        assert!(report.reasons[0].contains("not a regular file"));
    }

    #[test]
    fn validate_summarises_the_configured_sources() {
        let file = TempPath::with(CONFIG);
        let summary = validate_config_file(&file.0).unwrap();
        assert_eq!(summary.version, 1);
        assert_eq!(summary.sources.len(), 8);
        assert!(summary.sources.iter().all(|s| !s.builtin));
        let json = serde_json::to_value(&summary.sources[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "linear-webhook",
                "kind": "webhook",
                "allow": ["tabs:spawn", "state:set", "groups:create"],
                "confirm": [],
                "confirm_scope": "always",
                "builtin": false,
            })
        );
        let careful = summary
            .sources
            .iter()
            .find(|s| s.id == "careful-local")
            .unwrap();
        assert_eq!(careful.confirm_scope, ConfirmScope::OncePerSource);
        // The seed's example verbatim loads.
        let seed = TempPath::with(
            r#"{
  "version": 1,
  "sources": [
    {
      "id": "linear-webhook",
      "kind": "webhook",
      "allow": ["tabs:spawn", "groups:create", "state:set"],
      "confirm": [],
      "confirm_scope": "always"
    }
  ]
}"#,
        );
        assert!(validate_config_file(&seed.0).is_ok());
    }

    #[test]
    fn errors_carry_code_prompt_and_remedy() {
        let (p, file) = configured();
        let none = Approvals::new();
        let d = p.evaluate(
            Some("careful-local"),
            &[TabsClose],
            Some("8F2C0D4E-0000-4000-8000-000000000001"),
            "sessions.close",
            false,
            &none,
        );
        let e = d.clone().into_result().unwrap_err();
        assert_eq!(e.code, ErrorCode::ConfirmationRequired);
        for part in [
            "\"careful-local\"",
            "sessions.close",
            "8F2C0D4E-0000-4000-8000-000000000001",
            TabsClose.consequence(),
            "not asked again",
        ] {
            assert!(
                e.message.contains(part),
                "{part:?} missing from {}",
                e.message
            );
        }
        assert!(e.remedy.unwrap().contains("--confirm"));

        let e = p
            .evaluate(
                Some("linear-webhook"),
                &[TabsClose],
                None,
                "sessions.close",
                false,
                &none,
            )
            .to_error()
            .unwrap();
        assert_eq!(e.code, ErrorCode::Unauthorized);
        assert!(e.message.contains("\"linear-webhook\"") && e.message.contains("tabs:close"));
        let remedy = e.remedy.unwrap();
        assert!(remedy.contains(&file.0.display().to_string()), "{remedy}");

        let e = p
            .evaluate(
                None,
                &[OutputRead],
                Some("S"),
                "sessions.snapshot",
                false,
                &none,
            )
            .to_error()
            .unwrap();
        assert_eq!(e.code, ErrorCode::Unauthorized);
        assert!(e.remedy.unwrap().contains("--as local-reader"));

        let e = p
            .evaluate(
                Some("ghost"),
                &[TabsList],
                None,
                "sessions.list",
                false,
                &none,
            )
            .to_error()
            .unwrap();
        assert!(e.message.contains("unknown source \"ghost\""));
        assert!(e.remedy.unwrap().contains("maxx policy sources"));

        assert!(Decision::Allow {
            reason: String::new()
        }
        .to_error()
        .is_none());
    }

    #[test]
    fn policy_path_resolution() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            policy_path_from(env(&[
                ("MAXX_CONTROL_POLICY_FILE", "/p.json"),
                ("XDG_CONFIG_HOME", "/x"),
                ("HOME", "/h")
            ])),
            Some(PathBuf::from("/p.json"))
        );
        assert_eq!(
            policy_path_from(env(&[
                ("MAXX_CONTROL_POLICY_FILE", ""),
                ("XDG_CONFIG_HOME", "/x"),
                ("HOME", "/h")
            ])),
            Some(PathBuf::from("/x/maxx/control-policy.json"))
        );
        assert_eq!(
            policy_path_from(env(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/maxx/control-policy.json"))
        );
        assert_eq!(policy_path_from(env(&[])), None);
    }

    async fn spawn(path: Option<PathBuf>) -> ActorRef<PolicyMsg> {
        let (actor, _) = Actor::spawn(None, PolicyActor, path).await.unwrap();
        actor
    }

    async fn evaluate(
        actor: &ActorRef<PolicyMsg>,
        caller: &str,
        caps: &[Capability],
        confirm: bool,
    ) -> Decision {
        let caller = Some(caller.to_string());
        let capabilities = caps.to_vec();
        ractor::call!(actor, |reply| PolicyMsg::Evaluate {
            caller,
            capabilities,
            target: Some("S1".into()),
            method: "sessions.close",
            confirm,
            reply,
        })
        .unwrap()
    }

    async fn check(actor: &ActorRef<PolicyMsg>, caller: &str, cap: Capability) -> CheckResult {
        let caller = Some(caller.to_string());
        ractor::call!(actor, |reply| PolicyMsg::Check {
            caller,
            capability: cap,
            target: None,
            reply,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn actor_remembers_once_per_source_and_check_records_nothing() {
        let file = TempPath::with(CONFIG);
        let actor = spawn(Some(file.0.clone())).await;

        // check never records: asking twice, then evaluating, still needs confirmation.
        assert_eq!(check(&actor, "careful-local", TabsClose).await.decision, C);
        assert_eq!(
            evaluate(&actor, "careful-local", &[TabsClose], false)
                .await
                .kind(),
            C
        );
        assert_eq!(check(&actor, "careful-local", TabsClose).await.decision, C);

        // A confirmed request is allowed and remembered for that source and capability.
        assert!(evaluate(&actor, "careful-local", &[TabsClose], true)
            .await
            .is_allow());
        assert!(evaluate(&actor, "careful-local", &[TabsClose], false)
            .await
            .is_allow());
        let c = check(&actor, "careful-local", TabsClose).await;
        assert_eq!(c.decision, A);
        assert!(c.reason.contains("once_per_source"), "{}", c.reason);
        assert_eq!(
            evaluate(&actor, "careful-local", &[OutputRead], false)
                .await
                .kind(),
            C
        );

        // A confirmed request that is denied overall records nothing.
        assert_eq!(
            evaluate(&actor, "careful-local", &[OutputRead, ProfilesList], true)
                .await
                .kind(),
            D
        );
        assert_eq!(
            evaluate(&actor, "careful-local", &[OutputRead], false)
                .await
                .kind(),
            C
        );

        // `always` sources are asked every time.
        assert!(evaluate(&actor, "hook-confirm", &[InputSend], true)
            .await
            .is_allow());
        assert_eq!(
            evaluate(&actor, "hook-confirm", &[InputSend], false)
                .await
                .kind(),
            C
        );

        let report = ractor::call!(actor, PolicyMsg::Sources).unwrap();
        assert_eq!(report.config.status, ConfigStatus::Loaded);
        assert_eq!(
            report.approved_once,
            vec![Approval {
                source: "careful-local".into(),
                capability: TabsClose
            }]
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["sources"][0]["id"], LOCAL_CLI);
        assert_eq!(json["sources"][0]["builtin"], true);
        assert_eq!(json["config"]["status"], "loaded");
        assert_eq!(json["approved_once"][0]["capability"], "tabs:close");

        // A restart forgets the approvals.
        actor.stop(None);
        let actor = spawn(Some(file.0.clone())).await;
        assert_eq!(
            evaluate(&actor, "careful-local", &[TabsClose], false)
                .await
                .kind(),
            C
        );
        actor.stop(None);
    }

    #[tokio::test]
    async fn actor_reports_a_rejected_file_and_enforces_built_ins() {
        let file = TempPath::with(r#"{"version":1,"sources":[{"id":"local-cli","kind":"local"}]}"#);
        let actor = spawn(Some(file.0.clone())).await;
        let report = ractor::call!(actor, PolicyMsg::Sources).unwrap();
        assert_eq!(report.config.status, ConfigStatus::Rejected);
        assert!(report.config.reasons[0].contains("reserved"));
        assert_eq!(report.sources, builtin_sources());
        let json = serde_json::to_value(check(&actor, READONLY_EXTERNAL, TabsClose).await).unwrap();
        assert_eq!(json["decision"], "deny");
        assert_eq!(json["source"], READONLY_EXTERNAL);
        assert_eq!(json["source_kind"], "external");
        assert_eq!(json["capability"], "tabs:close");
        assert!(json["remedy"].is_string());
        let json = serde_json::to_value(check(&actor, "nobody", TabsList).await).unwrap();
        assert_eq!(json["decision"], "deny");
        assert_eq!(json["source_kind"], serde_json::Value::Null);
        assert!(evaluate(&actor, LOCAL_CLI, &[TabsClose], false)
            .await
            .is_allow());
        actor.stop(None);
    }
}
