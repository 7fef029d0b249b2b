"""Drives `tasks mcp` with the official MCP Python SDK (`mcp` from PyPI).

Usage: python mcp_client_test.py TASKS_BINARY STATE_ROOT

Covers what issue 7 asks an MCP client to see: the tools and their schemas, a foreground
Bash, a background Bash read with TaskOutput (blocking and not), TaskStop on a process tree,
a completion notification pushed once and delivered once in a tool result, and a
TaskCreate/TaskUpdate(addBlockedBy)/TaskList/TaskGet round. Exits non-zero on the first
failed check (an AssertionError with the reason).
"""

import asyncio
import os
import sys
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

DEADLINE_S = 30.0


def text_blocks(result):
    return [block.text for block in result.content if getattr(block, "type", None) == "text"]


def first_text(result):
    blocks = text_blocks(result)
    return blocks[0] if blocks else ""


def envelopes_about(result, task_id):
    return [
        t for t in text_blocks(result)
        if "<task-notification>" in t and f"<task-id>{task_id}</task-id>" in t
    ]


def pid_gone(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def eventually(check, what):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.02)


class Client:
    def __init__(self, session, pushed):
        self.session = session
        self.pushed = pushed

    async def call(self, tool, arguments):
        return await self.session.call_tool(tool, arguments)

    async def background(self, command, description):
        result = await self.call(
            "Bash", {"command": command, "description": description, "run_in_background": True}
        )
        assert not result.is_error, result
        task_id = result.structured_content["backgroundTaskId"]
        assert first_text(result).startswith(
            f"Command running in background with ID: {task_id}. Output is being written to: "
        ), first_text(result)
        return task_id

    async def output_until(self, task_id, predicate):
        async def look():
            result = await self.call("TaskOutput", {"task_id": task_id, "block": False})
            shape = result.structured_content
            return shape if predicate(shape) else None

        return await eventually(look, f"output of {task_id}")


async def check_tools(client):
    tools = {tool.name: tool for tool in (await client.session.list_tools()).tools}
    expected = {"Bash", "TaskOutput", "TaskStop", "Monitor", "TaskCreate", "TaskGet",
                "TaskUpdate", "TaskList", "TaskClaim", "SendMessage"}
    assert set(tools) == expected, sorted(tools)
    bash = tools["Bash"].input_schema
    assert bash["required"] == ["command"], bash
    assert bash["properties"]["command"]["description"] == "The command to execute"
    assert bash["properties"]["timeout"]["maximum"] == 600000
    assert "backgroundTaskId" in tools["Bash"].output_schema["properties"]
    output = tools["TaskOutput"].input_schema
    assert output["properties"]["block"]["default"] is True
    assert tools["TaskStop"].input_schema["properties"]["shell_id"]["description"] == \
        "Deprecated: use task_id instead"
    assert tools["TaskUpdate"].input_schema["properties"]["addBlockedBy"]["description"] == \
        "Task IDs that block this task"


async def check_foreground(client):
    result = await client.call("Bash", {"command": "echo hello; exit 4", "description": "fg"})
    assert first_text(result) == "hello\nExit code 4", result
    assert result.structured_content["exitCode"] == 4
    assert result.structured_content["interrupted"] is False


async def check_background(client, root):
    gate = Path(root) / "go"
    task_id = await client.background(
        f"echo start; while [ ! -e '{gate}' ]; do sleep 0.02; done; echo end", "gated"
    )
    running = await client.output_until(task_id, lambda s: "start" in s["task"]["output"])
    assert running["retrieval_status"] == "not_ready", running
    waited = await client.call("TaskOutput", {"task_id": task_id, "block": True, "timeout": 50})
    assert waited.structured_content["retrieval_status"] == "timeout", waited
    gate.write_text("")
    done = await client.call("TaskOutput", {"task_id": task_id, "block": True, "timeout": 30000})
    shape = done.structured_content
    assert shape["retrieval_status"] == "success", shape
    assert shape["task"]["status"] == "completed"
    assert shape["task"]["output"] == "start\nend\n", shape


