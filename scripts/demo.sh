#!/usr/bin/env bash
# `make run`: start Sluicegate and show it doing its job on the seed article's example.
#
# Four deliveries of occurrence A (two at once, one after its run completed, one after the
# processor was killed with SIGKILL and restarted) and one of B give 2 runs and 6 branch
# launches, not 15. Then Sluicegate keeps running until Ctrl-C (DEMO_EXIT=1: stop after the
# demo). Runs against the local stack that `make up` started.
set -euo pipefail
cd "$(dirname "$0")/.."
sg=.venv/bin/sluicegate
export SLUICEGATE_TOPIC_PREFIX=${SLUICEGATE_TOPIC_PREFIX:-sluicegate.}
mkdir -p var/log

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

$sg workflows apply examples/btc-breakout.toml

# serve keeps this file of "NAME PID" lines current: the demo signals one child by its pid,
# never by matching process names (which could hit any process on the machine).
pid_file=var/run/serve.pids
say "starting sluicegate serve (log: var/log/serve.log, pids: $pid_file)"
$sg serve --pid-file "$pid_file" >var/log/serve.log 2>&1 &
serve_pid=$!
cleanup() { kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

# A fresh candle each time the demo runs, so that it is a new occurrence within the horizon.
minute=$(( $(date +%s) / 60 * 60 - 120 ))
a_open=$(date -u -d "@$minute" +%Y-%m-%dT%H:%M:%SZ)
b_open=$(date -u -d "@$((minute + 60))" +%Y-%m-%dT%H:%M:%SZ)
line() {
  printf '{"subscription":"btc-breakout","environment":"paper","source":"tradingview","venue":"binance","instrument":"BTCUSDT","interval":"1m","candle_open":"%s","rule":"breakout-v1","side":"buy","price":"97000.5","account":"acc-1"}\n' "$1"
}
publish() { $sg publish --json 2>/dev/null; }
admission_key=""

wait_for() {  # wait_for SECONDS COMMAND...: until the command succeeds
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "timed out waiting for: $*" >&2; return 1; }
    sleep 0.5
  done
}
pid_of() {  # pid_of COMPONENT: its pid in serve's pid file, if it is running now
  awk -v name="$1" '$1 == name { print $2 }' "$pid_file" 2>/dev/null
}
running_other_than() {  # running_other_than COMPONENT PID: it runs, under another pid
  local pid; pid=$(pid_of "$1"); [ -n "$pid" ] && [ "$pid" != "$2" ]
}

say "two concurrent deliveries of A"
out=$( (line "$a_open"; line "$a_open") | publish )
echo "$out"
admission_key=$(echo "$out" | head -n 1 | sed -E 's/.*"admission_key":"([^"]*)".*/\1/')

say "waiting for A's run to finish (the demo worker takes its three branch tasks)"
# The signal branch is checked against the 5 s deadline when taken: a candle that closed
# more than 5 s ago is skipped (expired_at_dequeue); analysis and journal still complete.
wait_for 60 bash -c "$sg occurrences show '$admission_key' --json | grep -Eq '\"status\":\"(completed|skipped|failed)\"'"

say "a third delivery of A, after completion"
line "$a_open" | publish

say "kill -9 the processor; sluicegate serve restarts it, state comes back from the changelog"
wait_for 30 running_other_than processor none
processor_pid=$(pid_of processor)
kill -9 "$processor_pid"
echo "killed processor pid $processor_pid"
wait_for 60 running_other_than processor "$processor_pid"
echo "serve restarted it as pid $(pid_of processor)"

say "a fourth delivery of A after the restart, and the first of B"
out=$( (line "$a_open"; line "$b_open") | publish )
echo "$out"
b_key=$(echo "$out" | tail -n 1 | sed -E 's/.*"admission_key":"([^"]*)".*/\1/')

wait_for 90 bash -c "[ \$($sg occurrences show '$admission_key' --json | grep -o '\"outcome\":\"[a-z]*\"' | wc -l) -ge 4 ]"
wait_for 30 bash -c "$sg occurrences show '$b_key' --json | grep -q '\"outcome\":\"admitted\"'"

say "occurrence A: one run, four deliveries, each with its outcome"
$sg occurrences show "$admission_key"

say "occurrence B: its own run"
$sg occurrences show "$b_key"

say "the counts (sluicegate stats; they add up over every make run)"
$sg stats

if [ "${DEMO_EXIT:-0}" = 1 ]; then
  exit 0
fi
say "Sluicegate is running: webhook at http://${SLUICEGATE_HTTP:-127.0.0.1:8080}/v1/hooks/btc-breakout?env=paper, read API at http://${SLUICEGATE_READ_HTTP:-127.0.0.1:8081}/v1/stats, Ctrl-C stops it"
wait "$serve_pid"
