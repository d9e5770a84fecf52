//! The wait family: waiting for and following what happens: `sessions.wait`,
//! `sessions.watch`, `sessions.events`, `stream.watch`, `stream.wait`.

use super::*;

/// A wait, a watch, or a read of what happened.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitCall {
    /// `sessions.wait`
    Wait(WaitParams),
    /// `sessions.watch` (streaming)
    Watch(WatchParams),
    /// `sessions.events`
    Events(EventsParams),
    /// `stream.watch` (streaming)
    StreamWatch(StreamWatchParams),
    /// `stream.wait`
    StreamWait(StreamWaitParams),
}

const fn follow(name: &'static str, serve: Serve) -> MethodSpec {
    MethodSpec {
        name,
        capabilities: &[Capability::TabsList],
        changes_records: false,
        serve,
    }
}

impl Family for WaitCall {
    const METHODS: &'static [MethodSpec] = &[
        follow("sessions.wait", Serve::Held),
        follow("sessions.watch", Serve::Held),
        follow("sessions.events", Serve::Session { input: false }),
        follow("stream.watch", Serve::Held),
        follow("stream.wait", Serve::Held),
    ];

    fn decode(method: &str, params: Value) -> Result<Self, ErrorBody> {
        let call = match method {
            "sessions.wait" => WaitCall::Wait(WaitParams::decode(params)?),
            "sessions.watch" => WaitCall::Watch(WatchParams::decode(params)?),
            "sessions.events" => WaitCall::Events(EventsParams::decode(params)?),
            "stream.watch" => WaitCall::StreamWatch(StreamWatchParams::decode(params)?),
            "stream.wait" => WaitCall::StreamWait(StreamWaitParams::decode(params)?),
            other => return Err(unknown_method(other)),
        };
        Ok(call)
    }

    fn method(&self) -> &'static str {
        match self {
            WaitCall::Wait(_) => "sessions.wait",
            WaitCall::Watch(_) => "sessions.watch",
            WaitCall::Events(_) => "sessions.events",
            WaitCall::StreamWatch(_) => "stream.watch",
            WaitCall::StreamWait(_) => "stream.wait",
        }
    }

    /// A stream's target is its group, else its session.
    fn target(&self) -> Option<String> {
        match self {
            WaitCall::StreamWatch(p) => p.filter.group.clone().or(p.filter.session_id.clone()),
            WaitCall::StreamWait(p) => p.filter.group.clone().or(p.filter.session_id.clone()),
            other => other.session_id().map(str::to_string),
        }
    }

    fn session_id(&self) -> Option<&str> {
        match self {
            WaitCall::Wait(p) => Some(&p.session_id),
            WaitCall::Watch(p) => Some(&p.session_id),
            WaitCall::Events(p) => Some(&p.session_id),
            WaitCall::StreamWatch(_) | WaitCall::StreamWait(_) => None,
        }
    }

    /// `sessions.wait` with `until`/`regex` reads the screen: `output:read`.
    fn capabilities(&self) -> Vec<Capability> {
        match self {
            WaitCall::Wait(p) if matches!(p.condition, WaitCondition::Text(_)) => {
                vec![Capability::OutputRead]
            }
            _ => self.spec().capabilities.to_vec(),
        }
    }
}

/// A text condition for `sessions.wait` / `sessions.run`.
#[derive(Debug, Clone)]
pub enum TextPattern {
    /// A substring.
    Literal(String),
    /// A regex (validated).
    Regex(regex::Regex),
}

impl PartialEq for TextPattern {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TextPattern::Literal(a), TextPattern::Literal(b)) => a == b,
            (TextPattern::Regex(a), TextPattern::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl Eq for TextPattern {}

impl TextPattern {
    /// Whether a logical line matches.
    pub fn matches(&self, line: &str) -> bool {
        match self {
            TextPattern::Literal(s) => line.contains(s.as_str()),
            TextPattern::Regex(r) => r.is_match(line),
        }
    }
}

/// A text wait: the pattern, and whether lines holding OSC 133 input cells are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextWait {
    /// What a logical line must contain or match.
    pub pattern: TextPattern,
    /// `output_only`: ignore logical lines that hold a cell the program wrote between
    /// OSC 133 `B` and `C` (typed input). With no such marks it filters nothing.
    pub output_only: bool,
}

/// Compile a `--regex` (bounded size), or refuse it.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, ErrorBody> {
    if pattern.len() > PATTERN_MAX_BYTES {
        return Err(ErrorBody::invalid("regex is too long"));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| ErrorBody::invalid(format!("invalid regex: {e}")))
}

/// What `sessions.wait` waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitCondition {
    /// `--lifecycle L`: level-triggered on the Maxx-owned lifecycle.
    Lifecycle(Lifecycle),
    /// `--state S`: level-triggered on the declared status.
    State(String),
    /// `--event E`: edge-triggered on a new `emit-event` named E, after audit seq `since`
    /// (default: the last seq when the wait begins).
    Event {
        /// Event name.
        name: String,
        /// Baseline audit seq; `None` = the current last seq.
        since: Option<u64>,
    },
    /// `--until TEXT` / `--regex RE` (`--output-only`): a logical screen line matches
    /// (level-triggered on the screen; gated by output:read).
    Text(TextWait),
}

