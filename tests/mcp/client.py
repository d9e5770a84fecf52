"""Drive `maxx mcp` with the official MCP Python SDK (the `mcp` package from PyPI).

Run by tests/mcp.rs against a real daemon; nothing here was written for maxx but this script.
Environment: MAXX_BIN (the maxx binary), MAXX_CONTROL_DIR (the daemon's control dir),
MAXX_MCP_AS (the policy source the server acts as).

It checks, over stdio and JSON-RPC as any host would:
  1. initialize negotiates a handshake revision; tools/list has every tool with an object schema;
  2. create -> send_keys -> wait (until) -> snapshot -> run -> set_result -> get, the result
     read back;
  3. refusals are tool errors carrying the maxx code and remedy: `confirmation_required` for
     this source, `unauthorized` for a server started `--as readonly-external`;
  4. a long wait reports progress and, once cancelled by the client, ends: the test binary
     checks the daemon's counters while this script waits (lines on stdout/stdin:
     WAITING -> "cancel", CANCELLED -> "done").
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

MAXX = os.environ["MAXX_BIN"]
SOURCE = os.environ["MAXX_MCP_AS"]
ENV = {"MAXX_CONTROL_DIR": os.environ["MAXX_CONTROL_DIR"]}

EXPECTED_TOOLS = {
    "create", "list", "get", "send_keys", "paste", "submit", "snapshot", "wait", "run",
    "interrupt", "archive", "restart", "cancel", "declare_state", "set_status", "set_state",
    "set_summary", "set_result", "emit_event", "set_metadata", "events", "stream_wait",
    "policy_check",
}


def say(line: str) -> None:
    print(line, flush=True)


async def hear() -> str:
    return (await anyio.to_thread.run_sync(sys.stdin.readline)).strip()


def body(result):
    """The tool result's JSON object: structuredContent, else the text content."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def ok(session, tool, args):
    result = await session.call_tool(tool, args)
    assert not result.is_error, f"{tool} {args}: {body(result)}"
    return body(result)


async def refused(session, tool, args, code):
    result = await session.call_tool(tool, args)
    assert result.is_error, f"{tool} should be refused, got {body(result)}"
    error = body(result)["error"]
    assert error["code"] == code, f"{tool}: wanted {code}, got {error}"
    assert error["message"], error
    assert error.get("remedy"), f"{tool}: no remedy in {error}"
    return error


def server(source):
    return StdioServerParameters(command=MAXX, args=["mcp", "--as", source], env=ENV)


async def main() -> None:
    async with stdio_client(server(SOURCE)) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert init.protocol_version == "2025-11-25", init.protocol_version
            assert init.server_info.name == "maxx", init.server_info
            assert init.capabilities.tools is not None

            tools = {t.name: t for t in (await s.list_tools()).tools}
            missing = EXPECTED_TOOLS - set(tools)
            assert not missing, f"missing tools: {missing}"
            for t in tools.values():
                assert t.input_schema["type"] == "object", t.name
                assert t.description, t.name
            assert "session_id" in tools["wait"].input_schema["required"]
            assert "until" in tools["wait"].input_schema["properties"]
            assert tools["get"].annotations.read_only_hint is True
            assert tools["archive"].annotations.destructive_hint is True
            say(f"tools: {len(tools)}")

            # The loop: create -> act -> wait -> read -> declare -> read back.
            created = await ok(s, "create", {"command": "sh", "cwd": "/tmp", "title": "mcp"})
            sid = created["session"]["session_id"]
            await ok(s, "send_keys", {"session_id": sid, "keys": ["echo mcp-$((6*7))", "Enter"]})
            waited = await ok(s, "wait", {"session_id": sid, "until": "mcp-42", "timeout": "20s"})
            assert waited["outcome"] == "matched", waited
            screen = await ok(s, "snapshot", {"session_id": sid})
            # (the shell's prompt may share the line)
            assert any(line.rstrip().endswith("mcp-42") for line in screen["lines"]), screen["lines"]
            ran = await ok(s, "run", {"session_id": sid, "command": "false", "timeout": "20s"})
            assert ran["exit_code"] == 1, ran
            await ok(s, "set_result", {"session_id": sid, "result": "forty-two"})
            record = (await ok(s, "get", {"session_id": sid}))["session"]
            assert record["result"] == "forty-two", record
            assert record["result_source"] == SOURCE, record
            say("loop: ok")

            # Bad arguments never reach the daemon.
            await refused(s, "set_result", {"session_id": sid, "state": "x", "result": "r"},
                          "invalid_request")

            # A capability this source must have confirmed by a person: an error, not a success.
            await refused(s, "cancel", {"session_id": sid}, "confirmation_required")
            lifecycle = (await ok(s, "get", {"session_id": sid}))["session"]["lifecycle"]
            assert lifecycle == "running", lifecycle

            # Another server, another source: the policy denies it any declaration.
            async with stdio_client(server("readonly-external")) as (r2, w2):
                async with ClientSession(r2, w2) as ro:
                    await ro.initialize()
                    await ok(ro, "get", {"session_id": sid})
                    error = await refused(ro, "set_result",
                                          {"session_id": sid, "result": "overwritten"},
                                          "unauthorized")
                    say(f"denied: {error['code']}")
            record = (await ok(s, "get", {"session_id": sid}))["session"]
            assert record["result"] == "forty-two", record

            # A long wait: progress arrives, then the client cancels it.
            progressed = anyio.Event()

            async def on_progress(progress, total, message):
                assert progress >= 0 and total == 600, (progress, total, message)
                progressed.set()

            async with anyio.create_task_group() as tg:
                async def long_wait():
                    await s.call_tool("wait",
                                      {"session_id": sid, "until": "never-printed", "timeout": "10m"},
                                      progress_callback=on_progress)
                    raise AssertionError("the cancelled wait answered")

                tg.start_soon(long_wait)
                with anyio.fail_after(20):
                    await progressed.wait()
                say("WAITING")
                assert await hear() == "cancel"
                tg.cancel_scope.cancel()
            say("CANCELLED")
            assert await hear() == "done"

            # The server still serves after a cancellation.
            await ok(s, "get", {"session_id": sid})
            say("after cancel: ok")


anyio.run(main)
say("PASS")
