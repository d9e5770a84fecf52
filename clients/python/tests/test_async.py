"""The asyncio client: the same verbs as coroutines, streams as async iterators."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List

import pytest

import maxx

from conftest import READER, SHELL, Daemon

UNKNOWN = "2B0E0000-0000-4000-8000-000000000000"


def test_async_client_loop(daemon: Daemon, group: str) -> None:
    async def main() -> None:
        c = maxx.AsyncClient(control_dir=daemon.control)
        reader = c.with_options(as_=READER)
        sid = (await c.create(command=SHELL, group=group))["session"]["session_id"]
        await c.send_keys(sid, keys=["echo as'ync'-ok", "Enter"])
        assert (await reader.wait(sid, until="async-ok", timeout=10))["outcome"] == "matched"
        assert any("async-ok" in line for line in (await reader.snapshot(sid))["lines"])

        # A wait and the declaration it waits for, at once; `since` makes it race-free.
        since = (await c.events(sid))["next_since"]
        waited, _ = await asyncio.gather(
            c.wait(sid, event="go", since=since, timeout=10),
            c.emit_event(sid, event="go", payload={"ok": True}),
        )
        assert waited["outcome"] == "matched" and waited["event"]["payload"] == {"ok": True}

        await c.set_result(sid, result=json.dumps({"passed": True}))
        assert json.loads((await c.get(sid))["session"]["result"]) == {"passed": True}
        entries = [e async for e in c.iter_events(sid)]
        assert [e["name"] for e in entries if e["kind"] == "event"] == ["go"]

        with pytest.raises(maxx.NotFound) as nf:
            await c.get(UNKNOWN)
        assert nf.value.code == "not_found" and nf.value.remedy
        with pytest.raises(maxx.Unauthorized):
            await c.snapshot(sid)
        with pytest.raises(maxx.NoDaemon):
            await maxx.AsyncClient(control_dir=daemon.tmp + "/nowhere").status()
        await c.cancel(sid)

    asyncio.run(main())


def test_async_streams(daemon: Daemon, group: str) -> None:
    async def main() -> None:
        c = maxx.AsyncClient(control_dir=daemon.control)
        sid = (await c.create(command=SHELL, group=group))["session"]["session_id"]

        async with c.watch(sid, timeout=30) as w:
            first = await w.__anext__()
            assert first["type"] == "snapshot"
            await c.emit_event(sid, event="a.one")
            line = await w.__anext__()
            assert line["type"] == "event" and line["event"]["name"] == "a.one"
            assert w.last_seq == line["event"]["seq"]

        bus = c.stream_watch(group=group, since=0, timeout=30)
        lines: List[Dict[str, Any]] = []
        async for item in bus:
            lines.append(dict(item))
            if item["type"] == "event" and item["event"]["name"] == "a.one":
                break
        await bus.aclose()
        assert lines[0]["type"] == "hello" and bus.cursor == lines[-1]["event"]["cursor"]

        await c.emit_event(sid, event="a.two")
        async with c.stream_watch(group=group, since=bus.cursor, timeout=30) as resumed:
            hello = await resumed.__anext__()
            nxt = await resumed.__anext__()
        assert hello["type"] == "hello" and nxt["type"] == "event" and nxt["event"]["name"] == "a.two"

        with pytest.raises(maxx.NotFound):
            async for _ in c.watch(UNKNOWN):
                pass
        await c.cancel(sid)

    asyncio.run(main())


def test_async_attach(daemon: Daemon, group: str) -> None:
    async def main() -> None:
        c = maxx.AsyncClient(control_dir=daemon.control)
        sid = (await c.create(command=SHELL, group=group))["session"]["session_id"]
        async with await c.attach(sid, as_=READER) as att:
            assert att.session["session_id"] == sid
            await att.send(b"echo as'ync-att'ach\r")
            seen = b""
            while b"async-attach" not in seen:
                chunk = await att.read(timeout=10)
                assert chunk, seen
                seen += chunk
        await c.cancel(sid)

    asyncio.run(main())
