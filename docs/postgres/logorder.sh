#!/usr/bin/env bash
# The transition log's order on PostgreSQL. Sequence numbers come from a sequence, allocated
# when a row is inserted, not when its transaction commits, so a reader that polls `seq > last`
# can step past an entry that commits later and never see it. Shown three ways, then a stress:
#   1. a plain seq cursor misses an entry (the SQLite reader, ported as it is);
#   2. a seq cursor that only delivers entries below the oldest running transaction
#      (xid < pg_snapshot_xmin) still misses one: a transaction's xid is assigned at its first
#      write (the engine updates `jobs` before it logs), its seq at its insert, and the two orders differ;
#   3. an (xid, seq) cursor below the horizon misses nothing;
#   4. stress: 4 writers with sleeps inside their transactions, a plain reader and an (xid, seq)
#      reader polling side by side; each reader's deliveries are compared with the table.
#   PGHOST=<socket dir> ./logorder.sh [stress seconds]
set -euo pipefail
cd "$(dirname "$0")"
T=${1:-20}
export PGUSER=postgres PGDATABASE=postgres
q() { psql -qtA -v ON_ERROR_STOP=1 "$@"; }
reset() {
  q -c "TRUNCATE transitions, jobs RESTART IDENTITY CASCADE" \
    -c "INSERT INTO jobs (id, wire_name, queue, due_at, created_at, updated_at)
        VALUES ('00000000-0000-7000-8000-000000000001', 'w', 'q', 0, 0, 0)"
}
entry="INSERT INTO transitions (job_id, at, to_state, attempt)
       VALUES ('00000000-0000-7000-8000-000000000001', 0, 'scheduled', 0)"
horizon="pg_snapshot_xmin(pg_current_snapshot())"
q -f schema.sql >/dev/null 2>&1

echo "== 1. plain seq cursor"
reset
q -c "BEGIN" -c "$entry" -c "SELECT pg_sleep(2)" -c "COMMIT" >/dev/null &   # seq 1, commits at ~2 s
sleep 0.5; q -c "$entry"                                                     # seq 2, commits at once
sleep 0.5; cursor=$(q -c "SELECT coalesce(max(seq), 0) FROM transitions")
echo "reader at 1 s sees up to seq $cursor"
wait
echo "reader at 3 s, seq > $cursor: [$(q -c "SELECT string_agg(seq::text, ',') FROM transitions WHERE seq > $cursor")]"
echo "in the table: [$(q -c "SELECT string_agg(seq::text, ',' ORDER BY seq) FROM transitions")]"

echo "== 2. seq cursor, only entries with xid below the horizon"
reset
# A takes its xid first (its job update), logs late and commits at ~2 s.
q -c "BEGIN" -c "SELECT pg_current_xact_id()" -c "SELECT pg_sleep(1.5)" -c "$entry" -c "SELECT pg_sleep(0.5)" -c "COMMIT" >/dev/null &
sleep 0.5
# B takes a later xid but logs first (seq 1), and commits at ~4 s.
q -c "BEGIN" -c "$entry" -c "SELECT pg_sleep(3.5)" -c "COMMIT" >/dev/null &
sleep 2.3
got=$(q -c "SELECT string_agg(seq || '@' || xid, ',' ORDER BY seq) FROM transitions WHERE seq > 0 AND xid < $horizon")
echo "reader at 2.3 s delivers [$got]"
cursor=$(q -c "SELECT coalesce(max(seq), 0) FROM transitions WHERE xid < $horizon")
wait
echo "reader at 4.5 s, seq > $cursor below the horizon: [$(q -c "SELECT string_agg(seq || '@' || xid, ',') FROM transitions WHERE seq > $cursor AND xid < $horizon")]"
echo "in the table: [$(q -c "SELECT string_agg(seq || '@' || xid, ',' ORDER BY seq) FROM transitions")]"

