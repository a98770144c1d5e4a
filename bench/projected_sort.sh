#!/usr/bin/env bash
# high-cpu-all projected and sorted, one run: Hourglass (stage by stage) beside DuckDB
# in-memory and ClickHouse (chDB). Generates HOSTS x DURATION rows with tsbs_gen.py, loads
# them into a fresh Hourglass with target/release/ingest, then runs bench/projected_sort.py.
# Env: HOSTS (100), DURATION (86400), RUNS (5), SHARED, KEEP=1.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
HOSTS="${HOSTS:-100}"
DURATION="${DURATION:-86400}"
RUNS="${RUNS:-5}"
PY="$ROOT/.venv/bin/python"
cd "$ROOT"
build
ensure_py duckdb chdb pyarrow pymongo
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-projected.XXXXXX")"
trap 'bench_cleanup "$WORK"' EXIT
log "generating $HOSTS hosts x ${DURATION}s"
gen "$WORK/cpu.bson" bson "$HOSTS" "$DURATION" &
gen "$WORK/cpu.csv" csv "$HOSTS" "$DURATION" &
wait
hg_start "$WORK/hg"
"$ROOT/target/release/ingest" "$WORK/cpu.bson" --uri "$HG_URI" --clients 2 --coll cpu >/dev/null
"$PY" "$HERE/projected_sort.py" --uri "$HG_URI" --csv "$WORK/cpu.csv" --runs "$RUNS"
