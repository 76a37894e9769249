#!/usr/bin/env python3
"""Runs a command and prints the resident memory of it and every process it started (the
sum of their VmRSS), sampled `after` seconds in, for BENCHMARKS.md.

    python3 scripts/tree-rss.py <after seconds> <command> [args...]
"""
import os
import subprocess
import sys
import time


def tree(root):
    children = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(l.split()[1]) for l in f if l.startswith("VmRSS")), 0)
    except OSError:
        return 0


def main():
    after, command = float(sys.argv[1]), sys.argv[2:]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(after)
    pids = tree(child.pid)
    total = sum(rss_kb(p) for p in pids)
    child.wait()
    print(f"{total / 1024:.1f} MB in {len(pids)} process(es): {' '.join(command)}")


main()
