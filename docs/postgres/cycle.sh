#!/usr/bin/env bash
# Claim + complete ceiling (cycle-batch.sql) at batch 1/10/64 with 1/2/4 clients: the raw
# figure the engine's PostgreSQL drain should be compared with (SQLite's bench does the same).
#   PGHOST=<socket dir> ./cycle.sh [seconds] [backlog]
set -euo pipefail
cd "$(dirname "$0")"
T=${1:-8}; N=${2:-400000}
export PGUSER=postgres PGDATABASE=postgres
psql -q -v ON_ERROR_STOP=1 -f schema.sql >/dev/null 2>&1
if [ "${LEASE_INDEX:-}" = state ]; then
  psql -q -c "DROP INDEX jobs_lease" -c "CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running'"
fi
printf '%-6s %-8s %10s\n' batch clients jobs/s
for batch in ${BATCHES:-1 10 64}; do
  for c in 1 2 4; do
    psql -q -v ON_ERROR_STOP=1 -v n="$N" -f fill.sql >/dev/null
    pgbench -n -M prepared -f cycle-batch.sql -D batch="$batch" -c "$c" -j "$c" -T "$T" >/dev/null 2>&1
    done_n=$(psql -tA -c "SELECT count(*) FROM jobs WHERE state = 'succeeded'")
    stuck=$(psql -tA -c "SELECT count(*) FROM jobs WHERE state = 'running'")
    printf '%-6s %-8s %10.0f%s\n' "$batch" "$c" "$(bc -l <<<"$done_n / $T")" "$([ "$stuck" -le $((c * batch)) ] || echo "  ($stuck left running)")"
  done
done
