//! Typed requests: one params type per method, decoded from `(method, params)` at the
//! socket edge, with the seed's validation beside each.
//!
//! Methods come in families, one module each, and everything the daemon must know about
//! a method lives in its family's module, next to its decoder:
//!
//! | module | methods |
//! |---|---|
//! | [`create`] | `sessions.create`, `sessions.register-current` |
//! | [`records`] | `sessions.get`, `list`, `update`, `action`, `cancel`, `set-group`, `set-parent`, `archive`, `restart`, `set-restart-policy` |
//! | [`declare`] | the declaration verbs (`sessions.declare-state`, `set-metadata`, ...) and `event.emit` |
//! | [`screen`] | `sessions.snapshot`, `dump`, `inspect`, `run`, `send-keys`, `paste`, `resize`, `attach` |
//! | [`wait`] | `sessions.wait`, `watch`, `events`, `stream.watch`, `stream.wait` |
//! | [`daemon`] | `daemon.status`, `daemon.stats`, `profiles.list`, `policy.check`, `policy.sources` |
//!
//! Each family is a [`Family`]: a table of [`MethodSpec`]s (name, base capabilities,
//! whether it changes records, how it is served) and a decoder into the family's call
//! enum, with the per-request refinements (extra capabilities, the policy target) beside
//! it. [`Call`] is one family's call; the capability table, the list of methods and the
//! journal gate all derive from the families' tables.
//!
//! Params a method does not take are ignored, never refused, so the protocol can grow
//! without breaking a newer client against an older daemon; they are never *silently*
//! ignored either: [`Call::decode_reporting`] names every one (a path: `condition.foo`) and
//! the daemon answers with an `unknown_param` warning for each. The request *envelope*
//! ignores unknown fields too, as the brief requires.

pub mod create;
pub mod daemon;
pub mod declare;
pub mod records;
pub mod screen;
#[cfg(test)]
mod tests;

/// Every method's params object as the wire carries it, before validation: what a client
/// builds and serializes, and what the daemon's decoder reads. One type per method (or per
/// set of methods sharing their params), defined in its family's module beside its decoder.
pub mod wire {
    pub use super::create::wire::*;
    pub use super::daemon::wire::*;
    pub use super::declare::wire::*;
    pub use super::records::wire::*;
    pub use super::screen::wire::*;
    pub use super::validate::wire::*;
    pub use super::wait::wire::*;
}
pub mod validate;
pub mod wait;

pub use create::*;
pub use daemon::*;
pub use declare::*;
pub use records::*;
pub use screen::*;
pub use validate::{
    decode_error_message, json_depth, json_size, parse_session_id, redact_serde_values,
    validate_agent_type, validate_command, validate_depth, validate_env, validate_event_name,
    validate_group, validate_metadata_key, validate_metadata_map, validate_metadata_value,
    validate_result, validate_result_schema, validate_source, validate_status, validate_title,
    SessionRef,
};
pub use wait::*;

use crate::capability::Capability;
use crate::duration::duration_from_json;
use crate::error::{ErrorBody, ErrorCode};
use crate::limits::*;
use crate::session::{
    Lifecycle, Location, RestartMode, RestartPolicy, SplitDirection, WorkflowState,
};
use crate::stream::{AllCondition, StreamFilter};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;
use validate::*;

/// What the daemon knows about one method before it looks at the params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodSpec {
    /// The wire name (`"sessions.paste"`).
    pub name: &'static str,
    /// The capabilities every request of this method needs. A family may add to them per
    /// request ([`Family::capabilities`]); `docs/protocol.md` prints both.
    pub capabilities: &'static [Capability],
    /// Whether a request may change a session record, and so must be refused while the
    /// journal cannot be written (an `ok` always means "on disk"). A family may narrow it
    /// per request ([`Family::changes_records`]).
    pub changes_records: bool,
    /// How the daemon serves it.
    pub serve: Serve,
}

/// How the daemon serves a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    /// One message to the target session's actor and one answer. `input` methods type into
    /// the terminal and get the longer input budget.
    Session {
        /// Whether the method writes to the session's terminal.
        input: bool,
    },
    /// Answered by the daemon without a session's actor (or with more than one actor).
    Daemon,
    /// Holds its connection for long: a stream or a wait. These share a capped number of
    /// slots ([`crate::limits::MAX_LONG_LIVED_CONNECTIONS`]).
    Held,
}

/// A family of methods: their table, their decoder and their per-request facts.
pub trait Family: Sized {
    /// The family's methods, in documentation order.
    const METHODS: &'static [MethodSpec];

    /// Whether `method` is one of this family's.
    fn owns(method: &str) -> bool {
        Self::METHODS.iter().any(|s| s.name == method)
    }

    /// Decode `params` (an object) for `method`, one of this family's.
    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody>;

    /// The wire method name.
    fn method(&self) -> &'static str;

    /// The resource the request acts on, for the policy, prompts and logs (usually the
    /// session id).
    fn target(&self) -> Option<String>;

    /// The session whose actor serves a [`Serve::Session`] method.
    fn session_id(&self) -> Option<&str> {
        None
    }

    /// Every capability this request needs; by default the method's base set.
    fn capabilities(&self) -> Vec<Capability> {
        self.spec().capabilities.to_vec()
    }

    /// Whether this request may change a record; by default the method's flag.
    fn changes_records(&self) -> bool {
        self.spec().changes_records
    }

    /// The method's table entry.
    fn spec(&self) -> &'static MethodSpec {
        let method = self.method();
        Self::METHODS
            .iter()
            .find(|s| s.name == method)
            .expect("every family method has a table entry")
    }
}

