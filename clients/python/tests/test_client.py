"""The blocking client against a real daemon: the loop, selectors, errors, warnings and the
method table."""

from __future__ import annotations

import inspect
import json
import os
import stat
import subprocess
import sys
from typing import Any, Dict, List

import pytest

import maxx
from maxx._calls import Call

from conftest import CAREFUL, LIMITED, READER, SHELL, Daemon

UNKNOWN = "2B0E0000-0000-4000-8000-000000000000"


def test_create_send_keys_wait_snapshot_set_result_get(client: maxx.Client, group: str) -> None:
    s = client.create(command=SHELL, title=group, group=group, cols=100, rows=30)["session"]
    sid = s["session_id"]
    assert s["lifecycle"] == "running" and s["cols"] == 100 and s["group"] == group

    client.send_keys(sid, keys=["echo py-'client'-ok", "Enter"])
    reader = client.with_options(as_=READER)
    # The echoed line says py-client-ok; the typed one has quotes in it.
    waited = reader.wait(sid, until="py-client-ok", timeout="10s")
    assert waited["outcome"] == "matched", waited
    screen = reader.snapshot(sid)
    assert screen["session_id"] == sid and screen["cols"] == 100 and screen["rows"] == 30
    # The output line (the shell may have printed its prompt after the echo of what was typed).
    assert any(
        line.rstrip().endswith("py-client-ok") and "echo" not in line for line in screen["lines"]
    ), screen["lines"]

    client.set_result_schema(sid, result_schema={"type": "object", "required": ["passed"]})
    client.set_result(sid, result=json.dumps({"passed": True}), source="py-test")
    got = client.get(sid)["session"]
    assert json.loads(got["result"]) == {"passed": True}
    assert got["result_source"] == "py-test"

    # The same session by a unique id prefix and by %title: the daemon resolves them.
    assert client.get(sid[:8])["session"]["session_id"] == sid
    assert client.get(sid[:8].lower())["session"]["session_id"] == sid
    assert client.get("%" + group)["session"]["session_id"] == sid
    assert [x["session_id"] for x in client.list(group=group)["sessions"]] == [sid]

    ran = reader.run(sid, command="printf 'a\\nb\\n'; (exit 3)", timeout="20s")
    assert ran["exit_code"] == 3 and ran["output"].splitlines() == ["a", "b"], ran

    client.cancel(sid)
    assert client.wait(sid, lifecycle="closed", timeout=10)["outcome"] == "matched"


def test_declarations_and_events(client: maxx.Client, group: str) -> None:
    sid = client.create(command=SHELL, group=group)["session"]["session_id"]
    client.declare_state(sid, state="building", message="step 1")
    client.emit_event(sid, event="build.done", payload={"n": 1})
    client.set_metadata(sid, key="k", value={"deep": [1, 2]})
    client.set_state(sid, state="complete")
    client.set_summary(sid, summary="built")
    client.set_agent_type(sid, agent_type="py-agent")
    client.event_emit(sid, type="custom.thing", payload=[1])
    client.remove_metadata(sid, keys=["k"])
    rec = client.get(sid)["session"]
    assert rec["status"] == "building" and rec["workflow_state"] == "complete"
    assert rec["summary"] == "built" and rec["agent_type"] == "py-agent"
    assert "k" not in rec["metadata"]

    page = client.events(sid, since=0, limit=2)
    assert len(page["events"]) == 2 and page["more"] is True
    names = [e["name"] for e in client.iter_events(sid)]
    assert names == ["building", "build.done", "k", "complete", None, "py-agent", "custom.thing", "k"], names
    kinds = [e["kind"] for e in client.iter_events(sid, since=page["next_since"])]
    assert len(kinds) == len(names) - 2

    # A wait on an event that is already past: `since` counts it.
    first = next(e for e in client.iter_events(sid) if e["name"] == "build.done")
    w = client.wait(sid, event="build.done", since=first["seq"] - 1, timeout=5)
    assert w["outcome"] == "matched" and w["event"]["payload"] == {"n": 1}
    # A wait that times out is an answer, not an exception.
    assert client.wait(sid, event="never.happens", timeout="200ms")["outcome"] == "timeout"
    client.cancel(sid)


