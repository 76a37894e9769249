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
# Gateway hooks: the native activity logger (built here), the command logger (a shell
# script) and the long-task alert (a handler.py run by one long-lived python3 worker).
cargo build --release -p activity-logger
mkdir -p "$HERMES_HOME/hooks"
mkdir -p "$HERMES_HOME/hooks/activity-logger"
cp examples/gateway-hooks/activity-logger/HOOK.yaml "$HERMES_HOME/hooks/activity-logger/"
cp target/release/libactivity_logger.so "$HERMES_HOME/hooks/activity-logger/"
cp -r examples/gateway-hooks/command-logger "$HERMES_HOME/hooks/"
cp -r examples/gateway-hooks/long-task-alert "$HERMES_HOME/hooks/"
# The demo's tasks are short: alert from the third tool-loop iteration on.
sed -i 's/threshold: 10/threshold: 3/' "$HERMES_HOME/hooks/long-task-alert/HOOK.yaml"
"$hermes" plugins list
"$hermes" hooks list
"$hermes" gateway hooks

step "Run the scripted session (trace on stderr, conversation on stdout)"
"$hermes" run "$demo/session.yaml" --cwd "$work" --approvals deny

step "The same agent behind the local gateway: two chats, a slash command, a reset"
"$hermes" gateway run --stdin --script "$demo/gateway.yaml" --cwd "$work" --trace off < "$demo/chat.jsonl"

step "Gateway hook output: the command logger, the long-task alert, the activity log"
cat "$HERMES_HOME"/logs/command_usage.jsonl
cat "$HERMES_HOME"/logs/long-tasks.log
cut -c1-160 "$HERMES_HOME"/logs/activity.jsonl

step "The audit log the audit-log plugin wrote"
cat "$HERMES_HOME"/plugins/audit-log/audit.jsonl

step "The session summary the metrics plugin wrote"
cat "$HERMES_HOME"/plugins/metrics/metrics.jsonl

step "A plugin of your own: hermes plugins new, then the three commands its README gives"
rm -rf "$root/target/demo-plugin"
"$hermes" plugins new my-guard --path "$root/target/demo-plugin"
# Its own workspace; the shared target directory only saves building the same crates twice.
export CARGO_TARGET_DIR="$root/target"
(cd "$root/target/demo-plugin/my-guard" && cargo build --release)
"$hermes" plugins install "$root/target/demo-plugin/my-guard"
"$hermes" plugins fire pre_tool_call --payload '{"tool_name": "terminal", "args": {"command": "rm -rf /"}}'

step "What the hooks cost: hermes bench (short measurements; docs/bench.md for the options)"
"$hermes" bench --duration 100ms --html "$root/target/bench-demo.html"
echo "Plots: $root/target/bench-demo.html"
