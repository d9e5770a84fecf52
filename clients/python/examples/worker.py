"""A worker for examples/supervisor.py: it does its task, then declares its answer. Inside a
maxx session the client targets that session by itself ($MAXX_SESSION_ID)."""

from __future__ import annotations

import json
import sys

import maxx

task = sys.argv[1]
client = maxx.Client()
# The session this process runs in, proved with the per-surface secret it was given.
me = client.register_current()["session"]
assert me["title"] is not None and me["title"].endswith(task)
client.set_state(state="running", message=f"{task} started")
# ... the real work would happen here ...
client.set_result(result=json.dumps({"passed": True, "task": task}))
client.set_state(state="complete")
