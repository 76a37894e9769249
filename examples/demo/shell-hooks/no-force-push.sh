#!/bin/sh
# pre_tool_call shell hook: refuse force-pushes. Answers in the Claude-Code shape and exits 2,
# which blocks pre_tool_call in hermes even without the JSON.
payload=$(cat)
case "$payload" in
    *"git push"*--force*|*"git push"*" -f"*)
        printf '%s' '{"decision": "block", "reason": "force-pushing is not allowed from the agent"}'
        exit 2 ;;
esac
exit 0
