#!/usr/bin/env bash
# `make run`: start Sluicegate and show it doing its job on the seed article's example.
#
# Four deliveries of occurrence A (two at once, one after its run completed, one after the
# processor was killed with SIGKILL and restarted) and one of B give 2 runs and 6 branch
# launches, not 15. Then the gate: a fresh signal dispatched, a delayed one expiring at the
# gate, a newer one superseding an older one, and an older one arriving last that loses at
# once. Then the gateway's recovery of an entry whose answer was lost, serve replacing a
# frozen projector, and a foreign record dead-lettered. Then Sluicegate keeps running until
# Ctrl-C (DEMO_EXIT=1: stop after the demo). Runs against the local stack that `make up`
# started.
set -euo pipefail
cd "$(dirname "$0")/.."
sg=.venv/bin/sluicegate
export SLUICEGATE_TOPIC_PREFIX=${SLUICEGATE_TOPIC_PREFIX:-sluicegate.}
mkdir -p var/log

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

$sg workflows apply examples/btc-breakout.toml

# PostgreSQL is the machine's, Kafka's data lives in this checkout (var/): after var/ was
# removed, or in a second checkout, the read model holds offsets of topics that no longer
# exist, and the projector refuses to resume from them. Rebuild it from the topics as they are:
# the demo's old runs went with the topics they came from, so it drops them on purpose.
checked=0
why=$($sg projections check 2>&1 >/dev/null) || checked=$?
if [ "$checked" = 3 ]; then
  say "the read model was projected from topics that no longer exist: rebuilding it"
  echo "$why"
  $sg projections rebuild --no-progress --drop-history
elif [ "$checked" != 0 ]; then
  echo "$why" >&2
  exit 1
fi

