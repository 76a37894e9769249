#!/usr/bin/env python3
"""Lists the keyword arguments the reference (Hermes Agent) passes to each plugin hook.

Reads the reference's source, finds every `invoke_hook("<hook>", ...)` call (and the approval
module's `_fire_approval_hook`, which adds `turn_id` and `tool_call_id` to what it is given)
and prints, per hook, each call site with its keyword names, as JSON. `invoke_hook` itself
adds `telemetry_schema_version` to every call.

    pip download --no-deps hermes-agent==0.19.0 && unzip -q hermes_agent-0.19.0-*.whl -d ref
    python3 scripts/reference-kwargs.py ref > hermes-host/tests/fixtures/reference/kwargs.json

The fixture pins what the tests compare with; regenerate it when moving to a newer Hermes.
"""
import ast
import json
import os
import sys

# Keyword arguments a wrapper adds before calling invoke_hook.
_WRAPPERS = {"_fire_approval_hook": ["turn_id", "tool_call_id"]}


def _name(func):
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def sites(root):
    found = {}
    for directory, _, files in os.walk(root):
        if "test" in os.path.relpath(directory, root).split(os.sep)[0]:
            continue
        for file in sorted(files):
            if not file.endswith(".py"):
                continue
            path = os.path.join(directory, file)
            try:
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                name = _name(node.func)
                first = node.args[0]
                if not name or not isinstance(first, ast.Constant) or not isinstance(first.value, str):
                    continue
                if "invoke_hook" not in name and name not in _WRAPPERS:
                    continue
                names = [k.arg for k in node.keywords if k.arg is not None]
                if any(k.arg is None for k in node.keywords):
                    continue  # **payload: the names are not in the call
                names += [n for n in _WRAPPERS.get(name, []) if n not in names]
                site = f"{os.path.relpath(path, root)}:{node.lineno}"
                found.setdefault(first.value, []).append({"site": site, "kwargs": names})
    return {hook: found[hook] for hook in sorted(found)}


if __name__ == "__main__":
    print(json.dumps({"source": "hermes-agent 0.19.0 (PyPI)", "added_to_every_call": ["telemetry_schema_version"],
                      "hooks": sites(sys.argv[1])}, indent=1))
