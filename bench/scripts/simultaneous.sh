#!/bin/bash
# Two labd builds measured at the same time, so that whatever the machine
# does at that moment falls on both: each serves its own fresh store on its
# own ports under its own `wrk -t1 -c64`, single-fact appends with unique
# operation IDs, then the journal `head`, each request to one of JOURNALS
# journals (1 by default) drawn at random. The builds swap ports and start
# order every round. Prints per round and load each build's rate and labd
# CPU per request, and B's rate over A's. The same build as A and B gives
# the method's own spread. Needs wrk (Debian's package) and python3.
#
# usage: simultaneous.sh ROUNDS SECONDS LABD_A LABD_B [JOURNALS]
set -euo pipefail
rounds=$1 seconds=$2 a=$3 b=$4 journals=${5:-1}
work=$(mktemp -d)
trap 'kill $(cat "$work"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT

source "$(dirname "$0")/wrk-loads.sh"

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
