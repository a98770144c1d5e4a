#!/usr/bin/env bash
# Line-protocol ingest, one run: /work/shared/influx_load.py (InfluxDB's loader, same data,
# batch and workers) pointed at Hourglass' /write and at InfluxDB 1.x. Prints rows/s and
# bytes/value side by side, with the ratio to InfluxDB. See bench/README.md.
#
# Env: HOSTS (100), DURATION (86400 s), BATCH (10000), WORKERS (2, as the anchors),
#      DECIMALS (unset: full precision), SHARED, KEEP=1 keeps the temp dir.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
HOSTS="${HOSTS:-100}"
DURATION="${DURATION:-86400}"
BATCH="${BATCH:-10000}"
WORKERS="${WORKERS:-2}"

cd "$ROOT"
build
ensure_influx

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-http-ingest.XXXXXX")"
trap 'bench_cleanup "$WORK"' EXIT

ROWS=$(( HOSTS * (DURATION / 10) ))
log "generating $HOSTS hosts x ${DURATION}s = $ROWS rows"
gen "$WORK/data.lines" lines "$HOSTS" "$DURATION" ${DECIMALS:+--decimals "$DECIMALS"}

rate() { sed -n 's/.*rows_per_s=\([0-9]*\).*/\1/p' <<<"$1"; }

log "hourglass /write"
HTTP_PORT=$(free_port)
hg_start "$WORK/hg" --httpPort "$HTTP_PORT"
hg_out=$(python3 "$SHARED/influx_load.py" "$WORK/data.lines" --port "$HTTP_PORT" \
    --workers "$WORKERS" --batch "$BATCH" --db bench)
echo "hourglass: $hg_out" >&2
hg_mem=$(awk '/VmHWM/ {print $2}' "/proc/$HG_PID/status")
hg_stop
hg_bytes=$(du -sb "$WORK/hg" | awk '{print $1}')

log "influxdb /write"
influx_start "$WORK/influx"
in_out=$(python3 "$SHARED/influx_load.py" "$WORK/data.lines" --port "$INFLUX_PORT" \
    --workers "$WORKERS" --batch "$BATCH" --db bench)
echo "influxdb: $in_out" >&2
in_mem=$(awk '/VmHWM/ {print $2}' "/proc/$INFLUX_PID/status")
influx_wait_wal "$WORK/influx"
influx_stop
in_bytes=$(du -sb "$WORK/influx/data" "$WORK/influx/wal" "$WORK/influx/meta" | awk '{s+=$1} END {print s}')

hg_rps=$(rate "$hg_out")
in_rps=$(rate "$in_out")
echo
echo "### line protocol /write ($HOSTS hosts x ${DURATION}s = $ROWS rows, batch $BATCH, $WORKERS workers${DECIMALS:+, $DECIMALS decimals})"
echo
echo "| server | rows/s | bytes/value (whole dir after shutdown) | peak RSS MiB | ratio to InfluxDB rows/s |"
echo "|---|---|---|---|---|"
awk -v r="$hg_rps" -v b="$hg_bytes" -v n="$ROWS" -v m="$hg_mem" -v i="$in_rps" \
    'BEGIN {printf "| hourglass | %d | %.2f | %d | %.2f |\n", r, b/(n*10), m/1024, r/i}'
awk -v r="$in_rps" -v b="$in_bytes" -v n="$ROWS" -v m="$in_mem" \
    'BEGIN {printf "| influxdb 1.x | %d | %.2f | %d | 1.00 |\n", r, b/(n*10), m/1024}'
