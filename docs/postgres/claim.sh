#!/usr/bin/env bash
# The raw SKIP LOCKED claim ceiling: jobs claimed per second at batch 1/10/64 with 1/2/4 clients,
# with and without the transition-log append. Each run starts from a fresh backlog of due jobs
# and counts the rows actually claimed (not pgbench's tps x batch: under contention a claim can
# come back short, see rows/claim).
#   PGHOST=<socket dir> ./claim.sh [seconds] [backlog]
set -euo pipefail
cd "$(dirname "$0")"
T=${1:-8}; N=${2:-600000}
export PGUSER=postgres PGDATABASE=postgres
psql -q -v ON_ERROR_STOP=1 -f schema.sql >/dev/null
printf '%-4s %-6s %-8s %10s %10s %10s\n' log batch clients jobs/s claims/s rows/claim
for log in ${LOGS:-0 1}; do
  for batch in 1 10 64; do
    for c in 1 2 4; do
      psql -q -v ON_ERROR_STOP=1 -v n="$N" -f fill.sql >/dev/null
      out=$(pgbench -n -M prepared -f claim.sql -D batch="$batch" -D log="$log" -c "$c" -j "$c" -T "$T" 2>&1)
      tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
      claimed=$(psql -tA -c "SELECT count(*) FROM jobs WHERE state = 'running'")
      left=$(psql -tA -c "SELECT count(*) FROM jobs WHERE state = 'scheduled' AND due_at <= bw_now_ms()")
      [ "$left" -gt 0 ] || echo "warning: the due backlog drained: raise it" >&2
      printf '%-4s %-6s %-8s %10.0f %10.0f %10.1f\n' "$log" "$batch" "$c" "$(bc -l <<<"$claimed / $T")" "$tps" \
        "$(bc -l <<<"$claimed / ($tps * $T)")"
    done
  done
done