/// `sessions.wait` params.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitParams {
    /// Canonical session id.
    pub session_id: String,
    /// The condition.
    pub condition: WaitCondition,
    /// How long to wait (default 30 s, at most 1 h).
    pub timeout: Duration,
}

impl WaitParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: wire::Wait = decode(params)?;
        let session_id = parse_session_id("session_id", &raw.session_id)?;
        let given = [
            raw.lifecycle.is_some(),
            raw.state.is_some(),
            raw.event.is_some(),
            raw.until.is_some(),
            raw.regex.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(ErrorBody::invalid(
                "sessions.wait takes exactly one of state, event, lifecycle, until, regex",
            ));
        }
        let condition = if let Some(l) = raw.lifecycle {
            WaitCondition::Lifecycle(l)
        } else if let Some(s) = raw.state {
            validate_status(&s)?;
            WaitCondition::State(s)
        } else if let Some(e) = raw.event {
            validate_event_name(&e)?;
            WaitCondition::Event {
                name: e,
                since: raw.since,
            }
        } else if let Some(text) = raw.until {
            if text.is_empty() || text.len() > PATTERN_MAX_BYTES {
                return Err(ErrorBody::invalid("until must be 1..=4096 bytes"));
            }
            WaitCondition::Text(TextWait {
                pattern: TextPattern::Literal(text),
                output_only: raw.output_only,
            })
        } else {
            WaitCondition::Text(TextWait {
                pattern: TextPattern::Regex(compile_regex(
                    raw.regex.as_deref().unwrap_or_default(),
                )?),
                output_only: raw.output_only,
            })
        };
        if raw.since.is_some() && !matches!(condition, WaitCondition::Event { .. }) {
            return Err(ErrorBody::invalid("since is only valid with event"));
        }
        if raw.output_only && !matches!(condition, WaitCondition::Text(_)) {
            return Err(ErrorBody::invalid(
                "output_only is only valid with until or regex",
            ));
        }
        let timeout = decode_timeout(raw.timeout.as_ref())?.unwrap_or(WAIT_DEFAULT_TIMEOUT);
        Ok(WaitParams {
            session_id,
            condition,
            timeout,
        })
    }
}

/// `sessions.watch` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchParams {
    /// Canonical session id.
    pub session_id: String,
    /// Stop after this long (at most 1 h); `None` runs until the session ends or the
    /// caller disconnects.
    pub timeout: Option<Duration>,
}

impl WatchParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: wire::Watch = decode(params)?;
        Ok(WatchParams {
            session_id: parse_session_id("session_id", &raw.session_id)?,
            timeout: decode_timeout(raw.timeout.as_ref())?,
        })
    }
}

/// `sessions.events` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsParams {
    /// Canonical session id.
    pub session_id: String,
    /// Return entries with `seq` greater than this (default 0: everything).
    pub since: u64,
    /// Entries per answer, 1..=[`EVENTS_PAGE_MAX_ENTRIES`] (default: the maximum); an
    /// answer also stops at [`EVENTS_PAGE_MAX_BYTES`].
    ///
    /// [`EVENTS_PAGE_MAX_ENTRIES`]: crate::limits::EVENTS_PAGE_MAX_ENTRIES
    /// [`EVENTS_PAGE_MAX_BYTES`]: crate::limits::EVENTS_PAGE_MAX_BYTES
    pub limit: usize,
}

impl EventsParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: wire::Events = decode(params)?;
        let max = crate::limits::EVENTS_PAGE_MAX_ENTRIES;
        let limit = match raw.limit {
            None => max,
            Some(n) if (1..=max as u64).contains(&n) => n as usize,
            Some(_) => {
                return Err(
                    ErrorBody::invalid(format!("limit must be 1..={max}")).with_remedy(format!(
                        "page with a smaller limit and pass the answer's next_since as since; \
                         omit limit for {max}"
                    )),
                )
            }
        };
        Ok(EventsParams {
            session_id: parse_session_id("session_id", &raw.session_id)?,
            since: raw.since,
            limit,
        })
    }
}

/// `stream.watch` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamWatchParams {
    /// Which events.
    pub filter: StreamFilter,
    /// Replay retained events after this cursor first.
    pub since: Option<u64>,
    /// Stop after this long (at most 1 h).
    pub timeout: Option<Duration>,
}

/// `stream.watch` and `stream.wait` params as the wire carries them (`wire::Stream`):
/// a filter, and for `stream.wait` what to wait for.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RawStream {
    /// Only this group's events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Only this session's events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Only this surface's events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surface_id: Option<String>,
    /// Replay from this cursor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Seconds, or `500ms`/`30s`/`5m`/`1h` (`stream.wait`: default 30s, ≤ 3600s).
    #[cfg_attr(
        feature = "schemars",
        schemars(schema_with = "crate::duration::json_schema")
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Value>,
    /// `stream.wait`: the event to wait for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// `stream.wait`: the condition every member must meet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all: Option<String>,
    /// `stream.wait` with `all`: refuse a group with no members (`not_found`) instead of
    /// matching at once, and never match while it is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_members: Option<bool>,
}

