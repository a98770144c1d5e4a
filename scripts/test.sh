#!/usr/bin/env bash
# The project's one test command: installs what the tests need (if missing), builds, and runs
# every suite: Rust unit tests + the Rust-driver integration suite (cargo test), the pymongo
# suite (pytest), the mongosh smoke test and the drivers' specification tests (pymongo's
# unified-format runner, from its PyPI source distribution).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
PYTHON="${PYTHON:-python3}"

log() { printf '\n==> %s\n' "$*"; }

# ---- tools -------------------------------------------------------------------------------
if ! .venv/bin/python -c 'import pymongo, pytest' >/dev/null 2>&1; then
  log "installing pymongo + pytest into .venv"
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check pymongo pytest
fi
# pymongoarrow (Arrow tables from aggregate cursors) is optional: its test skips with the
# reason when no wheel can be installed here.
if ! .venv/bin/python -c 'import pymongoarrow' >/dev/null 2>&1; then
  log "installing pymongoarrow into .venv"
  .venv/bin/pip install --quiet --disable-pip-version-check pymongoarrow \
    || echo "pymongoarrow could not be installed; its test will be skipped"
fi
# Clients of the HTTP listener's tests (InfluxDB 1.x and 2.x, requests, prometheus-client's
# exposition parser, cramjam for snappy, duckdb to read what `hourglass export --type parquet`
# writes) and pymongo's wire compressors (backports.zstd, python-snappy): a test whose package
# cannot be installed skips with the reason. (The HTTP tests install the real Prometheus
# from Debian themselves.)
for pkg_mod in influxdb:influxdb influxdb-client:influxdb_client requests:requests \
               prometheus-client:prometheus_client cramjam:cramjam duckdb:duckdb \
               backports.zstd:backports.zstd python-snappy:snappy; do
  pkg="${pkg_mod%%:*}" mod="${pkg_mod#*:}"
  if ! .venv/bin/python -c "import $mod" >/dev/null 2>&1; then
    log "installing $pkg into .venv"
    .venv/bin/pip install --quiet --disable-pip-version-check "$pkg" \
      || echo "$pkg could not be installed; the tests that need it will be skipped"
  fi
done
if [ ! -x .tools/node_modules/.bin/mongosh ]; then
  log "installing mongosh into .tools"
  npm install --prefix .tools --no-audit --no-fund --loglevel=error mongosh
fi

# ---- build -------------------------------------------------------------------------------
log "cargo build --workspace"
cargo build --workspace

# ---- suites ------------------------------------------------------------------------------
declare -a NAMES=() RESULTS=()
run_suite() {
  local name="$1"; shift
  log "$name"
  local start=$SECONDS
  if "$@"; then
    RESULTS+=("ok    $name ($((SECONDS - start)) s)")
  else
    RESULTS+=("FAIL  $name ($((SECONDS - start)) s)")
  fi
  NAMES+=("$name")
}

export HOURGLASS_BIN="$ROOT/target/debug/hourglass"
run_suite "module cycles" "$PYTHON" scripts/check_module_cycles.py
run_suite "cargo test --workspace" cargo test --workspace --no-fail-fast
run_suite "pytest tests/python" .venv/bin/python -m pytest -q tests/python
run_suite "mongosh smoke test" tests/mongosh/run.sh
# The drivers' own specification tests (unified format) through pymongo's runner; fails
# under 95% of the tests that run.
run_suite "pymongo specification tests" .venv/bin/python tests/spec/run_pymongo_spec_tests.py

# ---- summary -----------------------------------------------------------------------------
passed=0; failed=0
printf '\n==> summary\n'
for r in "${RESULTS[@]}"; do
  printf '  %s\n' "$r"
  case "$r" in ok*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
