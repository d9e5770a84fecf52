"""The method table: one builder per verb, written once. A builder takes the verb's keyword
arguments, checks what only the client can know (a missing session outside a session), and
returns a :class:`Call`: the wire method, its params, and how long to wait for the answer.

``Client`` (``client.py``) and ``AsyncClient`` (``aio.py``) are generated from this module
by ``tools/generate.py`` (a test fails when they are stale), so the two cannot drift: same
names, same arguments, same result types. Params are passed through as given: selectors
(an id prefix, ``%title``) are resolved by the daemon, values are validated by the daemon.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, TypeVar, Union

from .errors import client_error
from .types import (
    JSON,
    DaemonStats,
    DaemonStatus,
    DumpResult,
    EventsPage,
    InspectResult,
    PolicyCheck,
    PolicySources,
    ProfileList,
    ResizeResult,
    RunResult,
    ScreenState,
    SessionList,
    SessionResult,
    StreamLine,
    StreamWaitResult,
    WaitResult,
    WatchLine,
)

T = TypeVar("T")

Duration = Union[int, float, str]
"""Seconds as a number, or a string: ``500ms``, ``30s``, ``5m``, ``1h``, ``1m30s``."""

CLIENT_TIMEOUT = 60.0
"""Seconds the client waits for an answer to a request that does not wait on purpose (the CLI's)."""
WAIT_SLACK = 15.0
"""Added to a wait's or run's own budget: the daemon answers ``timeout`` itself, and that
answer must arrive (the CLI's ``WAIT_SLACK``)."""
WAIT_DEFAULT = 30.0
RUN_DEFAULT = 600.0
WAIT_MAX = 3600.0


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, ready to send. ``T`` is the result type (for a stream: its line type)."""

    method: str
    params: Dict[str, Any]
    timeout: Optional[float]
    """Seconds to wait for the answer (for a stream: for each line); ``None``: no limit."""
    stream: bool = False
    waits: bool = False
    attach: bool = False
    """A wait or a run: ``timeout`` is its own budget plus slack, never the client's default."""


@dataclass(frozen=True)
class Verb:
    """A row of the method table: the client's name and the wire method it sends."""

    name: str
    method: str
    builder: Callable[..., Call[Any]]
    stream: bool
    attach: bool = False


VERBS: Dict[str, Verb] = {}
"""Client method name -> its row. ``submit`` and ``interrupt`` are ``sessions.action``
narrowed, as ``maxx mcp`` has them."""


def _verb(
    name: str, method: str, stream: bool = False, attach: bool = False
) -> Callable[[Callable[..., Call[T]]], Callable[..., Call[T]]]:
    def register(fn: Callable[..., Call[T]]) -> Callable[..., Call[T]]:
        VERBS[name] = Verb(name, method, fn, stream, attach)
        return fn

    return register


def methods() -> List[str]:
    """Every wire method the client sends, sorted."""
    return sorted({v.method for v in VERBS.values()})


_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def seconds(value: Optional[Duration]) -> Optional[float]:
    """A wire duration in seconds; ``None`` for absent or unreadable (the daemon judges it)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _PART.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    return total if pos == len(text) and pos > 0 else None


def _budget(timeout: Optional[Duration], default: float) -> float:
    """How long to wait for a wait's answer: its own timeout (or the default) plus slack."""
    own = seconds(timeout)
    if own is None:
        own = default if timeout is None else WAIT_MAX
    return min(own, WAIT_MAX) + WAIT_SLACK


def _params(**fields: Any) -> Dict[str, Any]:
    """The params object: ``None`` means absent, ``False`` flags are left out."""
    return {k: v for k, v in fields.items() if v is not None and v is not False}


def _self(session_id: Optional[str], verb: str) -> str:
    """A declaration or read names its session, else the session this process runs in
    (``$MAXX_SESSION_ID``), as the CLI does. Destructive verbs never default."""
    if session_id is not None:
        return session_id
    env = os.environ.get("MAXX_SESSION_ID")
    if env:
        return env
    raise client_error(
        "invalid_request",
        f"{verb}: no session_id given and MAXX_SESSION_ID is not set (not inside a maxx session)",
        "pass session_id (an id, a unique id prefix of 4+ hex digits, or %title)",
    )


def _call(method: str, params: Dict[str, Any]) -> Call[Any]:
    return Call(method, params, CLIENT_TIMEOUT)


def _waiting(method: str, params: Dict[str, Any], timeout: Optional[float]) -> Call[Any]:
    return Call(method, params, timeout, waits=True)


# sessions: create, read, change ------------------------------------------------------------


@_verb("create", "sessions.create")
def create(
    *,
    title: Optional[str] = None,
    command: Optional[str] = None,
    cwd: Optional[str] = None,
    env: Optional[Sequence[str]] = None,
    metadata: Optional[Mapping[str, JSON]] = None,
    status: Optional[str] = None,
    location: Optional[str] = None,
    split_target: Optional[str] = None,
    split_direction: Optional[str] = None,
    focus: Optional[bool] = None,
    cols: Optional[int] = None,
    rows: Optional[int] = None,
    agent_type: Optional[str] = None,
    result_schema: Optional[Mapping[str, JSON]] = None,
    group: Optional[str] = None,
    parent: Optional[str] = None,
    profile: Optional[str] = None,
    scrollback_lines: Optional[int] = None,
    restart: Optional[str] = None,
    restart_exit_codes: Optional[Sequence[int]] = None,
    max_restarts: Optional[int] = None,
    restart_window: Optional[Duration] = None,
    backoff: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.create``: start a program in a new PTY session (``command`` runs with
    ``/bin/sh -c``; none: the default shell). ``env`` is ``["KEY=VALUE", ...]``, given to the
    child only. Unlike the CLI, ``cwd`` is not filled in: absent means the daemon's ``$HOME``."""
    return _call(
        "sessions.create",
        {
            **_params(
                title=title, command=command, cwd=cwd, status=status, location=location,
                split_target=split_target, split_direction=split_direction, cols=cols, rows=rows,
                agent_type=agent_type, group=group, parent=parent, profile=profile,
                scrollback_lines=scrollback_lines, restart=restart, max_restarts=max_restarts,
                restart_window=restart_window, backoff=backoff,
            ),
            **({"env": [str(e) for e in env]} if env else {}),
            **({"metadata": dict(metadata)} if metadata is not None else {}),
            **({"focus": focus} if focus is not None else {}),
            **({"result_schema": dict(result_schema)} if result_schema is not None else {}),
            **({"restart_exit_codes": [int(c) for c in restart_exit_codes]} if restart_exit_codes is not None else {}),
        },
    )


@_verb("get", "sessions.get")
def get(session_id: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.get``: the session's record (default: ``$MAXX_SESSION_ID``)."""
    return _call("sessions.get", {"session_id": _self(session_id, "get")})


@_verb("list", "sessions.list")
def list(
    *,
    group: Optional[str] = None,
    parent: Optional[str] = None,
    metadata_filter: Optional[Sequence[Mapping[str, JSON]]] = None,
) -> Call[SessionList]:
    """``sessions.list``: every record, in creation order; ``metadata_filter`` is a list of
    ``{"key": K}`` (present) or ``{"key": K, "value": V}`` (equal), all of which must hold."""
    p = _params(group=group, parent=parent)
    if metadata_filter:
        p["metadata_filter"] = [dict(f) for f in metadata_filter]
    return _call("sessions.list", p)


@_verb("update", "sessions.update")
def update(
    session_id: str,
    *,
    status: Optional[str] = None,
    metadata: Optional[Mapping[str, JSON]] = None,
) -> Call[SessionResult]:
    """``sessions.update``: set the caller-owned ``status`` and/or merge ``metadata``."""
    p = _params(session_id=session_id, status=status)
    if metadata is not None:
        p["metadata"] = dict(metadata)
    return _call("sessions.update", p)


@_verb("action", "sessions.action")
def action(
    session_id: str,
    *,
    action: str,
    input: Optional[str] = None,
    signal: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.action``: ``focus``, ``input``, ``submit``, ``cancel``, ``close`` or
    ``interrupt`` (with an optional ``signal``)."""
    return _call(
        "sessions.action",
        _params(session_id=session_id, action=action, input=input, signal=signal),
    )


@_verb("submit", "sessions.action")
def submit(session_id: str, *, input: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.action`` ``submit``: type ``input`` as a paste, then Enter."""
    return _call("sessions.action", _params(session_id=session_id, action="submit", input=input))


@_verb("interrupt", "sessions.action")
def interrupt(session_id: str, *, signal: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.action`` ``interrupt``: Ctrl-C, or ``signal`` to the foreground group."""
    return _call("sessions.action", _params(session_id=session_id, action="interrupt", signal=signal))


@_verb("cancel", "sessions.cancel")
def cancel(session_id: str) -> Call[SessionResult]:
    """``sessions.cancel``: close the surface and end the program (idempotent)."""
    return _call("sessions.cancel", {"session_id": session_id})


@_verb("archive", "sessions.archive")
def archive(session_id: str, *, reason: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.archive``: end it for good (its record stays, ``lifecycle: archived``)."""
    return _call("sessions.archive", _params(session_id=session_id, reason=reason))


@_verb("restart", "sessions.restart")
def restart(
    session_id: str,
    *,
    command: Optional[str] = None,
    last_command: bool = False,
) -> Call[SessionResult]:
    """``sessions.restart``: a fresh PTY running ``command`` or the recorded command."""
    return _call(
        "sessions.restart",
        _params(session_id=session_id, command=command, last_command=last_command),
    )


@_verb("set_restart_policy", "sessions.set-restart-policy")
def set_restart_policy(
    session_id: str,
    *,
    restart: str,
    restart_exit_codes: Optional[Sequence[int]] = None,
    max_restarts: Optional[int] = None,
    restart_window: Optional[Duration] = None,
    backoff: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.set-restart-policy``: ``never``, ``on-failure`` or ``always``."""
    p = _params(
        session_id=session_id, restart=restart, max_restarts=max_restarts,
        restart_window=restart_window, backoff=backoff,
    )
    if restart_exit_codes is not None:
        p["restart_exit_codes"] = [int(c) for c in restart_exit_codes]
    return _call("sessions.set-restart-policy", p)


@_verb("register_current", "sessions.register-current")
def register_current(
    *,
    surface_id: Optional[str] = None,
    registration_token: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.register-current``: prove this process runs in a maxx session (default:
    ``$MAXX_SURFACE_ID`` and ``$MAXX_REGISTRATION_TOKEN`` from the environment)."""
    surface = surface_id or os.environ.get("MAXX_SURFACE_ID")
    token = registration_token or os.environ.get("MAXX_REGISTRATION_TOKEN")
    if not surface or not token:
        raise client_error(
            "invalid_request",
            "register_current: MAXX_SURFACE_ID and MAXX_REGISTRATION_TOKEN are not set "
            "(not inside a maxx session)",
            "run it inside a maxx session, or pass surface_id and registration_token",
        )
    return _call(
        "sessions.register-current",
        {"surface_id": surface, "registration_token": token},
    )


# waits and streams -------------------------------------------------------------------------


@_verb("wait", "sessions.wait")
def wait(
    session_id: Optional[str] = None,
    *,
    lifecycle: Optional[str] = None,
    state: Optional[str] = None,
    event: Optional[str] = None,
    until: Optional[str] = None,
    regex: Optional[str] = None,
    output_only: bool = False,
    since: Optional[int] = None,
    timeout: Optional[Duration] = None,
) -> Call[WaitResult]:
    """``sessions.wait``: block until exactly one condition holds. A timeout is an answer
    (``outcome: "timeout"``), not an exception. ``until``/``regex`` read the screen
    (``output:read``)."""
    return _waiting(
        "sessions.wait",
        _params(
            session_id=_self(session_id, "wait"), lifecycle=lifecycle, state=state, event=event,
            until=until, regex=regex, output_only=output_only, since=since, timeout=timeout,
        ),
        _budget(timeout, WAIT_DEFAULT),
    )


@_verb("watch", "sessions.watch", stream=True)
def watch(session_id: Optional[str] = None, *, timeout: Optional[Duration] = None) -> Call[WatchLine]:
    """``sessions.watch``: iterate the session's lines (``snapshot``, then ``event`` /
    ``lifecycle``, last ``end``). The iterator's ``last_seq`` is the last audit seq seen:
    after a disconnect, ``events(session_id, since=it.last_seq)`` fills the gap."""
    own = seconds(timeout)
    return Call(
        "sessions.watch",
        _params(session_id=_self(session_id, "watch"), timeout=timeout),
        None if own is None else own + WAIT_SLACK,
        stream=True,
    )


@_verb("events", "sessions.events")
def events(
    session_id: Optional[str] = None,
    *,
    since: int = 0,
    limit: Optional[int] = None,
) -> Call[EventsPage]:
    """``sessions.events``: one page of the audit log after ``since``; follow ``next_since``
    while ``more`` (``iter_events`` does)."""
    return _call(
        "sessions.events",
        _params(session_id=_self(session_id, "events"), since=since, limit=limit),
    )


@_verb("stream_watch", "stream.watch", stream=True)
def stream_watch(
    *,
    group: Optional[str] = None,
    session_id: Optional[str] = None,
    surface_id: Optional[str] = None,
    since: Optional[int] = None,
    timeout: Optional[Duration] = None,
) -> Call[StreamLine]:
    """``stream.watch``: iterate the event bus (``hello``, ``event``..., maybe ``reset``, then
    ``end``). The iterator's ``cursor`` is the last cursor seen (or the reset's
    ``resume_since``): pass it as ``since`` to resume without a gap."""
    own = seconds(timeout)
    return Call(
        "stream.watch",
        _params(group=group, session_id=session_id, surface_id=surface_id, since=since, timeout=timeout),
        None if own is None else own + WAIT_SLACK,
        stream=True,
    )


@_verb("stream_wait", "stream.wait")
def stream_wait(
    *,
    group: Optional[str] = None,
    session_id: Optional[str] = None,
    surface_id: Optional[str] = None,
    event: Optional[str] = None,
    all: Optional[str] = None,
    timeout: Optional[Duration] = None,
) -> Call[StreamWaitResult]:
    """``stream.wait``: an ``event`` on the bus, or ``all`` members of ``group`` meeting
    ``exited``, ``idle`` or ``declared:<state>``."""
    return _waiting(
        "stream.wait",
        _params(group=group, session_id=session_id, surface_id=surface_id, event=event, all=all, timeout=timeout),
        _budget(timeout, WAIT_DEFAULT),
    )


# declarations ------------------------------------------------------------------------------


def _declare(method: str, session_id: Optional[str], source: Optional[str], **fields: Any) -> Call[SessionResult]:
    verb = method.split(".", 1)[1]
    return _call(method, _params(session_id=_self(session_id, verb), source=source, **fields))


@_verb("declare_state", "sessions.declare-state")
def declare_state(
    session_id: Optional[str] = None,
    *,
    state: str,
    message: Optional[str] = None,
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.declare-state``: set ``status`` with an audit entry."""
    return _declare("sessions.declare-state", session_id, source, state=state, message=message)


@_verb("emit_event", "sessions.emit-event")
def emit_event(
    session_id: Optional[str] = None,
    *,
    event: str,
    payload: Optional[JSON] = None,
    message: Optional[str] = None,
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.emit-event``: an agent-declared event (any JSON ``payload``)."""
    return _declare("sessions.emit-event", session_id, source, event=event, payload=payload, message=message)


@_verb("event_emit", "event.emit")
def event_emit(
    session_id: Optional[str] = None,
    *,
    type: str,
    payload: Optional[JSON] = None,
    message: Optional[str] = None,
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``event.emit``: the seed's spelling of ``emit_event`` (``type`` is the event name)."""
    return _declare("event.emit", session_id, source, type=type, payload=payload, message=message)


@_verb("set_metadata", "sessions.set-metadata")
def set_metadata(
    session_id: Optional[str] = None,
    *,
    key: str,
    value: Optional[JSON] = None,
    value_json: Optional[str] = None,
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.set-metadata``: one key, to ``value`` (any JSON) or ``value_json`` (a JSON text)."""
    return _declare("sessions.set-metadata", session_id, source, key=key, value=value, value_json=value_json)


@_verb("remove_metadata", "sessions.remove-metadata")
def remove_metadata(
    session_id: Optional[str] = None,
    *,
    keys: Sequence[str],
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.remove-metadata``: remove these keys (absent ones are ignored)."""
    return _declare("sessions.remove-metadata", session_id, source, keys=[str(k) for k in keys])


@_verb("clear_metadata", "sessions.clear-metadata")
def clear_metadata(session_id: Optional[str] = None, *, source: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.clear-metadata``: empty the metadata map."""
    return _declare("sessions.clear-metadata", session_id, source)


@_verb("set_state", "sessions.set-state")
def set_state(
    session_id: Optional[str] = None,
    *,
    state: str,
    message: Optional[str] = None,
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.set-state``: the workflow state, ``running``, ``needsInput``, ``blocked``,
    ``complete`` or ``failed``."""
    return _declare("sessions.set-state", session_id, source, state=state, message=message)


@_verb("set_summary", "sessions.set-summary")
def set_summary(session_id: Optional[str] = None, *, summary: str, source: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.set-summary``."""
    return _declare("sessions.set-summary", session_id, source, summary=summary)


@_verb("set_result", "sessions.set-result")
def set_result(session_id: Optional[str] = None, *, result: str, source: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.set-result``: the session's answer (text; JSON satisfying ``result_schema``
    when one is declared)."""
    return _declare("sessions.set-result", session_id, source, result=result)


@_verb("clear_result", "sessions.clear-result")
def clear_result(session_id: Optional[str] = None, *, source: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.clear-result``."""
    return _declare("sessions.clear-result", session_id, source)


@_verb("set_result_schema", "sessions.set-result-schema")
def set_result_schema(
    session_id: Optional[str] = None,
    *,
    result_schema: Mapping[str, JSON],
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.set-result-schema``: the contract ``set_result`` must satisfy."""
    return _declare("sessions.set-result-schema", session_id, source, result_schema=dict(result_schema))


@_verb("clear_result_schema", "sessions.clear-result-schema")
def clear_result_schema(session_id: Optional[str] = None, *, source: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.clear-result-schema``."""
    return _declare("sessions.clear-result-schema", session_id, source)


@_verb("set_agent_type", "sessions.set-agent-type")
def set_agent_type(session_id: Optional[str] = None, *, agent_type: str, source: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.set-agent-type``."""
    return _declare("sessions.set-agent-type", session_id, source, agent_type=agent_type)


@_verb("ask", "sessions.ask")
def ask(
    session_id: Optional[str] = None,
    *,
    question: str,
    suggestions: Optional[Sequence[str]] = None,
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.ask``: ask a person for attention (advisory: nothing moves); the record
    keeps the open ask until it is answered or the session restarts."""
    return _declare(
        "sessions.ask",
        session_id,
        source,
        question=question,
        suggestions=list(suggestions) if suggestions is not None else None,
    )


@_verb("answer", "sessions.answer")
def answer(
    session_id: str,
    *,
    text: Optional[str] = None,
    choice: Optional[int] = None,
    ask_id: Optional[int] = None,
    source: Optional[str] = None,
) -> Call[SessionResult]:
    """``sessions.answer``: reply to the open ask with ``text`` or the ``choice``-th
    suggestion (from 1). Always names its session."""
    return _call(
        "sessions.answer",
        _params(session_id=session_id, answer=text, choice=choice, ask_id=ask_id, source=source),
    )


@_verb("set_group", "sessions.set-group")
def set_group(session_id: str, *, group: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.set-group``: join ``group`` (``None`` or ``""``: leave)."""
    return _call("sessions.set-group", _params(session_id=session_id, group=group))


@_verb("set_parent", "sessions.set-parent")
def set_parent(session_id: str, *, parent: Optional[str] = None) -> Call[SessionResult]:
    """``sessions.set-parent``: set the parent session (``None`` or ``""``: clear)."""
    return _call("sessions.set-parent", _params(session_id=session_id, parent=parent))


# screen and input --------------------------------------------------------------------------


@_verb("snapshot", "sessions.snapshot")
def snapshot(
    session_id: Optional[str] = None,
    *,
    scrollback: Union[bool, int, None] = None,
    cells: bool = False,
    unwrap: bool = False,
    tail: Optional[int] = None,
) -> Call[ScreenState]:
    """``sessions.snapshot`` (``output:read``): the screen; ``scrollback`` ``True``/``0`` all,
    N the newest N lines."""
    p = _params(session_id=_self(session_id, "snapshot"), cells=cells, unwrap=unwrap, tail=tail)
    if scrollback is not None:
        p["scrollback"] = scrollback
    return _call("sessions.snapshot", p)


@_verb("dump", "sessions.dump")
def dump(session_id: Optional[str] = None, *, scrollback: Union[bool, int, None] = None) -> Call[DumpResult]:
    """``sessions.dump`` (``output:read``): the screen as text."""
    p = _params(session_id=_self(session_id, "dump"))
    if scrollback is not None:
        p["scrollback"] = scrollback
    return _call("sessions.dump", p)


@_verb("inspect", "sessions.inspect")
def inspect(session_id: Optional[str] = None) -> Call[InspectResult]:
    """``sessions.inspect`` (``output:read``): terminal modes and the foreground process."""
    return _call("sessions.inspect", {"session_id": _self(session_id, "inspect")})


@_verb("run", "sessions.run")
def run(session_id: str, *, command: str, timeout: Optional[Duration] = None) -> Call[RunResult]:
    """``sessions.run`` (``output:read`` + ``input:send``): type one command line at the
    session's shell prompt and return its exit code and output. A spent budget raises
    :class:`~maxx.errors.Timeout`; ``timeout=0`` means no limit."""
    own = seconds(timeout)
    budget: Optional[float]
    if own == 0:
        budget = None
    else:
        budget = (RUN_DEFAULT if own is None and timeout is None else min(own or WAIT_MAX, WAIT_MAX)) + WAIT_SLACK
    return _waiting("sessions.run", _params(session_id=session_id, command=command, timeout=timeout), budget)


@_verb("send_keys", "sessions.send-keys")
def send_keys(session_id: str, *, keys: Sequence[str], literal: bool = False) -> Call[SessionResult]:
    """``sessions.send-keys``: key names (``Enter``, ``C-c``, ``Up``...) and text words,
    encoded for the program's terminal modes; ``literal``: every word is text."""
    if isinstance(keys, str):
        raise client_error(
            "invalid_request",
            "send_keys: keys is a string; pass a list of words, e.g. [\"echo hi\", \"Enter\"]",
            "wrap it in a list",
        )
    return _call("sessions.send-keys", _params(session_id=session_id, keys=[str(k) for k in keys], literal=literal))


@_verb("paste", "sessions.paste")
def paste(session_id: str, *, text: str) -> Call[SessionResult]:
    """``sessions.paste``: ``text`` as a bracketed paste when the program asked for one."""
    return _call("sessions.paste", {"session_id": session_id, "text": text})


@_verb("resize", "sessions.resize")
def resize(session_id: str, *, cols: int, rows: int) -> Call[ResizeResult]:
    """``sessions.resize``."""
    return _call("sessions.resize", {"session_id": session_id, "cols": cols, "rows": rows})


class Attached:
    """Marks :func:`attach`'s result: the client returns its ``Attachment`` object."""


@_verb("attach", "sessions.attach", attach=True)
def attach(
    session_id: Optional[str] = None,
    *,
    cols: Optional[int] = None,
    rows: Optional[int] = None,
) -> Call[Attached]:
    """``sessions.attach`` (``surface:attach`` + ``output:read``): a raw terminal connection
    to the session (default: the focused one). The returned attachment's ``session`` is the
    record; ``read()`` returns the screen's repaint and then the live output, ``send(bytes)``
    types, ``resize(cols, rows)`` resizes, ``detach()`` ends it. No session default from
    ``$MAXX_SESSION_ID``: absent means the daemon's focused session."""
    return Call(
        "sessions.attach",
        _params(session_id=session_id, cols=cols, rows=rows),
        CLIENT_TIMEOUT,
        attach=True,
    )


# daemon, profiles, policy ------------------------------------------------------------------


@_verb("status", "daemon.status")
def status() -> Call[DaemonStatus]:
    """``daemon.status``."""
    return _call("daemon.status", {})


@_verb("stats", "daemon.stats")
def stats() -> Call[DaemonStats]:
    """``daemon.stats``: live counters."""
    return _call("daemon.stats", {})


@_verb("profiles", "profiles.list")
def profiles() -> Call[ProfileList]:
    """``profiles.list`` (env values are never returned)."""
    return _call("profiles.list", {})


@_verb("policy_check", "policy.check")
def policy_check(*, capability: str, target: Optional[str] = None) -> Call[PolicyCheck]:
    """``policy.check``: what the policy would decide for the caller source; records nothing."""
    return _call("policy.check", _params(capability=capability, target=target))


@_verb("policy_sources", "policy.sources")
def policy_sources() -> Call[PolicySources]:
    """``policy.sources``."""
    return _call("policy.sources", {})


@_verb("whoami", "daemon.whoami")
def whoami() -> Call[JSON]:
    """``daemon.whoami``: the source the daemon resolved for this client, the peer's
    credentials, which daemon answered (never the token)."""
    return _call("daemon.whoami", {})


@_verb("reload", "daemon.reload")
def reload() -> Call[JSON]:
    """``daemon.reload``: read the policy file again; a refused file keeps the policy in
    force (``result["policy"]["applied"]`` says which)."""
    return _call("daemon.reload", {})


@_verb("stop", "daemon.stop")
def stop() -> Call[JSON]:
    """``daemon.stop``: answered, then the daemon stops cleanly (its sessions end)."""
    return _call("daemon.stop", {})

