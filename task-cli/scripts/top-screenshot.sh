#!/usr/bin/env bash
# Screenshots of `tasks top` for the README: a real session (shells, a monitor, a failed
# command, a task list) shown by the real dashboard in an 80x24 tmux window, captured with its
# colours and rendered to PNG by ansi_to_png.py (Pillow, DejaVu Sans Mono).
#
# Usage: task-cli/scripts/top-screenshot.sh [TASKS_BINARY]   (writes task-cli/docs/top*.png)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tasks="${1:-$here/../../target/debug/tasks}"
root="$(mktemp -d)"
sock="$root/tmux.sock"
export TASKS_ROOT="$root" TASKS_IDLE_EXIT_MS=60000
cleanup() {
    tmux -S "$sock" kill-server 2>/dev/null || true
    "$tasks" kill $("$tasks" ps --status live --json | python3 -c \
        'import json,sys; print(" ".join(t["id"] for t in json.load(sys.stdin)))') >/dev/null 2>&1 || true
    rm -rf "$root"
}
trap cleanup EXIT

"$tasks" run -d "cargo build" -- 'for i in $(seq 1 400); do echo "   Compiling crate-$i v0.1.$i"; sleep 0.3; done' >/dev/null
"$tasks" run -d "unit tests" -- 'for i in $(seq 1 50); do echo "test case_$i ... ok"; sleep 1; done' >/dev/null
"$tasks" monitor -d "watch the deploy log" -- 'while true; do echo "deploy: healthy"; sleep 5; done' >/dev/null
"$tasks" run -d "lint" -- 'echo "error: unused variable x"; exit 1' >/dev/null
"$tasks" list create "Design the API" -q >/dev/null
"$tasks" list create "Build the API" -q >/dev/null
"$tasks" list create "Write the docs" -q >/dev/null
"$tasks" list update 2 --add-blocked-by 1 >/dev/null
"$tasks" list update 1 --owner alice --status in_progress >/dev/null
sleep 3

tmux -S "$sock" -f /dev/null new-session -d -x 80 -y 24 -s shot \
    "TERM=xterm-256color $tasks top --interval 500ms"
sleep 2
tmux -S "$sock" send-keys -t shot Down Down
sleep 1.5
tmux -S "$sock" capture-pane -e -p -t shot > "$root/top.ansi"
python3 "$here/ansi_to_png.py" "$root/top.ansi" "$here/../docs/top.png"
tmux -S "$sock" send-keys -t shot l
sleep 1
tmux -S "$sock" capture-pane -e -p -t shot > "$root/top-list.ansi"
python3 "$here/ansi_to_png.py" "$root/top-list.ansi" "$here/../docs/top-list.png"
echo "wrote $here/../docs/top.png and top-list.png"
