"""The wire, shared by the sync and asyncio clients: one JSON request line per connection,
one response line back (or, for a stream, NDJSON lines until the daemon ends it). Reads are
bounded as the CLI's are (``RESPONSE_LINE_MAX_BYTES``)."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
import warnings
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Generic, Iterator, List, Optional, Tuple, TypeVar, cast

from ._calls import Call
from ._discovery import PathLike, Target
from .errors import MaxxError, client_error, from_wire

T = TypeVar("T")

REQUEST_LINE_MAX_BYTES = 1 << 20
"""The daemon refuses a longer request line (``too_large``); the client refuses it first."""
RESPONSE_LINE_MAX_BYTES = 64 << 20
"""The longest response line read (the CLI's bound)."""


class MaxxWarning(UserWarning):
    """A response's ``warnings`` entry (so far only ``unknown_param``: a param this daemon
    does not know was ignored). Issued with :func:`warnings.warn` unless the client has an
    ``on_warning`` callback."""

    def __init__(self, entry: Dict[str, Any]) -> None:
        super().__init__(f"{entry.get('code')}: {entry.get('message')} ({entry.get('param')})")
        self.entry = entry
        self.code = str(entry.get("code", ""))
        self.param = str(entry.get("param", ""))


WarningHook = Callable[[Dict[str, Any]], None]


class Options:
    """What every request of a client carries: where to, as whom, and the warning hook."""

    def __init__(
        self,
        control_dir: Optional[PathLike] = None,
        socket: Optional[PathLike] = None,
        as_: Optional[str] = None,
        confirm: bool = False,
        on_warning: Optional[WarningHook] = None,
        timeout: Optional[float] = None,
    ) -> None:
        self.target = Target.resolve(control_dir, socket)
        self.as_ = as_
        self.confirm = confirm
        self.on_warning = on_warning
        self.timeout = timeout

    def replaced(self, as_: Optional[str], confirm: Optional[bool]) -> "Options":
        """A copy acting as ``as_`` and/or with ``confirm`` (``None``: as this one)."""
        other = copy.copy(self)
        if as_ is not None:
            other.as_ = as_
        if confirm is not None:
            other.confirm = confirm
        return other

    def envelope(self, call: Call[Any], as_: Optional[str], confirm: Optional[bool]) -> bytes:
        """The request line, with a fresh token (a restarted daemon has a new one)."""
        self.target.check_dir()
        req: Dict[str, Any] = {
            "token": self.target.read_token(),
            "method": call.method,
            "params": call.params,
        }
        caller = as_ if as_ is not None else self.as_
        if caller is not None:
            req["caller"] = caller
        if confirm if confirm is not None else self.confirm:
            req["confirm"] = True
        line = json.dumps(req, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
        if len(line) > REQUEST_LINE_MAX_BYTES:
            raise client_error(
                "too_large",
                f"the request line is {len(line)} bytes; the limit is {REQUEST_LINE_MAX_BYTES}",
                "send less: one request line is at most 1 MiB",
            )
        return line

    def budget(self, call: Call[Any]) -> Optional[float]:
        """Seconds to wait for an answer: a wait's or run's own budget (plus slack), else the
        client's ``timeout`` when one was given, else the call's default (60 s)."""
        if call.waits or call.stream or self.timeout is None:
            return call.timeout
        return self.timeout

    def warn(self, response: Dict[str, Any]) -> None:
        for entry in response.get("warnings") or []:
            if not isinstance(entry, dict):
                continue
            if self.on_warning is not None:
                self.on_warning(entry)
            else:
                warnings.warn(MaxxWarning(entry), stacklevel=4)


def parse_line(line: bytes, *, stream: bool = False) -> Dict[str, Any]:
    """One line from the daemon, as a JSON object."""
    if not line:
        raise client_error(
            "internal",
            "the daemon closed the connection without answering",
            "retry; `maxx status` shows whether the daemon is running",
        )
    if len(line) > RESPONSE_LINE_MAX_BYTES or (not line.endswith(b"\n") and len(line) >= RESPONSE_LINE_MAX_BYTES):
        raise client_error(
            "too_large",
            f"a line from the daemon is over {RESPONSE_LINE_MAX_BYTES} bytes",
            "ask for less (e.g. a snapshot without scrollback)",
        )
    try:
        value = json.loads(line)
    except ValueError as e:
        raise client_error("internal", f"unreadable {'line' if stream else 'response'} from the daemon: {e}", "report it: this is a bug") from None
    if not isinstance(value, dict):
        raise client_error("internal", "a line from the daemon is not a JSON object", "report it: this is a bug")
    return value


def result_of(response: Dict[str, Any], options: Options) -> Any:
    """The ``result`` of an ``ok`` response, or the error raised."""
    if response.get("ok") is True:
        options.warn(response)
        return response.get("result")
    error = response.get("error")
    if not isinstance(error, dict):
        raise client_error("internal", f"a response with neither result nor error: {response}", "report it: this is a bug")
    raise from_wire(error)


def _timed_out(seconds: Optional[float]) -> MaxxError:
    return client_error(
        "timeout",
        f"the daemon did not answer within {seconds:g}s",
        "retry; a wait's answer comes within its own timeout plus slack",
    )


class _Tracker:
    """Follows a stream's position: ``cursor`` (bus cursor, ``stream.watch``) and ``last_seq``
    (audit seq, ``sessions.watch``), ``reset`` when the daemon reported a gap or dropped us."""

    def __init__(self, since: Optional[int]) -> None:
        self.cursor: Optional[int] = since
        self.last_seq: Optional[int] = None
        self.reset: Optional[Dict[str, Any]] = None
        self.end: Optional[Dict[str, Any]] = None

    def see(self, line: Dict[str, Any]) -> None:
        kind = line.get("type")
        if kind == "hello":
            c = line.get("cursor")
            if line.get("reset"):
                # The `since` asked for predates what the bus keeps: events up to
                # `dropped_through` are gone; the replay starts after it.
                self.reset = line
                d = line.get("dropped_through")
                self.cursor = d if isinstance(d, int) else c if isinstance(c, int) else self.cursor
            elif self.cursor is None and isinstance(c, int):
                # Live from here: the next event is after the bus's cursor now.
                self.cursor = c
        elif kind == "event":
            event = line.get("event")
            if isinstance(event, dict):
                if isinstance(event.get("cursor"), int):
                    self.cursor = event["cursor"]
                if isinstance(event.get("seq"), int) and "cursor" not in event:
                    self.last_seq = event["seq"]
        elif kind == "reset":
            self.reset = line
            if isinstance(line.get("resume_since"), int):
                self.cursor = line["resume_since"]
        elif kind == "end":
            self.end = line


class LineStream(Generic[T]):
    """A stream's lines as an iterator (``for line in client.watch(id)``). Close it (or use it
    in a ``with``) to end the stream early; the daemon sees the hang-up.

    ``cursor``: the last bus cursor seen (``stream_watch``; pass it as ``since`` to resume).
    ``last_seq``: the last audit seq seen (``watch``; ``events(since=last_seq)`` fills a gap).
    ``reset``: the ``reset`` line (or a ``hello`` with ``reset: true``) if the daemon reported
    a gap. ``end``: the ``end`` line once read."""

    def __init__(self, sock: socket.socket, options: Options, since: Optional[int], timeout: Optional[float]) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")
        self._options = options
        self._timeout = timeout
        self._track = _Tracker(since)
        self._first = True

    @property
    def cursor(self) -> Optional[int]:
        return self._track.cursor

    @property
    def last_seq(self) -> Optional[int]:
        return self._track.last_seq

    @property
    def reset(self) -> Optional[Dict[str, Any]]:
        return self._track.reset

    @property
    def end(self) -> Optional[Dict[str, Any]]:
        return self._track.end

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._file.closed:
            raise StopIteration
        try:
            raw = self._file.readline(RESPONSE_LINE_MAX_BYTES + 1)
        except socket.timeout:
            self.close()
            raise _timed_out(self._timeout) from None
        if not raw:
            self.close()
            if self._first:
                parse_line(raw, stream=True)  # raises: closed without answering
            raise StopIteration
        line = parse_line(raw, stream=True)
        if self._first:
            self._first = False
            if "ok" in line and "type" not in line:
                # An error before the first line comes as a normal response.
                self.close()
                result_of(line, self._options)
                raise StopIteration
            self._options.warn(line)
        self._track.see(line)
        return cast(T, line)

    def close(self) -> None:
        try:
            self._file.close()
        finally:
            self._sock.close()

    def __enter__(self) -> "LineStream[T]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


FRAME_INPUT = 0
FRAME_RESIZE = 1
FRAME_DETACH = 2
FRAME_MAX = 64 * 1024
"""An attach frame's payload bound: longer input is sent as several frames."""


def _frames(kind: int, payload: bytes) -> List[bytes]:
    if kind != FRAME_INPUT:
        return [bytes([kind]) + len(payload).to_bytes(4, "big") + payload]
    return [
        bytes([kind]) + len(chunk).to_bytes(4, "big") + chunk
        for chunk in (payload[i : i + FRAME_MAX] for i in range(0, len(payload), FRAME_MAX))
    ]


def _resize_payload(cols: int, rows: int) -> bytes:
    return int(cols).to_bytes(2, "big") + int(rows).to_bytes(2, "big")


class Attachment:
    """An attached terminal (``Client.attach``): ``session`` is the record the daemon sent
    first; ``read()`` the output bytes (b"" once it ended); ``send``, ``resize``, ``detach``."""

    def __init__(self, sock: socket.socket, pending: bytes, session: Dict[str, Any]) -> None:
        self._sock = sock
        self._pending = pending
        self.session = session

    def read(self, size: int = 65536, timeout: Optional[float] = None) -> bytes:
        """Up to ``size`` bytes of output as they come (waiting at most ``timeout`` seconds,
        then :class:`~maxx.errors.Timeout`; the attachment stays usable). ``b""``: it ended."""
        if self._pending:
            data, self._pending = self._pending[:size], self._pending[size:]
            return data
        self._sock.settimeout(timeout)
        try:
            return self._sock.recv(size)
        except socket.timeout:
            raise _timed_out(timeout) from None

    def send(self, data: bytes) -> None:
        """Type ``data`` (queued for the program; nothing answers)."""
        for f in _frames(FRAME_INPUT, data):
            self._sock.sendall(f)

    def resize(self, cols: int, rows: int) -> None:
        self._sock.sendall(_frames(FRAME_RESIZE, _resize_payload(cols, rows))[0])

    def detach(self) -> None:
        """Detach (the session keeps running) and close the connection."""
        try:
            self._sock.sendall(_frames(FRAME_DETACH, b"")[0])
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "Attachment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()


class AsyncAttachment:
    """:class:`Attachment` for asyncio."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: Dict[str, Any]) -> None:
        self._reader = reader
        self._writer = writer
        self.session = session

    async def read(self, size: int = 65536, timeout: Optional[float] = None) -> bytes:
        try:
            return await asyncio.wait_for(self._reader.read(size), timeout)
        except asyncio.TimeoutError:
            raise _timed_out(timeout) from None

    async def send(self, data: bytes) -> None:
        for f in _frames(FRAME_INPUT, data):
            self._writer.write(f)
        await self._writer.drain()

    async def resize(self, cols: int, rows: int) -> None:
        self._writer.write(_frames(FRAME_RESIZE, _resize_payload(cols, rows))[0])
        await self._writer.drain()

    async def detach(self) -> None:
        try:
            self._writer.write(_frames(FRAME_DETACH, b"")[0])
            await self._writer.drain()
        except OSError:
            pass
        await self.close()

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    async def __aenter__(self) -> "AsyncAttachment":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.detach()


class SyncTransport:
    """Blocking sockets: one connection per request."""

    _options: Options

    def _connect(self, call: Call[Any], as_: Optional[str], confirm: Optional[bool]) -> socket.socket:
        line = self._options.envelope(call, as_, confirm)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self._options.target.socket)
        except OSError as e:
            sock.close()
            raise self._options.target.no_daemon(e.strerror or str(e)) from None
        try:
            sock.sendall(line)
        except OSError as e:
            sock.close()
            raise client_error("internal", f"writing to the daemon failed: {e}", "retry") from None
        return sock

    def _call(self, call: Call[T], as_: Optional[str] = None, confirm: Optional[bool] = None) -> T:
        budget = self._options.budget(call)
        sock = self._connect(call, as_, confirm)
        try:
            # Half-close: the request is complete; a wait keeps going until it answers.
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(budget)
            with sock.makefile("rb") as f:
                try:
                    raw = f.readline(RESPONSE_LINE_MAX_BYTES + 1)
                except socket.timeout:
                    raise _timed_out(budget) from None
        finally:
            sock.close()
        return cast(T, result_of(parse_line(raw), self._options))

    def _stream(self, call: Call[T], as_: Optional[str] = None, confirm: Optional[bool] = None) -> LineStream[T]:
        sock = self._connect(call, as_, confirm)
        # The write side stays open: closing the connection ends the stream.
        sock.settimeout(call.timeout)
        since = call.params.get("since")
        return LineStream(sock, self._options, since if isinstance(since, int) else None, call.timeout)


    def _attach(self, call: Call[Any], as_: Optional[str] = None, confirm: Optional[bool] = None) -> Attachment:
        sock = self._connect(call, as_, confirm)
        sock.settimeout(call.timeout)
        # The first line is JSON, then raw bytes follow: read it off the socket ourselves and
        # keep what came after it.
        buf = b""
        try:
            while b"\n" not in buf and len(buf) <= RESPONSE_LINE_MAX_BYTES:
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    raise _timed_out(call.timeout) from None
                if not chunk:
                    break
                buf += chunk
            end = buf.find(b"\n") + 1 or len(buf)
            result = result_of(parse_line(buf[:end]), self._options)
        except BaseException:
            sock.close()
            raise
        return Attachment(sock, buf[end:], dict(result.get("session") or {}))


class AsyncLineStream(Generic[T]):
    """:class:`LineStream` for asyncio: ``async for line in client.watch(id)``."""

    def __init__(self, opener: Callable[[], Awaitable[Tuple[asyncio.StreamReader, asyncio.StreamWriter]]], options: Options, since: Optional[int], timeout: Optional[float]) -> None:
        self._opener = opener
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._options = options
        self._timeout = timeout
        self._track = _Tracker(since)
        self._first = True
        self._closed = False

    @property
    def cursor(self) -> Optional[int]:
        return self._track.cursor

    @property
    def last_seq(self) -> Optional[int]:
        return self._track.last_seq

    @property
    def reset(self) -> Optional[Dict[str, Any]]:
        return self._track.reset

    @property
    def end(self) -> Optional[Dict[str, Any]]:
        return self._track.end

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        if self._closed:
            raise StopAsyncIteration
        if self._reader is None:
            try:
                self._reader, self._writer = await self._opener()
            except BaseException:
                self._closed = True
                raise
        try:
            raw = await asyncio.wait_for(_readline(self._reader), self._timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise _timed_out(self._timeout) from None
        if not raw:
            await self.aclose()
            if self._first:
                parse_line(raw, stream=True)
            raise StopAsyncIteration
        line = parse_line(raw, stream=True)
        if self._first:
            self._first = False
            if "ok" in line and "type" not in line:
                await self.aclose()
                result_of(line, self._options)
                raise StopAsyncIteration
            self._options.warn(line)
        self._track.see(line)
        return cast(T, line)

    async def aclose(self) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass

    async def __aenter__(self) -> "AsyncLineStream[T]":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _readline(reader: asyncio.StreamReader) -> bytes:
    """One line, at most ``RESPONSE_LINE_MAX_BYTES`` (the reader's ``limit``)."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as e:
        return e.partial
    except asyncio.LimitOverrunError:
        raise client_error(
            "too_large",
            f"a line from the daemon is over {RESPONSE_LINE_MAX_BYTES} bytes",
            "ask for less (e.g. a snapshot without scrollback)",
        ) from None


class AsyncTransport:
    """asyncio streams: one connection per request."""

    _options: Options

    async def _open(self, call: Call[Any], as_: Optional[str], confirm: Optional[bool]) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        line = self._options.envelope(call, as_, confirm)
        try:
            reader, writer = await asyncio.open_unix_connection(
                self._options.target.socket, limit=RESPONSE_LINE_MAX_BYTES + 1
            )
        except OSError as e:
            raise self._options.target.no_daemon(e.strerror or str(e)) from None
        try:
            writer.write(line)
            await writer.drain()
        except OSError as e:
            writer.close()
            raise client_error("internal", f"writing to the daemon failed: {e}", "retry") from None
        return reader, writer

    async def _call(self, call: Call[T], as_: Optional[str] = None, confirm: Optional[bool] = None) -> T:
        budget = self._options.budget(call)
        reader, writer = await self._open(call, as_, confirm)
        try:
            if writer.can_write_eof():
                writer.write_eof()
            try:
                raw = await asyncio.wait_for(_readline(reader), budget)
            except asyncio.TimeoutError:
                raise _timed_out(budget) from None
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
        return cast(T, result_of(parse_line(raw), self._options))

    async def _attach(self, call: Call[Any], as_: Optional[str] = None, confirm: Optional[bool] = None) -> AsyncAttachment:
        reader, writer = await self._open(call, as_, confirm)
        try:
            try:
                raw = await asyncio.wait_for(_readline(reader), call.timeout)
            except asyncio.TimeoutError:
                raise _timed_out(call.timeout) from None
            result = result_of(parse_line(raw), self._options)
        except BaseException:
            writer.close()
            raise
        return AsyncAttachment(reader, writer, dict(result.get("session") or {}))

    def _stream(self, call: Call[T], as_: Optional[str] = None, confirm: Optional[bool] = None) -> AsyncLineStream[T]:
        since = call.params.get("since")
        # Opened at the first `async for` step (so the call itself needs no running loop).
        return AsyncLineStream(lambda: self._open(call, as_, confirm), self._options, since if isinstance(since, int) else None, call.timeout)


__all__: List[str] = [
    "AsyncAttachment",
    "Attachment",
    "AsyncLineStream",
    "LineStream",
    "MaxxWarning",
    "Options",
    "RESPONSE_LINE_MAX_BYTES",
    "REQUEST_LINE_MAX_BYTES",
]
