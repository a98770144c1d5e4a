#!/usr/bin/env bash
# Import throughput, one run: `hourglass import` of the TSBS-like cpu-only data (CSV and
# NDJSON) beside the raw-driver ingest of the same rows (bench/src/bin/ingest.rs: the Rust
# driver's insert_many of pre-encoded documents, no parsing), each into a fresh server and a
# new time-series collection (timeField time, metaField tags), same clients/workers and batch.
# Prints rows/s side by side and import / driver as a ratio (target: >= 0.80).
#
# Env: HOSTS (100), DURATION (21600 s), WORKERS (2), BATCH (1000), SHARED, KEEP=1.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
HOSTS="${HOSTS:-100}"
DURATION="${DURATION:-21600}"
WORKERS="${WORKERS:-2}"
BATCH="${BATCH:-1000}"

cd "$ROOT"
build

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hourglass-import.XXXXXX")"
trap 'bench_cleanup "$WORK"' EXIT
ROWS=$(( HOSTS * (DURATION / 10) ))
log "generating $HOSTS hosts x ${DURATION}s = $ROWS rows into $WORK"
gen "$WORK/cpu.bson" bson "$HOSTS" "$DURATION"
# The same rows as CSV whose tag columns are named under the meta field (tags.hostname, ...),
# and as NDJSON (relaxed Extended JSON, as `hourglass export` writes it).
gen "$WORK/cpu.raw.csv" csv "$HOSTS" "$DURATION"
python3 - "$WORK/cpu.raw.csv" "$WORK/cpu.csv" <<'PY'
import sys
src, dst = sys.argv[1:]
with open(src) as f, open(dst, "w") as out:
    head = f.readline().rstrip("\n").split(",")
    out.write(",".join(h if h == "time" or h.startswith("usage_") else "tags." + h for h in head) + "\n")
    for line in f:
        out.write(line)
PY
python3 - "$WORK/cpu.csv" "$WORK/cpu.json" <<'PY'
import csv, json, sys
src, dst = sys.argv[1:]
with open(src) as f, open(dst, "w") as out:
    for r in csv.DictReader(f):
        doc = {"time": {"$date": {"$numberLong": r["time"]}}, "tags": {}}
        for k, v in r.items():
            if k.startswith("tags."):
                doc["tags"][k[5:]] = v
            elif k != "time":
                doc[k] = float(v)
        out.write(json.dumps(doc) + "\n")
PY
ls -l "$WORK" >&2

driver() {
    local dir="$WORK/driver"
    hg_start "$dir"
    "$ROOT/target/release/ingest" "$WORK/cpu.bson" --uri "$HG_URI" --clients "$WORKERS" --batch "$BATCH" \
        | sed -n 's/.*rows_per_s=\([0-9]*\).*/\1/p'
    hg_stop
}

import() { # name args...
    local name="$1" dir="$WORK/import-$1"; shift
    hg_start "$dir"
    local out start end
    start=$(date +%s.%N)
    out=$("$ROOT/target/release/hourglass" import --uri "$HG_URI" --db bench -c cpu \
        --numInsertionWorkers "$WORKERS" --batchSize "$BATCH" --timeseries-timeField time \
        --timeseries-metaField tags "$@" 2>&1)
    end=$(date +%s.%N)
    echo "import[$name]: $out" >&2
    hg_stop
    awk -v s="$start" -v e="$end" -v n="$ROWS" 'BEGIN {printf "%.0f\n", n / (e - s)}'
}

d=$(driver)
c=$(import csv --type csv --headerline --timeFormat epoch_ms --file "$WORK/cpu.csv")
j=$(import ndjson --type json --file "$WORK/cpu.json")

printf '\n%-34s %12s %10s\n' "$ROWS rows, $WORKERS workers, batch $BATCH" "rows/s" "vs driver"
printf '%-34s %12s %10s\n' "raw driver (insert_many, no parse)" "$d" "1.00"
awk -v d="$d" -v c="$c" -v j="$j" 'BEGIN {
    printf "%-34s %12s %10.2f\n", "hourglass import --type csv", c, c / d
    printf "%-34s %12s %10.2f\n", "hourglass import --type json", j, j / d
}'
