#!/usr/bin/env bash
# Builds every workspace crate on its own with each of its feature sets (as `cargo hack check
# --each-feature` would): its defaults, no default features, and each feature alone. A crate
# that builds only thanks to the features another crate turns on (Cargo unifies features across
# a workspace build), or whose `default-features = false` is broken, fails here.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for package in json.load(sys.stdin)["packages"]:
    name = package["name"]
    features = sorted(f for f in package["features"] if f != "default")
    print(name, "")
    if "default" in package["features"]:
        print(name, "--no-default-features")
    for feature in features:
        print(name, f"--no-default-features --features {feature}")
' | while read -r crate flags; do
    echo "cargo check -p $crate --lib --bins $flags" >&2
    # shellcheck disable=SC2086 # the flags are words
    cargo check --quiet -p "$crate" --lib --bins $flags
done

# The session layer is for embedding: no front end in its dependency tree.
forbidden='^(clap|ratatui|rmcp|axum|axum-server|reqwest|rquickjs|postgres|tokio-postgres) '
if cargo tree -p task-session -e normal --prefix none | grep -E "$forbidden"; then
    echo "task-session depends on a front end (above)" >&2
    exit 1
fi

# The stream reader is for any harness: no runtime, no task types in its dependency tree.
forbidden='^(tokio|task-core|task-output|rquickjs|async-trait) '
if cargo tree -p agent-stream -e normal --prefix none | grep -E "$forbidden"; then
    echo "agent-stream depends on a runtime or on task types (above)" >&2
    exit 1
fi

# Worktrees are for any harness: no runtime, nothing of ours.
forbidden='^(tokio|task-[a-z-]+|agent-stream) '
if cargo tree -p task-worktree -e normal --prefix none | tail -n +2 | grep -E "$forbidden"; then
    echo "task-worktree depends on a runtime or on another crate of ours (above)" >&2
    exit 1
fi

# The contract is for any client: serde, no runtime, no process control, nothing else of ours.
forbidden='^(tokio|rustix|task-[a-z-]+|agent-stream) '
if cargo tree -p task-protocol -e normal --prefix none | tail -n +2 | grep -E "$forbidden"; then
    echo "task-protocol depends on a runtime or on another crate of ours (above)" >&2
    exit 1
fi

# The client is what front ends read and start tasks through: no executor in its tree.
forbidden='^(task-shell|task-agent|task-team|task-workflow|task-remote|task-slurm) '
if cargo tree -p task-client -e normal --prefix none | grep -E "$forbidden"; then
    echo "task-client depends on an executor (above)" >&2
    exit 1
fi

# The front ends start tasks through the session and the protocol: no executor in their trees.
forbidden='^(task-shell|task-agent|task-team|task-workflow|task-remote|task-slurm) '
for front in task-mcp task-serve; do
    if cargo tree -p "$front" -e normal --prefix none | grep -E "$forbidden"; then
        echo "$front depends on an executor (above)" >&2
        exit 1
    fi
done
