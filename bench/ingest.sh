#!/usr/bin/env bash
# Ingest comparison, one run: Hourglass (bench/src/bin/ingest.rs, 1/2/4/8/16 clients) beside
# InfluxDB 1.x (/work/shared/influx_load.py) on the same TSBS-like cpu-only data, at full
# precision and at 2 decimals. See bench/README.md.
#
# Env: HOSTS (100), DURATION (86400 s), CLIENTS ("1 2 4 8 16"), BATCH (10000),
#      INFLUX_WORKERS ("2 8"; ratios are to the first, as the anchors' 2), SHARED (dir of tsbs_gen.py / influx_load.py),
#      KEEP=1 keeps the temp dir.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
HOSTS="${HOSTS:-100}"
DURATION="${DURATION:-86400}"
CLIENTS="${CLIENTS:-1 2 4 8 16}"
BATCH="${BATCH:-10000}"
INFLUX_WORKERS="${INFLUX_WORKERS:-2 8}"

cd "$ROOT"
build
ensure_influx

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-ingest.XXXXXX")"
trap 'bench_cleanup "$WORK"' EXIT

ROWS=$(( HOSTS * (DURATION / 10) ))
echo "== generating $HOSTS hosts x ${DURATION}s = $ROWS rows into $WORK" >&2
gen_both() { # name decimals-args...
    local name="$1"; shift
    gen "$WORK/$name.bson" bson "$HOSTS" "$DURATION" "$@" &
    gen "$WORK/$name.lines" lines "$HOSTS" "$DURATION" "$@" &
    wait
}
gen_both full
gen_both dec2 --decimals 2
ls -l "$WORK" >&2

# InfluxDB: start on a temp dir, load with influx_load.py, wait for the WAL to be
# snapshotted into TSM files (cold after 5 s), measure, stop.
influx_run() { # name workers -> prints "rows_per_s bytes_per_value(tsm) bytes_per_value(dir)"
    local name="$1" workers="$2" dir="$WORK/influx-$1-$2"
    influx_start "$dir"
    local out
    out=$(python3 "$SHARED/influx_load.py" "$WORK/$name.lines" --port "$INFLUX_PORT" --workers "$workers" --batch "$BATCH" --db bench)
    echo "influx[$name]: $out" >&2
    influx_wait_wal "$dir"
    local tsm all
    tsm=$(find "$dir/data" -name '*.tsm' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
    echo "influx[$name]: tsm files: $(find "$dir/data" -name '*.tsm' | sed 's/.*\///' | tr '\n' ' ')" >&2
    influx_stop
    all=$(du -sb "$dir/data" "$dir/wal" "$dir/meta" | awk '{s+=$1} END {print s}')
    local rps
    rps=$(sed -n 's/.*rows_per_s=\([0-9]*\).*/\1/p' <<<"$out")
    awk -v r="$rps" -v t="$tsm" -v a="$all" -v n="$ROWS" 'BEGIN {printf "%s %.2f %.2f\n", r, t/(n*10), a/(n*10)}'
}

fmt() { echo "$1"; }

for name in full dec2; do
    label=$([ "$name" = full ] && echo "full precision" || echo "2 decimals")
    echo "== $label: hourglass" >&2
    declare -a HG=()
    for c in $CLIENTS; do
        res=$("$ROOT/target/release/ingest" "$WORK/$name.bson" --clients "$c" --batch "$BATCH" \
                --bin "$ROOT/target/release/hourglass" --dbpath "$WORK/hg-$name-$c" | tee -a "$WORK/hourglass.log" | grep '^RESULT') || {
            echo "hourglass ingest failed ($name, $c clients)" >&2; res="RESULT rows_per_s=0 metrics_per_s=0 bytes_per_value=nan alloc_bytes_per_value=nan table_bytes_per_value=nan"; }
        tail -n 12 "$WORK/hourglass.log" >&2
        rm -rf "$WORK/hg-$name-$c"
        HG+=("$c $(sed -n 's/.*rows_per_s=\([0-9]*\).*metrics_per_s=\([0-9]*\).* bytes_per_value=\([^ ]*\).*alloc_bytes_per_value=\([^ ]*\).*table_bytes_per_value=\([^ ]*\).*/\1 \2 \3 \4 \5/p' <<<"$res")")
    done
    declare -a INF=()
    for w in $INFLUX_WORKERS; do
        echo "== $label: influxdb, $w workers" >&2
        INF+=("$w $(influx_run "$name" "$w")")
    done
    read -r _ irps _ _ <<<"${INF[0]}"
    {
        echo
        echo "### $label ($HOSTS hosts x ${DURATION}s = $ROWS rows, batch $BATCH)"
        echo
        echo "| loader | clients | rows/s | metrics/s | bytes/value | ratio to InfluxDB rows/s |"
        echo "|---|---|---|---|---|---|"
        for line in "${HG[@]}"; do
            read -r c rps mps bpv abpv tbpv <<<"$line"
            ratio=$(awk -v a="$rps" -v b="$irps" 'BEGIN {printf "%.2f", (b>0 ? a/b : 0)}')
            printf "| hourglass | %s | %s | %s | %.2f (tables; %.2f whole dir, %.2f allocated) | %s |\n" "$c" "$(fmt "$rps")" "$(fmt "$mps")" "$tbpv" "$bpv" "$abpv" "$ratio"
        done
        for line in "${INF[@]}"; do
            read -r w wrps wtsm wall <<<"$line"
            ratio=$(awk -v a="$wrps" -v b="$irps" 'BEGIN {printf "%.2f", (b>0 ? a/b : 0)}')
            printf "| influxdb 1.x (influx_load.py) | %s | %s | %s | %s (TSM; %s whole dir) | %s |\n" \
                "$w" "$(fmt "$wrps")" "$(fmt $((wrps * 10)))" "$wtsm" "$wall" "$ratio"
        done
    } | tee -a "$WORK/tables.md"
done
echo
echo "== tables"
cat "$WORK/tables.md"
