#!/usr/bin/env bash
# tmux(1) gives the dashboard tests (`tasks top`, `run --wait` on a terminal) a real terminal
# they can type into and read back. Installs it when missing (CI runs as root on Debian).
set -euo pipefail
if ! command -v tmux >/dev/null; then
    apt-get update -qq && apt-get install -y -qq tmux
fi
tmux -V
