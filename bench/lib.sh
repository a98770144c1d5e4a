# Shared pieces of the benchmark scripts (sourced by bench/ingest.sh and bench/query.sh):
# paths, the release build, installing InfluxDB, data generation, and starting/stopping
# InfluxDB and Hourglass on temp dirs and free ports. Expects `set -euo pipefail`.
#
# Sets: HERE (bench/), ROOT (the repository), SHARED (tsbs_gen.py and friends; env
# SHARED overrides, default ../shared next to the repository).

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SHARED="${SHARED:-$HERE/../../shared}"

log() { echo "== $*" >&2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ensure_py MODULE... : installs the Python packages of the same names into .venv when one
# of the modules does not import.
ensure_py() {
    local py="$ROOT/.venv/bin/python"
    if ! "$py" -c "import $(IFS=,; echo "$*")" >/dev/null 2>&1; then
        log "installing $* into .venv"
        [ -x "$py" ] || python3 -m venv "$ROOT/.venv"
        "$ROOT/.venv/bin/pip" install --quiet --disable-pip-version-check "$@" >&2
    fi
}

build() {
    log "build"
    (cd "$ROOT" && cargo build --release -p hourglass-server -p hourglass-bench >&2)
}

ensure_influx() {
    if ! command -v influxd >/dev/null; then
        log "installing InfluxDB 1.x (Debian package influxdb)"
        apt-cache policy influxdb >&2
        apt-get update >&2 && apt-get install -y influxdb >&2
    fi
    # The package may enable a system service; we only use our own instance on a free port.
}

# gen OUT FORMAT HOSTS DURATION [tsbs_gen.py args...]: one data set in one format.
gen() {
    local out="$1" format="$2" hosts="$3" duration="$4"; shift 4
    python3 "$SHARED/tsbs_gen.py" --hosts "$hosts" --duration "$duration" --format "$format" "$@" >"$out"
}

# --- InfluxDB 1.x on a temp dir ---------------------------------------------------------
INFLUX_PID=""
INFLUX_PORT=""

# influx_start DIR: generated config (HTTP on 127.0.0.1 and a free port, RPC on 127.0.0.1,
# reporting, _internal monitoring, ifql, subscriber and continuous queries off, WAL
# snapshotted after 5 s cold); waits for /ping. Sets INFLUX_PID and INFLUX_PORT.
influx_start() {
    local dir="$1" rpc
    INFLUX_PORT=$(free_port); rpc=$(free_port)
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
  bind-address = "127.0.0.1:$INFLUX_PORT"
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
        curl -sf "http://127.0.0.1:$INFLUX_PORT/ping" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "influxd did not answer /ping; log:" >&2
    tail -n 20 "$dir/influxd.log" >&2
    return 1
}

# influx_wait_wal DIR: wait until the WAL is snapshotted into TSM files (no non-empty
# .wal segment left), at most 120 s.
influx_wait_wal() {
    local dir="$1"
    for _ in $(seq 240); do
        sleep 0.5
        if [ -z "$(find "$dir/wal" -name '*.wal' -size +0 2>/dev/null)" ]; then break; fi
    done
    sleep 2
}

influx_stop() {
    if [ -n "$INFLUX_PID" ] && kill -0 "$INFLUX_PID" 2>/dev/null; then
        kill -TERM "$INFLUX_PID" 2>/dev/null || true
        wait "$INFLUX_PID" 2>/dev/null || true
    fi
    INFLUX_PID=""
}

# --- Hourglass on a temp dbpath -----------------------------------------------------------
HG_PID=""
HG_URI=""

# hg_start DBPATH [ARGS...]: target/release/hourglass on a free port (with ARGS);
# waits until it listens. Sets HG_PID and HG_URI.
hg_start() {
    local dbpath="$1" port
    shift
    port=$(free_port)
    mkdir -p "$dbpath"
    "$ROOT/target/release/hourglass" --dbpath "$dbpath" --port "$port" --bind_ip 127.0.0.1 --quiet "$@" \
        >"$dbpath.log" 2>&1 &
    HG_PID=$!
    HG_URI="mongodb://127.0.0.1:$port/?directConnection=true"
    for _ in $(seq 100); do
        python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$port" \
            2>/dev/null && return 0
        sleep 0.2
    done
    echo "hourglass did not listen on $port; log:" >&2
    tail -n 20 "$dbpath.log" >&2
    return 1
}

# hg_settle: wait until the server's background work after a load is done (the buckets
# the load closed are compressed off the insert path, up to 256 MiB of them queued): its
# CPU time grows by under 50 ms in one second, at most 120 s. The counterpart of
# influx_wait_wal; prints how long it took.
hg_settle() {
    local t0=$SECONDS before after
    for _ in $(seq 120); do
        before=$(awk '{print $14 + $15}' "/proc/$HG_PID/stat")
        sleep 1
        after=$(awk '{print $14 + $15}' "/proc/$HG_PID/stat")
        [ $(( (after - before) * 1000 / $(getconf CLK_TCK) )) -lt 50 ] && break
    done
    log "hourglass: settled after the load in $(( SECONDS - t0 )) s"
}

# hg_stop: SIGTERM (clean shutdown), wait for the exit.
hg_stop() {
    if [ -n "$HG_PID" ] && kill -0 "$HG_PID" 2>/dev/null; then
        kill -TERM "$HG_PID" 2>/dev/null || true
        wait "$HG_PID" 2>/dev/null || true
    fi
    HG_PID=""
}

# bench_cleanup WORK: stop what we started, remove WORK unless KEEP=1 (for `trap ... EXIT`).
bench_cleanup() {
    hg_stop
    influx_stop
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $1" >&2; else rm -rf "$1"; fi
}
