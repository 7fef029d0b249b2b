#!/usr/bin/env bash
# zsh(1) for the completion test (`tasks completions zsh` loaded in a real interactive zsh).
# Installs it when missing (CI runs as root on Debian).
set -euo pipefail
if ! command -v zsh >/dev/null; then
    apt-get update -qq && apt-get install -y -qq zsh
fi
zsh --version
