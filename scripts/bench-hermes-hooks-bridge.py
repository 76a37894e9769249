#!/usr/bin/env python3
"""What a native callback costs inside Hermes Agent, for BENCHMARKS.md: Hermes's own
PluginManager (hermes-agent from PyPI) fires `pre_tool_call` through `invoke_hook`, with the
reference's keyword arguments, at one Python no-op callback and at one native no-op callback
(the `noop` test plugin through the hermes-hooks package), alternately in one process, and
prints the p50 and p99 of each (20 000 firings each per round, after 2 000 to warm up,
three rounds). It prints the RSS after plugin discovery first: run it once more with
`hermes-hooks` left out of `plugins.enabled` for the baseline.

    HERMES_HOME=<home with noop installed and enabled, and hermes-hooks enabled> \\
        <venv with hermes-agent and hermes-hooks>/bin/python scripts/bench-hermes-hooks-bridge.py
"""
import time


def rss_kib():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))


def timed(manager, n):
    args = {"command": "ls -la"}
    times = []
    for _ in range(n):
        started = time.perf_counter_ns()
        manager.invoke_hook("pre_tool_call", tool_name="terminal", args=args, task_id="t1",
                            session_id="s1", tool_call_id="c1", turn_id="u1",
                            api_request_id="r1", middleware_trace=[])
        times.append(time.perf_counter_ns() - started)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)]


def main():
    import hermes_cli.plugins as plugins

    manager = plugins.get_plugin_manager()
    before = rss_kib()
    manager.discover_and_load()
    loaded = rss_kib()
    native = list(manager._hooks.get("pre_tool_call", []))
    print(f"RSS after plugin discovery: {loaded / 1024:.1f} MB ({before / 1024:.1f} MB before)")
    if not native:
        return  # the baseline run: hermes-hooks not enabled
    assert len(native) == 1, f"expected one native callback, got {native}"

    def python_noop(**kwargs):
        return None

    for round_ in range(3):
        for name, callbacks in (("python no-op", [python_noop]), ("native no-op", native)):
            manager._hooks["pre_tool_call"] = callbacks
            timed(manager, 2_000)
            p50, p99 = timed(manager, 20_000)
            print(f"round {round_ + 1}: invoke_hook over one {name} callback: "
                  f"p50 {p50 / 1000:.2f} µs, p99 {p99 / 1000:.2f} µs")


main()
