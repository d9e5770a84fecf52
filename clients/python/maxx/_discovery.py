"""Find the daemon as the CLI does: ``socket=`` (the control dir is its folder), else
``control_dir=``, else ``$MAXX_CONTROL_DIR``, else ``/tmp/maxx-control-<euid>``; the socket is
``control.sock`` and the token ``token`` in that dir. The dir must be a real directory (not a
symlink), owned by us, with no group/other mode bits: anything else is refused, never
repaired (``unsafe_control_dir``), before anything is read from it."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Optional, Union

from .errors import MaxxError, client_error

SOCKET_FILE = "control.sock"
TOKEN_FILE = "token"
# The token is 64 hex chars; anything much bigger is not a token.
_TOKEN_MAX_BYTES = 4096

PathLike = Union[str, "os.PathLike[str]"]


def default_control_dir() -> str:
    """``$MAXX_CONTROL_DIR``, else ``/tmp/maxx-control-<euid>``."""
    env = os.environ.get("MAXX_CONTROL_DIR")
    if env:
        return env
    return f"/tmp/maxx-control-{os.geteuid()}"


@dataclass(frozen=True)
class Target:
    """Where requests go: the control dir (holding the token) and the socket path."""

    control_dir: str
    socket: str

    @staticmethod
    def resolve(
        control_dir: Optional[PathLike] = None, socket: Optional[PathLike] = None
    ) -> "Target":
        if socket is not None:
            sock = os.fspath(socket)
            folder = os.path.dirname(sock) or "."
            return Target(folder, sock)
        folder = os.fspath(control_dir) if control_dir is not None else default_control_dir()
        return Target(folder, os.path.join(folder, SOCKET_FILE))

    def no_daemon(self, why: str) -> MaxxError:
        return client_error(
            "no_daemon",
            f"no maxx daemon answered; tried {self.socket} ({why})",
            "start one with `maxx daemon --detach`, or point MAXX_CONTROL_DIR (control_dir=/socket=) "
            "at a running one",
        )

    def check_dir(self) -> None:
        """Refuse a control dir that is not ours; ``no_daemon`` when it does not exist."""
        try:
            st = os.lstat(self.control_dir)
        except FileNotFoundError:
            raise self.no_daemon("the control dir does not exist") from None
        except OSError as e:
            raise self.no_daemon(str(e)) from None
        why = None
        if stat.S_ISLNK(st.st_mode):
            why = "it is a symlink"
        elif not stat.S_ISDIR(st.st_mode):
            why = "it is not a directory"
        elif st.st_uid != os.geteuid():
            why = f"it is owned by uid {st.st_uid}, not {os.geteuid()}"
        elif st.st_mode & 0o077:
            why = f"its mode is {stat.S_IMODE(st.st_mode):o}, open to others (want 700)"
        if why is not None:
            raise client_error(
                "unsafe_control_dir",
                f"refusing control dir {self.control_dir}: {why}",
                "fix it as the message says (maxx never repairs a control dir), or point "
                "MAXX_CONTROL_DIR at a fresh path",
            )

    def read_token(self) -> str:
        """The token, read fresh (a daemon writes a new one at every start). A symlink, FIFO
        or anything but a regular file is refused without blocking."""
        path = os.path.join(self.control_dir, TOKEN_FILE)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except OSError as e:
            what = "it is a symlink" if e.errno == errno.ELOOP else e.strerror
            raise self.no_daemon(f"cannot read the token {path}: {what}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self.no_daemon(f"cannot read the token {path}: not a regular file")
            data = os.read(fd, _TOKEN_MAX_BYTES + 1)
        finally:
            os.close(fd)
        token = data.decode("utf-8", "replace").strip()
        if not token or len(data) > _TOKEN_MAX_BYTES:
            raise self.no_daemon(f"cannot read the token {path}: empty or malformed")
        return token
