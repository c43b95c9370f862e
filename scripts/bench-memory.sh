#!/usr/bin/env bash
# Memory per process: the peak resident set (the kernel's ru_maxrss, read
# when each process is reaped, so no sample can miss the peak) of every
# process of the multi-process quick start (config/cluster-local.json's
# five nodes: chief, ps0, ps1, worker0, worker1, on free ports, with a
# checkpoint folder of their own) and of troupe-train on config/mlp.json,
# next to the stored size of the dataset they read, with each run's
# samples/s.
# With an earlier build, both run in turn ROUNDS times and each figure is
# the median, next to the earlier build's, samples/s as this build's over
# the earlier one's (above 1: this build is faster).
# With "read" in place of BEFORE_BUILD, this build runs in turn with the
# gzipped IDX files inflated once into the cache folder and mapped (the
# default, "read": "map") and inflated into each process's memory
# ("read": "memory").
# Usage: scripts/bench-memory.sh [epochs, default 2] [BEFORE_BUILD|read
#   [rounds, default 3]]  (BEFORE_BUILD: a build folder of an earlier
#   commit with troupe-node and troupe-train built, as
#   scripts/bench-before.sh makes)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
python3 - "${1:-2}" "$TROUPE_BUILD/apps" "${2:-}" "${3:-3}" <<'PY'
import json
import os
import re
import statistics
import subprocess
import sys
from benchlib import chief_summary, free_port, scratch_dir

epochs, apps, before, rounds = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                int(sys.argv[4]))
# name: (programs, data.read or None for the config's own)
builds = {"this build": (apps, None)}
if before == "read":
    builds = {"mapped copy": (apps, "map"), "in memory": (apps, "memory")}
elif before:
    builds["earlier build"] = (os.path.join(before, "apps"), None)
else:
    rounds = 1
work = scratch_dir()


def peak_mb(proc):
    """Waits for `proc`; its peak resident set in MB (ru_maxrss is KiB)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024 / 1e6


def start(name, args):
    log = open(os.path.join(work, name + ".out"), "w+")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT), log


def output_of(log):
    log.seek(0)
    return log.read()


def stored_mb(config):
    data = json.load(open(config))["data"]
    folder = data["dir"]
    return sum(os.path.getsize(os.path.join(folder, f))
               for f in os.listdir(folder)) / 1e6


def measure(build, run_name):
    """One run of the quick start and of troupe-train with `build`'s
    programs and data.read: ({process: peak MB}, quick start samples/s,
    troupe-train samples/s)."""
    apps, read = build
    cluster = json.load(open("config/cluster-local.json"))
    train_config = "config/mlp.json"
    if read:
        cluster["data"]["read"] = read
        mlp = json.load(open(train_config))
        mlp["data"]["read"] = read
        train_config = os.path.join(work, "mlp-%s.json" % read)
        json.dump(mlp, open(train_config, "w"))
    for node in cluster["cluster"]["nodes"]:
        node["port"] = free_port()
    cluster["training"]["epochs"] = epochs
    cluster["training"]["checkpoint"]["dir"] = os.path.join(work, run_name)
    cluster_file = os.path.join(work, "cluster.json")
    json.dump(cluster, open(cluster_file, "w"))
    names = [n["name"] for n in cluster["cluster"]["nodes"]]
    chief = cluster["cluster"]["chief"]
    members = [(n, *start(n, [apps + "/troupe-node", "--config",
                              cluster_file, "--node", n]))
               for n in names if n != chief]
    boss, boss_log = start(chief, [apps + "/troupe-node", "--config",
                                   cluster_file, "--node", chief])
    peaks = {chief: peak_mb(boss)}
    for name, proc, _ in members:
        peaks[name] = peak_mb(proc)
    if boss.returncode != 0:
        sys.exit("the chief failed:\n" + output_of(boss_log)[-2000:])
    cluster_rate, _ = chief_summary(output_of(boss_log))
    train, train_log = start("train", [apps + "/troupe-train", "--config",
                                       train_config, "--epochs",
                                       str(epochs)])
    peaks["troupe-train"] = peak_mb(train)
    if train.returncode != 0:
        sys.exit("troupe-train failed:\n" + output_of(train_log)[-2000:])
    done = [l for l in output_of(train_log).splitlines()
            if l.startswith("done:")]
    rate = re.search(r"([0-9.]+) (?:examples|samples)/sec", done[-1])
    return peaks, cluster_rate, float(rate.group(1))


runs = {b: [] for b in builds}
for r in range(rounds):
    for b, path in builds.items():
        runs[b].append(measure(path, "ckpt-%d-%d" % (r, list(builds).index(b))))


def median(values):
    return statistics.median(values)


print(f"dataset as stored: {stored_mb('config/mlp.json'):.0f} MB "
      f"({json.load(open('config/mlp.json'))['data']['dir']})"
      + (f"; medians of {rounds} rounds" if rounds > 1 else ""))
names = list(next(iter(runs.values()))[0][0])
print(f"{'process':<14}" + "".join(f"{b + ' MB':>20}" for b in builds))
for name in names:
    print(f"{name:<14}" + "".join(
        f"{median([run[0][name] for run in runs[b]]):>20.0f}"
        for b in builds))
for i, what in ((1, "quick start"), (2, "troupe-train")):
    rates = {b: median([run[i] for run in runs[b]]) for b in builds}
    line = f"{what} samples/s:" + "".join(
        f" {b} {rates[b]:.0f}" for b in builds)
    if "earlier build" in rates:
        line += f"; this/earlier {rates['this build'] / rates['earlier build']:.3f}"
    if "in memory" in rates:
        line += f"; mapped/in memory {rates['mapped copy'] / rates['in memory']:.3f}"
    print(line)
PY
