"""A real daemon for the suite: ``$MAXX_BIN`` (the binary cargo built, set by
tests/python_client.rs), else the repo's ``target/debug/maxx``, on a temp control dir, with a
policy file granting screen reads to one local source. Waits poll with a deadline; no
fixed sleeps."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Callable, Iterator, Optional, TypeVar

import pytest

import maxx

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

READER = "reader"
"""A local source allowed screen reads (no source holds ``output:read`` by default)."""
CAREFUL = "careful"
"""A local source that must have closing a session confirmed."""
LIMITED = "limited"
"""A source allowed to list and nothing else."""

T = TypeVar("T")


def maxx_bin() -> str:
    path = os.environ.get("MAXX_BIN") or os.path.join(REPO, "target", "debug", "maxx")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no maxx binary at {path} (cargo build, or set MAXX_BIN)")
    return path


def poll(what: str, cond: Callable[[], Optional[T]], timeout: float = 10.0) -> T:
    """``cond()`` until it returns something, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        value = cond()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


class Daemon:
    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.control = os.path.join(tmp, "ctl")
        policy = os.path.join(tmp, "control-policy.json")
        with open(policy, "w") as f:
            json.dump(
                {
                    "version": 1,
                    "sources": [
                        {"id": READER, "kind": "local",
                         "allow": ["output:read", "tabs:list", "tabs:spawn", "input:send", "keys:press", "state:set",
                                   "surface:attach"],
                         "confirm": [], "confirm_scope": "always"},
                        {"id": CAREFUL, "kind": "local", "allow": ["tabs:list", "tabs:spawn"],
                         "confirm": ["tabs:close"], "confirm_scope": "always"},
                        {"id": LIMITED, "kind": "external", "allow": ["tabs:list"],
                         "confirm": [], "confirm_scope": "always"},
                    ],
                },
                f,
            )
        env = dict(os.environ)
        env.update(MAXX_CONTROL_DIR=self.control, HOME=tmp, MAXX_CONTROL_POLICY_FILE=policy)
        for k in ("XDG_CONFIG_HOME", "MAXX_PROFILES_FILE", "MAXX_SESSION_ID", "MAXX_SURFACE_ID", "MAXX_REGISTRATION_TOKEN"):
            env.pop(k, None)
        self.proc = subprocess.Popen(
            [maxx_bin(), "daemon", "--log-level", "warn"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        )
        sock = os.path.join(self.control, "control.sock")

        def answers() -> Optional[bool]:
            if self.proc.poll() is not None:
                pytest.fail(f"the daemon exited with {self.proc.returncode}")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(sock)
                return True
            except OSError:
                return None
            finally:
                s.close()

        poll("the daemon socket", answers)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="maxx-py") as tmp:
        d = Daemon(tmp)
        try:
            yield d
        finally:
            d.stop()


@pytest.fixture()
def client(daemon: Daemon) -> maxx.Client:
    return maxx.Client(control_dir=daemon.control)


@pytest.fixture()
def group() -> str:
    """A group label of this test's own."""
    return "py-" + uuid.uuid4().hex[:12]


SHELL = "exec /bin/sh"
"""A plain POSIX shell at its prompt (``sessions.run`` needs one)."""
