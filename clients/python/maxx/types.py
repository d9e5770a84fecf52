"""Typed results: the daemon's answers as ``TypedDict``s, exactly the wire's JSON (nothing is
renamed, derived or dropped; fields a newer daemon adds are simply there). Fields the daemon
omits when absent are not required keys: read them with ``.get``. Shapes from
``docs/protocol.md``."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

JSON = Any
"""Any JSON value (payloads, metadata values, schemas)."""


class Warning_(TypedDict):
    """One entry of a response's ``warnings``: ``{code: "unknown_param", param, message}``."""

    code: str
    param: str
    message: str


class _SessionRequired(TypedDict):
    session_id: str
    surface_id: str
    title: Optional[str]
    command: Optional[str]
    cwd: str
    status: Optional[str]
    lifecycle: str
    metadata: Dict[str, JSON]
    created_at: str
    updated_at: str
    pid: Optional[int]
    location: str
    focused: bool
    restart_count: int
    cols: int
    rows: int


class Session(_SessionRequired, total=False):
    """The session view (``result.session``; elements of ``result.sessions``)."""

    exit_code: int
    exit_signal: str
    split_target: str
    split_direction: str
    terminal_title: str
    restored: bool
    last_seen_at: str
    restart_policy: Dict[str, JSON]
    next_restart_at: str
    restart_gave_up: bool
    archive_reason: str
    group: str
    parent_id: str
    workflow_state: str
    workflow_state_at: str
    workflow_state_source: str
    summary: str
    summary_at: str
    summary_source: str
    result: str
    result_at: str
    result_source: str
    result_schema: Dict[str, JSON]
    agent_type: str
    agent_type_at: str
    agent_type_source: str


class AuditEntry(TypedDict):
    """One entry of a session's audit log (``events``, ``watch``, ``wait(event=...)``)."""

    seq: int
    kind: str
    name: Optional[str]
    message: Optional[str]
    payload: JSON
    source: str
    created_at: str
    session_id: str
    surface_id: str
    pid: Optional[int]


class _StreamEventRequired(TypedDict):
    schema: int
    cursor: int
    source_kind: str
    kind: str
    name: str
    source: str
    message: Optional[str]
    payload: JSON
    created_at: str
    resource_kind: str
    session_id: str
    surface_id: str
    pid: Optional[int]


class StreamEvent(_StreamEventRequired, total=False):
    """A bus event (``stream_watch``, ``stream_wait(event=...)``)."""

    seq: int
    group: str


class SessionResult(TypedDict):
    """``{session}``: most session verbs."""

    session: Session


class SessionList(TypedDict):
    """``sessions.list``."""

    sessions: List[Session]


class _WaitRequired(TypedDict):
    outcome: str
    session: Session


class WaitResult(_WaitRequired, total=False):
    """``sessions.wait``: ``outcome`` is ``matched``, ``timeout`` or ``ended``."""

    event: AuditEntry
    output_only_filtered: bool


class _EventsRequired(TypedDict):
    session_id: str
    events: List[AuditEntry]
    next_since: int
    more: bool


class EventsPage(_EventsRequired, total=False):
    """``sessions.events``: one page; pass ``next_since`` as the next ``since``. ``reset`` and
    ``dropped_through`` say entries up to that seq are no longer kept."""

    reset: bool
    dropped_through: int


class _MemberRequired(TypedDict):
    session_id: str
    lifecycle: str


class GroupMember(_MemberRequired, total=False):
    workflow_state: str
    exit_code: int
    exit_signal: str


class _StreamWaitRequired(TypedDict):
    outcome: str


class StreamWaitResult(_StreamWaitRequired, total=False):
    """``stream.wait``: ``outcome`` ``matched``/``timeout``/``ended``; ``stream_event`` for an
    ``event`` match, ``group`` and ``members`` for an ``all`` condition."""

    stream_event: StreamEvent
    group: str
    members: List[GroupMember]
    reason: str


class Cursor(TypedDict):
    x: int
    y: int
    visible: bool


class _ScreenRequired(TypedDict):
    schema_version: int
    session_id: str
    cols: int
    rows: int
    cursor: Cursor
    lines: List[str]
    scrollback: List[str]
    truncated: bool
    truncated_reason: Optional[str]
    title: Optional[str]


class ScreenState(_ScreenRequired, total=False):
    """``sessions.snapshot``: the screen as a grid fed every byte would show it."""

    cells: List[Dict[str, JSON]]
    scrollback_cells: List[Dict[str, JSON]]
    soft_wrap: List[bool]


