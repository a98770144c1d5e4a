#!/usr/bin/env bash
# Online archive benchmark, one run: loads the TSBS-like cpu data into Hourglass (release
# build), measures bytes per value hot and once archived to Parquet, and times the seven
# TSBS queries over hot data, over archived data and in DuckDB over the same Parquet files,
# side by side with ratios (bench/archive.py; see bench/README.md).
#
# Env: HOSTS (100), DURATION (86400 s), RUNS (5 timed runs after a warm-up), LOAD_CLIENTS (2),
#      PARTITION_BY (archive partitionBy, comma-separated meta paths; default none),
#      SHARED, KEEP=1 (keep the temp dir), OUT (also write the tables to this file).
#      Exit status 1 if an answer differs.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
HOSTS="${HOSTS:-100}"
DURATION="${DURATION:-86400}"
RUNS="${RUNS:-5}"
LOAD_CLIENTS="${LOAD_CLIENTS:-2}"
PARTITION_BY="${PARTITION_BY:-}"
PY="$ROOT/.venv/bin/python"

cd "$ROOT"
build
# pytz: DuckDB returns TIMESTAMPTZ values to Python through it.
ensure_py pymongo duckdb pytz pyarrow

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-archive.XXXXXX")"
trap 'bench_cleanup "$WORK"' EXIT
START=$SECONDS
ROWS=$(( HOSTS * (DURATION / 10) ))
log "generating $HOSTS hosts x ${DURATION}s = $ROWS rows into $WORK"
gen "$WORK/cpu.bson" bson "$HOSTS" "$DURATION"

ARGS=(--bson "$WORK/cpu.bson" --work "$WORK" --runs "$RUNS" --clients "$LOAD_CLIENTS"
      --title " ($HOSTS hosts x ${DURATION}s = $ROWS rows)")
if [ -n "$PARTITION_BY" ]; then ARGS+=(--partition-by "$PARTITION_BY"); fi
if [ -n "${OUT:-}" ]; then ARGS+=(--out "$OUT"); fi
STATUS=0
"$PY" "$HERE/archive.py" "${ARGS[@]}" || STATUS=$?
log "total $(( SECONDS - START )) s (without the build)"
exit "$STATUS"
