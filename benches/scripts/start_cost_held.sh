#!/bin/bash
# The start cost with many live tasks held (issue #43), for one or two builds side by side:
# a session holding 100 live `sleep` tasks and one holding HELD (default 10 000); in each, a
# loop of STARTS (default 100) `tasks run -- true` then one `tasks wait` on them all, SAMPLES
# times (default 3), the two sessions interleaved; per start: the supervisor's CPU
# (utime + stime from /proc, 10 ms ticks) and the loop's wall time; medians of the samples.
# Also each supervisor's RSS and open descriptors, and its CPU while idle for 10 s.
#
#   benches/scripts/start_cost_held.sh NEW/tasks [BASE/tasks]
#
# The same measurement as the `cli` bench's `start_cost_held`, with the held tasks started
# by 8 `tasks run` loops at once (one at a time, 10 000 took most of ten minutes on a loaded
# machine) and each session ended by SIGKILL of every task's process group, then of its
# supervisor (a `tasks kill` of each is slow on the base build). Roots in TASKS_BENCH_ROOT
# (default /dev/shm), removed at the end.
# Needs about 2 × HELD free pids (a task is `sh` and `sleep`): one build's sessions at a time.
set -eu
HELD=${HELD:-10000}; STARTS=${STARTS:-100}; SAMPLES=${SAMPLES:-3}
base=$(mktemp -d "${TASKS_BENCH_ROOT:-/dev/shm}/start_cost_held.XXXXXX")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
now() { date +%s%N; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
session() { # BUILD COUNT DIR: a root whose supervisor holds COUNT live sleeps; prints its pid
    mkdir -p "$3"
    TASKS_ROOT=$3 "$1" run -- true >/dev/null
    seq "$2" | TASKS_ROOT=$3 xargs -P 8 -I{} "$1" run -- sleep 100000 >/dev/null
    while [ "$(TASKS_ROOT=$3 "$1" ps --json | grep -o '"status":"running"' | wc -l)" -lt "$2" ]; do
        sleep 0.5
    done
    cat "$3/default/supervisor.lock"
}
stop() { # SUPERVISOR: kills each task's group (the supervisor's children lead one each), then it
    for leader in $(ps -o pid= --ppid "$1"); do kill -9 -- "-$leader" 2>/dev/null || true; done
    kill -9 "$1"
}
loop() { # BUILD DIR: STARTS runs then one wait; prints "cpu_ticks wall_ns"
    pid=$(cat "$2/default/supervisor.lock"); c0=$(ticks "$pid"); w0=$(now)
    ids=$(for i in $(seq "$STARTS"); do TASKS_ROOT=$2 "$1" run -- true; done)
    TASKS_ROOT=$2 "$1" wait $ids >/dev/null
    echo "$(( $(ticks "$pid") - c0 )) $(( $(now) - w0 ))"
}
export TASKS_IDLE_EXIT_MS=3600000 TASKS_POLL_MS=5
echo "start_cost_held: $HELD held, $STARTS starts a sample, $SAMPLES samples; load $(cut -d' ' -f1-3 /proc/loadavg)"
for build in "$@"; do
    t0=$(now)
    small=$(session "$build" 100 "$base/$$-small")
    large=$(session "$build" "$HELD" "$base/$$-large")
    started=$(( ($(now) - t0) / 1000000000 ))
    i0=$(ticks "$large"); sleep 10; idle=$(( ($(ticks "$large") - i0) * 10 ))
    for s in $(seq "$SAMPLES"); do
        loop "$build" "$base/$$-small" >> "$base/small.$s"
        loop "$build" "$base/$$-large" >> "$base/large.$s"
    done
    for which in small large; do
        cpu=$(cat "$base"/$which.* | awk '{print $1}' | median)
        wall=$(cat "$base"/$which.* | awk '{print $2}' | median)
        pid=$(eval echo \$$which)
        eval "${which}_cpu=\$cpu ${which}_wall=\$wall"
        echo "$build $which: supervisor CPU $(echo "scale=3; $cpu * 10 / $STARTS" | bc) ms a start, wall $(echo "scale=3; $wall / 1000000 / $STARTS" | bc) ms a start; samples (ticks wall_ns): $(cat "$base"/$which.* | tr '\n' ' '); RSS $(awk '/VmRSS/ {print $2}' "/proc/$pid/status") KiB, $(ls "/proc/$pid/fd" | wc -l) descriptors"
    done
    echo "$build ratio $HELD / 100 held: supervisor CPU $(echo "scale=2; $large_cpu / $small_cpu" | bc)×, wall $(echo "scale=2; $large_wall / $small_wall" | bc)×; idle supervisor at $HELD held: $idle ms CPU in 10 s; $HELD held started in $started s"
    stop "$small"; stop "$large"
    rm -f "$base"/small.* "$base"/large.*
    sleep 2
done
rm -rf "$base"
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
