#!/usr/bin/env bash
# Geospatial queries over a generated fleet, one run: Hourglass (a time-series collection
# of GeoJSON positions) beside DuckDB answering the same questions in plain SQL (the point
# in polygon and the haversine distance written as expressions: DuckDB's `spatial`
# extension downloads at run time, which this machine cannot do).
# Env: VEHICLES (1000), HOURS (6; a position every 30 s), RUNS (5), KEEP=1, REGULAR (1; 0
# leaves out the regular-collection copy). The issue's full size:
#   VEHICLES=10000 HOURS=24 REGULAR=0 bash bench/geo.sh
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
VEHICLES="${VEHICLES:-1000}"
HOURS="${HOURS:-6}"
RUNS="${RUNS:-5}"
PY="$ROOT/.venv/bin/python"
cd "$ROOT"
build
ensure_py duckdb pymongo
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-geo.XXXXXX")"
trap 'bench_cleanup "$WORK"' EXIT
hg_start "$WORK/hg"
REGULAR_FLAG=()
[ "${REGULAR:-1}" = 0 ] && REGULAR_FLAG=(--no-regular)
"$PY" "$HERE/geo.py" --uri "$HG_URI" --work "$WORK" --vehicles "$VEHICLES" --hours "$HOURS" --runs "$RUNS" "${REGULAR_FLAG[@]}"
