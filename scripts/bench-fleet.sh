#!/usr/bin/env bash
# The fleet's figures for BENCHMARKS.md, on loopback, against Debian's nats-server:
#   1. what publishing costs a gateway: the same burst of chats through `gateway run
#      --stdin`, without and with --events-nats, side by side (wall time per turn), and
#      the events per second one gateway published during it;
#   2. end to end, gateway to consumer handler: a consumer's handler.py records
#      now - emitted_at for every event of the burst; p50 and p99.
# Usage: scripts/bench-fleet.sh [CHATS] (default 3000). Needs a release build
# (cargo build --release -p hermes-host) and nats-server on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
chats="${1:-3000}"
hermes="$PWD/target/release/hermes"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nats-server -js -sd "$work/store" -a 127.0.0.1 -p "$port" >/dev/null 2>&1 &
until python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null; do sleep 0.1; done
url="nats://127.0.0.1:$port"
python3 - "$chats" > "$work/messages.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"chat_id": f"c{i}", "user_id": "u", "text": "hi"}))
PY

burst() { # home, extra args...
    local home="$1"; shift
    local start end
    start=$(date +%s%N)
    "$hermes" --home "$home" gateway run --stdin --trace off "$@" < "$work/messages.jsonl" > /dev/null 2> "$home.log"
    end=$(date +%s%N)
    echo $(( (end - start) / 1000 ))
}

echo "machine: $(nproc) cores, $(uname -r); $chats chats, one message each"
for round in 1 2 3; do
    plain=$(burst "$work/plain-$round")
    events=$(burst "$work/events-$round" --events-nats "$url")
    published=$(grep -o 'events: [0-9]* published' "$work/events-$round.log" | grep -o '[0-9]*')
    echo "round $round: without ${plain} µs ($(( plain / chats )) µs/turn), with ${events} µs ($(( events / chats )) µs/turn); $published events, $(( published * 1000000 / events )) events/s published"
done

# End to end: a consumer whose handler records the latency of every event, on a fresh
# broker (the stream above holds the bursts, which a new durable would read first).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nats-server -js -sd "$work/store2" -a 127.0.0.1 -p "$port" >/dev/null 2>&1 &
until python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null; do sleep 0.1; done
url="nats://127.0.0.1:$port"
mkdir -p "$work/consumer/hooks/latency"
cat > "$work/consumer/hooks/latency/HOOK.yaml" <<'YAML'
name: latency
events: ["gateway:startup", "session:*", "agent:*", "command:*"]
YAML
cat > "$work/consumer/hooks/latency/handler.py" <<'PY'
import os, time
OUT = open(os.path.join(os.environ["HERMES_HOME"], "latency.txt"), "a", buffering=1)
def handle(event_type, context):
    OUT.write(f"{time.time() - context['emitted_at']} {event_type}\n")
PY
"$hermes" --home "$work/consumer" gateway consume --nats "$url" --durable latency --concurrency 64 2>/dev/null &
consumer=$!
until grep -q "reading" "$work/consumer/logs/consume.log" 2>/dev/null; do sleep 0.1; done
# A paced load, so the latency is the pipeline's, not a queue's: 200 chats a second.
python3 - "$chats" > "$work/paced.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"chat_id": f"p{i}", "user_id": "u", "text": "hi"}))
PY
python3 -c "
import sys, time
for line in open('$work/paced.jsonl'):
    sys.stdout.write(line); sys.stdout.flush(); time.sleep(0.005)
" | "$hermes" --home "$work/paced" gateway run --stdin --trace off --events-nats "$url" > /dev/null 2> "$work/paced.log"
total=$(grep -o 'events: [0-9]* published' "$work/paced.log" | grep -o '[0-9]*')
until [ "$(wc -l < "$work/consumer/latency.txt" 2>/dev/null || echo 0)" -ge "$total" ]; do sleep 0.2; done
kill "$consumer"
python3 - "$work/consumer/latency.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
def report(label, xs):
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))] * 1000
    print(f"end to end, gateway emit -> consumer handler.py, {label}: {len(xs)} events, p50 {q(0.5):.2f} ms, p99 {q(0.99):.2f} ms, max {xs[-1]*1000:.2f} ms")
# The shutdown ends every session at once (a burst of session:end); apart from it the
# load is paced.
report("paced turns (agent:*, session:start)", [float(t) for t, e in rows if e != "session:end"])
report("all, with the shutdown burst of session:end", [float(t) for t, e in rows])
PY
