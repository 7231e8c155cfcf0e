#!/usr/bin/env python3
"""Runs a command and prints the peak of the summed resident memory of it and all its descendants
(sampled every 50 ms from /proc), as `peak_rss_mib N` on standard error after the command's own output.
A trainer's threads share one resident set; its processes (ranks, launcher, supervisor) add up. Run it
outside the cores the command is pinned to (taskset inside: peak_rss.py taskset -c 0 CMD ...), so the
sampling takes no time from what it measures.

  peak_rss.py COMMAND [ARGS...]
"""
import os
import subprocess
import sys
import time

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def tree_rss_kib(root):
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    parent[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    members, changed = {root}, True
    while changed:
        grown = {pid for pid, ppid in parent.items() if ppid in members} - members
        changed = bool(grown)
        members |= grown
    total = 0
    for pid in members:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * PAGE_KIB
        except (OSError, IndexError, ValueError):
            pass
    return total


process = subprocess.Popen(sys.argv[1:])
peak = 0
while process.poll() is None:
    peak = max(peak, tree_rss_kib(process.pid))
    time.sleep(0.05)
print(f"peak_rss_mib {peak / 1024:.0f}", file=sys.stderr)
sys.exit(process.returncode)
