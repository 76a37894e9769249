#!/bin/sh
# pre_llm_call shell hook: tell the model what day it is (canonical Hermes answer shape).
cat > /dev/null
printf '{"context": "Today is %s."}' "$(date -u +%A)"
