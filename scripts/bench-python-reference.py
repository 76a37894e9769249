#!/usr/bin/env python3
"""The reference's in-process cost of one Python plugin callback, for BENCHMARKS.md.

Hermes (Python) calls plugin callbacks in its own process: `invoke_hook` loops over the
callbacks registered for a hook, calls each with the hook's keyword arguments inside a
try/except, and keeps the answers that are not None. This times that loop over one
callback that answers nothing on `pre_tool_call`, the same callback `hermes bench` measures
in a Python plugin's worker, so the two figures can be read side by side.

    python3 scripts/bench-python-reference.py [callbacks]
"""
import sys
import time


def callback(tool_name, args, task_id, **kwargs):
    return None


def invoke_hook(callbacks, name, **kwargs):
    results = []
    for cb in callbacks:
        try:
            result = cb(**kwargs)
            if result is not None:
                results.append(result)
        except Exception as e:  # the reference logs and goes on
            print(f"Hook '{name}' callback {cb.__name__} raised: {e}", file=sys.stderr)
    return results


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    callbacks = [callback] * count
    args = {"command": "ls -la"}
    rounds = 200_000
    best = None
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(rounds):
            invoke_hook(callbacks, "pre_tool_call", tool_name="terminal", args=args, task_id="t1",
                        session_id="s1", tool_call_id="c1")
        took = (time.perf_counter() - started) / rounds
        best = took if best is None else min(best, took)
    print(f"invoke_hook over {count} callback(s): {best * 1e9:.0f} ns per firing (best of 5 x {rounds})")


main()