class DumpResult(TypedDict):
    """``sessions.dump``."""

    text: str


class InspectResult(TypedDict, total=False):
    """``sessions.inspect``."""

    schema_version: int
    session_id: str
    grid: Dict[str, int]
    scrollback: Dict[str, int]
    alt_screen: bool
    bracketed_paste: bool
    app_cursor: bool
    foreground: Optional[Dict[str, JSON]]
    exited: bool
    title: Optional[str]
    backlog_bytes: int


class RunResult(TypedDict):
    """``sessions.run``: the command's exit code and output (nothing inferred)."""

    command: str
    exit_code: int
    output: str
    duration_ms: int
    truncated: bool


class ResizeResult(TypedDict):
    """``sessions.resize``."""

    schema_version: int
    session_id: str
    requested: Dict[str, int]
    applied: Dict[str, int]
    held: JSON


class KeeperStatus(TypedDict):
    """The keeper a daemon runs under (``daemon.status`` ``keeper``)."""

    pid: int
    connected: bool
    daemons_before: int


class DaemonStatus(TypedDict, total=False):
    """``daemon.status``."""

    version: str
    protocol: int
    pid: int
    """The daemon serving the socket (under a keeper: the keeper's child)."""
    control_dir: str
    sessions: int
    by_lifecycle: Dict[str, int]
    focused: Optional[str]
    asking: List[str]
    """Sessions with an open ask."""
    bus_cursor: int
    policy: Dict[str, JSON]
    registry_unreadable: Optional[Dict[str, str]]
    keeper: Optional[KeeperStatus]


DaemonStats = Dict[str, JSON]
"""``daemon.stats``: live counters by name (see docs/protocol.md)."""


class Profile(TypedDict, total=False):
    name: str
    command: Optional[str]
    agent_type: Optional[str]
    env_keys: List[str]
    metadata_keys: List[str]


class ProfileList(TypedDict):
    """``profiles.list``."""

    profiles: List[Profile]


class _PolicyCheckRequired(TypedDict):
    source: str
    source_kind: Optional[str]
    capability: str
    target: Optional[str]
    decision: str
    reason: str


class PolicyCheck(_PolicyCheckRequired, total=False):
    """``policy.check``: ``decision`` is ``allow``, ``deny`` or ``confirm``."""

    prompt: str
    remedy: str


class PolicySources(TypedDict):
    """``policy.sources``."""

    config: Dict[str, JSON]
    sources: List[Dict[str, JSON]]
    approved_once: List[JSON]


# Stream lines ------------------------------------------------------------------------------


class WatchSnapshot(TypedDict):
    """``sessions.watch``'s first line."""

    type: Literal["snapshot"]
    session: Session


class WatchEvent(TypedDict):
    """A new audit entry of the watched session."""

    type: Literal["event"]
    event: AuditEntry


class WatchLifecycle(TypedDict):
    """A lifecycle change of the watched session."""

    type: Literal["lifecycle"]
    lifecycle: str
    session: Session


class End(TypedDict, total=False):
    """The last line of a stream: ``reason`` ``ended``, ``timeout`` or ``dropped`` (watch);
    ``timeout`` or none (stream)."""

    type: Literal["end"]
    reason: str


WatchLine = Union[WatchSnapshot, WatchEvent, WatchLifecycle, End]
"""One line of ``sessions.watch``; switch on ``line["type"]``."""


class _HelloRequired(TypedDict):
    type: Literal["hello"]
    schema: int
    cursor: int


class StreamHello(_HelloRequired, total=False):
    """``stream.watch``'s first line. ``reset``/``dropped_through``: the ``since`` asked for
    predates what the bus keeps (or is from another daemon run): events up to
    ``dropped_through`` are gone."""

    reset: bool
    dropped_through: int


class StreamEventLine(TypedDict):
    """A bus event on ``stream.watch``."""

    type: Literal["event"]
    event: StreamEvent


class StreamReset(TypedDict):
    """The daemon dropped this subscriber (``slow_consumer``); resume with
    ``since=resume_since`` (the last cursor it was sent)."""

    type: Literal["reset"]
    reason: str
    resume_since: int


StreamLine = Union[StreamHello, StreamEventLine, StreamReset, End]
"""One line of ``stream.watch``; switch on ``line["type"]``."""