def test_errors_carry_code_message_remedy(client: maxx.Client, daemon: Daemon, group: str) -> None:
    with pytest.raises(maxx.NotFound) as nf:
        client.get(UNKNOWN)
    assert nf.value.code == "not_found" and UNKNOWN in nf.value.message and nf.value.remedy
    assert isinstance(nf.value, maxx.MaxxError)

    with pytest.raises(maxx.InvalidRequest) as bad:
        client.create(command=SHELL, cols=5000)
    assert bad.value.code == "invalid_request" and bad.value.remedy

    with pytest.raises(maxx.InvalidRequest):
        client.wait("not-an-id", lifecycle="exited")

    sid = client.create(command=SHELL, group=group)["session"]["session_id"]
    # No source holds output:read unless the policy file says so: local-cli does not.
    with pytest.raises(maxx.Unauthorized) as denied:
        client.snapshot(sid)
    assert denied.value.code == "unauthorized" and denied.value.remedy
    # A source allowed to list only.
    limited = maxx.Client(control_dir=daemon.control, as_=LIMITED)
    assert limited.get(sid)["session"]["session_id"] == sid
    with pytest.raises(maxx.Unauthorized):
        limited.send_keys(sid, keys=["Enter"])
    with pytest.raises(maxx.Unauthorized):
        client.get(sid, as_="no-such-source")

    # A confirmation, then the same request confirmed (per call and per client).
    careful = maxx.Client(control_dir=daemon.control, as_=CAREFUL)
    with pytest.raises(maxx.ConfirmationRequired) as conf:
        careful.archive(sid)
    assert conf.value.message and conf.value.remedy
    assert careful.archive(sid, confirm=True)["session"]["lifecycle"] == "archived"
    assert careful.with_options(confirm=True).archive(sid)["session"]["lifecycle"] == "archived"

    with pytest.raises(maxx.AlreadyEnded):
        client.send_keys(sid, keys=["Enter"])

    # Client-side: nothing is sent.
    with pytest.raises(maxx.InvalidRequest):
        client.send_keys(sid, keys="Enter")  # type: ignore[arg-type]
    os.environ.pop("MAXX_SESSION_ID", None)
    with pytest.raises(maxx.InvalidRequest):
        client.set_result(result="x")


def test_no_daemon_and_unsafe_control_dir(daemon: Daemon, tmp_path: Any) -> None:
    with pytest.raises(maxx.NoDaemon) as nd:
        maxx.Client(control_dir=tmp_path / "missing").status()
    assert nd.value.code == "no_daemon" and "missing" in nd.value.message
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    with pytest.raises(maxx.NoDaemon):
        maxx.Client(control_dir=empty).status()
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o755)
    with pytest.raises(maxx.UnsafeControlDir) as unsafe:
        maxx.Client(control_dir=loose).status()
    assert "755" in unsafe.value.message
    link = tmp_path / "link"
    link.symlink_to(daemon.control)
    with pytest.raises(maxx.UnsafeControlDir):
        maxx.Client(control_dir=link).status()
    # `socket=`: the token is read from its folder, as the CLI's --socket.
    via_socket = maxx.Client(socket=os.path.join(daemon.control, "control.sock"))
    assert via_socket.status()["control_dir"]
    # $MAXX_CONTROL_DIR, as the CLI.
    old = os.environ.get("MAXX_CONTROL_DIR")
    os.environ["MAXX_CONTROL_DIR"] = daemon.control
    try:
        assert maxx.Client().control_dir == daemon.control
        # `maxx daemon` is the keeper; the daemon serving the socket is its child.
        status = maxx.Client().status()
        assert status["keeper"]["pid"] == daemon.proc.pid
        assert status["pid"] != daemon.proc.pid
    finally:
        if old is None:
            del os.environ["MAXX_CONTROL_DIR"]
        else:
            os.environ["MAXX_CONTROL_DIR"] = old


def test_warnings_are_surfaced(client: maxx.Client, daemon: Daemon, group: str) -> None:
    sid = client.create(command=SHELL, group=group)["session"]["session_id"]
    seen: List[Dict[str, Any]] = []
    hooked = maxx.Client(control_dir=daemon.control, on_warning=seen.append)
    # A param this daemon does not know (as from a newer client): ignored, and said so.
    hooked._call(Call("sessions.get", {"session_id": sid, "titel": "x"}, 10.0))
    assert [(w["code"], w["param"]) for w in seen] == [("unknown_param", "titel")]
    with pytest.warns(maxx.MaxxWarning, match="titel"):
        client._call(Call("sessions.get", {"session_id": sid, "titel": "x"}, 10.0))
    client.cancel(sid)


