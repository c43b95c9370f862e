#!/usr/bin/env bash
# Chaos runs of replicated shards (cluster.shard_replicas 1): troupe-node
# processes on 127.0.0.1 (chief, shard nodes ps0-ps2 of one shard each,
# worker nodes w0 and w1 of one async worker each); in each disturbed run
# one shard node, drawn at random, is killed with SIGKILL at a step drawn
# at random from the middle 60% of the run. A run passes when the chief
# says the replicas took over with 0 steps lost, no step was retrained,
# every shard ends at the version of every batch (async: one update per
# batch applied, each once), every sample trained once per epoch, and both
# replicas the killed node cost were built again. Undisturbed runs of the
# same cluster give the noise of the result. Prints one line per run and
# the result's spread, and the seconds from the kill to the last replica
# in step again.
# Models: mlp (Fashion-MNIST, 3 epochs), click (the click model on 400k
# generated click logs, a table on the 3 shards, 2 epochs).
# Usage: scripts/chaos-shards.sh [runs, default 10] [models, default
#   mlp,click] [undisturbed runs, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
python3 - "${1:-10}" "${2:-mlp,click}" "${3:-3}" "$TROUPE_BUILD/apps" <<'PY'
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from benchlib import free_port, scratch_dir, small_click_run

runs, models, quiet, apps = (int(sys.argv[1]), sys.argv[2].split(","),
                             int(sys.argv[3]), sys.argv[4])
quiet = max(quiet, 1)  # the disturbed runs' steps come from one
work = scratch_dir()
random.seed(int(os.environ.get("CHAOS_SEED", time.time())))
shard_nodes = ["ps0", "ps1", "ps2"]


def config(model):
    nodes = [{"name": "chief", "host": "127.0.0.1"}]
    nodes += [{"name": n, "host": "127.0.0.1", "shards": 1}
              for n in shard_nodes]
    nodes += [{"name": w, "host": "127.0.0.1", "workers": 1}
              for w in ("w0", "w1")]
    for n in nodes:
        n["port"] = free_port()
    cfg = {
        "name": "chaos-" + model,
        "model": {"type": "mlp", "hidden": [256, 128], "seed": 1},
        "data": {"format": "idx", "dir": "/usr/share/datasets/fashion-mnist"},
        "training": {"batch_size": 128, "epochs": 3, "seed": 1,
                     "threads": 1, "log_every_steps": 20,
                     "optimizer": {"type": "adam", "learning_rate": 0.001}},
        "cluster": {"mode": "async", "chief": "chief", "nodes": nodes,
                    "shard_replicas": 1, "heartbeat_interval_ms": 200,
                    "connection_timeout_ms": 1500, "max_restarts": 10},
    }
    if model == "click":
        small_click_run(cfg, apps, work)
        cfg["training"]["epochs"] = 2
    return cfg


