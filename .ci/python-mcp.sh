#!/usr/bin/env bash
# Installs the official MCP Python SDK (`mcp` from PyPI) into a virtual environment for the
# `tasks mcp` client tests, and prints the path of that environment's python.
#
#   export TASKS_MCP_PYTHON="$(.ci/python-mcp.sh)"
#
# Progress goes to stderr; stdout is the python path alone.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CARGO_TARGET_DIR:-target}/mcp-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp>=2.3,<3" >&2
"$venv/bin/python" -c 'import mcp' >&2
echo "$(cd "$venv/bin" && pwd)/python"
