#!/usr/bin/env bash
# Starts hourglass on a free port with a temporary dbpath and runs smoke.js through mongosh.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${HOURGLASS_BIN:-$ROOT/target/debug/hourglass}"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
MONGOSH="${MONGOSH:-$ROOT/.tools/node_modules/.bin/mongosh}"
if [ ! -x "$MONGOSH" ]; then
  MONGOSH="$(command -v mongosh || true)"
fi
[ -x "$BIN" ] || { echo "run.sh: hourglass binary not found at $BIN" >&2; exit 2; }
[ -n "$MONGOSH" ] && [ -x "$MONGOSH" ] || { echo "run.sh: mongosh not found (npm install --prefix .tools mongosh)" >&2; exit 2; }

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
TMP="$(mktemp -d -t hourglass-mongosh-XXXXXX)"
mkdir -p "$TMP/db"
"$BIN" --dbpath "$TMP/db" --port "$PORT" --bind_ip 127.0.0.1 --quiet >"$TMP/server.out" 2>&1 &
PID=$!
cleanup() {
  kill -TERM "$PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

for _ in $(seq 1 200); do
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "run.sh: hourglass exited during startup:" >&2; cat "$TMP/server.out" >&2; exit 1
  fi
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
  sleep 0.1
done

export MONGOSH_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
"$MONGOSH" --quiet --norc "mongodb://127.0.0.1:$PORT/test?directConnection=true&serverSelectionTimeoutMS=5000" --file "$HERE/smoke.js"
echo "mongosh smoke test: 1 passed, 0 failed"
