"""A client of the tasks supervisor written from the wire's JSON Schema alone.

Usage: wire_client.py SOCKET SCHEMA

Every request it sends and every answer it reads is validated against the schema
(task-protocol/wire.schema.json). It asks for the supervisor's version, starts a shell
task, reads its output by offsets until the task has ended, then takes notifications
until its task's arrives, and takes again to see that none comes twice. It prints one
JSON line with what it saw; the Rust test checks it.
"""

import json
import os
import socket
import sys
import time

import jsonschema

SOCKET, SCHEMA = sys.argv[1], sys.argv[2]
with open(SCHEMA, encoding="utf-8") as f:
    schema = json.load(f)
VERSION = schema["x-protocol-version"]


def validator(name):
    return jsonschema.Draft202012Validator(
        {"$ref": f"#/$defs/{name}", "$defs": schema["$defs"]}
    )


REQUEST, RESPONSE, SHELL_START = (
    validator("Request"),
    validator("Response"),
    validator("ShellStart"),
)


def call(op):
    request = {
        "version": VERSION,
        "deadlineMs": int(time.time() * 1000) + 10_000,
        "op": op,
    }
    REQUEST.validate(request)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(SOCKET)
        conn.sendall(json.dumps(request).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    response = json.loads(answer)
    RESPONSE.validate(response)
    return response


def until(what, probe, within=30.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        time.sleep(0.02)
    raise SystemExit(f"timed out waiting for {what}")


hello = call({"op": "hello"})
assert hello["result"] == "hello", hello

shell = {"command": "echo one; echo two; exit 3", "description": "from python"}
SHELL_START.validate(shell)
started = call(
    {
        "op": "start",
        "kind": "shell",
        "caller": {
            "cwd": os.getcwd(),
            "env": [[k, v] for k, v in os.environ.items()],
            "background": True,
        },
        "request": shell,
    }
)
assert started["result"] == "started", started
task = started["id"]

output = {"text": "", "offset": 0}


def read_to_end():
    answer = call(
        {"op": "output", "id": task, "offset": output["offset"], "maxBytes": 4096}
    )
    assert answer["result"] == "output", answer
    output["text"] += answer["text"]
    output["offset"] = answer["next"]
    done = answer["ended"] and answer["text"] == ""
    return True if done else None


until("the task's end", read_to_end)

taken = []


def take_own():
    answer = call({"op": "take_notifications"})
    assert answer["result"] == "notifications", answer
    taken.extend(n for n in answer["notices"] if n["taskId"] == task)
    return True if taken else None


until("its notification", take_own)
for _ in range(5):  # taken again: nothing more for this task
    answer = call({"op": "take_notifications"})
    taken.extend(n for n in answer["notices"] if n["taskId"] == task)

unknown = call({"op": "output", "id": "bzzzzzzzz", "offset": 0, "maxBytes": 10})
print(
    json.dumps(
        {
            "version": hello["version"],
            "task": task,
            "output": output["text"],
            "notifications": [n["text"] for n in taken],
            "unknown": unknown,
        }
    )
)
