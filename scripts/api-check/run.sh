#!/usr/bin/env bash
# make api-check: schemathesis against the OpenAPI file each service serves.
#
# Builds labd, starts it on free loopback ports with a temporary data
# directory, installs the pinned schemathesis into a virtualenv when it is not
# there yet, runs it against the operations listener of bytes, journal and
# coordination (bounded examples, fixed seed), and stops labd. Exits non-zero
# when any run finds a failure.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cargo="${CARGO:-cargo}"
venv="${API_CHECK_VENV:-$root/target/api-check/venv}"
examples="${API_CHECK_EXAMPLES:-25}"
seed="${API_CHECK_SEED:-20260910}"

"$cargo" build --quiet -p labd --manifest-path "$root/Cargo.toml"
labd="$root/target/debug/labd"

if ! "$venv/bin/st" --version >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi

work="$(mktemp -d)"
labd_pid=""
stop() {
    if [ -n "$labd_pid" ]; then
        kill "$labd_pid" 2>/dev/null || true
        wait "$labd_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop EXIT

"$labd" --data-dir "$work/state" --ready-file "$work/ready.json" --log warn \
    --bytes-listen 127.0.0.1:0 --bytes-management-listen 127.0.0.1:0 \
    --journal-listen 127.0.0.1:0 --journal-management-listen 127.0.0.1:0 \
    --coord-listen 127.0.0.1:0 --coord-management-listen 127.0.0.1:0 \
    >"$work/labd.log" 2>&1 &
labd_pid=$!
for _ in $(seq 1 1200); do
    [ -f "$work/ready.json" ] && break
    if ! kill -0 "$labd_pid" 2>/dev/null; then
        cat "$work/labd.log" >&2
        echo "labd exited before it was ready" >&2
        exit 1
    fi
    sleep 0.1
done
[ -f "$work/ready.json" ] || { echo "labd was not ready in time" >&2; exit 1; }

address() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["operations"])' \
        "$work/ready.json" "$1"
}

failed=()
# (ready-file name, contract directory)
for pair in bytes:bytes journal:journal coord:coordination; do
    service="${pair%%:*}"
    contract="${pair#*:}"
    base="http://$(address "$service")"
    echo "== $contract: $base/describe/openapi.json"
    if ! python3 -c 'import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1]).read() != open(sys.argv[2], "rb").read())' \
        "$base/describe/openapi.json" "$root/contracts/$contract/openapi.json"; then
        echo "the served openapi.json differs from contracts/$contract/openapi.json" >&2
        failed+=("$contract")
        continue
    fi
    if ! (cd "$work" && API_CHECK_SERVICE="$contract" SCHEMATHESIS_HOOKS=hooks \
        PYTHONPATH="$here" "$venv/bin/st" --config-file "$here/$contract.toml" run \
        "$base/describe/openapi.json" --url "$base" \
        --max-examples "$examples" --seed "$seed" \
        --workers 1 --no-color \
        --generation-database none); then
        failed+=("$contract")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "api-check failed: ${failed[*]}" >&2
    exit 1
fi
echo "api-check: bytes, journal and coordination conform to their openapi.json"
