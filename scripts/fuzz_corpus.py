#!/usr/bin/env python3
"""`make fuzz-corpus`: folds what `make fuzz` found (BUILD/fuzz/corpus/TARGET) into the committed seed
corpus (tests/fuzz/corpus/TARGET) and keeps it small.

1. libFuzzer's `-merge=1` (edges only, `-use_counters=0`) over the committed corpus and the new inputs
   keeps the inputs that reach an edge the others do not; the catalog and the regressions, which every
   run reads anyway, are counted as already there and not copied.
2. Each kept input's whole edge set is read from a one-input merge, and a greedy set cover takes the
   input that adds the most uncovered edges, then the next, up to CAP inputs per target (the merge is
   ordered by size and keeps many inputs that each add one edge; the cover reaches ~90% of the edges
   with a tenth of them). Named seeds (not a 40-hex libFuzzer name) are always kept.

Usage: scripts/fuzz_corpus.py BUILD [TARGET...]   (CAP=N in the environment, default 35)
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATALOG = {"model": "models", "cluster": "topologies", "scenario": "scenarios"}
ENV = dict(os.environ, PARATWIN_HOME=ROOT)


def merge(binary, out, inputs, control=None):
    args = [binary, "-merge=1", "-use_counters=0", "-timeout=10", "-rss_limit_mb=2048"]
    if control:
        args.append(f"-merge_control_file={control}")
    subprocess.run(args + [out] + inputs, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)


def files(folder):
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))] if os.path.isdir(folder) else []


def edges_of(binary, path):
    """Every edge one input reaches: a merge of that input alone records all of them as new."""
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(f"{tmp}/in")
        os.mkdir(f"{tmp}/out")
        shutil.copy(path, f"{tmp}/in/")
        merge(binary, f"{tmp}/out", [f"{tmp}/in"], control=f"{tmp}/control")
        found = set()
        with open(f"{tmp}/control") as control:
            for line in control:
                if line.startswith("FT "):
                    found.update(int(x) for x in line.split()[2:])
        return found


def minimize(build, target, cap):
    binary = os.path.join(build, "fuzz", f"fuzz_{target}")
    committed = os.path.join(ROOT, "tests", "fuzz", "corpus", target)
    named = [p for p in files(committed) if not re.fullmatch(r"[0-9a-f]{40}", os.path.basename(p))]
    known = files(os.path.join(ROOT, CATALOG[target])) if target in CATALOG else []
    known += files(os.path.join(ROOT, "tests", "fuzz", "regressions", target))
    with tempfile.TemporaryDirectory() as pool:
        for path in named + known:
            shutil.copy(path, pool)
        merge(binary, pool, [committed, os.path.join(build, "fuzz", "corpus", target)])
        for path in known:
            os.remove(os.path.join(pool, os.path.basename(path)))
        edges = {p: edges_of(binary, p) for p in files(pool)}
        everything = set().union(*edges.values()) if edges else set()
        chosen = [os.path.join(pool, os.path.basename(p)) for p in named]
        covered = set().union(*(edges[p] for p in chosen)) if chosen else set()
        while covered != everything and len(chosen) < max(cap, len(named)):
            best = max(edges, key=lambda p: (len(edges[p] - covered), -os.path.getsize(p)))
            chosen.append(best)
            covered |= edges[best]
        shutil.rmtree(committed, ignore_errors=True)
        os.makedirs(committed)
        for path in chosen:
            shutil.copy(path, committed)
    share = len(covered) / len(everything) if everything else 1.0
    print(f"{target}: {len(chosen)} of {len(edges)} inputs, {share:.0%} of their {len(everything)} edges, "
          f"{sum(os.path.getsize(p) for p in files(committed))} bytes")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    cap = int(os.environ.get("CAP", "35"))
    fuzz = os.path.join(build, "fuzz")
    # Every target built (tests/CMakeLists.txt's list) unless some are named; with none built, model's
    # absence is what the message below names.
    built = sorted(os.path.basename(p)[len("fuzz_"):] for p in glob.glob(os.path.join(fuzz, "fuzz_*"))
                   if os.path.isfile(p) and os.access(p, os.X_OK))
    for target in sys.argv[2:] or built or ["model"]:
        if not os.access(os.path.join(fuzz, f"fuzz_{target}"), os.X_OK):
            sys.exit(f"fuzz-corpus: no {build}/fuzz/fuzz_{target} (needs clang and libfuzzer-14-dev)")
        minimize(build, target, cap)


if __name__ == "__main__":
    main()