impl RawStream {
    fn filter(&self) -> Result<StreamFilter, ErrorBody> {
        if let Some(g) = &self.group {
            validate_group(g)?;
        }
        Ok(StreamFilter {
            group: self.group.clone(),
            session_id: match &self.session_id {
                Some(id) => Some(parse_session_id("session_id", id)?),
                None => None,
            },
            surface_id: match &self.surface_id {
                Some(id) => Some(parse_uuid("surface_id", id)?),
                None => None,
            },
        })
    }
}

impl StreamWatchParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: RawStream = decode(params)?;
        if raw.event.is_some() || raw.all.is_some() || raw.require_members.is_some() {
            return Err(ErrorBody::invalid(
                "event, all and require_members belong to stream.wait, not stream.watch",
            ));
        }
        Ok(StreamWatchParams {
            filter: raw.filter()?,
            since: raw.since,
            timeout: decode_timeout(raw.timeout.as_ref())?,
        })
    }
}

/// What `stream.wait` waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamWaitFor {
    /// A new event with this name passing the filter (edge-triggered).
    Event(String),
    /// Every member of the filter's group satisfies the condition (level-triggered).
    All {
        /// The condition.
        condition: AllCondition,
        /// `require_members`: an empty group is refused (`not_found`) when the wait
        /// begins, and does not match while it is empty; without it "every member" of
        /// no members holds at once.
        require_members: bool,
    },
}

/// `stream.wait` params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamWaitParams {
    /// Which events / which group.
    pub filter: StreamFilter,
    /// The condition.
    pub wait_for: StreamWaitFor,
    /// How long (default 30 s, at most 1 h).
    pub timeout: Duration,
}

impl StreamWaitParams {
    pub(crate) fn decode(params: Value) -> Result<Self, ErrorBody> {
        let raw: RawStream = decode(params)?;
        if raw.since.is_some() {
            return Err(ErrorBody::invalid("since belongs to stream.watch"));
        }
        let filter = raw.filter()?;
        let wait_for = match (raw.event, raw.all) {
            (Some(_), None) if raw.require_members.is_some() => {
                return Err(ErrorBody::invalid(
                    "require_members goes with all (a group wait), not event",
                ))
            }
            (Some(e), None) => {
                validate_event_name(&e)?;
                StreamWaitFor::Event(e)
            }
            (None, Some(all)) => {
                if filter.group.is_none()
                    || filter.session_id.is_some()
                    || filter.surface_id.is_some()
                {
                    return Err(ErrorBody::invalid("all needs group (and only group)"));
                }
                StreamWaitFor::All {
                    condition: AllCondition::parse(&all).map_err(ErrorBody::invalid)?,
                    require_members: raw.require_members.unwrap_or(false),
                }
            }
            _ => {
                return Err(ErrorBody::invalid(
                    "stream.wait takes exactly one of event, all",
                ))
            }
        };
        Ok(StreamWaitParams {
            filter,
            wait_for,
            timeout: decode_timeout(raw.timeout.as_ref())?.unwrap_or(WAIT_DEFAULT_TIMEOUT),
        })
    }
}

/// The params objects of this family's methods as the wire carries them: what a client
/// builds (and serializes) and what the decoder reads before it validates.
pub(crate) mod wire {
    use super::*;
    use serde::Serialize;

    pub use super::RawStream as Stream;

    /// `sessions.wait`: exactly one of `lifecycle`, `state`, `event`, `until`, `regex`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Wait {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Wait until the lifecycle is this (level-triggered).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub lifecycle: Option<Lifecycle>,
        /// Wait until the declared status is this (level-triggered).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub state: Option<String>,
        /// Wait for a new declared event with this name (edge-triggered).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub event: Option<String>,
        /// With `event`: count audit entries after this seq as new.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub since: Option<u64>,
        /// Budget: seconds, or `500ms`/`30s`/`5m`/`1h` (default 30s, ≤ 3600s).
        #[cfg_attr(
            feature = "schemars",
            schemars(schema_with = "crate::duration::json_schema")
        )]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub timeout: Option<Value>,
        /// Wait until a screen line contains this text (needs `output:read`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub until: Option<String>,
        /// Wait until a screen line matches this regex (needs `output:read`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub regex: Option<String>,
        /// With `until`/`regex`: ignore lines the user typed (OSC 133 input).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pub output_only: bool,
    }

    /// `sessions.watch`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Watch {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// How long to watch: seconds, or `30s`/`5m`/`1h`.
        #[cfg_attr(
            feature = "schemars",
            schemars(schema_with = "crate::duration::json_schema")
        )]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub timeout: Option<Value>,
    }

    /// `sessions.events`.
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
    pub struct Events {
        /// Session id (a UUID, any case).
        pub session_id: String,
        /// Only entries with a seq above this.
        #[serde(default)]
        pub since: u64,
        /// Entries per answer (1..=1000); absent = the maximum.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub limit: Option<u64>,
    }
}
