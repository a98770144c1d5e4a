#!/usr/bin/env bash
# Ingest comparison, one run: Hourglass (bench/src/bin/ingest.rs, 1/4/8 clients) beside
# InfluxDB 1.x (/work/shared/influx_load.py) on the same TSBS-like cpu-only data, at full
# precision and at 2 decimals. See bench/README.md.
#
# Env: HOSTS (100), DURATION (86400 s), CLIENTS ("1 4 8"), BATCH (10000),
#      INFLUX_WORKERS (2, as the anchors), SHARED (dir of tsbs_gen.py / influx_load.py),
#      KEEP=1 keeps the temp dir.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SHARED="${SHARED:-$HERE/../../shared}"
HOSTS="${HOSTS:-100}"
DURATION="${DURATION:-86400}"
CLIENTS="${CLIENTS:-1 4 8}"
BATCH="${BATCH:-10000}"
INFLUX_WORKERS="${INFLUX_WORKERS:-2}"

cd "$ROOT"
echo "== build" >&2
cargo build --release -p hourglass-server -p hourglass-bench >&2

if ! command -v influxd >/dev/null; then
    echo "== installing InfluxDB 1.x (Debian package influxdb)" >&2
    apt-cache policy influxdb >&2
    apt-get update >&2 && apt-get install -y influxdb >&2
fi
# The package may enable a system service; we only use our own instance on a free port.

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-ingest.XXXXXX")"
INFLUX_PID=""
cleanup() {
    if [ -n "$INFLUX_PID" ] && kill -0 "$INFLUX_PID" 2>/dev/null; then
        kill -TERM "$INFLUX_PID" 2>/dev/null || true
        wait "$INFLUX_PID" 2>/dev/null || true
    fi
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

ROWS=$(( HOSTS * (DURATION / 10) ))
echo "== generating $HOSTS hosts x ${DURATION}s = $ROWS rows into $WORK" >&2
gen() { # name decimals-args...
    local name="$1"; shift
    python3 "$SHARED/tsbs_gen.py" --hosts "$HOSTS" --duration "$DURATION" --format bson "$@" >"$WORK/$name.bson" &
    python3 "$SHARED/tsbs_gen.py" --hosts "$HOSTS" --duration "$DURATION" --format lines "$@" >"$WORK/$name.lines" &
    wait
}
gen full
gen dec2 --decimals 2
ls -l "$WORK" >&2

# InfluxDB: start on a temp dir, load with influx_load.py, wait for the WAL to be
# snapshotted into TSM files (cold after 5 s), measure, stop.
influx_run() { # name -> prints "rows_per_s bytes_per_value(tsm) bytes_per_value(dir)"
    local name="$1" dir="$WORK/influx-$1" port rpc
    port=$(free_port); rpc=$(free_port)
    mkdir -p "$dir"
    cat >"$dir/influxdb.conf" <<EOF
reporting-disabled = true
bind-address = "127.0.0.1:$rpc"
[meta]
  dir = "$dir/meta"
[data]
  dir = "$dir/data"
  wal-dir = "$dir/wal"
  query-log-enabled = false
  cache-snapshot-write-cold-duration = "5s"
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:$port"
  log-enabled = false
[ifql]
  enabled = false
[subscriber]
  enabled = false
[continuous_queries]
  enabled = false
[logging]
  level = "warn"
EOF
    influxd -config "$dir/influxdb.conf" >"$dir/influxd.log" 2>&1 &
    INFLUX_PID=$!
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$port/ping" >/dev/null 2>&1 && break
        sleep 0.2
    done
    local out
    out=$(python3 "$SHARED/influx_load.py" "$WORK/$name.lines" --port "$port" --workers "$INFLUX_WORKERS" --batch "$BATCH" --db bench)
    echo "influx[$name]: $out" >&2
    # wait until the WAL is snapshotted (no non-empty .wal segment left), at most 120 s
    for _ in $(seq 240); do
        sleep 0.5
        if [ -z "$(find "$dir/wal" -name '*.wal' -size +0 2>/dev/null)" ]; then break; fi
    done
    sleep 2
    local tsm all
    tsm=$(find "$dir/data" -name '*.tsm' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
    echo "influx[$name]: tsm files: $(find "$dir/data" -name '*.tsm' | sed 's/.*\///' | tr '\n' ' ')" >&2
    kill -TERM "$INFLUX_PID"; wait "$INFLUX_PID" 2>/dev/null || true; INFLUX_PID=""
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
    echo "== $label: influxdb" >&2
    read -r irps itsm iall < <(influx_run "$name")
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
        printf "| influxdb 1.x (influx_load.py) | %s | %s | %s | %s (TSM; %s whole dir) | 1.00 |\n" \
            "$INFLUX_WORKERS" "$(fmt "$irps")" "$(fmt $((irps * 10)))" "$itsm" "$iall"
    } | tee -a "$WORK/tables.md"
done
echo
echo "== tables"
cat "$WORK/tables.md"
