#!/usr/bin/env bash
# Click logs streamed from gzipped parts next to the same logs read into
# memory, in one run, alternating REPEATS times: samples/s, the ratio,
# each run's peak RSS and its test log-loss and AUC. The data: bench-
# clicks.sh's 1M training and 100k test click logs (troupe-clicks, 4
# numeric and 8 categorical fields of 100000 Zipf-1.1 values, seed 7),
# written once into DIR, and the training logs again as 8 gzipped parts
# (level 1) in DIR/parts. Every run: troupe-node embedded (2 workers, 2
# shards), dim 8, MLP 64-32, batch 256, Adam, async, one epoch; in memory
# every sample is shuffled, streamed the parts are interleaved in blocks
# of 4096 (docs/training.md#streamed-click-logs).
# Usage: scripts/bench-click-stream.sh [repeats, default 3] [DIR, default
#                                       runs/bench-click-stream]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
dir="${2:-runs/bench-click-stream}"
troupe_bench_click_logs "$dir"
exec /usr/bin/python3 - "${1:-3}" "$dir" <<'PY'
import gzip, os, re, subprocess, sys

from benchlib import medians_of_rounds, scratch_dir, write_click_bench_config

repeats, data = int(sys.argv[1]), os.path.abspath(sys.argv[2])
node = os.environ["TROUPE_BUILD"] + "/apps/troupe-node"
work = scratch_dir()
parts = 8
if not os.path.exists(f"{data}/parts/train-{parts - 1}.tsv.gz"):
    os.makedirs(f"{data}/parts", exist_ok=True)
    lines = open(f"{data}/train.tsv", "rb").readlines()
    step = (len(lines) + parts - 1) // parts
    for k in range(parts):
        with gzip.open(f"{data}/parts/train-{k}.tsv.gz", "wb",
                       compresslevel=1) as f:
            f.writelines(lines[k * step:(k + 1) * step])

def config(name, train):
    return write_click_bench_config(f"{work}/{name}.json",
                                    "bench-click-stream", data, train,
                                    {"shards": 2, "workers": 2})

def run(name, train):
    """samples/s, peak RSS (MB), test log-loss and AUC of one run."""
    out_path, err_path = f"{work}/{name}.out", f"{work}/{name}.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen([node, "--config", config(name, train)],
                             stdout=out, stderr=err)
        # wait4 reaps it with its own resource usage: its peak RSS alone.
        _, status, usage = os.wait4(p.pid, 0)
    out, err = open(out_path).read(), open(err_path).read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"troupe-node failed:\n{out[-2000:]}{err[-2000:]}")
    scores = re.findall(r"test loss = ([0-9.]+), test AUC = ([0-9.]+)", out)
    row = out.strip().splitlines()[-1].split()
    return (float(row[7]), usage.ru_maxrss / 1024, float(scores[-1][0]),
            float(scores[-1][1]))

def say(r, name, result):
    rate, mb, loss, auc = result
    print(f"round {r}: {name}: {rate:.0f} samples/s, peak RSS "
          f"{mb:.0f} MB, test log-loss {loss:.4f}, AUC {auc:.4f}",
          flush=True)

runs = {"in memory (train.tsv)": lambda: run("in", "train.tsv"),
        "streamed (8 gzipped parts)": lambda: run("streamed",
                                                  "parts/train-*.tsv.gz")}
median = medians_of_rounds(runs, repeats, say)
base = median["in memory (train.tsv)"]
print(f"\none epoch of 1M click logs, troupe-node embedded, medians of "
      f"{repeats}")
print(f"{'':28} {'samples/s':>10} {'ratio':>6} {'peak RSS':>9} "
      f"{'log-loss':>8} {'AUC':>7}")
for name, (rate, mb, loss, auc) in median.items():
    print(f"{name:28} {rate:>10.0f} {rate / base[0]:>6.2f} {mb:>6.0f} MB "
          f"{loss:>8.4f} {auc:>7.4f}")
PY
