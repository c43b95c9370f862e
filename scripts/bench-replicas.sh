#!/usr/bin/env bash
# What replicated shards cost (cluster.shard_replicas 1), side by side in
# one run. The multi-process quick start (config/cluster-local.json: chief,
# shard nodes ps0 and ps1, worker nodes worker0 and worker1, async, on
# free ports) trains with no replicas and with one replica per shard, in
# turn ROUNDS times; prints the medians of samples/s and of each
# process's peak resident memory (ru_maxrss, read when it is reaped), and
# replicas over none. With "click", the click model on 400k generated
# click logs (its table on the two shard nodes) instead of the MLP.
# With "copy ROWS", the time a new replica of a shard holding a table of
# ROWS rows x 16 floats (Adagrad) takes to come in step instead
# (bench-replica: two processes on 127.0.0.1, 2000 row pushes during the
# copy); 51000000 is the table of scripts/clicks-scale.sh held by one
# shard, 12750000 one of its four shards' part.
# Usage: scripts/bench-replicas.sh [epochs, default 2] [rounds, default 3]
#          [mlp|click, default mlp]
#        scripts/bench-replicas.sh copy ROWS
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
if [[ "${1:-}" == "copy" ]]; then
  exec "$TROUPE_BUILD/apps/bench-replica" --rows "${2:?rows}" --dim 16 \
    --pushes 2000
fi
python3 - "${1:-2}" "${2:-3}" "${3:-mlp}" "$TROUPE_BUILD/apps" <<'PY'
import os
import statistics
import sys
from benchlib import (chief_summary, scratch_dir, start_logged_node,
                      write_local_cluster)

epochs, rounds, model, apps = (int(sys.argv[1]), int(sys.argv[2]),
                               sys.argv[3], sys.argv[4])
work = scratch_dir()


cpu = {}


def peak_mb(proc, name=None):
    """Waits for `proc`; its peak resident set in MB (ru_maxrss is KiB).
    Its CPU seconds go to cpu[name]."""
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:  # reaped already (a failed run's kill)
        return 0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if name:
        cpu[name] = usage.ru_utime + usage.ru_stime
    return usage.ru_maxrss * 1024 / 1e6


def measure(replicas):
    path, cluster = write_local_cluster(work, apps, epochs, model,
                                        shard_replicas=replicas)
    names = [n["name"] for n in cluster["cluster"]["nodes"]]
    chief = cluster["cluster"]["chief"]
    logs = {}

    def start(name):
        proc, logs[name] = start_logged_node(apps, path, name, work)
        return proc
    members = {n: start(n) for n in names if n != chief}
    boss = start(chief)
    peaks = {chief: peak_mb(boss, chief)}
    if boss.returncode != 0:
        for proc in members.values():
            proc.kill()
    for name, proc in members.items():
        peaks[name] = peak_mb(proc, name)
    logs[chief].seek(0)
    out = logs[chief].read()
    if boss.returncode != 0:
        # A port another program took between free_port() and the node's
        # bind (rare since free_port() picks below the kernel's ephemeral
        # range) is the harness's, not the run's: that round runs again.
        if "did not come up" in out:
            print("a node did not come up; the round runs again")
            return None
        for name in names:
            logs[name].seek(0)
            print(f"--- {name}\n" + logs[name].read()[-2000:])
        sys.exit("the chief failed")
    if replicas and out.count(" is in step at ") < 2:
        sys.exit("the replicas did not come in step:\n" + out[-3000:])
    rate, _ = chief_summary(out)
    return peaks, rate, dict(cpu)


runs = {0: [], 1: []}
for r in range(rounds):
    for replicas in (0, 1):
        result = None
        while result is None:
            result = measure(replicas)
        runs[replicas].append(result)
median = statistics.median
print(f"{model}, {epochs} epochs, medians of {rounds} rounds, alternating")
print(f"{'process':<10}{'no replicas MB':>16}{'replicas MB':>14}"
      f"{'ratio':>8}{'CPU s, none':>14}{'replicas':>10}")
for name in runs[0][0][0]:
    a = median([p[name] for p, _, _ in runs[0]])
    b = median([p[name] for p, _, _ in runs[1]])
    ca = median([c[name] for _, _, c in runs[0]])
    cb = median([c[name] for _, _, c in runs[1]])
    print(f"{name:<10}{a:>16.0f}{b:>14.0f}{b / a:>8.2f}{ca:>14.1f}"
          f"{cb:>10.1f}")
a = median([rate for _, rate, _ in runs[0]])
b = median([rate for _, rate, _ in runs[1]])
print(f"samples/s: no replicas {a:.0f}, replicas {b:.0f}; replicas/none "
      f"{b / a:.3f}")
PY
