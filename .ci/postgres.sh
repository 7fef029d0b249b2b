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
# For the connection tests (task-list/tests/pg_connect.rs) the server also speaks TLS on
# 127.0.0.1 (`ssl = on`; never on the socket: PostgreSQL does not): a private CA signs a server
# certificate whose only name is `localhost`, so `verify-full` passes for `localhost` and fails
# for 127.0.0.1 while `verify-ca` passes for both. openssl makes them (installed when absent).
# Two roles besides `postgres` (trusted, as before): `tasks_pw` must give its password
# (scram-sha-256, on the socket and on TCP) and `tasks_tls` may connect only over TLS. Also
# exported: TASKS_TEST_PG_SOCKET_DIR, TASKS_TEST_PG_PORT, TASKS_TEST_PG_CA (the CA's
# certificate), TASKS_TEST_PG_PW_USER and TASKS_TEST_PG_PW_PASSWORD (random at each start),
# TASKS_TEST_PG_TLS_USER.
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
    # The server's certificates.
    command -v openssl >/dev/null || wanted+=(openssl)
    if [ "${#wanted[@]}" -gt 0 ]; then
        echo "installing ${wanted[*]} from the distribution's packages" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}" >&2
    fi
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
    fi
}

# A private CA and a server certificate it signs for `localhost` only, in $dir/tls.
make_certificates() {
    local tls="$dir/tls"
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=tasks-test-ca \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
        -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
        -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
    printf '%s\n' subjectAltName=DNS:localhost basicConstraints=critical,CA:FALSE \
        keyUsage=critical,digitalSignature,keyEncipherment extendedKeyUsage=serverAuth \
        >"$tls/server.ext"
    openssl x509 -req -days 30 -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
        -CAcreateserial -extfile "$tls/server.ext" -out "$tls/server.crt" 2>/dev/null
    chmod 600 "$tls/ca.key" "$tls/server.key"
    chmod 644 "$tls/ca.crt" "$tls/server.crt"
    # The server reads its key as its own user.
    if [ "$(id -u)" = 0 ]; then chown -R postgres: "$tls"; fi
}

# TLS on, and the two test roles' rules ahead of initdb's `trust` for everyone (first match
# wins). In the data directory's files, so that `pg_ctl restart` keeps them.
configure_server() {
    local data="$dir/data" rules
    printf '%s\n' "ssl = on" "ssl_cert_file = '$dir/tls/server.crt'" \
        "ssl_key_file = '$dir/tls/server.key'" | as_owner tee -a "$data/postgresql.conf" >/dev/null
    rules="$(cat "$data/pg_hba.conf")"
    printf '%s\n' \
        "local     all tasks_pw                scram-sha-256" \
        "host      all tasks_pw  127.0.0.1/32  scram-sha-256" \
        "hostssl   all tasks_tls 127.0.0.1/32  trust" \
        "hostnossl all tasks_tls 127.0.0.1/32  reject" \
        "$rules" | as_owner tee "$data/pg_hba.conf" >/dev/null
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
    make_certificates
    configure_server
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
         -c max_connections=300 -c fsync=on" >&2
    local password
    password="$(openssl rand -hex 16)"
    as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -q -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE tasks_pw LOGIN PASSWORD '$password'" -c "CREATE ROLE tasks_tls LOGIN" >&2
    local url="postgres://postgres@127.0.0.1:$port/postgres"
    echo "export TASKS_TEST_PG_URL='$url'"
    echo "export TASKS_TEST_PG_DATA='$dir/data'"
    echo "export TASKS_TEST_PG_BIN='$bin'"
    echo "export TASKS_TEST_PG_SOCKET_DIR='$dir'"
    echo "export TASKS_TEST_PG_PORT='$port'"
    echo "export TASKS_TEST_PG_CA='$dir/tls/ca.crt'"
    echo "export TASKS_TEST_PG_PW_USER='tasks_pw'"
    echo "export TASKS_TEST_PG_PW_PASSWORD='$password'"
    echo "export TASKS_TEST_PG_TLS_USER='tasks_tls'"
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
