#!/bin/bash
# labd builds measured one at a time, in turn, so that each runs alone on
# the machine (its caches as well as its cores) and a slow minute falls on
# every build in some round. Each round starts every build on a fresh store
# with JOURNALS journals, one after the other, and puts `wrk -t1 -c64`
# single-fact appends and then the journal `head` on it, SECONDS each after
# a one-second warm-up. Prints per round and build: each load's rate, labd
# CPU per request, the store's writer thread's share of it, context
# switches per request (every labd thread), interrupts per request that
# woke another CPU (the machine's, whoever sent them), requests per commit
# of the store, and the append's rate over the `head`'s. simultaneous.sh
# is the other method: both builds at once. Needs wrk (Debian's package),
# curl and python3.
#
# usage: alternate.sh ROUNDS SECONDS JOURNALS LABD...
set -euo pipefail
rounds=$1 seconds=$2 journals=$3
shift 3
work=$(mktemp -d)
trap 'kill $(cat "$work"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT

source "$(dirname "$0")/wrk-loads.sh"

# counters PID WRITER_TID: labd's CPU ticks, the writer's, context
# switches, the machine's interrupts that wake another CPU (rescheduling
# and function-call interrupts, every CPU), and the store's commits.
counters() {
  echo "$(awk '{print $14 + $15}' "/proc/$1/stat")" \
    "$(awk '{print $14 + $15}' "/proc/$1/task/$2/stat")" \
    "$(cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {n += $2} END {print n}')" \
    "$(awk '$1 == "RES:" || $1 == "CAL:" {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i} END {print n}' /proc/interrupts)" \
    "$(curl -s http://127.0.0.1:18103/metrics | awk '$1 == "lab_kv_commits_total" {print $2}')"
}

tick=$(getconf CLK_TCK)
for round in $(seq "$rounds"); do
  for labd in "$@"; do
    start a "$labd" 18100
    pid=$(cat "$work/a.pid")
    writer=$(grep -lx kv-writer /proc/"$pid"/task/*/comm | head -1 | cut -d/ -f5)
    line="round $round $labd:"
    for load in append head; do
      SPACE=$work/a/space wrk -t1 -c64 -d1s -s "$work/$load.lua" http://127.0.0.1:18102 >/dev/null
      read -r c0 w0 s0 i0 g0 <<<"$(counters "$pid" "$writer")"
      SPACE=$work/a/space wrk -t1 -c64 -d"${seconds}s" -s "$work/$load.lua" \
        http://127.0.0.1:18102 >"$work/a.wrk"
      read -r c1 w1 s1 i1 g1 <<<"$(counters "$pid" "$writer")"
      requests=$(awk '/requests in/ {print $1}' "$work/a.wrk")
      line+=$(python3 -c "
n, s, t = $requests, $seconds, $tick
print(f' {\"$load\"} {n / s:.0f}/s {($c1 - $c0) / t / n * 1e6:.1f} µs '
      f'(writer {($w1 - $w0) / t / n * 1e6:.1f}, {($s1 - $s0) / n:.2f} switches, {($i1 - $i0) / n:.2f} wake-up interrupts, '
      f'{f\"{n / ($g1 - $g0):.1f} a commit\" if $g1 > $g0 else \"no commits\"});', end='')")
      eval "rate_$load=$requests"
    done
    echo "$line append/head $(python3 -c "print(f'{$rate_append / $rate_head:.0%}')")"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
done
