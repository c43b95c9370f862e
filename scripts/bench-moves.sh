#!/usr/bin/env bash
# What shards added and drained while training cost, side by side in one
# run. The multi-process quick start (config/cluster-local.json: chief,
# shard nodes ps0 and ps1, worker nodes worker0 and worker1, async, on
# free ports) trains undisturbed and with five moves through troupe-shell
# (add-shard ps1, drain shard:0, add-shard ps0, drain shard:1, add-shard
# ps1, at 1/6 .. 5/6 of the undisturbed run's training time), in turn
# ROUNDS times. Prints each move's
# pause (leasing paused, as the chief reports it), the medians of samples/s
# and of the test result, and moved over undisturbed; a run that lost or
# repeated a step (a shard's final version other than the steps trained)
# stops the script. With "click", the click model on 400k generated click
# logs with VALUES values per categorical field (default 2000: a table of
# about 8000 rows; 1000000 makes one of about 1.2M rows).
# Usage: scripts/bench-moves.sh [epochs, default 6] [rounds, default 3]
#          [mlp|click, default mlp] [values, default 2000]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
python3 - "${1:-6}" "${2:-3}" "${3:-mlp}" "${4:-2000}" "$TROUPE_BUILD/apps" <<'PY'
import os
import re
import statistics
import subprocess
import sys
import time
from benchlib import (chief_summary, scratch_dir, start_logged_node,
                      write_local_cluster)

epochs, rounds, model, values, apps = (int(sys.argv[1]), int(sys.argv[2]),
                                       sys.argv[3], int(sys.argv[4]),
                                       sys.argv[5])
work = scratch_dir()
rows = []  # table rows each move took along
MOVES = ["add-shard ps1", "drain shard:0", "add-shard ps0", "drain shard:1",
         "add-shard ps1"]


def shell(address, command):
    """troupe-shell -c COMMAND against the chief; its output, or None."""
    p = subprocess.run([apps + "/troupe-shell", "--connect", address,
                        "--timeout", "120", "-c", command],
                       capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else None


def measure(moving, seconds):
    """One run; with `moving`, the moves at 1/6 .. 5/6 of `seconds` (the
    undisturbed run's training time) after the nodes are up."""
    path, cluster = write_local_cluster(work, apps, epochs, model, values)
    names = [n["name"] for n in cluster["cluster"]["nodes"]]
    chief = cluster["cluster"]["chief"]
    address = "127.0.0.1:%d" % cluster["cluster"]["nodes"][0]["port"]
    logs = {}

    def start(name):
        proc, logs[name] = start_logged_node(apps, path, name, work)
        return proc
    members = [start(n) for n in names if n != chief]
    boss = start(chief)
    pauses = []
    up = None
    while moving and len(pauses) < len(MOVES) and boss.poll() is None:
        time.sleep(0.05)
        if up is None:
            with open(os.path.join(work, chief + ".out")) as f:
                if "nodes are up" in f.read():
                    up = time.monotonic()
            continue
        k = len(pauses)
        if time.monotonic() - up < seconds * (k + 1) / (len(MOVES) + 1):
            continue
        out = shell(address, MOVES[k])
        if out is None:
            break  # the run is over, or refused it: said below
        moved = re.search(r"and ([0-9]+) table rows moved in ([0-9.]+) s "
                          r"of paused", out)
        pauses.append(float(moved.group(2)))
        rows.append(int(moved.group(1)))
    boss.wait()
    for proc in members:
        if boss.returncode != 0:
            proc.kill()
        proc.wait()
    logs[chief].seek(0)
    out = logs[chief].read()
    if boss.returncode != 0:
        if "did not come up" in out:  # a port taken before its bind
            print("a node did not come up; the round runs again")
            return None
        sys.exit("the chief failed:\n" + out[-3000:])
    if moving and len(pauses) < len(MOVES):
        sys.exit("the run ended before its five moves:\n" + out[-2000:])
    versions = re.search(r"shard versions at the end:([ 0-9]+)", out)
    steps = int(out.strip().splitlines()[-1].split()[4])
    if any(int(v) != steps for v in versions.group(1).split()):
        sys.exit("a shard's version is not the steps trained:\n" + out[-3000:])
    rate, result = chief_summary(out)
    return rate, result, pauses, float(out.strip().splitlines()[-1].split()[6])


runs = {False: [], True: []}
for r in range(rounds):
    for moving in (False, True):
        result = None
        while result is None:
            seconds = runs[False][-1][3] if moving else 0
            result = measure(moving, seconds)
        runs[moving].append(result)
median = statistics.median
pauses = [p for _, _, ps, _ in runs[True] for p in ps]
print(f"{model}, {epochs} epochs, medians of {rounds} rounds, alternating")
print("pause per move, s: median %.3f, most %.3f (%d moves, %d-%d table "
      "rows each)" % (median(pauses), max(pauses), len(pauses), min(rows),
                      max(rows)))
for moving in (False, True):
    print("%-12s samples/s %.0f, test result %.4f (%s)"
          % ("five moves" if moving else "undisturbed",
             median([x for x, _, _, _ in runs[moving]]),
             median([y for _, y, _, _ in runs[moving]]),
             ", ".join("%.4f" % y for _, y, _, _ in runs[moving])))
a = median([x for x, _, _, _ in runs[False]])
b = median([x for x, _, _, _ in runs[True]])
print(f"samples/s: moved/undisturbed {b / a:.3f}")
PY
