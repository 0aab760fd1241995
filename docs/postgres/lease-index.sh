#!/usr/bin/env bash
# A/B of the jobs_lease predicate under claim + complete (cycle-batch.sql), alternating the two
# variants cell by cell so that the shared machine's load falls on both alike:
#   state:    jobs_lease (lease_expires_at) WHERE state = 'running'   (schema.sql today)
#   notnull:  jobs_lease (lease_expires_at) WHERE lease_expires_at IS NOT NULL
#   PGHOST=<socket dir> ./lease-index.sh [seconds] [reps]
set -euo pipefail
cd "$(dirname "$0")"
T=${1:-5}; R=${2:-3}; N=200000; C=2
export PGUSER=postgres PGDATABASE=postgres
printf '%-6s %-8s %s\n' batch variant "jobs/s per rep (2 clients)"
for batch in 1 10; do
  declare -A res=()
  for rep in $(seq "$R"); do
    for variant in state notnull; do
      psql -q -v ON_ERROR_STOP=1 -f schema.sql >/dev/null 2>&1
      [ "$variant" = notnull ] || psql -q -c "DROP INDEX jobs_lease" -c "CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running'"
      psql -q -v ON_ERROR_STOP=1 -v n="$N" -f fill.sql >/dev/null
      pgbench -n -M prepared -f cycle-batch.sql -D batch="$batch" -c "$C" -j "$C" -T "$T" >/dev/null 2>&1
      n=$(psql -tA -c "SELECT count(*) FROM jobs WHERE state = 'succeeded'")
      res[$variant]+="$(printf '%7.0f' "$(bc -l <<<"$n / $T")")"
    done
  done
  for variant in state notnull; do printf '%-6s %-8s %s\n' "$batch" "$variant" "${res[$variant]}"; done
  unset res
done
