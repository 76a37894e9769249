#!/usr/bin/env bash
# Same-run check that `hermes bench` agrees with the criterion benches (BENCHMARKS.md):
# the noop test plugin and the shell bench's trivial script, measured by both, back to back.
set -euo pipefail
cd "$(dirname "$0")/.."
home="$PWD/target/bench-vs-criterion-home"
cargo build --release -p noop -p hermes-host
cargo bench -p hermes-tests --bench dispatch --no-run
cargo bench -p hermes-host --bench shell --no-run
rm -rf "$home" && mkdir -p "$home/plugins/noop"
cp target/release/libnoop.so tests/plugins/noop/plugin.yaml "$home/plugins/noop/"
printf '#!/bin/bash\nread -r -d %s payload\nexit 0\n' "''" > "$home/trivial.sh"
chmod +x "$home/trivial.sh"
printf 'plugins:\n  enabled: [noop]\nhooks:\n  pre_tool_call:\n    - command: %s\n' "$home/trivial.sh" > "$home/config.yaml"
target/release/hermes --home "$home" hooks allow "$home/trivial.sh"
echo "load: $(cat /proc/loadavg) on $(nproc) cores"
cargo bench -p hermes-tests --bench dispatch -- 'pre_tool_call/native_plugin/1$' --warm-up-time 2 --measurement-time 5
cargo bench -p hermes-host --bench shell -- 'one pre_tool_call hook/(bare|shell hook)' --warm-up-time 1 --measurement-time 3
target/release/hermes --home "$home" bench pre_tool_call --duration 5s
echo "load: $(cat /proc/loadavg)"