echo "== 3. (xid, seq) cursor below the horizon, same interleaving"
reset
q -c "BEGIN" -c "SELECT pg_current_xact_id()" -c "SELECT pg_sleep(1.5)" -c "$entry" -c "SELECT pg_sleep(0.5)" -c "COMMIT" >/dev/null &
sleep 0.5
q -c "BEGIN" -c "$entry" -c "SELECT pg_sleep(3.5)" -c "COMMIT" >/dev/null &
sleep 2.3
cur=$(q -F' ' -c "SELECT xid, seq FROM transitions WHERE xid < $horizon ORDER BY xid DESC, seq DESC LIMIT 1")
echo "reader at 2.3 s delivers up to (xid seq) = ($cur)"
wait
read -r cx cs <<<"$cur"
echo "reader at 4.5 s, (xid, seq) > ($cx, $cs) below the horizon: [$(q -c "SELECT string_agg(seq || '@' || xid, ',' ORDER BY xid, seq) FROM transitions
      WHERE (xid, seq) > ('$cx'::xid8, $cs) AND xid < $horizon")]"

echo "== 4. stress: 4 writers for $T s, two readers polling"
reset
cat >/tmp/bw_logwriter.sql <<SQL
BEGIN;
SELECT pg_current_xact_id();
\sleep 3 ms
$entry;
\set pause random(0, 20)
\sleep :pause ms
$entry;
COMMIT;
SQL
pgbench -n -f /tmp/bw_logwriter.sql -c 4 -j 4 -T "$T" >/tmp/bw_logwriter.out 2>&1 &
writers=$!
plain=/tmp/bw_plain.txt; ordered=/tmp/bw_ordered.txt; : >"$plain"; : >"$ordered"
(
  last=0
  while kill -0 "$writers" 2>/dev/null; do
    rows=$(q -c "SELECT seq FROM transitions WHERE seq > $last ORDER BY seq")
    [ -z "$rows" ] || { echo "$rows" >>"$plain"; last=$(tail -n1 <<<"$rows"); }
  done
) &
plain_reader=$!
polls=0; cx=0; cs=0
while kill -0 "$writers" 2>/dev/null || [ "$polls" -eq 0 ]; do
  rows=$(q -F' ' -c "SELECT xid, seq FROM transitions WHERE (xid, seq) > ('$cx'::xid8, $cs) AND xid < $horizon ORDER BY xid, seq")
  if [ -n "$rows" ]; then echo "$rows" | cut -d' ' -f2 >>"$ordered"; read -r cx cs <<<"$(tail -n1 <<<"$rows")"; fi
  polls=$((polls + 1))
done
wait "$plain_reader" || true
# One last poll each, after every writer has finished.
rows=$(q -F' ' -c "SELECT xid, seq FROM transitions WHERE (xid, seq) > ('$cx'::xid8, $cs) AND xid < $horizon ORDER BY xid, seq")
[ -z "$rows" ] || echo "$rows" | cut -d' ' -f2 >>"$ordered"
q -c "SELECT seq FROM transitions ORDER BY seq" >/tmp/bw_all.txt
total=$(wc -l </tmp/bw_all.txt)
for reader in plain ordered; do
  f=/tmp/bw_$reader.txt
  missed=$(comm -23 <(sort /tmp/bw_all.txt) <(sort -u "$f") | wc -l)
  dup=$(($(wc -l <"$f") - $(sort -u "$f" | wc -l)))
  echo "$reader reader: $total entries written, $missed never delivered, $dup delivered twice"
done
echo "(xid, seq) reader: $polls polls"

echo "== 5. what holds the horizon back"
x0=$(q -c "SELECT $horizon")
q -c "BEGIN" -c "SELECT count(*) FROM jobs" -c "SELECT pg_sleep(2)" -c "COMMIT" >/dev/null &
sleep 0.5; q -c "$entry"; x1=$(q -c "SELECT $horizon"); wait
echo "an open read-only transaction: horizon $x0 -> $x1 (it has no xid: does not hold it)"
q -c "DROP DATABASE IF EXISTS other" -c "CREATE DATABASE other" >/dev/null
psql -qtA -d other -c "CREATE TABLE t (x int)" >/dev/null
x0=$(q -c "SELECT $horizon")
psql -qtA -d other -c "BEGIN" -c "INSERT INTO t VALUES (1)" -c "SELECT pg_sleep(2)" -c "COMMIT" >/dev/null &
sleep 0.5; q -c "$entry"; q -c "$entry"; x1=$(q -c "SELECT $horizon"); newest=$(q -c "SELECT max(xid) FROM transitions")
wait
echo "a writing transaction in ANOTHER database of the cluster: horizon $x0 -> $x1 while the newest entry's xid is $newest"
q -c "DROP DATABASE other" >/dev/null
