#!/usr/bin/env bash
# TSBS cpu-only query benchmark, one run: the 7 TSBS queries (plus high-cpu-all projected
# and sorted) on Hourglass (MongoDB aggregations through the Rust driver,
# target/release/tsbs_query), InfluxDB 1.x (HTTP, the InfluxQL of
# ../shared/influx_queries.py), DuckDB (file and in-memory, the SQL of
# ../shared/duckdb_baseline.py) and ClickHouse (chDB in-process, ../shared/chdb_baseline.py)
# on the same TSBS-like data; Hourglass's answers checked
# against DuckDB's; then an index-served query on a high-cardinality set (10,000 series).
# Prints markdown tables. See bench/README.md.
#
# Env: HOSTS (100), DURATION (86400 s), RUNS (5, after one warm-up), QUERY_BUDGET (60 s: no
#      new Hourglass run of a query once its timed runs took that long), LOAD_CLIENTS (2),
#      INDEX_HOSTS (10000), INDEX_DURATION (300 s), INDEX_HOST (host_4242 for 10,000 hosts),
#      DATE_TRUNC (auto|strict|arith, see tsbs_query), SKIP_INDEX=1, SKIP_REGULAR=1 (no run on a
#      regular collection with a {tags.hostname: 1, time: 1} index), SHARED, KEEP=1, OUT (file
#      to copy the tables to). Exit status 1 if an answer differs (after the tables).
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
HOSTS="${HOSTS:-100}"
DURATION="${DURATION:-86400}"
RUNS="${RUNS:-5}"
QUERY_BUDGET="${QUERY_BUDGET:-60}"
LOAD_CLIENTS="${LOAD_CLIENTS:-2}"
INDEX_HOSTS="${INDEX_HOSTS:-10000}"
INDEX_DURATION="${INDEX_DURATION:-300}"
INDEX_HOST="${INDEX_HOST:-host_$(( INDEX_HOSTS * 4242 / 10000 ))}" # host_4242 of 10,000
DATE_TRUNC="${DATE_TRUNC:-auto}"
T0_MS=1451606400000 # 2016-01-01T00:00:00Z, tsbs_gen.py's start
# the index query's range: all but the first and the last minute of the set
INDEX_FROM=$(( T0_MS + 60000 ))
INDEX_TO=$(( T0_MS + (INDEX_DURATION - 60) * 1000 ))
PY="$ROOT/.venv/bin/python"

cd "$ROOT"
build
ensure_influx
# pytz: DuckDB's TIMESTAMPTZ results need it.
ensure_py duckdb pytz
ensure_py chdb

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-query.XXXXXX")"
trap 'bench_cleanup "$WORK"' EXIT
START=$SECONDS

ROWS=$(( HOSTS * (DURATION / 10) ))
IROWS=$(( INDEX_HOSTS * (INDEX_DURATION / 10) ))
log "generating $HOSTS hosts x ${DURATION}s = $ROWS rows (bson, lines, csv) into $WORK"
gen "$WORK/cpu.bson" bson "$HOSTS" "$DURATION" &
gen "$WORK/cpu.lines" lines "$HOSTS" "$DURATION" &
wait
gen "$WORK/cpu.csv" csv "$HOSTS" "$DURATION" &
if [ "${SKIP_INDEX:-0}" != 1 ]; then
    log "generating $INDEX_HOSTS hosts x ${INDEX_DURATION}s = $IROWS rows (bson, csv)"
    gen "$WORK/cpu10k.bson" bson "$INDEX_HOSTS" "$INDEX_DURATION" &
    wait
    gen "$WORK/cpu10k.csv" csv "$INDEX_HOSTS" "$INDEX_DURATION"
fi
wait
ls -l "$WORK" >&2
log "generated in $(( SECONDS - START )) s"

# --- Hourglass ------------------------------------------------------------------------
log "hourglass: load ($LOAD_CLIENTS clients)"
hg_start "$WORK/hg"
"$ROOT/target/release/ingest" "$WORK/cpu.bson" --uri "$HG_URI" --clients "$LOAD_CLIENTS" --coll cpu \
    | tee "$WORK/hg-load.log" | grep -E '^(rows|load seconds|rows/s):' >&2
if [ "${SKIP_INDEX:-0}" != 1 ]; then
    "$ROOT/target/release/ingest" "$WORK/cpu10k.bson" --uri "$HG_URI" --clients "$LOAD_CLIENTS" --coll cpu10k \
        | tee "$WORK/hg-load10k.log" | grep -E '^(rows|load seconds|rows/s):' >&2
