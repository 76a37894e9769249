#!/usr/bin/env python3
"""The reference itself, for BENCHMARKS.md: Hermes Agent's own PluginManager (hermes-agent
from PyPI) loads the plugins of $HERMES_HOME, as `hermes` here loads them, and this times its
`invoke_hook("pre_tool_call", ...)` per firing (p50 and p99 over 20 000 firings, after 2 000
to warm up), then prints its RSS with the plugins loaded.

    HERMES_HOME=<home> <venv with hermes-agent>/bin/python scripts/bench-python-hermes-agent.py
"""
import time

import hermes_cli.plugins as plugins


def main():
    manager = plugins.get_plugin_manager()
    manager.discover_and_load()
    callbacks = len(manager._hooks.get("pre_tool_call", []))
    args = {"command": "ls -la"}
    times = []
    for i in range(22_000):
        started = time.perf_counter_ns()
        manager.invoke_hook("pre_tool_call", tool_name="terminal", args=args, task_id="t1",
                            session_id="s1", tool_call_id="c1")
        if i >= 2_000:
            times.append(time.perf_counter_ns() - started)
    times.sort()
    p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
    rss = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
    print(f"hermes-agent invoke_hook over {callbacks} callback(s): p50 {p50 / 1000:.1f} µs, "
          f"p99 {p99 / 1000:.1f} µs; RSS {rss / 1024:.1f} MB")


main()