def run(model, kill):
    """One run; kill: None or (node, step). Returns a dict of findings."""
    cfg = config(model)
    path = os.path.join(work, "cluster.json")
    json.dump(cfg, open(path, "w"))
    procs = {}
    for n in cfg["cluster"]["nodes"]:
        log = open(os.path.join(work, n["name"] + ".out"), "w+")
        if n["name"] != "chief":
            procs[n["name"]] = (subprocess.Popen(
                [apps + "/troupe-node", "--config", path, "--node",
                 n["name"]], stdout=log, stderr=subprocess.STDOUT), log)
    log = open(os.path.join(work, "chief.out"), "w+")
    chief = subprocess.Popen([apps + "/troupe-node", "--config", path,
                              "--node", "chief"],
                             stdout=log, stderr=subprocess.STDOUT)
    killed_at = in_step_again = None
    start = time.time()
    while chief.poll() is None and time.time() - start < 600:
        time.sleep(0.05)
        log.seek(0)
        out = log.read()
        steps = [int(s) for s in re.findall(r"^step (\d+)", out, re.M)]
        in_step = out.count(" is in step at ")
        if kill and killed_at is None and steps and steps[-1] >= kill[1] \
                and in_step >= 3:
            procs[kill[0]][0].send_signal(signal.SIGKILL)
            killed_at = time.time()
        if killed_at and in_step_again is None and in_step >= 5:
            in_step_again = time.time() - killed_at
    if chief.poll() is None:
        chief.kill()
    for name, (p, _) in procs.items():
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    log.seek(0)
    out = log.read()
    if os.environ.get("CHAOS_KEEP"):
        open(os.path.join(os.environ["CHAOS_KEEP"], "chief-%d.out" % len(
            os.listdir(os.environ["CHAOS_KEEP"]))), "w").write(out)
    row = out.strip().splitlines()[-1].split()
    found = {"rc": chief.returncode, "out": out}
    if chief.returncode != 0:
        for name, (_, member_log) in procs.items():
            member_log.seek(0)
            found["out"] += f"--- {name}\n" + member_log.read()[-1500:]
        # A port another program took between free_port() and the node's
        # bind (rare since free_port() picks below the kernel's ephemeral
        # range) is the harness's, not the run's: such a run starts again.
        found["harness"] = "these nodes did not come up" in out
        return found
    steps = int(row[4])
    versions = [int(v) for v in re.search(
        r"shard versions at the end:([ \d]+)", out).group(1).split()]
    samples = [int(v) for v in re.search(
        r"samples trained per epoch:([ \d]+)", out).group(1).split()]
    size = 60000 if model == "mlp" else 400000
    found.update({
        "steps": steps,
        "versions_ok": versions == [steps] * 3,
        "samples_ok": samples == [size] * cfg["training"]["epochs"],
        "score": float(row[8]) if model == "mlp" else float(
            re.findall(r"test loss = ([0-9.]+)", out)[-1]),
        "seconds": float(row[6]),
        "kill_step": None,
        "again": in_step_again,
    })
    if kill:
        took = re.search(r"^step (\d+).*\n(?:.*\n)*?.*shard \d+ on node "
                         + kill[0] + " stopped", out, re.M)
        found["kill_step"] = int(took.group(1)) if took else kill[1]
        found["lost0"] = ("0 steps lost" in out
                          and "steps lost and retrained: 0" in out
                          and "to be trained again" not in out)
        copies = [float(x) for x in
                  re.findall(r"in step after ([0-9.]+) s", out)]
        found["copy_max"] = max(copies[3:]) if len(copies) > 3 else None
    return found


score_name = {"mlp": "test acc", "click": "test log-loss"}
failed = 0
for model in models:
    print(f"== {model}: {runs} runs with a shard node killed, {quiet} "
          "undisturbed")
    total = None
    quiet_scores = []
    for r in range(quiet):
        f = run(model, None)
        while f["rc"] != 0 and f.get("harness"):
            f = run(model, None)
        if f["rc"] != 0:
            sys.exit("an undisturbed run failed:\n" + f["out"][-3000:])
        total = f["steps"]
        quiet_scores.append(f["score"])
        print(f"undisturbed {r + 1}: {score_name[model]} {f['score']:.4f}, "
              f"{f['seconds']:.1f} s")
    disturbed = []
    for r in range(runs):
        victim = random.choice(shard_nodes)
        step = random.randint(int(total * 0.2), int(total * 0.8))
        f = run(model, (victim, step))
        while f["rc"] != 0 and f.get("harness"):
            print(f"run {r + 1}: a node did not come up (started again):\n"
                  + f["out"][-1500:])
            f = run(model, (victim, step))
        ok = (f["rc"] == 0 and f["lost0"] and f["versions_ok"]
              and f["samples_ok"] and f["again"] is not None)
        failed += 0 if ok else 1
        if f["rc"] != 0:
            print(f"run {r + 1}: kill {victim} at step {step}: FAILED, "
                  f"the chief ended with {f['rc']}")
            print(f["out"][-3000:])
            continue
        disturbed.append(f["score"])
        print(f"run {r + 1}: kill {victim} at step {step}: "
              f"{'pass' if ok else 'FAIL'}; 0 lost {f['lost0']}, versions "
              f"{f['versions_ok']}, samples once {f['samples_ok']}, "
              f"{score_name[model]} {f['score']:.4f}, replicas in step "
              f"{f['again']:.2f} s after the kill (copies "
              f"{f['copy_max']:.2f} s at most)" if f["again"] else
              f"run {r + 1}: kill {victim} at step {step}: FAIL (replicas "
              "not in step again)")
    if disturbed:
        print(f"{model}: {score_name[model]} undisturbed "
              f"{min(quiet_scores):.4f}-{max(quiet_scores):.4f} (mean "
              f"{statistics.mean(quiet_scores):.4f}), with a kill "
              f"{min(disturbed):.4f}-{max(disturbed):.4f} (mean "
              f"{statistics.mean(disturbed):.4f})")
print("all runs passed" if failed == 0 else f"{failed} runs FAILED")
sys.exit(1 if failed else 0)
PY
