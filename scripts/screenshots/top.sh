#!/usr/bin/env bash
# Screenshots of `tasks top` for the READMEs: docs/screenshots/top-*.png.
#
# It prepares a real session in a temp TASKS_ROOT (shell tasks running, completed and failed, a
# monitor, an agent, two teammates and a workflow run by task-agent's scripted fake-agent, a
# task list with dependencies and owners), runs the real `tasks top` in a detached tmux window
# of 100x30 and of 80x24, selects a task so its output is followed, captures each screen with
# its colours (`tmux capture-pane -e -p`) and renders it to PNG with render.py (pyte, a terminal
# emulator, and Pillow with DejaVu Sans Mono).
#
# Regenerate (from anywhere; needs tmux, python3 with venv, fonts-dejavu-core):
#   cargo build -p task-cli --bin tasks && cargo build -p task-agent --bin fake-agent
#   scripts/screenshots/top.sh [BIN_DIR]      # BIN_DIR holds tasks and fake-agent; target/debug
# pyte and Pillow are installed in a venv under target/screenshots-venv on the first run.
# Everything it starts (the tmux server, the supervisor and its tasks) is killed by pid at the
# end, and the temp dir removed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$(cd "${1:-$repo/target/debug}" && pwd)"
out="$repo/docs/screenshots"
venv="$repo/target/screenshots-venv"
for tool in "$bin/tasks" "$bin/fake-agent"; do
    [ -x "$tool" ] || { echo "missing $tool: build it first (see the header)" >&2; exit 1; }
done
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ] ||
    { echo "DejaVu Sans Mono is missing: apt-get install fonts-dejavu-core" >&2; exit 1; }
if ! "$venv/bin/python" -c 'import pyte, PIL' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q pyte Pillow
fi

work="$(mktemp -d)"
root="$work/root"
sock="$work/tmux.sock"
export TASKS_ROOT="$root" TASKS_IDLE_EXIT_MS=600000 PATH="$bin:$PATH"
export TASKS_AGENT_COMMAND="$bin/fake-agent --script $work/workflow-agent.jsonl"
unset TASKS_SESSION TASKS_LIST_ID TASKS_LIST_ROOT TASKS_AGENT_ID NO_COLOR

# The pids of every process carrying this TASKS_ROOT (the supervisor, its tasks, tmux, top).
session_pids() {
    grep -lsz "^TASKS_ROOT=$root\$" /proc/[0-9]*/environ | cut -d/ -f3 | grep -vx "$$" || true
}
cleanup() {
    tmux -S "$sock" kill-server 2>/dev/null || true
    local deadline=$((SECONDS + 10)) pids
    while pids="$(session_pids)"; [ -n "$pids" ] && ((SECONDS < deadline)); do
        kill -KILL $pids 2>/dev/null || true
        sleep 0.05
    done
    rm -rf "$work"
}
trap cleanup EXIT

# Polls `condition ARGS` every 0.1 s until it holds; fails after 20 s saying what it waited for.
wait_until() {
    local what="$1" deadline=$((SECONDS + 20))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || {
            echo "timed out waiting for $what" >&2
            tmux -S "$sock" capture-pane -p -t shot >&2 2>/dev/null || true
            exit 1
        }
        sleep 0.1
    done
}

# --- the session -----------------------------------------------------------------------------
tasks run -d "cargo build --release" -- \
    'for c in tokio serde clap ratatui crossterm rustix tracing; do echo "   Compiling $c v1.0.0"; done;
     for i in $(seq 1 40); do echo "   Compiling task-crate-$i v0.1.0"; done; sleep 100000' >/dev/null
tasks run -d "cargo fmt --check" -- 'echo "fmt: 84 files checked"' >/dev/null
tasks run -d "cargo clippy" -- \
    'echo "error: used \`unwrap()\` on a \`Result\` value"; echo "  --> task-cli/src/serve/mod.rs:88:9"; exit 101' >/dev/null

