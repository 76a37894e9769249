#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/: real inputs of each kind, from the docs,
the shipped plugins and hooks, and the shapes tests use. Re-run after changing a format; the
fuzzer's own finds are never written here (fuzz/run keeps them in a temporary directory).

Each target's input layout is documented at its function in tests/fuzz/src/lib.rs."""
import json, os, struct, pathlib, shutil

here = pathlib.Path(__file__).resolve().parent
root = here.parent
corpus = here / "corpus"


def put(target, name, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def copy_files(target, paths):
    for p in paths:
        p = root / p
        put(target, p.parent.name + "-" + p.name, p.read_bytes())


shutil.rmtree(corpus, ignore_errors=True)

# config.yaml: the documented shapes.
put("config_hooks", "one-shot.yaml", """hooks:
  pre_tool_call:
    - command: ~/.hermes/agent-hooks/guard.sh   # argv by shell-word splitting
      matcher: terminal|write_file
      timeout: 10
      fail_closed: true
      priority: 0
  pre_llm_call:
    - command: python3 ~/.hermes/agent-hooks/context.py
""")
put("config_hooks", "persistent-http-claude.yaml", """hooks:
  strict_permissions: false
  pre_tool_call:
    - command: python3 policy.py
      persistent: true
      instances: 4
    - url: https://policy.internal/hermes/pre-tool
      matcher: terminal|write_file
      timeout: 5
      headers:
        Authorization: "Bearer ${POLICY_TOKEN}"
      allowed_env_vars: [POLICY_TOKEN]
    - command: ./bash-guard.sh
      format: claude
      matcher: Bash|mcp__.*
  on_session_start:
    - command: "echo 'quoted # not a comment' \\\\"
hooks_auto_accept: true
""")
put("config_hooks", "plugins.yaml", """plugins:
  enabled: [guardrail, audit-log, "memory"]
  disabled: [metrics]
  guardrail:
    default_patterns: true
    patterns:
      - pattern: '\\bgit\\s+push\\s+(?:-f|--force)\\b'
        reason: force-push
gateway:
  max_line_bytes: 1048576
  idle_timeout: 30
""")
put("config_hooks", "mistakes.yaml", """hooks:
  pre_tool_cal:
    - command: x
  post_tool_call: not-a-list
  pre_tool_call:
    - matcher: "(unclosed"
      command: ""
    - url: ftp://example.invalid/
    - command: a
      timeout: -3
      priority: high
      persistent: yes
  strict_permissions: maybe
""")
put("config_hooks", "anchors.yaml", """base: &b
  command: ./a.sh
  timeout: 5
hooks:
  pre_tool_call:
    - *b
    - <<: *b
      matcher: Bash
""")

# Nesting deeper than any parser's recursion should go (a stack overflow is a crash).
put("config_hooks", "deep-flow.yaml", "hooks: " + "[" * 4000)
put("config_hooks", "deep-block.yaml", "".join("  " * i + f"k{i}:\n" for i in range(300)))
# Nested flow mappings: the YAML scanner's walk over them is quadratic, so the host refuses
# deep nesting before parsing (hermes_host::nesting); these keep that path fuzzed.
put("config_hooks", "deep-flow-mappings.yaml", "hooks: " + "{a: " * 3000 + "}" * 3000)
put("plugin_yaml", "deep-flow.yaml", "name: x\nconfig: " + "[{a: " * 1500 + "}]" * 1500)
put("hook_yaml", "deep-flow.yaml", "name: x\nevents: " + "[" * 3000 + "]" * 3000)
put("allowlist", "deep.json", '{"approvals": ' + "[" * 3000 + "]" * 3000 + "}")

# plugin.yaml: every shipped manifest and a few broken ones.
copy_files("plugin_yaml", sorted(
    str(p.relative_to(root)) for p in list((root / "plugins").glob("*/plugin.yaml"))
    + list((root / "tests/plugins").glob("*/plugin.yaml"))))
put("plugin_yaml", "escape.yaml", "name: x\nlibrary: ../../../../tmp/libx.so\nisolation: process\nmemory_limit: 1.5GiB\ntimeout: 0\n")
put("plugin_yaml", "wrong-types.yaml", "name: [a]\nlibrary: {x: 1}\nisolation: 7\nmemory_limit: true\nconfig: {a: !!binary aGVsbG8=}\n")
put("plugin_yaml", "empty.yaml", "")

# HOOK.yaml: the shipped examples and broken ones.
copy_files("hook_yaml", sorted(
    str(p.relative_to(root)) for p in list((root / "examples/gateway-hooks").glob("*/HOOK.yaml"))
    + [root / "hermes-host/tests/fixtures/boot-md/HOOK.yaml"]))
put("hook_yaml", "native.yaml", "name: n\nevents: ['agent:*', command:reset]\nlibrary: ../../libx.so\ntimeout: 2.5\n")
put("hook_yaml", "not-a-mapping.yaml", "- events\n- [x\n")
put("hook_yaml", "wrong-types.yaml", "name: 3\nevents: agent:start\nconfig: [1, 2]\ntimeout: forever\n")


# Shell answers: byte 0 = exit (0, 1, 2, killed, timed out, not run), byte 1 = event
# (pre_tool_call, post_tool_call, pre_llm_call, on_session_start, transform_tool_result,
# on_session_end), then stdout, NUL, stderr.
def answer(name, exit_sel, event_sel, stdout, stderr=""):
    put("shell_answer", name, bytes([exit_sel, event_sel]) + stdout.encode() + b"\0" + stderr.encode())


answer("block", 0, 0, json.dumps({"decision": "block", "reason": "no rm"}))
answer("action-block", 0, 0, json.dumps({"action": "block", "message": "not here"}))
answer("exit2", 2, 0, "", "rm is not allowed\n")
answer("exit1-block", 1, 0, json.dumps({"decision": "block"}), "oops")
answer("context", 0, 2, json.dumps({"context": "Remember the style guide."}))
answer("modify", 0, 0, json.dumps({"action": "modify", "args": {"command": "ls -la"}}))
answer("not-json", 0, 0, "hello, world")
answer("timed-out", 4, 0, "")
answer("claude-deny", 0, 0, json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "blocked by policy"}}))
answer("claude-updated", 0, 0, json.dumps({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls", "timeout": 120000, "file_path": "/x"}}, "systemMessage": "rewritten", "suppressOutput": True}))
answer("claude-stop", 0, 3, json.dumps({"continue": False, "stopReason": "enough", "hookSpecificOutput": {"additionalContext": "ctx"}}))
answer("claude-payload", 0, 0, json.dumps({"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"file_path": "a.txt", "content": "x"}, "tool_use_id": "c1", "cwd": "/tmp"}))
answer("transform", 0, 4, json.dumps({"result": "replaced"}))


# Gateway client bytes: byte 0 = chunk size, then lines as a client sends them.
def gw(name, chunk, lines):
    put("gateway_lines", name, bytes([chunk]) + lines)


gw("messages", 16, b'{"chat_id": "c1", "user_id": "u1", "text": "hello"}\n{"chat_id": "c2", "user_id": "u2", "text": "/reset", "platform": "telegram", "message_id": "m1", "internal": false}\n')
gw("bad-lines", 3, b'not json\n\xff\xfe\n{"chat_id": 5}\n{"text": "no chat"}\n\n   \n{"chat_id": "c", "user_id": "u", "text": "tail without newline"}')
gw("long-line", 200, b'{"chat_id": "c", "user_id": "u", "text": "' + b"x" * 400 + b'"}\n{"chat_id": "c", "user_id": "u", "text": "after"}\n')
gw("crlf-unicode", 7, '{"chat_id": "c\u00e9", "user_id": "\u2603", "text": "line\\nbreak \\ud83d\\ude00"}\r\n'.encode())


# Isolation frames: u32 LE length of (kind + body), kind byte, body.
def s(text):
    b = text.encode()
    return struct.pack("<I", len(b)) + b


def frame(kind, body):
    return struct.pack("<I", len(body) + 1) + bytes([kind]) + body


def u32(v):
    return struct.pack("<I", v)


hello = frame(1, u32(1) + s("") + u32(2) + s("pre_tool_call") + s("guard") + s("post_tool_call") + s("audit"))
fire = frame(2, u32(0) + s("pre_tool_call") + u32(4)
             + s("tool_name") + b"\x04" + s("terminal")
             + s("args") + b"\x05" + s('{"command": "rm -rf /"}')
             + s("attempt") + b"\x02" + struct.pack("<q", -3)
             + s("score") + b"\x03" + struct.pack("<d", 1.5))
put("isolation_frames", "hello-fire", hello + fire)
put("isolation_frames", "answers", frame(3, b"\x01" + s("block") + s("no rm") + s("")) + frame(3, b"\x00") + frame(3, b"\x02" + s("panicked: boom")))
put("isolation_frames", "call", frame(4, s("gateway.send") + s('{"platform": "local", "chat_id": "c1", "text": "hi"}')) + frame(5, b"\x01" + s('{"ok": true}')))
put("isolation_frames", "hello-error", frame(1, u32(1) + s("register failed: missing config") + u32(0)))
put("isolation_frames", "malformed", frame(1, u32(2) + s("")) + frame(9, b"") + u32(0))
put("isolation_frames", "huge-length", struct.pack("<I", 64 << 20) + b"\x03\x00")

# Persistent hook stdout: byte 0 = the firing id waiting, then lines.
put("persistent_lines", "answers", b"\x07" + b'{"hook_firing_id": 7, "decision": "block", "reason": "no"}\n{}\n\n')
put("persistent_lines", "stale-junk", b"\x07" + b'{"hook_firing_id": 6, "decision": "block"}\nready\n\xff\xfe\n{"hook_firing_id": "7"}\n')
put("persistent_lines", "context", b"\x02" + b'  {"context": "more", "hook_firing_id": 2}  \n')

# The allowlist file, as written and as it may be found.
put("allowlist", "written.json", json.dumps({"approvals": [{
    "approved_at": "2026-04-21T10:11:12.123456Z", "command": "./guard.sh", "event": "pre_tool_call",
    "script_mtime_at_approval": "2026-04-20T08:00:00Z",
    "script_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
    {"command": "https://policy.internal/x", "event": "pre_tool_call", "script_sha256": None}]}, indent=2))
put("allowlist", "reference.json", json.dumps({"approvals": [{"event": "on_session_start", "command": "echo hi", "approved_at": "2026-01-01T00:00:00Z"}]}))
put("allowlist", "broken.json", '{"approvals": [{"event": 3, "command": null}, "x"], "extra": {}}')
put("allowlist", "truncated.json", '{"approvals": [{"event": "pre_tool_call", "comm')

# Claude Code settings, then after a NUL byte the config.yaml they are imported into.
claude_settings = {"hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/.claude/hooks/validate.py", "timeout": 30}]},
                   {"matcher": "Write|Edit", "hooks": [{"type": "http", "url": "http://127.0.0.1:9/guard"}]}],
    "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "make lint\nmake test"}]}],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo 'it''s' \"q\" \\ \t\u0085\u2028"}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "notify-send x"}]}],
    "Stop": [{"hooks": [{"type": "prompt", "prompt": "check"}]}]}}
put("claude_import", "into-nothing.json", json.dumps(claude_settings))
put("claude_import", "into-a-block.json", json.dumps(claude_settings) + "\0" +
    "# mine\nplugins:\n  enabled: [a]\nhooks:\n  pre_tool_call:\n    - command: ./old.sh\n      timeout: 5\n  # note\nhooks_auto_accept: false\n")
put("claude_import", "into-inline.json", json.dumps(claude_settings) + "\0" + "hooks: {}\n")
put("claude_import", "odd-shapes.json", json.dumps({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "  "}, {"type": "http"}, {}, 3]}, "x"], "SessionStart": {}}}))

for target in sorted(os.listdir(corpus)):
    print(f"{target}: {len(os.listdir(corpus / target))} seeds")
