#!/usr/bin/env bash
# Installs schemathesis (PyPI) into a virtual environment for the `tasks serve` API test, and
# prints the path of its `schemathesis` command.
#
#   export TASKS_SCHEMATHESIS="$(.ci/schemathesis.sh)"
#
# Progress goes to stderr; stdout is the command's path alone.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CARGO_TARGET_DIR:-target}/schemathesis-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis>=4,<5" >&2
"$venv/bin/schemathesis" --version >&2
echo "$(cd "$venv/bin" && pwd)/schemathesis"