# Writes each argument as one line (a fake-agent step; newlines inside it are dropped).
step() { for s in "$@"; do tr -d '\n' <<<"$s"; echo; done; }
step '{"read_user": true}' \
    '{"text": "Reading the request handlers.", "usage": {"input_tokens": 5200, "output_tokens": 40}}' \
    '{"tool": "Bash", "input": {"command": "grep -rn unwrap task-cli/src/serve", "description": "Find unwraps in the server"}, "usage": {"input_tokens": 8300, "output_tokens": 60}, "output": "task-cli/src/serve/mod.rs:88: let id = parts[2].parse().unwrap();"}' \
    '{"tool": "Read", "input": {"file_path": "task-cli/src/serve/mod.rs"}, "usage": {"input_tokens": 14100, "output_tokens": 90}, "output": "fn route(...)"}' \
    '{"text": "One id is parsed unchecked; proposing a typed error.", "usage": {"input_tokens": 15800, "output_tokens": 420}}' \
    "{\"wait_file\": \"$work/never\"}" >"$work/reviewer.jsonl"
reviewer="$(tasks agent --name reviewer --prompt "Review the HTTP handlers for panics" -- \
    "$bin/fake-agent" --script "$work/reviewer.jsonl" | head -n1)"

step '{"read_user": true}' '{"result": "ready"}' '{"teammate": true}' >"$work/idle-mate.jsonl"
step '{"read_user": true}' \
    '{"text": "Writing the quick start.", "usage": {"input_tokens": 3100, "output_tokens": 250}}' \
    "{\"wait_file\": \"$work/never\"}" >"$work/busy-mate.jsonl"
tasks team spawn alice@docs -- "$bin/fake-agent" --script "$work/idle-mate.jsonl" >/dev/null
tasks team spawn bob@docs -- "$bin/fake-agent" --script "$work/busy-mate.jsonl" >/dev/null

