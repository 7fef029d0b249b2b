#!/usr/bin/env bash
# A private single-node Slurm cluster for the task-slurm tests.
#
#   .ci/slurm.sh start   installs Debian's slurm-wlm and munge when absent (and prints how long
#                        the install took), then starts, in a fresh private directory, a munged
#                        on its own socket and key, a slurmctld and a slurmd on this machine
#                        (one node named by `hostname -s`, its CPUs and memory, one partition
#                        `debug`), and waits until the node is idle. It prints on stdout:
#                          eval "$(.ci/slurm.sh start)"   # exports SLURM_CONF, TASKS_TEST_SLURM
#   .ci/slurm.sh stop    stops the daemons started by `start` (by their pid files) and removes
#                        the directory.
#
# The configuration is .ci/slurm/slurm.conf.in, filled in at each start: no accounting
# database, no cgroups (proctrack/linuxproc, task/none), SlurmUser=SlurmdUser=root, private
# ports, a short MinJobAge (TASKS_SLURM_MIN_JOB_AGE, default 10 seconds) so that a finished job
# leaves slurmctld soon. Also exported: TASKS_TEST_SLURM_DIR (the private directory),
# TASKS_TEST_SLURM_MIN_JOB_AGE and TASKS_TEST_SLURM_CPUS (the node's CPUs).
#
# Runs as root (slurmd starts jobs as their submitting user). State lives in $TASKS_SLURM_DIR
# (default /tmp/tasks-ci-slurm); the ports are TASKS_SLURM_CTLD_PORT and TASKS_SLURM_SLURMD_PORT
# (default 56817 and 56818). On a failed start the daemons' logs go to stderr.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dir="${TASKS_SLURM_DIR:-/tmp/tasks-ci-slurm}"
ctld_port="${TASKS_SLURM_CTLD_PORT:-56817}"
slurmd_port="${TASKS_SLURM_SLURMD_PORT:-56818}"
min_job_age="${TASKS_SLURM_MIN_JOB_AGE:-10}"
# How long `start` waits for the node to come up, in seconds.
deadline_secs="${TASKS_SLURM_START_TIMEOUT:-90}"

install_slurm() {
    local wanted=()
    command -v slurmctld >/dev/null || wanted+=(slurmctld)
    command -v slurmd >/dev/null || wanted+=(slurmd)
    command -v sbatch >/dev/null || wanted+=(slurm-client)
    command -v munged >/dev/null || wanted+=(munge)
    if [ "${#wanted[@]}" -gt 0 ]; then
        # slurm-wlm is the metapackage of the three Slurm packages; its recommends (the -dev
        # packages of every plugin) are not needed.
        echo "installing slurm-wlm munge (${wanted[*]} missing) from the distribution's packages" >&2
        local began=$SECONDS
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slurm-wlm munge >&2
        echo "slurm-wlm and munge installed in $((SECONDS - began)) s" >&2
    fi
}

