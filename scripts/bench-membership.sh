#!/usr/bin/env bash
# The chief against the number of node processes, on one host. For each
# count N: a cluster file of N troupe-node processes on 127.0.0.1 (the
# chief's node, shard nodes ps0 and ps1 of one shard each, and N - 3
# worker nodes of one worker each), a tiny model (MLP 784-16-10 on
# Fashion-MNIST, batch 32, async, evaluation only at the end), and:
#   - registration: seconds from starting the processes to the chief's
#     log naming the last node up, and the chief process's CPU seconds
#     until then (its start, loading the model and data, included);
#   - the chief process's CPU seconds per second (/proc: user + system)
#     over WINDOW seconds while training, and while paused from the shell
#     (then only the links' heartbeats, the agents' and the shell's
#     traffic are left), and the steps/s of the run in the same windows;
#   - troupe-shell -c status --json and -c nodes --json: wall seconds,
#     the program's start included;
#   - a worker node killed with kill -9, and another stopped with SIGSTOP
#     (a hung process: its socket stays open): seconds until the chief's
#     log says it is down, against cluster.connection_timeout_ms (3 s by
#     default; middleman heartbeats every 500 ms);
# then the run is stopped from the shell.
# Processes: N troupe-node processes of about 8 threads each; open files:
# the chief holds a connection to every node; 128 need no ulimit change
# (1024 open files, 4096+ processes). Ports: N free ports of 127.0.0.1.
# Usage: scripts/bench-membership.sh [counts, default "8 32 128"]
#                                    [window seconds, default 10]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-8 32 128}" "${2:-10}" <<'PY'
import atexit, json, os, queue, random, signal, subprocess, sys, threading, time

from benchlib import free_port, scratch_dir

counts, window = [int(n) for n in sys.argv[1].split()], float(sys.argv[2])
apps = os.environ["TROUPE_BUILD"] + "/apps/"
work = scratch_dir()
ticks = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks


def cluster_file(n):
    nodes = [{"name": "chief", "host": "127.0.0.1", "port": free_port()}]
    nodes += [{"name": f"ps{i}", "host": "127.0.0.1", "port": free_port(),
               "shards": 1} for i in range(2)]
    nodes += [{"name": f"w{i}", "host": "127.0.0.1", "port": free_port(),
               "workers": 1} for i in range(n - 3)]
    c = {"name": f"membership-{n}",
         "model": {"type": "mlp", "hidden": [16], "activation": "relu",
                   "init": "he", "seed": 1},
         "data": {"format": "idx", "dir": "/usr/share/datasets/fashion-mnist"},
         "training": {"batch_size": 32, "epochs": 1000, "seed": 1,
                      "threads": 1, "eval_every_steps": 10**9,
                      "log_every_steps": 10**9,
                      "optimizer": {"type": "sgd", "learning_rate": 0.05}},
         "cluster": {"mode": "async", "chief": "chief", "nodes": nodes,
                     "node_timeout_s": 120}}
    path = f"{work}/cluster-{n}.json"
    json.dump(c, open(path, "w"))
    return path, nodes


class Chief:
    """The chief's process, its log lines read with their arrival time."""

    def __init__(self, path):
        self.proc = subprocess.Popen([apps + "troupe-node", "--config", path,
                                      "--node", "chief"],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line.rstrip()))

    def wait_for(self, test, timeout):
        """The arrival time of the first line from now on passing `test`."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                t, line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if test(line):
                return t, line
        sys.exit(f"the chief did not log what was awaited within {timeout} s")


def shell(port, *command):
    start = time.monotonic()
    out = subprocess.run([apps + "troupe-shell", "--connect",
                          f"127.0.0.1:{port}", "--json", "-c", " ".join(command)],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"troupe-shell {' '.join(command)} failed: {out.stdout}{out.stderr}")
    return time.monotonic() - start, json.loads(out.stdout)


def steps(port):
    return shell(port, "status")[1]["run"]["steps"]


started = []  # every process, killed at exit whatever happens


@atexit.register
def kill_the_rest():
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()


def measure(n):
    path, nodes = cluster_file(n)
    port = nodes[0]["port"]
    start = time.monotonic()
    members = {m["name"]: subprocess.Popen(
        [apps + "troupe-node", "--config", path, "--node", m["name"]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for m in nodes[1:]}
    chief = Chief(path)
    started.extend([*members.values(), chief.proc])
    up = set()
    while len(up) < n - 1:
        t, line = chief.wait_for(lambda l: " is up" in l, 60)
        up.add(line.split("node ", 1)[1].split(" ", 1)[0])
    registered = t - start
    # Until the last node was up the chief did little else but take
    # registrations (and start the processes' links).
    r = {"n": n, "registered_s": registered,
         "registration_cpu": cpu_seconds(chief.proc.pid)}
    time.sleep(3)  # the workers start stepping
    for phase in ("training", "paused"):
        if phase == "paused":
            shell(port, "pause")
            time.sleep(2)
        s0, c0, t0 = steps(port), cpu_seconds(chief.proc.pid), time.monotonic()
        time.sleep(window)
        s1, c1, t1 = steps(port), cpu_seconds(chief.proc.pid), time.monotonic()
        r[phase] = ((c1 - c0) / (t1 - t0), (s1 - s0) / (t1 - t0))
    shell(port, "resume")
    r["status_s"] = max(shell(port, "status")[0] for _ in range(3))
    r["nodes_s"] = max(shell(port, "nodes")[0] for _ in range(3))
    victims = random.Random(n).sample([m["name"] for m in nodes[3:]], 2)
    killed = time.monotonic()
    members[victims[0]].send_signal(signal.SIGKILL)
    t, _ = chief.wait_for(lambda l: f"node {victims[0]} " in l and " is down" in l, 60)
    r["kill9_s"] = t - killed
    stopped = time.monotonic()
    members[victims[1]].send_signal(signal.SIGSTOP)
    t, _ = chief.wait_for(lambda l: f"node {victims[1]} " in l and " is down" in l, 60)
    r["sigstop_s"] = t - stopped
    members[victims[1]].send_signal(signal.SIGCONT)
    shell(port, "stop")
    chief.proc.wait(timeout=120)
    for p in members.values():
        if p.poll() is None:
            p.terminate()
    for p in members.values():
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    return r


print(f"{'nodes':>5} {'registered s':>12} {'CPU s':>6} {'chief CPU/s training':>20} "
      f"{'steps/s':>8} {'chief CPU/s paused':>18} {'status s':>8} "
      f"{'nodes s':>7} {'kill -9 s':>9} {'SIGSTOP s':>9}", flush=True)
for n in counts:
    r = measure(n)
    print(f"{n:>5} {r['registered_s']:>12.2f} {r['registration_cpu']:>6.2f} "
          f"{r['training'][0]:>20.3f} "
          f"{r['training'][1]:>8.0f} {r['paused'][0]:>18.3f} {r['status_s']:>8.2f} "
          f"{r['nodes_s']:>7.2f} {r['kill9_s']:>9.2f} {r['sigstop_s']:>9.2f}",
          flush=True)
PY
