#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster on a unix socket in a temp dir, owned by the `postgres` user.
#   cluster.sh start   -> prints the socket dir (export PGHOST=<it>)
#   cluster.sh stop DIR
# No TCP listener (-h ''), trust auth on the socket only, removed on stop.
set -euo pipefail
BIN=/usr/lib/postgresql/15/bin
case "${1:-}" in
  start)
    dir=$(mktemp -d /tmp/bwpg.XXXXXX)
    chown postgres "$dir"; chmod 700 "$dir"
    runuser -u postgres -- "$BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
    runuser -u postgres -- "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
      -o "-k $dir -h '' -c max_connections=50 -c shared_buffers=128MB -c log_lock_waits=on" start >/dev/null
    echo "$dir" ;;
  stop)
    dir=${2:?socket dir}
    runuser -u postgres -- "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    rm -rf "$dir" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
