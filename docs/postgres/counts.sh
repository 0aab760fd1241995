#!/usr/bin/env bash
# Keeping per-(queue, state) counts exact under the engine's load: 4 clients run cycle.sql (claim,
# then 25 % fail / 75 % succeed) for T seconds with no counts, the SQLite triggers ported per row,
# statement-level delta triggers, and per-row delta appends (both folded once a second). Reports attempts/s, deadlocks (from
# pg_stat_database) and whether the counts equal a full count(*) afterwards.
#   PGHOST=<socket dir> ./counts.sh [seconds] [clients]
set -euo pipefail
cd "$(dirname "$0")"
T=${1:-30}; C=${2:-4}; N=300000
export PGUSER=postgres PGDATABASE=postgres
deadlocks() { psql -tA -c "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"; }
printf '%-6s %10s %10s %10s %s\n' counts attempts/s failed deadlocks exact
for variant in ${VARIANTS:-none row stmt append}; do
  psql -q -v ON_ERROR_STOP=1 -f schema.sql >/dev/null 2>&1
  # The backlog first, the triggers after: 300,000 inserts in one transaction through the
  # per-row counter trigger update one job_counts row 300,000 times, and each update walks the
  # row's growing chain of versions (not finished after 2 minutes; seconds without the trigger).
  psql -q -v ON_ERROR_STOP=1 -v n="$N" -f fill.sql >/dev/null
  [ "$variant" = none ] || psql -q -v ON_ERROR_STOP=1 -f "counts-$variant.sql" >/dev/null
  before=$(deadlocks)
  folder=
  if [ "$variant" = stmt ] || [ "$variant" = append ]; then
    (while sleep 1; do psql -q -f fold.sql >/dev/null; done) & folder=$!
  fi
  out=$(pgbench -n -M prepared -f cycle.sql -c "$C" -j "$C" -T "$T" --failures-detailed 2>&1)
  [ -z "$folder" ] || { kill "$folder"; wait "$folder" 2>/dev/null || true; psql -q -f fold.sql >/dev/null; }
  after=$(deadlocks)
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
  failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
  exact=-
  if [ "$variant" != none ]; then
    exact=$(psql -tA -c "SELECT count(*) = 0 FROM (SELECT queue, state, n FROM job_counts WHERE n <> 0) kept
        FULL JOIN (SELECT queue, state, count(*) AS n FROM jobs GROUP BY 1, 2) truth USING (queue, state)
        WHERE kept.n IS DISTINCT FROM truth.n")
  fi
  printf '%-6s %10.0f %10s %10s %s\n' "$variant" "$tps" "$failed" "$((after - before))" "$exact"
done