def test_daemon_policy_and_profile_verbs(client: maxx.Client) -> None:
    st = client.status()
    assert st["protocol"] == 1 and st["policy"]["status"] == "loaded"
    assert isinstance(client.stats()["long_lived"], int)
    assert client.profiles()["profiles"] == []
    check = client.policy_check(capability="output:read", as_=READER)
    assert check["decision"] == "allow" and check["source"] == READER
    assert client.policy_check(capability="output:read")["decision"] == "deny"
    assert {s["id"] for s in client.policy_sources()["sources"]} >= {READER, CAREFUL, LIMITED}


def test_screen_and_lifecycle_verbs(client: maxx.Client, group: str) -> None:
    reader = client.with_options(as_=READER)
    sid = client.create(command=SHELL, group=group, title=group + "-scr")["session"]["session_id"]
    client.paste(sid, text="echo pasted-'text'")
    client.submit(sid)
    assert reader.wait(sid, until="pasted-text", timeout=10)["outcome"] == "matched"
    assert "pasted-text" in reader.dump(sid)["text"]
    assert reader.inspect(sid)["session_id"] == sid
    assert client.resize(sid, cols=60, rows=20)["applied"] == {"cols": 60, "rows": 20}
    client.update(sid, status="s1", metadata={"a": "b"})
    client.action(sid, action="focus")
    child = client.create(command=SHELL, group=group)["session"]["session_id"]
    assert client.set_parent(child, parent=sid)["session"]["parent_id"] == sid
    assert client.set_group(child, group=group + "-other")["session"]["group"] == group + "-other"
    assert client.set_restart_policy(child, restart="on-failure", max_restarts=2)["session"]["restart_policy"]["mode"] == "on-failure"
    client.interrupt(child, signal="SIGKILL")
    assert client.wait(child, lifecycle="exited", timeout=10)["outcome"] == "matched"
    assert client.restart(child, last_command=True)["session"]["restart_count"] == 1
    client.clear_metadata(sid)
    client.clear_result(sid)
    client.clear_result_schema(sid)
    for s in (sid, child):
        client.cancel(s)


def test_method_table_is_the_daemon_s(client: maxx.Client) -> None:
    """Every method the daemon lists (its unknown_method remedy) has a verb."""
    with pytest.raises(maxx.UnknownMethod) as e:
        client._call(Call("no.such-method", {}, 10.0))
    listed = set(e.value.remedy.split(":", 1)[1].replace(" ", "").split(","))
    assert set(maxx.methods()) == listed


def test_sync_and_async_clients_match() -> None:
    for name in maxx.VERBS:
        sync = inspect.signature(getattr(maxx.Client, name))
        aio = inspect.signature(getattr(maxx.AsyncClient, name))
        assert sync.parameters == aio.parameters, name
        plain = str(aio.return_annotation).replace("Async", "")
        assert str(sync.return_annotation) == plain, name


def test_generated_clients_are_fresh() -> None:
    gen = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "generate.py")
    out = subprocess.run([sys.executable, gen, "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_durations() -> None:
    assert maxx.seconds("1m30s") == 90 and maxx.seconds("500ms") == 0.5 and maxx.seconds(2) == 2.0
    assert maxx.seconds("12") == 12 and maxx.seconds("soon") is None


def test_readme_verb_table_is_the_client_s() -> None:
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    start = text.index("| method | wire method |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0].strip("`"), cells[1].split(" ")[0].strip("`")))
    assert rows == [(v.name, v.method) for v in maxx.VERBS.values()]


def test_answer_budgets(daemon: Daemon, group: str) -> None:
    from maxx import _calls

    assert _calls.wait("x", lifecycle="exited").timeout == 30 + 15
    assert _calls.wait("x", lifecycle="exited", timeout="2m").timeout == 120 + 15
    assert _calls.stream_wait(group="g", all="exited", timeout=5).timeout == 5 + 15
    assert _calls.run("x", command="true").timeout == 600 + 15
    assert _calls.run("x", command="true", timeout=0).timeout is None
    assert _calls.get("x").timeout == 60
    # The client's own budget applies to plain requests, never to a wait's.
    quick = maxx.Client(control_dir=daemon.control, timeout=0.3)
    sid = quick.create(command=SHELL, group=group)["session"]["session_id"]
    assert quick.wait(sid, event="never", timeout="1s")["outcome"] == "timeout"
    quick.cancel(sid)
