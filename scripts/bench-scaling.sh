#!/usr/bin/env bash
# How troupe scales with workers, shards and threads in one process, and
# what a parameter shard's update costs. Prints, in one run:
#   1. the in-process cluster (troupe-node, async, config/local.json: MLP
#      784-256-128-10, Adam, batch 128) with 1, 2, 4, 8 CPU workers and 1,
#      2, 4 shards: samples/s, the speed-up over one worker with as many
#      shards, test accuracy, and user and system CPU seconds; then 1, 2, 4
#      GPU workers when nvidia-smi finds a GPU and the build has CUDA;
#   2. async test accuracy with 1, 2, 4, 8 workers (4 shards), the
#      staleness rules of cluster.stale_lr on (divide) and off (none), and
#      divide with cluster.stale_momentum reduce;
#   3. the shard's update next to memcpy (bench-shard; then with 30% of the
#      gradient zero, denormals flushed and kept) and the minor page
#      faults per step of a running cluster in steady state (two runs of
#      different lengths: the difference of their faults over the
#      difference of their steps, so start-up and the final evaluation
#      cancel out);
#   4. troupe-train's compute threads 1, 2, 4, ... up to the cores, on the
#      MLP and on the CNN of config/cnn.json (a fixed number of steps).
# Rows that ask for more workers or threads than the machine has cores say
# so: their speed says nothing about scaling there.
# Usage: scripts/bench-scaling.sh [epochs, default 4] [cnn steps, default 150]
#                                [sections, default 1234: e.g. 4 for threads]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
cd "$TROUPE_ROOT"
export TROUPE_BUILD
exec python3 - "${1:-4}" "${2:-150}" "${3:-1234}" <<'PY'
import atexit, json, os, re, resource, shutil, subprocess, sys, tempfile

epochs, cnn_steps, sections = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
build = os.environ["TROUPE_BUILD"] + "/apps/"
cores = os.cpu_count() or 1
gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
    ["nvidia-smi", "-L"], capture_output=True).returncode == 0
cuda_build = os.path.isdir(os.environ["TROUPE_BUILD"] + "/gpu")

def config(path, **training):
    c = json.load(open(path))
    c["training"]["epochs"] = epochs
    c["training"]["eval_every_steps"] = 10**9  # only at the end
    c["training"].update(training)
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(c, f)
    f.close()
    atexit.register(os.unlink, f.name)
    return f.name

def run(args):
    """Runs a command; its output and its CPU seconds and minor faults."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(args, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return (p.stdout, after.ru_utime - before.ru_utime,
            after.ru_stime - before.ru_stime,
            after.ru_minflt - before.ru_minflt)

def node(cfg, workers, shards, *extra):
    """troupe-node's summary row: samples/s, test accuracy, steps."""
    out, user, sys_s, faults = run([build + "troupe-node", "--config", cfg,
                                    "--workers", str(workers),
                                    "--shards", str(shards), *extra])
    row = out.strip().splitlines()[-1].split()
    return dict(rate=float(row[7]), acc=float(row[8]), steps=int(row[4]),
                user=user, sys=sys_s, faults=faults)

def note(n):
    return f"  ({n} > {cores} cores: not a scaling figure)" if n > cores else ""

mlp = config("config/local.json")
print(f"machine: {cores} cores, GPU: {'yes' if gpu else 'no'}, "
      f"CUDA build: {'yes' if cuda_build else 'no'}; {epochs} epochs, async")

if "1" in sections:
    print("\n1. in-process cluster, CPU workers (MLP, Adam, batch 128)")
    print(f"{'workers':>7} {'shards':>6} {'samples/s':>10} {'speed-up':>8} "
          f"{'test acc':>8} {'user s':>7} {'sys s':>6} {'sys/user':>8}")
    devices = [("cpu", [1, 2, 4, 8])]
    if gpu and cuda_build:
        devices.append(("gpu", [1, 2, 4]))
    for device, counts in devices:
        if device == "gpu":
            print("GPU workers")
        for shards in (1, 2, 4):
            one = None
            for w in counts:
                r = node(mlp, w, shards, "--device", device)
                one = one or r["rate"]
                print(f"{w:>7} {shards:>6} {r['rate']:>10.0f} {r['rate'] / one:>7.2f}x "
                      f"{r['acc']:>8.4f} {r['user']:>7.1f} {r['sys']:>6.2f} "
                      f"{r['sys'] / max(r['user'], 1e-9):>7.1%}"
                      + (note(w) if device == "cpu" else ""))

if "2" in sections:
    print("\n2. async test accuracy by stale_lr and stale_momentum (4 shards)")
    rules = {"divide": ("divide", "none"), "none": ("none", "none"),
             "divide+reduce": ("divide", "reduce")}
    print(f"{'workers':>7} " + " ".join(f"{r:>13}" for r in rules))
    for w in (1, 2, 4, 8):
        acc = {}
        for name, (lr_rule, momentum_rule) in rules.items():
            c = json.load(open(mlp))
            c["cluster"]["stale_lr"] = lr_rule
            c["cluster"]["stale_momentum"] = momentum_rule
            path = mlp + "." + name + ".json"
            json.dump(c, open(path, "w"))
            acc[name] = node(path, w, 4)["acc"]
            os.unlink(path)
        print(f"{w:>7} " + " ".join(f"{acc[r]:>13.4f}" for r in rules))

if "3" in sections:
    print("\n3. the shard's update (bench-shard) and page faults of a running cluster")
    print(run([build + "bench-shard", "--keep-freed-memory"])[0].rstrip())
    for extra in ([], ["--keep-denormals"]):
        print(f"30% of the gradient zero after the slots filled "
              f"({'denormals kept' if extra else 'denormals flushed, the default'}):")
        print(run([build + "bench-shard", "--keep-freed-memory", "--sizes", "58786",
                   "--zero-gradients", "0.3", *extra])[0].rstrip())
    short = node(mlp, 1, 2, "--epochs", "1")
    long = node(mlp, 1, 2, "--epochs", "3")
    per_step = (long["faults"] - short["faults"]) / (long["steps"] - short["steps"])
    print(f"troupe-node, 1 worker, 2 shards: {per_step:.2f} minor faults per step "
          f"in steady state ({short['faults']} faults over {short['steps']} steps, "
          f"{long['faults']} over {long['steps']})")

if "4" in sections:
    print("\n4. troupe-train compute threads")
    print(f"{'model':>5} {'threads':>7} {'samples/s':>10} {'speed-up':>8} "
          f"{'user s':>7} {'sys s':>6} {'sys/user':>8}")
    threads = [t for t in (1, 2, 4, 8, 16) if t <= max(cores, 2)]
    for model, path, extra in (("mlp", mlp, []),
                               ("cnn", config("config/cnn.json"),
                                ["--max-steps", str(cnn_steps)])):
        one = None
        for t in threads:
            out, user, sys_s, _ = run([build + "troupe-train", "--config", path,
                                       "--threads", str(t), *extra])
            rate = float(re.search(r"([0-9.]+) examples/sec, test accuracy",
                                   out).group(1))
            one = one or rate
            print(f"{model:>5} {t:>7} {rate:>10.0f} {rate / one:>7.2f}x "
                  f"{user:>7.1f} {sys_s:>6.2f} {sys_s / max(user, 1e-9):>7.1%}"
                  + note(t))
PY
