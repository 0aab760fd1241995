#!/usr/bin/env bash
# What one fenced completion costs after K claims and completions since the last vacuum, with
# either jobs_lease predicate: EXPLAIN (ANALYZE, BUFFERS) of the fence for one running job. Page
# counts do not depend on the machine's load, unlike the timings of claim.sh / cycle.sh.
#   PGHOST=<socket dir> ./lease-plan.sh [K]
set -euo pipefail
cd "$(dirname "$0")"
K=${1:-50000}
export PGUSER=postgres PGDATABASE=postgres
for variant in state notnull; do
  psql -q -v ON_ERROR_STOP=1 -f schema.sql >/dev/null 2>&1
  [ "$variant" = notnull ] || psql -q -c "DROP INDEX jobs_lease" -c "CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running'"
  psql -q -v ON_ERROR_STOP=1 -v n=$((K + 10)) -f fill.sql >/dev/null
  psql -q -v ON_ERROR_STOP=1 -c "ALTER TABLE jobs SET (autovacuum_enabled = off)" \
    -c "UPDATE jobs SET state = 'running', attempt = 1, lease_owner = 'w', lease_expires_at = bw_now_ms() + 60000
        WHERE id IN (SELECT id FROM jobs ORDER BY due_at LIMIT $K)" \
    -c "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, finished_at = bw_now_ms()
        WHERE state = 'running'" \
    -c "UPDATE jobs SET state = 'running', attempt = 1, lease_owner = 'w', lease_expires_at = bw_now_ms() + 60000
        WHERE id = (SELECT id FROM jobs WHERE state = 'scheduled' ORDER BY due_at LIMIT 1)" \
    -c "ANALYZE jobs"
  id=$(psql -tA -c "SELECT id FROM jobs WHERE state = 'running'")
  echo "== jobs_lease WHERE $variant, after $K claims and completions without a vacuum"
  psql -tA -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
      UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, finished_at = bw_now_ms()
      WHERE id = '$id' AND state = 'running' AND lease_owner = 'w' AND attempt = 1" -c "ROLLBACK" \
    | grep -E "Index Scan|Buffers|Execution Time"
done
