#!/usr/bin/env bash
# Memory per process: the peak resident set (the kernel's ru_maxrss, read
# when each process is reaped, so no sample can miss the peak) of every
# process of the multi-process quick start (config/cluster-local.json's
# five nodes: chief, ps0, ps1, worker0, worker1, on free ports, with a
# checkpoint folder of their own) and of troupe-train on config/mlp.json,
# next to the stored size of the dataset they read, with each run's
# samples/s.
# Usage: scripts/bench-memory.sh [epochs, default 2]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
python3 - "${1:-2}" "$TROUPE_BUILD/apps" <<'PY'
import json
import os
import subprocess
import sys
from benchlib import chief_summary, free_port, scratch_dir

epochs, apps = int(sys.argv[1]), sys.argv[2]
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


cluster = json.load(open("config/cluster-local.json"))
for node in cluster["cluster"]["nodes"]:
    node["port"] = free_port()
cluster["training"]["epochs"] = epochs
cluster["training"]["checkpoint"]["dir"] = os.path.join(work, "ckpt")
cluster_file = os.path.join(work, "cluster.json")
json.dump(cluster, open(cluster_file, "w"))
names = [n["name"] for n in cluster["cluster"]["nodes"]]
chief = cluster["cluster"]["chief"]
members = [(n, *start(n, [apps + "/troupe-node", "--config", cluster_file,
                          "--node", n])) for n in names if n != chief]
boss, boss_log = start(chief, [apps + "/troupe-node", "--config",
                               cluster_file, "--node", chief])
peaks = {chief: peak_mb(boss)}
for name, proc, _ in members:
    peaks[name] = peak_mb(proc)
if boss.returncode != 0:
    sys.exit("the chief failed:\n" + output_of(boss_log)[-2000:])
cluster_rate, _ = chief_summary(output_of(boss_log))

train, train_log = start("train", [apps + "/troupe-train", "--config",
                                   "config/mlp.json", "--epochs",
                                   str(epochs)])
peaks["troupe-train"] = peak_mb(train)
if train.returncode != 0:
    sys.exit("troupe-train failed:\n" + output_of(train_log)[-2000:])
done = [l for l in output_of(train_log).splitlines() if l.startswith("done:")]

print(f"dataset as stored: {stored_mb('config/mlp.json'):.0f} MB "
      f"({json.load(open('config/mlp.json'))['data']['dir']})")
print(f"{'process':<14} {'peak RSS MB':>12}")
for name, mb in peaks.items():
    print(f"{name:<14} {mb:>12.0f}")
print(f"quick start: {cluster_rate:.0f} samples/s; troupe-train: "
      f"{done[-1] if done else '?'}")
PY
