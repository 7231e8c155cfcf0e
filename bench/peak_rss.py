#!/usr/bin/env python3
"""Runs a command and prints the peak of the summed resident memory of it and all its descendants
(sampled every 20 ms from /proc), as `peak_rss_mib N` on standard error after the command's own output.
A trainer's threads share one resident set; its processes (ranks, launcher, supervisor) add up.

  peak_rss.py COMMAND [ARGS...]
"""
import os
import subprocess
import sys
import time


def tree_rss_kib(root):
    children = {}
    rss = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/status") as f:
                vm = [line for line in f if line.startswith("VmRSS:")]
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(pid))
        rss[int(pid)] = int(vm[0].split()[1]) if vm else 0
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


process = subprocess.Popen(sys.argv[1:])
peak = 0
while process.poll() is None:
    peak = max(peak, tree_rss_kib(process.pid))
    time.sleep(0.02)
print(f"peak_rss_mib {peak / 1024:.0f}", file=sys.stderr)
sys.exit(process.returncode)
