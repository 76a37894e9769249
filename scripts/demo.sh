#!/usr/bin/env bash
# The main job: build the host and the example plugins, lay out a demo Hermes home under
# target/ (plugins, pre-approved and content-pinned shell hooks, gateway hooks), and run a
# scripted agent session in which plugin hooks and shell hooks fire and decide. Needs only
# cargo and sh; no network beyond crates.io, no API key.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
demo="$root/examples/demo"

cargo build --release -p hermes-host
hermes="$root/target/release/hermes"
export HERMES_HOME="$root/target/demo-home"
work="$root/target/demo-work"
rm -rf "$HERMES_HOME" "$work"
mkdir -p "$HERMES_HOME" "$work"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Lay out the demo home in $HERMES_HOME"
sed "s|@DEMO@|$demo|g" "$demo/home/config.yaml.in" > "$HERMES_HOME/config.yaml"
for plugin in plugins/*/; do
    "$hermes" plugins install "$plugin"
done
# Headless approval of the shell hooks, pinned to the scripts' current content.
"$hermes" hooks allow "$demo/shell-hooks/no-force-push.sh"
"$hermes" hooks allow "$demo/shell-hooks/today.sh"
"$hermes" plugins list
"$hermes" hooks list

step "Run the scripted session (trace on stderr, conversation on stdout)"
"$hermes" run "$demo/session.yaml" --cwd "$work" --approvals deny

step "The audit log the audit-log plugin wrote"
cat "$HERMES_HOME"/plugins/audit-log/audit.jsonl

step "The session summary the metrics plugin wrote"
cat "$HERMES_HOME"/plugins/metrics/metrics.jsonl