# serve keeps this file of "NAME PID" lines current: the demo signals one child by its pid,
# never by matching process names (which could hit any process on the machine).
pid_file=var/run/serve.pids
# A liveness window of 15 s instead of 30, so that the last step's frozen projector is replaced
# sooner; still twice the 7 s the gate is paused for on purpose.
# Each engine instance serves its probes and /metrics on a port of its own, consecutive
# from the first of five free ones at 9470 or above (processor, gate, gateway, projector, worker).
probes=$(.venv/bin/python -c '
import socket
for first in range(9470, 9970):
    try:
        held = [socket.socket() for _ in range(5)]
        for n, s in enumerate(held):
            s.bind(("127.0.0.1", first + n))
    except OSError:
        continue
    finally:
        for s in held:
            s.close()
    print(first)
    break
')
say "starting sluicegate serve (log: var/log/serve.log, pids: $pid_file, probes from port $probes)"
$sg serve --pid-file "$pid_file" --liveness 15s --only venue --only processor --only gate \
  --only gateway --only projector --only ingest --health "127.0.0.1:$probes" \
  >var/log/serve.log 2>&1 &
serve_pid=$!
# Two demonstration workers in their own groups: one proposes (signal) and journals, one
# approves (analysis), so that a slow approval never holds up another run's proposal.
$sg worker --slot signal --slot journal --group demo-proposers >var/log/worker-propose.log 2>&1 &
proposer_pid=$!
$sg worker --slot analysis --group demo-approvers >var/log/worker-approve.log 2>&1 &
approver_pid=$!
cleanup() {
  kill -CONT "$(pid_of gate)" 2>/dev/null || true
  kill "$proposer_pid" "$approver_pid" 2>/dev/null || true
  kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
}
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

say "waiting for A's run to finish (the demo workers take its three branch tasks)"
echo "A's candle closed a minute or two ago, so its 5 s deadline has passed: the signal and"
echo "analysis tasks are skipped when taken (expired_at_dequeue in the counts below) and only"
echo "the journal task, kept for the record, runs. The run still ends, once. Fresh signals"
echo "that make it in time are the gate's part of the demo, further down."
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

say "the restarted processor's own metrics (serve --health: GET /metrics on port $probes)"
echo "What it restored from its changelog, what it decided since its restart, and how far it"
echo "is behind each partition of deliveries (0 or 1: a commit marker takes an offset)."
wait_for 60 bash -c "curl -s 127.0.0.1:$probes/metrics | grep -q '^sluicegate_engine_ready{.*} 1'"
curl -s "127.0.0.1:$probes/metrics" \
  | grep -E '^sluicegate_engine_(restored_records_total|records_total|input_lag_offsets)' \
  | grep -E 'restored|records_total|deliveries'

say "occurrence A: one run, four deliveries, each with its outcome"
$sg occurrences show "$admission_key"

say "occurrence B: its own run"
$sg occurrences show "$b_key"

say "the counts (sluicegate stats; they add up over every make run)"
$sg stats

# ---- the gate: which proposed entries may leave ------------------------------------------
# Every run proposes an entry from its signal slot (the demo handler), approved by analysis.
# Each scenario uses its own account, so its own decision scope (account, instrument, side).
tag=$(date +%s)
scope_of() { printf 'paper|account=%s|instrument=BTCUSDT|side=buy' "$1"; }
# signal ACCOUNT CANDLE_OPEN_MS INTERVAL [APPROVAL_DELAY_MS]: a delivery whose candle closes
# at CANDLE_OPEN_MS + INTERVAL (its source time; the 5 s window counts from there).
signal() {
  printf '{"subscription":"btc-breakout","environment":"paper","source":"tradingview","venue":"binance","instrument":"BTCUSDT","interval":"%s","candle_open":%s,"rule":"breakout-v1","side":"buy","price":"97000.5","account":"%s","demo_approval_delay_ms":%s}\n' \
    "$3" "$2" "$1" "${4:-0}"
}
now_ms() { date +%s%3N; }
decided() {  # decided SCOPE OUTCOME [COUNT]: the scope has COUNT decisions with OUTCOME
  [ "$($sg scopes show "$1" --json 2>/dev/null | grep -o "\"outcome\":\"$2\"" | wc -l)" -ge "${3:-1}" ]
}

say "gate 1/4: a fresh signal (its candle closed just now) is proposed, approved and dispatched"
echo "The signal slot proposes an entry, analysis approves it, the gate checks that it is the"
echo "current candidate of its scope and that now + 250 ms < its deadline: ActionDispatched."
fresh=$(scope_of "demo-fresh-$tag")
signal "demo-fresh-$tag" "$(( $(now_ms) - 60000 ))" 1m | publish
wait_for 60 decided "$fresh" dispatched
$sg scopes show "$fresh"

say "gate 2/4: a delayed signal expires at the gate (the gate is paused with SIGSTOP for 7 s)"
echo "Its worker takes it in time and analysis approves it, but the dispatch request waits in"
echo "the gate's queue past the 5 s deadline: it is expired, nothing is sent, and no queue"
echo "gives it a new window."
late=$(scope_of "demo-late-$tag")
gate_pid=$(pid_of gate)
kill -STOP "$gate_pid"
signal "demo-late-$tag" "$(( $(now_ms) - 60000 ))" 1m | publish
sleep 7
kill -CONT "$gate_pid"
wait_for 60 decided "$late" expired
$sg scopes show "$late"

say "gate 3/4: a newer signal supersedes an older one of the same scope"
echo "The older (candle 12:xx-5m, interval 5m) is approved slowly (2 s); meanwhile the newer"
echo "(a later candle_open, interval 1m; both close now) is accepted: the older candidate is"
echo "superseded (newer_generation) and only the newer one is dispatched."
sup=$(scope_of "demo-newer-$tag")
now=$(now_ms)
signal "demo-newer-$tag" "$(( now - 300000 ))" 5m 2000 | publish
sleep 0.7
signal "demo-newer-$tag" "$(( now - 60000 ))" 1m | publish
wait_for 60 decided "$sup" superseded
wait_for 60 decided "$sup" dispatched
$sg scopes show "$sup"

say "gate 4/4: an older signal that arrives last loses at once"
echo "The newer one (candle_open later) is decided first; the older one, sent after it, is"
echo "superseded on arrival (older_than_current): arrival order never makes it win."
last=$(scope_of "demo-last-$tag")
now=$(now_ms)
signal "demo-last-$tag" "$(( now - 60000 ))" 1m | publish
wait_for 60 decided "$last" dispatched
signal "demo-last-$tag" "$(( now - 300000 ))" 5m | publish
wait_for 60 decided "$last" superseded
$sg scopes show "$last"

# ---- the execution gateway: an entry whose response is lost, a crash, the recovery -------
# Where serve runs the paper venue (the gateway's SLUICEGATE_VENUE_URL) and where it keeps
# its admin token (SLUICEGATE_VENUE_STATE_DIR), as serve and the venue read them.
venue=${SLUICEGATE_VENUE_URL:-http://127.0.0.1:8090}
venue=${venue%/}
token=$(cat "${SLUICEGATE_VENUE_STATE_DIR:-var/venue}/admin-token" 2>/dev/null || true)
venue_orders() {  # venue_orders CLIENT_ORDER_ID: how many orders the venue holds with that id
  local n
  n=$(curl -s -H "Authorization: Bearer $token" "$venue/paper/v1/orders?client_order_id=$1" \
    | grep -o "\"$1\": *[0-9]*" | grep -o '[0-9]*$')
  echo "${n:-0}"
}
has_order() { [ "$(venue_orders "$1")" -ge 1 ]; }
journal_has() {  # journal_has RUN_ID TEXT: the run's timeline mentions TEXT
  $sg runs timeline "$1" 2>/dev/null | grep -Eq "$2"
}

say "gateway 1/2: an entry whose response is lost, and the gateway killed with SIGKILL"
echo "The gateway is paused while the signal is admitted, so that the venue can be told in time"
echo "to hold its answer to exactly this entry (client order id <run id>-E) for 20 s. The"
echo "gateway commits AttemptStarted before the request leaves; the venue fills the order and"
echo "says nothing; then the gateway is killed. Nothing it knew was lost: the attempt is in the"
echo "journal, its outcome is not."
gateway_pid=$(pid_of gateway)
kill -STOP "$gateway_pid"
out=$(signal "demo-lost-$tag" "$(( $(now_ms) - 60000 ))" 1m | publish)
lost_key=$(echo "$out" | sed -E 's/.*"admission_key":"([^"]*)".*/\1/')
lost_run=$(.venv/bin/python -c 'import sys; from streams.core.identity import run_id_for; print(run_id_for(sys.argv[1], 0))' "$lost_key")
entry_id="${lost_run#run-}-E"
curl -s -o /dev/null -H "Authorization: Bearer $token" -X POST "$venue/paper/v1/faults" \
  -d "{\"name\": \"lose-$entry_id\", \"action\": \"hold\", \"hold_ms\": 20000, \"client_order_id\": \"$entry_id\"}"
kill -CONT "$gateway_pid"
wait_for 30 has_order "$entry_id"
echo "the venue holds $(venue_orders "$entry_id") order with client order id $entry_id (filled); the gateway heard nothing"
kill -9 "$gateway_pid"
echo "killed gateway pid $gateway_pid"
wait_for 60 running_other_than gateway "$gateway_pid"
echo "serve restarted it as pid $(pid_of gateway)"

say "gateway 2/2: recovery looks the entry up instead of sending it again"
echo "The new owner restores the run's journal: the last checkpoint says the entry is next, but"
echo "a newer record says its dispatch started, so the entry is looked up by its client order"
echo "id. The receipt links it to the venue's order; the recovery receipt records what was"
echo "restored, consulted and observed; then the protection order is sized from the exposure"
echo "the venue reports and placed, and the notification sent."
wait_for 90 journal_has "$lost_run" RecoveryReceiptRecorded
wait_for 90 bash -c "$sg runs timeline '$lost_run' | grep -Eq 'ReceiptRecorded +notification'"
$sg runs timeline "$lost_run"
echo
echo "venue orders for the entry: $(venue_orders "$entry_id") (sent once); for the protection: $(venue_orders "${lost_run#run-}-P")"

say "serve: a frozen component is replaced (the projector is paused with SIGSTOP, for good)"
echo "A frozen process (a debugger, a suspended VM, a swap storm) neither exits nor answers."
echo "Each child of serve beats on a pipe while it is worth keeping; one silent for the"
echo "liveness window (15 s here, 30 s by default) is killed with SIGKILL and restarted, and the"
echo "projector carries on from the offsets it stored with its last batch."
projector_pid=$(pid_of projector)
kill -STOP "$projector_pid"
echo "paused projector pid $projector_pid at $(date -u +%T)"
wait_for 60 running_other_than projector "$projector_pid"
grep -a "sent no heartbeat" var/log/serve.log | tail -n 1
echo "serve restarted it as pid $(pid_of projector) at $(date -u +%T)"

say "a record that bypassed Sluicegate's codec is a dead letter: kept, never a run, never a stall"
echo "Bytes written straight to the deliveries topic by some other producer cannot be decided."
echo "The processor moves them to dead-letters with the reason and where they came from, in the"
echo "transaction that moves its offset past them, and goes on; the read model keeps them after"
echo "the topic's 30 days (GET /v1/dead-letters; sluicegate_dead_letters_total on /metrics, by"
echo "kind: this one is undecodable)."
hostile="demo-hostile-$tag"
.venv/bin/python -c '
import sys
from confluent_kafka import Producer
from streams.settings import load_settings
settings = load_settings()
producer = Producer(settings.producer_config())
producer.produce(settings.topic_named("deliveries"), b"{\"not\": \"our codec\"}", sys.argv[1].encode())
assert producer.flush(10) == 0
' "$hostile"
read_api="http://${SLUICEGATE_READ_HTTP:-127.0.0.1:8081}"
read_auth=()
[ -n "${SLUICEGATE_READ_TOKEN:-}" ] && read_auth=(-H "Authorization: Bearer $SLUICEGATE_READ_TOKEN")
newest_dead_letter() {  # the newest dead letter, as GET /v1/dead-letters lists it
  local total
  total=$(curl -s "${read_auth[@]}" "$read_api/v1/dead-letters?limit=1" \
    | grep -o '"total": *[0-9]*' | grep -o '[0-9]*$' || true)
  [ -n "$total" ] && [ "$total" -gt 0 ] || return 1
  curl -s "${read_auth[@]}" "$read_api/v1/dead-letters?from=$(( total - 1 ))&limit=1"
}
dead_letter_listed() { newest_dead_letter | grep -q "$hostile"; }
wait_for 60 dead_letter_listed
newest_dead_letter
echo
curl -s "${read_auth[@]}" "$read_api/metrics" | grep '^sluicegate_dead_letters_total'

say "the counts: dispatched, expired before send, superseded, unresolved attempts, holds"
$sg stats

say "the read model's size, and what a prune would delete now"
echo "The projector keeps every row until 'sluicegate projections prune' deletes the occurrences"
echo "the engine forgot (evicted once the workflow's retention passed) and the topics no longer"
echo "hold, with every row built from them. This demo's occurrences are minutes old, so a dry"
echo "run finds nothing to delete yet. 'sluicegate projector --prune-every 6h' (or"
echo "SLUICEGATE_PRUNE_EVERY=6h) prunes on a schedule; '--keep 400d' keeps an audit horizon."
curl -s "${read_auth[@]}" "$read_api/metrics" \
  | grep -E '^sluicegate_projection_table_bytes\{table="(event_log|runs|deliveries)"\}'
$sg projections prune --dry-run

if [ "${DEMO_EXIT:-0}" = 1 ]; then
  exit 0
fi
say "Sluicegate is running: webhook at http://${SLUICEGATE_HTTP:-127.0.0.1:8080}/v1/hooks/btc-breakout?env=paper, read API at http://${SLUICEGATE_READ_HTTP:-127.0.0.1:8081}/v1/stats, Ctrl-C stops it"
wait "$serve_pid"
