#!/usr/bin/env bash
# Events numbered at the commit (old) against staged and numbered after it (new), at the
# database alone: BENCHMARKS.md, "PostgreSQL's events numbered after their commit".
# Run from the repository root: tests/benches/pgbench/run.sh [postgres URL]
set -euo pipefail
url="${1:-postgres://postgres@127.0.0.1:5432/postgres}"
dir=tests/benches/pgbench
psql "$url" -qc "DROP DATABASE IF EXISTS agentd_pgbench" -c "CREATE DATABASE agentd_pgbench"
db="${url%/*}/agentd_pgbench"
psql "$db" -q -f "$dir/setup.sql" >/dev/null
# The same transaction through the new `record_event`.
new_sql=$(mktemp)
trap 'rm -f "$new_sql"' EXIT
sed 's/record_event_old/record_event/' "$dir/old.sql" >"$new_sql"
tps() { grep '^tps' | head -1 | awk '{print $3}'; }
for round in ${ROUNDS:-1 2}; do
    for owners in ${OWNERS:-1 16}; do
        old=$(pgbench "$db" -n -c 16 -j 2 -T 8 -D owners="$owners" -f "$dir/old.sql" 2>&1 | tps)
        pgbench "$db" -n -c 1 -T 9 -f "$dir/number.sql" >"$dir/.numbering.log" 2>&1 &
        new=$(pgbench "$db" -n -c 16 -j 2 -T 8 -D owners="$owners" -f "$new_sql" 2>&1 | tps)
        wait
        numbering=$(tps <"$dir/.numbering.log")
        psql "$db" -Atc "SELECT count(*) FROM number_events(NULL, 100)" >/dev/null
        echo "round $round, owners $owners: old $old tps, new $new tps (numbering $numbering calls/s)"
    done
done
rm -f "$dir/.numbering.log"
psql "$db" -Atc "SELECT 'staged left: ' || count(*) FROM pending_events" \
    -c "SELECT 'numbers without a gap: ' || bool_and(c = m) FROM (SELECT owner_id, count(*) c, max(seq) m FROM events GROUP BY 1) x"
psql "$url" -qc "DROP DATABASE agentd_pgbench"
