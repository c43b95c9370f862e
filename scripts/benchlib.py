"""The benchmark scripts' shared pieces, in one module instead of a copy in
each script's Python: a free loopback port, a process's resident memory, a
scratch folder that goes away at exit, a results file of "key ... value"
lines read into lists per key for medians, runs alternated over rounds and their medians,
config/local.json's run as a cluster of processes and as one process,
config/cluster-local.json's run for the shard benchmarks, the click
benchmarks' run config, a cluster file run as troupe-node processes,
troupe-train on a run config, and the PyTorch references: a script that
prints its result as a JSON line, PyTorch's RPC parameter server
(bench/pytorch_rpc_ps.py) among them. scripts/setup.sh puts this folder on
PYTHONPATH, so the scripts' inline Python says `from benchlib import ...`;
from bash, `python3 scripts/benchlib.py port` prints a free port."""

import atexit
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict


_handed_out = set()


def free_port():
    """A TCP port of 127.0.0.1 that was free a moment ago, below the
    kernel's ephemeral range (32768-60999 by default) and not handed out
    before by this process: a port from bind(0) comes from that range, where
    a node's data plane (which binds port 0) or an outgoing connection may
    take it before the node it was meant for binds it."""
    rng = random.SystemRandom()
    for _ in range(2000):
        port = rng.randrange(20000, 32000)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    sys.exit("no free port on 127.0.0.1 in 20000-31999")


def small_click_run(config, apps, work, values=2000):
    """Makes `config` (a run config) train the click model on 400k
    generated click logs (2 numeric and 4 categorical fields of `values`
    values, written once into `work`) instead of its model."""
    logs = os.path.join(work, "click-logs-%d" % values)
    if not os.path.exists(os.path.join(logs, "test.tsv")):
        subprocess.run([apps + "/troupe-clicks", "--out", logs,
                        "--train", "400000", "--test", "20000",
                        "--numeric", "2", "--categorical", "4",
                        "--values", str(values), "--zipf", "1.1",
                        "--seed", "3"],
                       check=True, stdout=subprocess.DEVNULL)
    config["model"] = {"type": "click", "hidden": [64, 32], "seed": 1,
                       "embedding": {"dim": 8}}
    config["data"] = {"format": "click", "dir": logs, "train": "train.tsv",
                      "test": "test.tsv", "numeric": 2, "categorical": 4,
                      "vocabulary": 1 << 22}
    config["training"].update({"batch_size": 256,
                               "eval_every_steps": 100000,
                               "sparse_optimizer": {"type": "adagrad",
                                                    "learning_rate": 0.05}})


def two_shards_two_workers():
    """The cluster file's nodes of the click benchmarks: ps0 and ps1 a
    shard each (ps0 is the chief), w0 and w1 a worker each, on 127.0.0.1."""
    return [{"name": n, "host": "127.0.0.1", "port": free_port(),
             **({"shards": 1} if n.startswith("ps") else {"workers": 1})}
            for n in ("ps0", "ps1", "w0", "w1")]



def rss_kib(pid):
    """Process `pid`'s resident memory in KiB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None

def scratch_dir():
    """A new folder, removed with what it holds when the script ends."""
    path = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, path, True)
    return path


def read_results(path, key_words):
    """The lines of `path` that are `key_words` words and a number, as
    {(word, ...): [number, ...]} in file order; other lines are skipped."""
    values = defaultdict(list)
    with open(path) as lines:
        for line in lines:
            parts = line.split()
            if len(parts) == key_words + 1:
                values[tuple(parts[:key_words])].append(float(parts[-1]))
    return values


def write_local_clusters(local_json, work, epochs, shards, workers):
    """config/local.json's run for `epochs`, evaluated only at the end, in
    two files of `work`: cluster.json (the chief, a node per shard "psI" and
    a node per worker "wI", on free ports of 127.0.0.1) and one.json (the
    same shards and workers in one process). Returns the member nodes'
    names, the chief's left out."""
    c = json.load(open(local_json))
    c["training"]["epochs"] = epochs
    c["training"]["eval_every_steps"] = 10**9
    c["training"]["log_every_steps"] = 10**9
    node = {"host": "127.0.0.1"}
    nodes = [dict(node, name="chief", port=free_port())]
    nodes += [dict(node, name=f"ps{i}", port=free_port(), shards=1)
              for i in range(shards)]
    nodes += [dict(node, name=f"w{i}", port=free_port(), workers=1)
              for i in range(workers)]
    one = dict(c, cluster=dict(c["cluster"], shards=shards, workers=workers))
    with open(f"{work}/one.json", "w") as out:
        json.dump(one, out)
    c["cluster"] = {"mode": "async", "chief": "chief", "nodes": nodes}
    with open(f"{work}/cluster.json", "w") as out:
        json.dump(c, out)
    return [n["name"] for n in nodes[1:]]