# The daemons' logs, for a failed start.
show_logs() {
    local log
    for log in "$dir"/log/*.log; do
        [ -f "$log" ] || continue
        echo "---- $log" >&2
        tail -n 60 "$log" >&2
    done
}

fail() {
    echo "slurm.sh: $*" >&2
    show_logs
    stop_quietly
    exit 1
}

# Waits until `$@` succeeds, up to the start deadline.
wait_for() {
    local what="$1"
    shift
    local until=$((SECONDS + deadline_secs))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$until" ]; then
            fail "no $what after ${deadline_secs} s"
        fi
        sleep 0.2
    done
}

node_idle() {
    local state
    state="$(sinfo --noheader --nodes="$host" --format=%T 2>/dev/null)" || return 1
    [ "$state" = idle ]
}

start() {
    [ "$(id -u)" = 0 ] || { echo "slurm.sh: start runs as root (slurmd)" >&2; exit 1; }
    install_slurm
    stop_quietly
    host="$(hostname -s)"
    local cpus memory
    cpus="$(nproc)"
    memory="$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))"

    mkdir -p "$dir"/{munge,state,spool,run,log}
    chmod 755 "$dir"
    # munged checks that no one else can write to its directory or read its key; clients need
    # to reach its socket.
    chmod 755 "$dir/munge"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
    # --force: as root, munged refuses to run without it.
    munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
        --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munged.seed" >&2 || fail "munged did not start"
    wait_for "munge socket" test -S "$dir/munge/munge.socket"
    munge --socket="$dir/munge/munge.socket" -n </dev/null \
        | unmunge --socket="$dir/munge/munge.socket" >/dev/null \
        || fail "munge cannot decode its own credential"

    sed -e "s|@DIR@|$dir|g" -e "s|@HOST@|$host|g" -e "s|@CPUS@|$cpus|g" \
        -e "s|@MEMORY@|$memory|g" -e "s|@CTLD_PORT@|$ctld_port|g" \
        -e "s|@SLURMD_PORT@|$slurmd_port|g" -e "s|@MIN_JOB_AGE@|$min_job_age|g" \
        "$here/slurm/slurm.conf.in" >"$dir/slurm.conf"
    # slurmd reads cgroup.conf beside slurm.conf; no plugin here uses cgroups.
    cp "$here/slurm/cgroup.conf" "$dir/cgroup.conf"
    export SLURM_CONF="$dir/slurm.conf"

    # -i: no state from an earlier cluster (the directory is fresh anyway).
    slurmctld -i >&2 || fail "slurmctld did not start"
    wait_for "slurmctld answer" scontrol ping
    slurmd >&2 || fail "slurmd did not start"
    wait_for "idle node $host" node_idle
    # The node could be idle thanks to a daemon of an earlier cluster still holding the port.
    local daemon
    for daemon in slurmctld slurmd munged; do
        daemon_alive "$dir/run/$daemon.pid" || fail "$daemon is not running (port taken?)"
    done

    echo "export SLURM_CONF='$dir/slurm.conf'"
    echo "export TASKS_TEST_SLURM=1"
    echo "export TASKS_TEST_SLURM_DIR='$dir'"
    echo "export TASKS_TEST_SLURM_MIN_JOB_AGE='$min_job_age'"
    echo "export TASKS_TEST_SLURM_CPUS='$cpus'"
}

daemon_alive() {
    local pid
    pid="$(cat "$1" 2>/dev/null)" && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Ends the process whose pid is in $1 (if it is still there) and waits for it, up to 10 s.
stop_pid_file() {
    local file="$1" pid
    [ -f "$file" ] || return 0
    pid="$(cat "$file" 2>/dev/null)" || return 0
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    local until=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$SECONDS" -ge "$until" ]; then
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
}

stop_quietly() {
    [ -d "$dir" ] || return 0
    # Jobs first (slurmd kills their processes), then the daemons.
    if [ -f "$dir/slurm.conf" ] && command -v scancel >/dev/null; then
        SLURM_CONF="$dir/slurm.conf" timeout 10 scancel --full --quiet --user=root \
            >/dev/null 2>&1 || true
    fi
    # slurmd's step daemons kill the jobs' processes: wait for the jobs to be gone (10 s at
    # most) before stopping the daemons.
    if [ -f "$dir/slurm.conf" ] && command -v squeue >/dev/null; then
        local until=$((SECONDS + 10)) left
        while [ "$SECONDS" -lt "$until" ]; do
            left="$(SLURM_CONF="$dir/slurm.conf" timeout 5 squeue --noheader \
                --states=PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED 2>/dev/null)" || break
            [ -z "$left" ] && break
            sleep 0.2
        done
    fi
    local file
    for file in "$dir/run/slurmd.pid" "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
        stop_pid_file "$file"
    done
    rm -rf "$dir"
}

case "${1:-}" in
start) start ;;
stop) stop_quietly ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
