#!/bin/bash
# Two labd builds measured at the same time, so that whatever the machine
# does at that moment falls on both: each serves its own fresh store on its
# own ports under its own `wrk -t1 -c64`, single-fact appends with unique
# operation IDs, then the journal `head`. The builds swap ports and start
# order every round. Prints per round and load each build's rate and labd
# CPU per request, and B's rate over A's. The same build as A and B gives
# the method's own spread. Needs wrk (Debian's package) and curl.
#
# usage: simultaneous.sh ROUNDS SECONDS LABD_A LABD_B
set -euo pipefail
rounds=$1 seconds=$2 a=$3 b=$4
work=$(mktemp -d)
trap 'kill $(cat "$work"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT

cat >"$work/append.lua" <<'LUA'
local f = io.open(os.getenv("SPACE")); local space = f:read("*l"); f:close()
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
local n, tag = 0, tostring(os.time()) .. tostring(math.random(1000000))
request = function()
  n = n + 1
  return wrk.format(nil, "/v1/append", nil, '{"space":' .. space ..
    ',"facts":["gmViZW5jaAA="],"operation_id":"s' .. tag .. '-' .. n .. '"}')
end
LUA
cat >"$work/head.lua" <<'LUA'
local f = io.open(os.getenv("SPACE")); local space = f:read("*l"); f:close()
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.body = '{"space":' .. space .. '}'
wrk.path = "/v1/head"
LUA

field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

# start NAME LABD PORT: labd on PORT..PORT+5; a journal under the root.
start() {
  local name=$1 labd=$2 port=$3 dir=$work/$1
  rm -rf "$dir" && mkdir -p "$dir"
  "$labd" --data-dir "$dir/data" --log warn --ready-file "$dir/ready" \
    --bytes-listen 127.0.0.1:$port --bytes-management-listen 127.0.0.1:$((port + 1)) \
    --journal-listen 127.0.0.1:$((port + 2)) --journal-management-listen 127.0.0.1:$((port + 3)) \
    --coord-listen 127.0.0.1:$((port + 4)) --coord-management-listen 127.0.0.1:$((port + 5)) \
    >"$dir/log" 2>&1 &
  echo $! >"$work/$name.pid"
  until [ -f "$dir/ready" ]; do sleep 0.1; done
  local journal=http://127.0.0.1:$((port + 2)) health root space
  health=$(curl -s "$journal/healthz")
  root=$(echo "$health" | field 'd["identity"]["root_id"]')
  space=$(echo "$health" | field 'd["identity"]["root_space_id"]')
  space=$(curl -s -X POST "$journal/v1/create" -H 'content-type: application/json' \
    -d "{\"parent\":{\"root_id\":\"$root\",\"space_id\":\"$space\"},\"key\":\"one\",\"operation_id\":\"one\"}" |
    field 'd["child"]["space_id"]')
  echo "{\"root_id\":\"$root\",\"space_id\":\"$space\"}" >"$dir/space"
}

cpu() { awk '{print $14 + $15}' "/proc/$(cat "$work/$1.pid")/stat"; }

# both SCRIPT SECONDS: the two loads at once.
both() {
  SPACE=$work/a/space wrk -t1 -c64 -d"$2"s -s "$work/$1" http://127.0.0.1:$((pa + 2)) >"$work/a.wrk" 2>&1 &
  local first=$!
  SPACE=$work/b/space wrk -t1 -c64 -d"$2"s -s "$work/$1" http://127.0.0.1:$((pb + 2)) >"$work/b.wrk" 2>&1
  wait $first
}

tick=$(getconf CLK_TCK)
for round in $(seq "$rounds"); do
  if [ $((round % 2)) = 1 ]; then pa=18100 pb=18200; else pa=18200 pb=18100; fi
  if [ $((round % 2)) = 1 ]; then start a "$a" $pa; start b "$b" $pb
  else start b "$b" $pb; start a "$a" $pa; fi
  for load in append.lua head.lua; do
    both $load 1
    a0=$(cpu a) b0=$(cpu b)
    both $load "$seconds"
    a1=$(cpu a) b1=$(cpu b)
    ra=$(awk '/requests in/{print $1}' "$work/a.wrk")
    rb=$(awk '/requests in/{print $1}' "$work/b.wrk")
    python3 -c "
ra, rb, s, t = $ra, $rb, $seconds, $tick
print(f'round $round ${load%.lua}: A {ra / s:.0f}/s {($a1 - $a0) / t / ra * 1e6:.1f} µs, '
      f'B {rb / s:.0f}/s {($b1 - $b0) / t / rb * 1e6:.1f} µs, B/A {rb / ra:.3f}')"
  done
  kill "$(cat "$work/a.pid")" "$(cat "$work/b.pid")"
  wait "$(cat "$work/a.pid")" "$(cat "$work/b.pid")" 2>/dev/null || true
done