/// A decoded, validated request: one family's call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `sessions.create`, `sessions.register-current`.
    Create(CreateCall),
    /// Session records: get, list, update, action, group and parent, archive, restart.
    Records(RecordsCall),
    /// Every declaration verb (`sessions.declare-state`, `sessions.set-metadata`, ...) and
    /// `event.emit`.
    Declare(DeclareParams),
    /// The terminal: reads, `run`, input, resize, attach.
    Screen(ScreenCall),
    /// Waits, watches, the audit log and the event stream.
    Wait(WaitCall),
    /// The daemon itself: status, stats, profiles, the policy.
    Daemon(DaemonCall),
}

/// Applies `$body` to the family call inside a [`Call`], whichever family it is.
macro_rules! each_family {
    ($call:expr, $f:ident => $body:expr) => {
        match $call {
            Call::Create($f) => $body,
            Call::Records($f) => $body,
            Call::Declare($f) => $body,
            Call::Screen($f) => $body,
            Call::Wait($f) => $body,
            Call::Daemon($f) => $body,
        }
    };
}

/// Every family's table, in documentation order.
fn tables() -> [&'static [MethodSpec]; 6] {
    [
        CreateCall::METHODS,
        RecordsCall::METHODS,
        DeclareParams::METHODS,
        ScreenCall::METHODS,
        WaitCall::METHODS,
        DaemonCall::METHODS,
    ]
}

/// Every method this daemon implements, with its table entry, in documentation order.
/// `debug.panic` (debug builds only) is not listed.
pub fn all_specs() -> impl Iterator<Item = &'static MethodSpec> {
    tables()
        .into_iter()
        .flatten()
        .filter(|s| s.name != DEBUG_PANIC)
}

/// Every method name this daemon implements, in documentation order.
pub fn all_methods() -> impl Iterator<Item = &'static str> {
    all_specs().map(|s| s.name)
}

/// The table entry of `method`, if this daemon implements it.
pub fn spec(method: &str) -> Option<&'static MethodSpec> {
    tables().into_iter().flatten().find(|s| s.name == method)
}

impl Call {
    /// [`Call::decode`], and the params it did not read (unknown to this daemon: ignored,
    /// and reported back as warnings).
    pub fn decode_reporting(
        method: &str,
        params: Option<Value>,
    ) -> Result<(Call, Vec<String>), ErrorBody> {
        let (call, ignored) = validate::collect_ignored(|| Call::decode(method, params));
        Ok((call?, ignored))
    }

    /// Decode and validate `params` for `method`. `params: null`/absent means `{}`.
    /// Params the method does not take are ignored ([`Call::decode_reporting`] names them).
    pub fn decode(method: &str, params: Option<Value>) -> Result<Call, ErrorBody> {
        let params = match params {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(ErrorBody::invalid("params must be a JSON object")),
        };
        // Backstop for any stored value a per-field check does not name: nothing deeper
        // than the params object, a map, and the deepest storable value.
        let depth = json_depth(&params);
        if depth > PARAMS_MAX_DEPTH {
            return Err(ErrorBody::invalid(format!(
                "params nest {depth} levels deep; a value may nest at most {JSON_MAX_DEPTH}"
            ))
            .with_remedy(format!(
                "flatten the deepest value to at most {JSON_MAX_DEPTH} nested arrays/objects; \
                 nothing was changed"
            )));
        }
        if CreateCall::owns(method) {
            CreateCall::decode(method, params).map(Call::Create)
        } else if RecordsCall::owns(method) {
            RecordsCall::decode(method, params).map(Call::Records)
        } else if DeclareParams::owns(method) {
            DeclareParams::decode(method, params).map(Call::Declare)
        } else if ScreenCall::owns(method) {
            ScreenCall::decode(method, params).map(Call::Screen)
        } else if WaitCall::owns(method) {
            WaitCall::decode(method, params).map(Call::Wait)
        } else if DaemonCall::owns(method) {
            DaemonCall::decode(method, params).map(Call::Daemon)
        } else {
            Err(unknown_method(method))
        }
    }

    /// The wire method name.
    pub fn method(&self) -> &'static str {
        each_family!(self, f => f.method())
    }

    /// The method's table entry.
    pub fn spec(&self) -> &'static MethodSpec {
        each_family!(self, f => f.spec())
    }

    /// Every capability this request needs: the method's base set and its family's
    /// refinements.
    pub fn capabilities(&self) -> Vec<Capability> {
        each_family!(self, f => f.capabilities())
    }

    /// The resource a request acts on, for policy prompts and logs.
    pub fn target(&self) -> Option<String> {
        each_family!(self, f => f.target())
    }

    /// The session whose actor serves a [`Serve::Session`] method.
    pub fn session_id(&self) -> Option<&str> {
        each_family!(self, f => f.session_id())
    }

    /// Whether the call may change a session record (and so writes the journal). Reads,
    /// waits, input and interrupts do not.
    pub fn changes_records(&self) -> bool {
        each_family!(self, f => f.changes_records())
    }

    /// Whether the request may hold its connection for long ([`Serve::Held`]).
    pub fn is_long_lived(&self) -> bool {
        self.spec().serve == Serve::Held
    }
}

/// The answer to a method this daemon does not implement, naming the ones it does.
pub(crate) fn unknown_method(method: &str) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::UnknownMethod,
        format!("unknown method {:?}", truncate(method, 64)),
    )
    .with_remedy(format!(
        "known methods: {}",
        all_methods().collect::<Vec<_>>().join(", ")
    ))
}
