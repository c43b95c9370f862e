#!/usr/bin/env bash
# This build against an earlier one, side by side in one run, for changes
# that must not change speed (a restructuring, a refactor): the CPU
# training loop (bench-cpu-training, every model, batch and thread count),
# and a cluster of troupe-node processes on 127.0.0.1 next to the same
# cluster in one process (config/local.json's MLP; 1 shard node and 2
# worker nodes), the two builds alternating ROUNDS times. Prints medians,
# this build's over the earlier one's (above 1: this build is faster), and
# their geometric mean. The data plane's figures come from
# TROUPE_BEFORE=BEFORE/apps/bench-transfer scripts/bench-transfer.sh.
# Usage: scripts/bench-before.sh BEFORE_BUILD [rounds, default 3]
#   BEFORE_BUILD: a build folder of the earlier commit with troupe-node and
#   bench-cpu-training built in it, e.g.
#     git worktree add ../troupe-before REV
#     cmake -S ../troupe-before -B ../troupe-before/build
#     cmake --build ../troupe-before/build -j2 --target troupe-node bench-cpu-training
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
troupe_setup
before="${1:?usage: scripts/bench-before.sh BEFORE_BUILD [rounds]}"
rounds="${2:-3}"
cd "$TROUPE_ROOT"
exec python3 - "$TROUPE_BUILD" "$before" "$rounds" <<'PY'
import json, math, statistics, subprocess, sys
from collections import defaultdict
from benchlib import scratch_dir, write_local_clusters

after, before, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
builds = {"after": after, "before": before}
work = scratch_dir()
rates = defaultdict(lambda: defaultdict(list))  # figure -> build -> [rate]


def cpu_loop(name, build):
    out = subprocess.run([f"{build}/apps/bench-cpu-training", "--json",
                          "--model", "all", "--seconds", "1"],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        r = json.loads(line)
        key = f"cpu loop {r['model']}, batch {r['batch']}, {r['threads']} threads"
        rates[key][name].append(r["samples_per_sec"])


def summary_rate(out):
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("run ") and i + 1 < len(lines):
            return float(lines[i + 1].split()[7])
    raise SystemExit("no summary table in:\n" + out)


def nodes(name, build, members):
    node = f"{build}/apps/troupe-node"
    procs = [subprocess.Popen([node, "--config", f"{work}/cluster.json",
                               "--node", m], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for m in members]
    chief = subprocess.run([node, "--config", f"{work}/cluster.json",
                            "--node", "chief"], capture_output=True,
                           text=True, timeout=600)
    for p in procs:
        p.wait(timeout=60)
    rates["4 processes, 1 shard, 2 workers"][name].append(
        summary_rate(chief.stdout))
    one = subprocess.run([node, "--config", f"{work}/one.json"],
                         capture_output=True, text=True, timeout=600)
    rates["one process, 1 shard, 2 workers"][name].append(
        summary_rate(one.stdout))


members = write_local_clusters("config/local.json", work, 2, 1, 2)
for r in range(rounds):
    print(f"round {r + 1} of {rounds}", file=sys.stderr)
    for name, build in (builds.items() if r % 2 == 0
                        else reversed(list(builds.items()))):
        cpu_loop(name, build)
        nodes(name, build, members)

print(f"{'samples/s, medians of ' + str(rounds):58} {'this':>10} "
      f"{'earlier':>10} {'ratio':>6}")
ratios = []
for key, by in rates.items():
    a, b = statistics.median(by["after"]), statistics.median(by["before"])
    ratios.append(a / b)
    print(f"{key:58} {a:>10.0f} {b:>10.0f} {a / b:>6.3f}")
geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
print(f"geometric mean of the ratios: {geo:.3f} "
      f"(lowest {min(ratios):.3f}, highest {max(ratios):.3f})")
PY
