"""Errors: every refusal is a :class:`MaxxError` carrying the wire's ``code``, ``message`` and
``remedy``; a subclass per common code, so ``except NotFound:`` works. Branch on ``code`` (or
the class), never on ``message``."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type


class MaxxError(Exception):
    """A request the daemon refused (``ok: false``), or one the client could not deliver.

    ``code`` is the wire's snake_case error code (``not_found``, ``unauthorized``, ...; the
    client-side ``no_daemon`` and ``timeout`` as the CLI uses them), ``remedy`` what a caller
    can do about it, ``details`` the whole wire error object (some codes carry more fields,
    e.g. ``reasons``)."""

    code: str
    message: str
    remedy: str
    details: Dict[str, Any]

    def __init__(
        self,
        code: str,
        message: str,
        remedy: str = "",
        details: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.remedy = remedy
        self.details = dict(details) if details is not None else {
            "code": code,
            "message": message,
            "remedy": remedy,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, remedy={self.remedy!r})"


class Unauthenticated(MaxxError):
    """``unauthenticated``: the token is missing or wrong (the daemon restarted?)."""


class Unauthorized(MaxxError):
    """``unauthorized``: the capability policy denied the caller source."""


class ConfirmationRequired(MaxxError):
    """``confirmation_required``: send the same request again with ``confirm=True`` once a
    person approved; ``message`` is the prompt."""


class NotFound(MaxxError):
    """``not_found``: no session by that id, prefix or ``%title``."""


class Ambiguous(MaxxError):
    """``ambiguous``: a selector names several sessions (``message`` lists them)."""


class InvalidRequest(MaxxError):
    """``invalid_request``: a param is wrong (also raised client-side before sending)."""


class AlreadyEnded(MaxxError):
    """``already_ended``: the session's program (or surface) is gone."""


class Unsupported(MaxxError):
    """``unsupported``: the request does not apply (e.g. the input queue is full)."""


class UnknownMethod(MaxxError):
    """``unknown_method``: the daemon does not implement the method (an older daemon?)."""


class TooLarge(MaxxError):
    """``too_large``: the request line is over 1 MiB (also raised client-side)."""


class Internal(MaxxError):
    """``internal``: the daemon failed, or its answer was unreadable."""


class Timeout(MaxxError):
    """``timeout``: ``run`` spent its budget, or the daemon did not answer in time
    (client-side, as the CLI does). A *wait* that times out is not an error: its result's
    ``outcome`` is ``"timeout"``."""


class PersistenceFailed(MaxxError):
    """``persistence_failed``: the change could not be written to disk, so it is not acknowledged."""


class RegistryUnreadable(MaxxError):
    """``registry_unreadable``: the daemon refuses mutations until its registry is repaired."""


class ForegroundBusy(MaxxError):
    """``foreground_busy``: ``run`` needs a shell at its prompt in the foreground."""


class Busy(MaxxError):
    """``busy``: every long-lived slot (watch, wait, run, attach) is taken; retry later."""


class UnsafeFile(MaxxError):
    """``unsafe_file``: a file the daemon uses is a symlink, FIFO, ... where a file belongs."""


class AlreadyRunning(MaxxError):
    """``already_running``: another daemon holds the control dir."""


class UnsafeControlDir(MaxxError):
    """``unsafe_control_dir``: the control dir is a symlink, not ours, or open to others."""


class FdLimit(MaxxError):
    """``fd_limit``: the daemon's open-files limit leaves no room for another session."""


class PtyExhausted(MaxxError):
    """``pty_exhausted``: the kernel had no pseudo-terminal left for a new session."""


class NoDaemon(MaxxError):
    """``no_daemon``: nothing answered at the socket, the control dir is missing, or the token
    is unreadable."""


CODES: Dict[str, Type[MaxxError]] = {
    "unauthenticated": Unauthenticated,
    "unauthorized": Unauthorized,
    "confirmation_required": ConfirmationRequired,
    "not_found": NotFound,
    "ambiguous": Ambiguous,
    "invalid_request": InvalidRequest,
    "already_ended": AlreadyEnded,
    "unsupported": Unsupported,
    "unknown_method": UnknownMethod,
    "too_large": TooLarge,
    "internal": Internal,
    "timeout": Timeout,
    "persistence_failed": PersistenceFailed,
    "registry_unreadable": RegistryUnreadable,
    "foreground_busy": ForegroundBusy,
    "busy": Busy,
    "unsafe_file": UnsafeFile,
    "already_running": AlreadyRunning,
    "unsafe_control_dir": UnsafeControlDir,
    "fd_limit": FdLimit,
    "pty_exhausted": PtyExhausted,
    "no_daemon": NoDaemon,
}
"""Wire code -> exception class. A code not listed here (a newer daemon) raises the base
:class:`MaxxError` with that code."""


def from_wire(error: Mapping[str, Any]) -> MaxxError:
    """The exception for a wire error object ``{code, message, remedy, ...}``."""
    code = str(error.get("code", "internal"))
    cls = CODES.get(code, MaxxError)
    return cls(code, str(error.get("message", "")), str(error.get("remedy", "")), error)


def client_error(code: str, message: str, remedy: str) -> MaxxError:
    """An error the client noticed itself (nothing answered, a bad argument, ...)."""
    return CODES.get(code, MaxxError)(code, message, remedy)
