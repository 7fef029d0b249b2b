#!/usr/bin/env bash
# Installs the real agent CLIs the MCP client tests drive (task-cli/tests/mcp_clients.rs), at
# the versions the tests pin, from the npm registry into target/agent-clis, and prints the
# variables that name them:
#
#   eval "$(.ci/agent-clis.sh)"
#
# Progress goes to stderr; stdout is the export lines alone. Each install is timed.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE=@anthropic-ai/claude-code@2.1.332
CODEX=@openai/codex@0.171.0
GEMINI_CLI=@google/gemini-cli@0.61.0

prefix="${CARGO_TARGET_DIR:-target}/agent-clis"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

if ! command -v npm >/dev/null; then
    echo "npm not found: installing Debian's nodejs and npm" >&2
    apt-get update -qq >&2 && apt-get install -y -qq nodejs npm >&2
fi

install() { # NAME PACKAGE BIN
    local dir="$prefix/$1"
    local start=$SECONDS
    if [ ! -x "$dir/node_modules/.bin/$3" ] \
        || [ "$(cat "$dir/.pinned" 2>/dev/null)" != "$2" ]; then
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$2" >&2
        echo "$2" > "$dir/.pinned"
    fi
    "$dir/node_modules/.bin/$3" --version </dev/null >&2
    echo "$2: $((SECONDS - start)) s" >&2
}

install claude "$CLAUDE_CODE" claude
install codex "$CODEX" codex
install gemini "$GEMINI_CLI" gemini

echo "export TASKS_TEST_CLAUDE='$prefix/claude/node_modules/.bin/claude'"
echo "export TASKS_TEST_CODEX='$prefix/codex/node_modules/.bin/codex'"
echo "export TASKS_TEST_GEMINI='$prefix/gemini/node_modules/.bin/gemini'"
