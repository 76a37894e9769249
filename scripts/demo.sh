#!/usr/bin/env bash
# The main job: build the host and the example plugins, install them into a fresh Hermes
# home under target/, and fire hooks at them the way an agent would, printing what each
# plugin decided. Needs only cargo; no network beyond crates.io, no API key.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p hermes-host
hermes=target/release/hermes
export HERMES_HOME="$PWD/target/demo-home"
rm -rf "$HERMES_HOME"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Install the example plugins (release builds, copied into $HERMES_HOME/plugins)"
for plugin in plugins/*/; do
    "$hermes" plugins install "$plugin"
done

step "What loaded"
"$hermes" plugins list

step "pre_tool_call: the guardrail blocks a dangerous command"
"$hermes" plugins fire pre_tool_call --payload \
    '{"tool_name": "terminal", "args": {"command": "sudo rm -rf /"}, "session_id": "demo", "tool_call_id": "call-1"}'

step "pre_tool_call: a harmless command is allowed (and audited)"
"$hermes" plugins fire pre_tool_call --payload \
    '{"tool_name": "terminal", "args": {"command": "ls -la"}, "session_id": "demo", "tool_call_id": "call-2"}'

step "post_llm_call then pre_llm_call: memory stores a fact and recalls it"
"$hermes" plugins fire post_llm_call --payload \
    '{"session_id": "demo", "user_message": "remember: the deploy key lives in vault, never in git", "assistant_response": "Noted."}'
"$hermes" plugins fire pre_llm_call --payload \
    '{"session_id": "demo", "user_message": "Where does the deploy key live?", "is_first_turn": false}'

step "transform_tool_result: the secret redactor hides a leaked key"
"$hermes" plugins fire transform_tool_result --payload \
    '{"tool_name": "read_file", "result": "AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP\npassword=hunter2", "session_id": "demo"}'

step "The audit log the audit-log plugin wrote"
cat "$HERMES_HOME"/plugins/audit-log/*.jsonl
