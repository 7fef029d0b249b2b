#!/usr/bin/env bash
# A private PostgreSQL server for the task-list tests.
#
#   .ci/postgres.sh start   installs PostgreSQL from Debian's packages when absent, runs initdb
#                           in a fresh temp dir and starts a server listening on a Unix socket
#                           in that dir and on 127.0.0.1 only; prints the test URL on stdout:
#                             eval "$(.ci/postgres.sh start)"   # exports TASKS_TEST_PG_URL
#   .ci/postgres.sh stop    stops the server started by `start` and removes its directory.
#
# `start` also exports TASKS_TEST_PG_DATA and TASKS_TEST_PG_BIN (the restart tests use them)
# and installs iproute2 when `ip` is missing (the two-host test makes network namespaces).
#
# As root the server runs as the `postgres` user (created when absent): PostgreSQL refuses to
# run as root. State lives in $TASKS_PG_DIR (default /tmp/tasks-ci-pg).
set -euo pipefail

dir="${TASKS_PG_DIR:-/tmp/tasks-ci-pg}"
port="${TASKS_PG_PORT:-55432}"

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

bin_dir() {
    local found
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [ -n "$found" ] || return 1
    echo "$found"
}

install_postgres() {
    local wanted=()
    bin_dir >/dev/null || wanted+=(postgresql)
    # `ip netns` for the two-host claim test.
    command -v ip >/dev/null || wanted+=(iproute2)
    if [ "${#wanted[@]}" -gt 0 ]; then
        echo "installing ${wanted[*]} from the distribution's packages" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}" >&2
    fi
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
    fi
}

start() {
    install_postgres
    local bin
    bin="$(bin_dir)"
    stop_quietly
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    chmod 700 "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-instructions >&2
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
         -c max_connections=300 -c fsync=on" >&2
    local url="postgres://postgres@127.0.0.1:$port/postgres"
    echo "export TASKS_TEST_PG_URL='$url'"
    echo "export TASKS_TEST_PG_DATA='$dir/data'"
    echo "export TASKS_TEST_PG_BIN='$bin'"
}

stop_quietly() {
    local bin
    bin="$(bin_dir)" || return 0
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
    fi
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