def chief_summary(output):
    """The samples/s and test accuracy of the summary row a chief prints
    last ("<run> <mode> <workers> <shards> <steps> <epochs> <seconds>
    <examples/s> <test acc> <restarts>")."""
    row = output.strip().splitlines()[-1].split()
    # "-": the run was not evaluated
    return float(row[7]), float("nan") if row[8] == "-" else float(row[8])


def run_troupe_cluster(node, config, chief, members):
    """Runs cluster file `config` as troupe-node processes (`node` the
    program): the member nodes, then the chief, waiting for all. Returns
    the chief's samples/s and test accuracy; exits with its output when it
    fails."""
    procs = [subprocess.Popen([node, "--config", config, "--node", m],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for m in members]
    out = subprocess.run([node, "--config", config, "--node", chief],
                         capture_output=True, text=True)
    for p in procs:
        p.wait(timeout=60)
    if out.returncode != 0:
        sys.exit(f"troupe-node {chief} failed:\n"
                 f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return chief_summary(out.stdout)


def run_json_script(args, **options):
    """/usr/bin/python3 with `args` (a script and its options; from the
    project's root unless `options` give another cwd), which prints its
    result as a JSON line last. Returns that result; exits with the
    script's errors when it fails."""
    out = subprocess.run(["/usr/bin/python3", *args], capture_output=True,
                         text=True, **options)
    if out.returncode != 0:
        sys.exit(f"{args[0]} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_pytorch_rpc_ps(args):
    """bench/pytorch_rpc_ps.py with `args`, from the project's root, on a
    free port. Returns its samples/s and test accuracy; exits with its
    errors when it fails."""
    r = run_json_script(["bench/pytorch_rpc_ps.py", *args, "--port",
                         str(free_port())])
    return r["samples_per_sec"], r["test_accuracy"]


def run_troupe_train(build, config, threads):
    """troupe-train of build folder `build` on run config `config` with
    `threads` threads. Returns its output; exits with its errors when it
    fails."""
    out = subprocess.run([os.path.join(build, "apps/troupe-train"),
                          "--config", config, "--threads", str(threads)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("troupe-train failed:\n" + out.stderr[-2000:])
    return out.stdout


def train_adam_on_troupe(build, work, name, model, data, epochs, seed,
                         threads):
    """troupe-train of build folder `build` on run `name` of `model` and
    `data` (config sections) as the PyTorch side-by-sides
    (scripts/bench-layers.sh, scripts/bench-regression.sh) train it:
    Adam 0.001, batches of 64, `epochs` epochs from `seed`, no progress
    lines, on `threads` threads; the config goes to `work`. Returns
    troupe-train's output; exits with its errors when it fails."""
    config = os.path.join(work, f"{name}-{seed}.json")
    with open(config, "w") as f:
        json.dump({"name": name, "model": model, "data": data,
                   "training": {"batch_size": 64, "epochs": epochs,
                                "seed": seed, "log_every_steps": 100000,
                                "optimizer": {"type": "adam",
                                              "learning_rate": 0.001}}}, f)
    return run_troupe_train(build, config, threads)


def means_over_seeds(runs, seeds, thread_counts, say):
    """Calls every run(threads, seed) of {name: run} for seeds 1..`seeds`
    and each of `thread_counts`, each run returning a tuple of numbers;
    say(seed, threads, name, result) after each. Returns {(name, threads):
    the tuple of the means of its results over the seeds}."""
    results = defaultdict(list)
    for seed in range(1, seeds + 1):
        for threads in thread_counts:
            for name, run in runs.items():
                result = run(threads, seed)
                results[(name, threads)].append(result)
                say(seed, threads, name, result)
    return {key: tuple(statistics.mean(column) for column in zip(*rows))
            for key, rows in results.items()}


def medians_of_rounds(runs, repeats, say):
    """Calls every run of {name: run} in turn, `repeats` rounds (so that a
    machine's slow moments fall on every side alike), each run returning a
    tuple of numbers; say(round, name, result) after each, rounds from 1.
    Returns {name: the tuple of the medians of its results}."""
    results = {name: [] for name in runs}
    for r in range(repeats):
        for name, run in runs.items():
            results[name].append(run())
            say(r + 1, name, results[name][-1])
    return {name: tuple(statistics.median(column) for column in zip(*rows))
            for name, rows in results.items()}


def write_click_bench_config(path, name, data, train, cluster):
    """Writes to `path` the run config of the click benchmarks
    (scripts/bench-clicks.sh, scripts/bench-click-stream.sh), named
    `name`: the click model (dim 8, MLP 64-32) on the logs of folder `data`
    (4 numeric and 8 categorical fields; `train` the training file or
    pattern), batch 256, Adam 0.001 for the MLP and lazy Adam 0.01 for the
    rows, one epoch on one thread, evaluated at the end only, async;
    `cluster` adds to the cluster section. Returns `path`."""
    c = {"name": name,
         "model": {"type": "click", "hidden": [64, 32], "seed": 1,
                   "embedding": {"dim": 8}},
         "data": {"format": "click", "dir": data, "train": train,
                  "test": "test.tsv", "numeric": 4, "categorical": 8,
                  "vocabulary": 2**30},
         "training": {"batch_size": 256, "epochs": 1, "seed": 1,
                      "threads": 1, "eval_every_steps": 10**9,
                      "log_every_steps": 10**9,
                      "optimizer": {"type": "adam", "learning_rate": 0.001},
                      "sparse_optimizer": {"type": "adam",
                                           "learning_rate": 0.01}},
         "cluster": dict({"mode": "async"}, **cluster)}
    with open(path, "w") as out:
        json.dump(c, out)
    return path


def write_local_cluster(work, apps, epochs, model, values=2000, **cluster):
    """config/cluster-local.json's run for `epochs`, without its checkpoint,
    `cluster` added to its cluster section, on free ports of 127.0.0.1;
    with `model` "click" it trains the small click model instead
    (small_click_run, `values` values a field). Written to
    `work`/cluster.json; returns that path and the config."""
    with open("config/cluster-local.json") as f:
        config = json.load(f)
    config["training"]["epochs"] = epochs
    config["training"].pop("checkpoint", None)
    config["cluster"].update(cluster)
    if model == "click":
        small_click_run(config, apps, work, values)
    for node in config["cluster"]["nodes"]:
        node["port"] = free_port()
    path = os.path.join(work, "cluster.json")
    with open(path, "w") as out:
        json.dump(config, out)
    return path, config


def start_logged_node(apps, config, name, work):
    """Starts troupe-node (of folder `apps`) as node `name` of cluster file
    `config`, its output and errors into `work`/NAME.out. Returns the
    process and that file, open for reading it back."""
    log = open(os.path.join(work, name + ".out"), "w+")
    return subprocess.Popen([apps + "/troupe-node", "--config", config,
                             "--node", name], stdout=log,
                            stderr=subprocess.STDOUT), log


if __name__ == "__main__":
    if sys.argv[1:] == ["port"]:
        print(free_port())
    else:
        sys.exit("usage: benchlib.py port")
