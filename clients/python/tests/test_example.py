"""The README's supervisor flow, ``examples/supervisor.py``, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import maxx

from conftest import Daemon

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def test_supervisor_example_runs(daemon: Daemon, group: str) -> None:
    env = dict(os.environ, MAXX_CONTROL_DIR=daemon.control)
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "supervisor.py"), group],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, (out.stdout, out.stderr)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert sorted(r["title"] for r in rows) == sorted(f"{group}-{t}" for t in ("lint", "unit", "e2e"))
    for r in rows:
        assert r["exit_code"] == 0 and r["result"]["passed"] is True, r
    # Each answer was declared by the worker itself, from inside its session.
    client = maxx.Client(control_dir=daemon.control)
    for s in client.list(group=group)["sessions"]:
        assert s["workflow_state"] == "complete" and s["result_source"] == "local-cli"


def test_supervisor_example_without_a_daemon(tmp_path: object) -> None:
    env = dict(os.environ, MAXX_CONTROL_DIR=os.path.join(str(tmp_path), "none"))
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "supervisor.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 3 and out.stdout == ""
    assert json.loads(out.stderr)["error"]["code"] == "no_daemon"