async def check_stop(client):
    command = "sleep 300 & echo child $!; echo shell $$; wait"
    task_id = await client.background(command, "sleepers")
    shape = await client.output_until(task_id, lambda s: "shell" in s["task"]["output"])
    pids = [line.split()[1] for line in shape["task"]["output"].splitlines()]
    assert len(pids) == 2 and not any(pid_gone(p) for p in pids), pids
    stopped = await client.call("TaskStop", {"task_id": task_id})
    assert stopped.structured_content == {
        "message": f"Successfully stopped task: {task_id} ({command})",
        "task_id": task_id, "task_type": "local_bash", "command": command,
    }, stopped

    async def all_gone():
        return all(pid_gone(p) for p in pids)

    await eventually(all_gone, f"the tree of {task_id} to die")
    after = await client.call("TaskOutput", {"task_id": task_id, "block": False})
    assert after.structured_content["task"]["status"] == "killed", after


async def check_notification(client, root):
    gate = Path(root) / "finish"
    task_id = await client.background(
        f"while [ ! -e '{gate}' ]; do sleep 0.02; done; echo finished", "bg done"
    )
    gate.write_text("")

    async def pushed():
        return [p for p in client.pushed if p.get("taskId") == task_id]

    push = (await eventually(pushed, f"a push about {task_id}"))[0]
    assert push["status"] == "completed" and push["delivered"] is False, push
    first = await client.call("TaskList", {})
    envelopes = envelopes_about(first, task_id)
    assert len(envelopes) == 1, text_blocks(first)
    assert envelopes[0].startswith("[SYSTEM NOTIFICATION - NOT USER INPUT]\n")
    assert (f'<summary>Background command "bg done" completed (exit code 0)</summary>'
            in envelopes[0]), envelopes[0]
    second = await client.call("TaskList", {})
    assert envelopes_about(second, task_id) == [], text_blocks(second)
    assert len(await pushed()) == 1


async def check_task_list(client):
    one = await client.call("TaskCreate", {"subject": "Set up schema", "description": "first"})
    assert first_text(one) == "Task #1 created successfully: Set up schema", one
    assert one.structured_content == {"task": {"id": "1", "subject": "Set up schema"}}
    two = await client.call("TaskCreate", {"subject": "Write API", "description": "second",
                                           "activeForm": "Writing API"})
    assert first_text(two) == "Task #2 created successfully: Write API"
    edge = await client.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    assert first_text(edge) == "Updated task #2 blockedBy", edge
    listed = await client.call("TaskList", {})
    assert first_text(listed) == "#1 [pending] Set up schema\n#2 [pending] Write API [blocked by #1]"
    got = await client.call("TaskGet", {"taskId": "2"})
    assert first_text(got) == \
        "Task #2: Write API\nStatus: pending\nDescription: second\nBlocked by: #1", got
    assert got.structured_content["task"]["blockedBy"] == ["1"]
    missing = await client.call("TaskGet", {"taskId": "7"})
    assert first_text(missing) == "Task not found"


async def main(binary, root):
    env = {key: value for key, value in os.environ.items()
           if key not in ("TASKS_SESSION", "TASKS_LIST_ID", "TASKS_LIST_ROOT", "CLAUDE_CONFIG_DIR")}
    env.update({"TASKS_ROOT": root, "TASKS_IDLE_EXIT_MS": "1000", "TASKS_POLL_MS": "20"})
    params = StdioServerParameters(command=binary, args=["mcp", "--watch-ms", "50"], env=env)
    pushed = []

    async def on_log(params):
        if params.logger == "tasks" and isinstance(params.data, dict):
            pushed.append(params.data)

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as session:
            await session.initialize()
            client = Client(session, pushed)
            await check_tools(client)
            await check_foreground(client)
            await check_background(client, root)
            await check_stop(client)
            await check_notification(client, root)
            await check_task_list(client)
    print("python mcp client: all checks passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
