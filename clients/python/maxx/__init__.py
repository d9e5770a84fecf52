"""maxx: a Python client for the maxx control socket.

>>> import maxx
>>> client = maxx.Client()                       # finds the daemon as the CLI does
>>> s = client.create(command="make test", group="ci")["session"]
>>> client.wait(s["session_id"], lifecycle="exited", timeout="10m")["outcome"]
'matched'

``Client`` (blocking) and ``AsyncClient`` (asyncio) have one method per verb; results are the
wire's JSON as ``TypedDict``s (:mod:`maxx.types`); refusals raise :class:`MaxxError`
subclasses carrying ``code``, ``message`` and ``remedy``.
"""

from ._calls import VERBS, Duration, methods, seconds
from ._discovery import default_control_dir
from ._transport import AsyncAttachment, AsyncLineStream, Attachment, LineStream, MaxxWarning
from .aio import AsyncClient
from .client import Client
from .errors import (
    CODES,
    AlreadyEnded,
    AlreadyRunning,
    Ambiguous,
    Busy,
    ConfirmationRequired,
    ForegroundBusy,
    Internal,
    InvalidRequest,
    MaxxError,
    NoDaemon,
    NotFound,
    PersistenceFailed,
    RegistryUnreadable,
    Timeout,
    TooLarge,
    Unauthenticated,
    Unauthorized,
    UnknownMethod,
    UnsafeControlDir,
    FdLimit,
    PtyExhausted,
    UnsafeFile,
    Unsupported,
)

__version__ = "0.1.0"

__all__ = [
    "AlreadyEnded",
    "AlreadyRunning",
    "AsyncAttachment",
    "Attachment",
    "Ambiguous",
    "AsyncClient",
    "AsyncLineStream",
    "Busy",
    "CODES",
    "Client",
    "ConfirmationRequired",
    "Duration",
    "ForegroundBusy",
    "Internal",
    "InvalidRequest",
    "LineStream",
    "MaxxError",
    "MaxxWarning",
    "NoDaemon",
    "NotFound",
    "PersistenceFailed",
    "RegistryUnreadable",
    "Timeout",
    "TooLarge",
    "Unauthenticated",
    "Unauthorized",
    "UnknownMethod",
    "UnsafeControlDir",
    "FdLimit",
    "PtyExhausted",
    "UnsafeFile",
    "Unsupported",
    "VERBS",
    "default_control_dir",
    "methods",
    "seconds",
]
