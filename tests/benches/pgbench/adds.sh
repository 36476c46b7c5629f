#!/usr/bin/env bash
# Adds with the agent's wake-up notified inside `add_task` (migration 0025) against sent apart
# after it (0028), at the database alone: BENCHMARKS.md, "Agents' wake-ups sent after the
# commit". The schema is the project's migrations; 0028's function is loaded as
# `add_task_new` beside the old one. While the new adds run, one client sends wake-ups one at a
# time, nonstop or `WAKES_PER_S` a second (nonstop is more than a node's sender, which gathers
# them, would send); while either runs, one numbers events as a node would.
# Run from the repository root: tests/benches/pgbench/adds.sh [postgres URL]
set -euo pipefail
url="${1:-postgres://postgres@127.0.0.1:5432/postgres}"
dir=tests/benches/pgbench
export PGOPTIONS="-c client_min_messages=warning"
psql "$url" -qc "DROP DATABASE IF EXISTS agentd_pgbench_adds" -c "CREATE DATABASE agentd_pgbench_adds"
db="${url%/*}/agentd_pgbench_adds"
for migration in agentcore/migrations/postgres/*.sql; do
    case "$migration" in
    *0028_add_task_wakes_after_commit.sql) sed 's/FUNCTION add_task(/FUNCTION add_task_new(/' "$migration" ;;
    *) cat "$migration" ;;
    esac | psql "$db" -q -v ON_ERROR_STOP=1 >/dev/null
done
psql "$db" -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO workspaces (id, name, created_at, updated_at) VALUES ('w1', 'Bench', now(), now());
INSERT INTO agents (owner_id, id, name, status, channel, role_prompt, created_at, updated_at)
    SELECT 'w1', 'a' || g, 'Agent', 'active', 'general', 'Work.', now(), now()
    FROM generate_series(1, 10) g;
SQL
new_sql=$(mktemp)
wakes_log=$(mktemp)
trap 'rm -f "$new_sql" "$wakes_log"; psql "$url" -qc "DROP DATABASE IF EXISTS agentd_pgbench_adds"' EXIT
sed 's/add_task(/add_task_new(/' "$dir/add.sql" >"$new_sql"
tps() { grep '^tps' | head -1 | awk '{printf "%.0f", $3}'; }
for round in ${ROUNDS:-1 2}; do
    for agents in ${AGENTS:-10 1}; do
        pgbench "$db" -n -c 1 -T 9 -f "$dir/number.sql" >/dev/null 2>&1 &
        old=$(pgbench "$db" -n -c 16 -j 2 -T 8 -D agents="$agents" -f "$dir/add.sql" 2>&1 | tps)
        wait
        pgbench "$db" -n -c 1 -T 9 -f "$dir/number.sql" >/dev/null 2>&1 &
        pgbench "$db" -n -c 1 -T 9 ${WAKES_PER_S:+-R "$WAKES_PER_S"} -D agents="$agents" -f "$dir/wake.sql" >"$wakes_log" 2>&1 &
        new=$(pgbench "$db" -n -c 16 -j 2 -T 8 -D agents="$agents" -f "$new_sql" 2>&1 | tps)
        wait
        echo "round $round, $agents agent(s): old $old adds/s, new $new adds/s (beside $(tps <"$wakes_log") wake-ups/s)"
    done
done