# The workflow's agents (TASKS_AGENT_COMMAND) answer by prompt: one scan ends, one goes on.
step '{"read_user": true}' "{\"by_prompt\": [
    {\"if\": \"Scan task-cli\", \"steps\": [
        {\"tool\": \"Grep\", \"input\": {\"pattern\": \"unwrap\"}, \"output\": \"2 matches\",
         \"usage\": {\"input_tokens\": 2400, \"output_tokens\": 30}},
        {\"result\": \"2 unchecked ids\"}]},
    {\"if\": \"\", \"steps\": [
        {\"text\": \"Scanning the remote client.\",
         \"usage\": {\"input_tokens\": 1900, \"output_tokens\": 20}},
        {\"wait_file\": \"$work/never\"}]}]}" >"$work/workflow-agent.jsonl"
cat >"$work/audit.js" <<'EOF'
export const meta = {
  name: 'audit-input',
  description: 'Audit unchecked input',
  phases: [{ title: 'Scan', detail: 'one agent per crate' }, { title: 'Report' }],
}
phase('Scan')
log('scanning two crates')
const found = await parallel([
  () => agent('Scan task-cli for unchecked input', { label: 'scan:cli' }),
  () => agent('Scan task-remote for unchecked input', { label: 'scan:remote' }),
])
phase('Report')
return await agent('Write the report: ' + found.join('; '), { label: 'report' })
EOF
tasks workflow run "$work/audit.js" >/dev/null

tasks list create "Design the HTTP API" -q >/dev/null
tasks list create "Validate ids in every handler" -q >/dev/null
tasks list create "Write the quick start" -q >/dev/null
tasks list create "Release 0.2" -q >/dev/null
tasks list update 1 --owner alice --status completed >/dev/null
tasks list update 2 --owner reviewer --status in_progress --add-blocked-by 1 >/dev/null
tasks list update 3 --owner bob --status in_progress >/dev/null
tasks list update 4 --add-blocked-by 2 --add-blocked-by 3 >/dev/null

# Everything has reached the state shown: the shells ended or wrote their lines, the agents
# worked (one of the workflow's finished, the reviewer has used its tools), a teammate is idle.
py() { "$venv/bin/python" -c "$@"; }
ready() {
    tasks ps --all --json | py '
import json, sys
tasks = json.load(sys.stdin)
status = {(t["type"], t["status"]) for t in tasks}
wanted = {("local_bash", "failed"), ("local_bash", "completed"), ("local_agent", "completed")}
sys.exit(0 if wanted <= status else 1)' &&
        tasks output "$reviewer" | grep -q "proposing a typed error" &&
        tasks team ls --json | py '
import json, sys
sys.exit(0 if {m["activity"] for m in json.load(sys.stdin)} == {"idle", "working"} else 1)'
}
wait_until "the session's tasks to reach their state" ready

# --- the dashboard ---------------------------------------------------------------------------
printf 'set -g status off\n' >"$work/tmux.conf"
screen() { tmux -S "$sock" capture-pane -p -t shot "$@"; }
shows() { [[ "$(screen)" == *"$1"* ]]; }
# Until two captures 0.3 s apart are the same but for their digits (a redraw has landed; ages
# and sizes keep ticking).
settled() {
    local before
    before="$(screen -e | tr 0-9 '#')"
    sleep 0.3
    [ "$before" = "$(screen -e | tr 0-9 '#')" ]
}
# Starts `tasks top` in a fresh COLUMNSxROWS window; with a third argument `all`, finished
# tasks are shown too.
top_in() {
    tmux -S "$sock" kill-session -t shot 2>/dev/null || true
    tmux -S "$sock" -f "$work/tmux.conf" new-session -d -x "$1" -y "$2" -s shot \
        "TERM=xterm-256color tasks top --interval 250ms"
    wait_until "tasks top to draw" shows "Tasks"
    if [ "${3:-}" = all ]; then
        tmux -S "$sock" send-keys -t shot a
        wait_until "the finished tasks" shows "cargo clippy"
    fi
}
# The id whose output the dashboard follows.
followed() { screen | sed -n 's/.* Output of \([a-z0-9]*\) (following.*/\1/p'; }
# Moves the selection down until the output pane follows ID.
select_task() {
    local id="$1" tries=0 before
    until [ "$(followed)" = "$id" ]; do
        ((tries++ < 40)) || { echo "could not select $id on:" >&2; screen >&2; exit 1; }
        before="$(followed)"
        tmux -S "$sock" send-keys -t shot Down
        wait_until "the selection to move" eval '[ "$(followed)" != "$before" ]'
    done
}
# Writes docs/screenshots/top-NAME.png from the settled screen.
shoot() {
    wait_until "the screen to settle" settled
    local size
    size="$(tmux -S "$sock" display -p -t shot '#{pane_width} #{pane_height}')"
    screen -e >"$work/$1.ansi"
    # shellcheck disable=SC2086 # two numbers
    "$venv/bin/python" "$repo/scripts/screenshots/render.py" "$work/$1.ansi" "$out/top-$1.png" $size
    echo "wrote docs/screenshots/top-$1.png ($size)"
}

mkdir -p "$out"
clippy="$(tasks ps --all --json | py '
import json, sys
print(next(t["id"] for t in json.load(sys.stdin) if t["status"] == "failed"))')"

top_in 100 30
select_task "$reviewer"
wait_until "the agent's conversation" shows "proposing a typed error"
shoot overview
tmux -S "$sock" send-keys -t shot l
wait_until "the task list" shows "Release 0.2"
shoot list

top_in 80 24 all
select_task "$clippy"
wait_until "the failed command's output" shows "serve/mod.rs:88"
shoot 80x24
tmux -S "$sock" send-keys -t shot '?'
wait_until "the help" shows "any key closes this help"
shoot help
