//! The daemon family: `daemon.status`, `daemon.stats`, `daemon.stop`, `daemon.reload`,
//! `profiles.list`, `policy.check`, `policy.sources` (and `debug.panic` in debug builds).
//! None needs a session's actor.

use super::*;

/// `debug.panic`: in debug builds only; a release build answers `unknown_method`.
pub const DEBUG_PANIC: &str = "debug.panic";

/// A call to the daemon itself.
#[derive(Debug, Clone, PartialEq)]
pub enum DaemonCall {
    /// `daemon.status`: version, pid, control dir, counts by lifecycle, bus cursor.
    Status,
    /// `daemon.stats`: counts of live daemon objects, for diagnostics and leak tests.
    Stats,
    /// `profiles.list`: profile names and env key names (never values).
    ProfilesList,
    /// `policy.check`: the decision for (the request's caller, capability, target), with no
    /// side effect.
    PolicyCheck {
        /// The capability to evaluate.
        capability: Capability,
        /// The target, if any.
        target: Option<String>,
    },
    /// `policy.sources`: the active sources and the fate of the policy file.
    PolicySources,
    /// `daemon.stop`: a clean stop (as SIGTERM), after the answer is written.
    Stop,
    /// `daemon.reload`: read the policy file again (as SIGHUP).
    Reload,
    /// `daemon.whoami`: who the daemon takes the caller for (source, peer uid), and which
    /// daemon answers. Never the token.
    Whoami,
    /// `debug.panic` (debug builds only): make a session's actor panic, to test recovery.
    #[cfg(debug_assertions)]
    DebugPanic(SessionRef),
}

const fn daemon(name: &'static str, capabilities: &'static [Capability]) -> MethodSpec {
    MethodSpec {
        name,
        capabilities,
        changes_records: false,
        serve: Serve::Daemon,
    }
}

impl Family for DaemonCall {
    const METHODS: &'static [MethodSpec] = &[
        daemon("profiles.list", &[Capability::ProfilesList]),
        daemon("daemon.status", &[Capability::TabsList]),
        daemon("daemon.stats", &[Capability::TabsList]),
        // Stopping ends every session's process.
        daemon("daemon.stop", &[Capability::TabsClose]),
        // Applies only what the owner wrote in the policy file; a refused file changes nothing.
        daemon("daemon.reload", &[]),
        // Says only what the caller already is and which daemon it reached.
        daemon("daemon.whoami", &[]),
        daemon("policy.check", &[]),
        daemon("policy.sources", &[]),
        daemon(DEBUG_PANIC, &[Capability::TabsClose]),
    ];

    fn owns(method: &str) -> bool {
        (cfg!(debug_assertions) || method != DEBUG_PANIC)
            && Self::METHODS.iter().any(|s| s.name == method)
    }

    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody> {
        let call = match method {
            "daemon.stats" => {
                let _: Empty = decode(params)?;
                DaemonCall::Stats
            }
            "profiles.list" => {
                let _: Empty = decode(params)?;
                DaemonCall::ProfilesList
            }
            "policy.check" => {
                let raw: wire::PolicyCheck = decode(params)?;
                if let Some(t) = &raw.target {
                    check_chars("target", t, 256)?;
                }
                DaemonCall::PolicyCheck {
                    capability: Capability::parse(&raw.capability)?,
                    target: raw.target,
                }
            }
            "policy.sources" => {
                let _: Empty = decode(params)?;
                DaemonCall::PolicySources
            }
            // Fault injection exists only in debug builds: a release build answers
            // `unknown_method`.
            #[cfg(debug_assertions)]
            "debug.panic" => DaemonCall::DebugPanic(SessionRef::decode(params)?),
            "daemon.status" => {
                let _: Empty = decode(params)?;
                DaemonCall::Status
            }
            "daemon.stop" => {
                let _: Empty = decode(params)?;
                DaemonCall::Stop
            }
            "daemon.reload" => {
                let _: Empty = decode(params)?;
                DaemonCall::Reload
            }
            "daemon.whoami" => {
                let _: Empty = decode(params)?;
                DaemonCall::Whoami
            }
            other => return Err(unknown_method(other)),
        };
        Ok(call)
    }

    fn method(&self) -> &'static str {
        match self {
            DaemonCall::Status => "daemon.status",
            DaemonCall::Stats => "daemon.stats",
            DaemonCall::ProfilesList => "profiles.list",
            DaemonCall::PolicyCheck { .. } => "policy.check",
            DaemonCall::PolicySources => "policy.sources",
            DaemonCall::Stop => "daemon.stop",
            DaemonCall::Reload => "daemon.reload",
            DaemonCall::Whoami => "daemon.whoami",
            #[cfg(debug_assertions)]
            DaemonCall::DebugPanic(_) => DEBUG_PANIC,
        }
    }

    fn target(&self) -> Option<String> {
        match self {
            #[cfg(debug_assertions)]
            DaemonCall::DebugPanic(r) => Some(r.session_id.clone()),
            _ => None,
        }
    }
}

/// The params objects of this family's methods as the wire carries them: what a client
/// builds (and serializes) and what the decoder reads before it validates.
pub(crate) mod wire {
    use super::*;
    use serde::Serialize;

    /// `policy.check`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct PolicyCheck {
        /// Capability wire name, e.g. `tabs:close`.
        pub capability: String,
        /// The resource (usually a session id).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub target: Option<String>,
    }
}
