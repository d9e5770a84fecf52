"""The supervisor flow in Python: start workers in a group, wait for all of them to exit,
and read what each declared. Nothing is inferred from their screens: a worker's answer is
what it declared (here with the same client, from inside its session).

    python examples/supervisor.py [GROUP]

Finds the daemon as the CLI does ($MAXX_CONTROL_DIR, else /tmp/maxx-control-<uid>); start
one with `maxx daemon --detach`. Exits 0 when every worker passed, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

import maxx

TASKS = ["lint", "unit", "e2e"]
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


def main() -> int:
    group = sys.argv[1] if len(sys.argv) > 1 else "ci"
    client = maxx.Client()

    for task in TASKS:
        client.create(
            group=group,
            title=f"{group}-{task}",
            command=f"{shlex.quote(sys.executable)} {shlex.quote(WORKER)} {task}",
            # The worker imports this package: give it the supervisor's import path.
            env=[f"PYTHONPATH={os.pathsep.join(p for p in sys.path if p)}"],
            result_schema={"type": "object", "required": ["passed"]},
        )

    done = client.stream_wait(group=group, all="exited", timeout="1h")
    if done["outcome"] != "matched":
        print(f"workers still running after the timeout: {done}", file=sys.stderr)
        return 1

    passed = True
    for s in client.list(group=group)["sessions"]:
        result = json.loads(s["result"]) if "result" in s else None
        print(json.dumps({"title": s["title"], "exit_code": s.get("exit_code"), "result": result}))
        passed = passed and s.get("exit_code") == 0 and bool(result and result["passed"])
    return 0 if passed else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except maxx.MaxxError as e:
        # Branch on e.code, never on e.message.
        print(json.dumps({"ok": False, "error": e.details}), file=sys.stderr)
        sys.exit(3 if e.code == "no_daemon" else 1)
