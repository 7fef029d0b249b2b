#!/usr/bin/env bash
# Installs tree-sitter's Python bindings and its Rust grammar (`tree-sitter`, `tree-sitter-rust`
# from PyPI) into a virtual environment for .ci/cycles.py and its test, and prints the path of
# that environment's python.
#
#   CYCLES_PYTHON="$(.ci/cycles-deps.sh)"
#   "$CYCLES_PYTHON" .ci/cycles.py
#
# (.ci/cycles.py run by another python re-runs itself with this one.) Progress goes to stderr;
# stdout is the python path alone.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CARGO_TARGET_DIR:-target}/cycles-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
# The grammar's node names are what the checker reads: a new minor version of tree-sitter-rust
# may rename them, so both are pinned to the versions the checker was written against.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "tree-sitter==0.26.*" "tree-sitter-rust==0.24.*" >&2
"$venv/bin/python" -c 'import tree_sitter, tree_sitter_rust' >&2
echo "$(cd "$venv/bin" && pwd)/python"