fi
hg_settle
log "hourglass: queries (warm-up + $RUNS runs each)"
"$ROOT/target/release/tsbs_query" --uri "$HG_URI" --coll cpu --runs "$RUNS" --budget "$QUERY_BUDGET" --date-trunc "$DATE_TRUNC" \
    --out "$WORK/hg.json"
if [ "${SKIP_INDEX:-0}" != 1 ]; then
    "$ROOT/target/release/tsbs_query" --uri "$HG_URI" --coll cpu10k --runs "$RUNS" --budget "$QUERY_BUDGET" --index \
        --host "$INDEX_HOST" --from "$INDEX_FROM" --to "$INDEX_TO" --out "$WORK/hg-index.json"
fi
# Server memory after the loads and the time-series queries: peak and current RSS.
HG_MEM="$(awk '/^VmHWM|^VmRSS/ {printf "%s %d MiB; ", $1, $2 / 1024}' "/proc/$HG_PID/status")"
log "hourglass memory: $HG_MEM"
REGULAR_ARGS=()
if [ "${SKIP_REGULAR:-0}" != 1 ]; then
    log "hourglass: the same rows in a regular collection with a {tags.hostname: 1, time: 1} index"
    "$ROOT/target/release/ingest" "$WORK/cpu.bson" --uri "$HG_URI" --clients "$LOAD_CLIENTS" --coll cpu_regular \
        --regular | tee "$WORK/hg-load-regular.log" | grep -E '^(rows|load seconds|rows/s|index build seconds):' >&2
    hg_settle
    "$ROOT/target/release/tsbs_query" --uri "$HG_URI" --coll cpu_regular --runs "$RUNS" --budget "$QUERY_BUDGET" \
        --date-trunc "$DATE_TRUNC" --out "$WORK/hg-regular.json"
    REGULAR_ARGS=(--hg-regular "$WORK/hg-regular.json")
fi
hg_stop
log "hourglass done at $(( SECONDS - START )) s"

# --- InfluxDB -------------------------------------------------------------------------
log "influxdb: load"
influx_start "$WORK/influx"
python3 "$SHARED/influx_load.py" "$WORK/cpu.lines" --port "$INFLUX_PORT" --workers 2 --batch 10000 --db bench >&2
influx_wait_wal "$WORK/influx"
log "influxdb: queries (warm-up + $RUNS runs each)"
python3 "$HERE/tsbs_peers.py" influx --port "$INFLUX_PORT" --runs "$RUNS" --out "$WORK/influx.json"
influx_stop
log "influxdb done at $(( SECONDS - START )) s"

# --- DuckDB ---------------------------------------------------------------------------
log "duckdb: load + queries (file db and in-memory)"
"$PY" "$HERE/tsbs_peers.py" duckdb "$WORK/cpu.csv" --file-db "$WORK/cpu.duckdb" --runs "$RUNS" \
    --out "$WORK/duckdb.json"
INDEX_ARGS=()
if [ "${SKIP_INDEX:-0}" != 1 ]; then
    "$PY" "$HERE/tsbs_peers.py" duckdb "$WORK/cpu10k.csv" --file-db "$WORK/cpu10k.duckdb" --runs "$RUNS" \
        --index --host "$INDEX_HOST" --from "$INDEX_FROM" --to "$INDEX_TO" --out "$WORK/duckdb-index.json"
    INDEX_ARGS=(--hg-index "$WORK/hg-index.json" --duckdb-index "$WORK/duckdb-index.json"
        --index-title " ($INDEX_HOSTS hosts x ${INDEX_DURATION}s = $IROWS rows, $INDEX_HOST from +60 s to $(( INDEX_DURATION - 60 )) s)")
fi
log "duckdb done at $(( SECONDS - START )) s"

# --- ClickHouse (chDB) ----------------------------------------------------------------
log "clickhouse (chdb): load + queries"
"$PY" "$HERE/tsbs_peers.py" chdb "$WORK/cpu.csv" --runs "$RUNS" --out "$WORK/chdb.json"
log "clickhouse done at $(( SECONDS - START )) s"

# --- answers and tables -----------------------------------------------------------------
STATUS=0
python3 "$HERE/tsbs_compare.py" --hg "$WORK/hg.json" --duckdb "$WORK/duckdb.json" --influx "$WORK/influx.json" \
    --chdb "$WORK/chdb.json" --hg-memory "$HG_MEM" \
    "${INDEX_ARGS[@]}" "${REGULAR_ARGS[@]}" --title " ($HOSTS hosts x ${DURATION}s = $ROWS rows, median of $RUNS runs after a warm-up)" \
    >"$WORK/tables.md" || STATUS=$?
cat "$WORK/tables.md"
if [ -n "${OUT:-}" ]; then cp "$WORK/tables.md" "$OUT"; fi
log "total $(( SECONDS - START )) s (without the build)"
exit "$STATUS"
