"""The chief's metrics port under a flood of idle and slow connections,
on a live run (one troupe-node process, --metrics-listen on 127.0.0.1):
500 connections, 450 that send nothing and 50 that send a request one
byte a second, held open (those the port closes at its 10 s request
timeout are opened again) for --flood-s seconds. Meanwhile:

- GET /, GET /metrics, GET /api/status and a steering POST (set lr,
  with its proof of the key) are each answered within 1 s, every second;
  at the flood's end a pause (seen in /api/status) and a resume too;
- the port's thread (troupe-http) uses under 5% of a core through the
  flood, requests and reconnections included;
- the run trains on: its samples/s during the flood (the mean of
  /api/status's rate, sampled each second) is at least --least-ratio of
  the rate in as long a window before it (a loose bound: the suite runs
  beside other tests on two cores; the figure is printed);
- when the flood ends, the chief's process is back to the descriptors it
  had before it.

Run by ctest (web.port_load). Bounded: the flood's connections, its
length and every wait are fixed."""

import argparse
import hashlib
import hmac
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import (  # noqa: E402 (the path above first)
    check, free_ports, read, say, scratch_run, stop_process, troupe_program,
    wait_until)

IDLE, SLOW = 450, 50
SLOW_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


def config_file(folder):
    config = {
        "name": "port-load",
        "model": {"type": "mlp", "hidden": [64], "seed": 1},
        "data": {"format": "idx", "dir": "/usr/share/datasets/fashion-mnist"},
        "training": {"batch_size": 128, "epochs": 1000, "seed": 1,
                     "threads": 1, "log_every_steps": 500,
                     "optimizer": {"type": "adam", "learning_rate": 0.001}},
        "cluster": {"shards": 2, "workers": 2, "mode": "async"}}
    path = os.path.join(folder, "port-load.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def timed(request):
    """(status, body, seconds) of one request on a connection of its own."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    except OSError as e:
        status, body = 0, str(e).encode()
    return status, body, time.monotonic() - start


class Flood:
    """IDLE connections that say nothing and SLOW that trickle a request,
    opened again when the port closes them."""

    def __init__(self, port):
        self.port = port
        self.idle, self.slow = [], []  # sockets; slow: (socket, bytes sent)
        self.reopened = 0

    def open_one(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.setblocking(False)
        return s

    def start(self):
        self.idle = [self.open_one() for _ in range(IDLE)]
        self.slow = [[self.open_one(), 0] for _ in range(SLOW)]

    @staticmethod
    def closed(s):
        try:
            return s.recv(4096) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def tick(self):
        """One second's work: a byte more from each slow one; those closed
        opened again."""
        for i, s in enumerate(self.idle):
            if self.closed(s):
                s.close()
                self.idle[i] = self.open_one()
                self.reopened += 1
        for entry in self.slow:
            s, sent = entry
            if self.closed(s) or sent >= len(SLOW_REQUEST):
                s.close()
                entry[0], entry[1] = self.open_one(), 0
                self.reopened += 1
                continue
            try:
                s.send(SLOW_REQUEST[sent:sent + 1])
                entry[1] += 1
            except OSError:
                pass

    def stop(self):
        for s in self.idle + [e[0] for e in self.slow]:
            s.close()


def thread_cpu_seconds(pid, name):
    """User and system CPU seconds of process pid's thread `name`."""
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            if f.read().strip() != name:
                continue
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    raise AssertionError("no thread %s in process %d" % (name, pid))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--flood-s", type=int, default=20)
    p.add_argument("--least-ratio", type=float, default=0.5)
    args = p.parse_args()
    node = troupe_program("troupe-node")
    with scratch_run("troupe-port-load-") as run:
        metrics = free_ports(1)[0]
        log = os.path.join(run.folder, "chief.log")
        env = dict(os.environ, XDG_CONFIG_HOME=run.folder)  # its own key
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [node, "--config", config_file(run.folder),
                 "--metrics-listen", "127.0.0.1:%d" % metrics],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env)
        run.teardown = lambda: stop_process(proc)
        run.on_failure = lambda: say(read(log)[-3000:])
        base = "http://127.0.0.1:%d" % metrics
        wait_until("the run's first steps", lambda: "\nstep " in read(log),
                   60)
        with open(os.path.join(run.folder, "troupe", "cluster.key")) as f:
            key = bytes.fromhex(f.read().strip())

        def rate():
            status, body, _ = timed(base + "/api/status")
            return json.loads(body)["run"]["examples_per_sec"] \
                if status == 200 else None

        def window(seconds, during=None):
            rates = []
            for _ in range(seconds):
                if during:
                    during()
                r = rate()
                if r:
                    rates.append(r)
                time.sleep(1)
            return rates

        def steer(command):
            _, body, _ = timed(base + "/api/challenge")
            body = json.dumps({"command": command,
                               "challenge": json.loads(body)["challenge"]})
            proof = hmac.new(key, b"troupe page steer\n" + body.encode(),
                             hashlib.sha256).hexdigest()
            return timed(urllib.request.Request(
                base + "/api/steer", data=body.encode(), method="POST",
                headers={"Content-Type": "application/json",
                         "X-Troupe-Proof": proof}))

        fds_before = len(os.listdir("/proc/%d/fd" % proc.pid))
        before = window(args.flood_s)
        flood = Flood(metrics)
        flood.start()
        slowest = {}

        most_fds = [0]

        def probe():
            flood.tick()
            most_fds[0] = max(most_fds[0],
                              len(os.listdir("/proc/%d/fd" % proc.pid)))
            for name, request in (("/", base + "/"),
                                  ("/metrics", base + "/metrics"),
                                  ("/api/status", base + "/api/status")):
                status, _, took = timed(request)
                if status != 200:
                    check(False, "%s answered during the flood" % name,
                          str(status))
                slowest[name] = max(slowest.get(name, 0), took)
            steered(slowest, "set lr 0.001")

        def steered(slowest, command):
            status, body, took = steer(command)
            if status != 200:
                check(False, "%s from the page during the flood" % command,
                      body.decode(errors="replace"))
            slowest["steer " + command] = max(
                slowest.get("steer " + command, 0), took)

        http_cpu = thread_cpu_seconds(proc.pid, "troupe-http")
        flood_start = time.monotonic()
        during = window(args.flood_s, probe)
        http_cpu = thread_cpu_seconds(proc.pid, "troupe-http") - http_cpu
        flood_s = time.monotonic() - flood_start
        # A pause and a resume, still in the flood (not in the rate's
        # window: a pause would take from it).
        steered(slowest, "pause")
        wait_until("/api/status to say paused during the flood",
                   lambda: json.loads(timed(base + "/api/status")[1])
                   ["run"]["paused"], 5)
        steered(slowest, "resume")
        flood.stop()
        say("the flood: %d connections (%d idle, %d sending a byte a "
            "second), %d opened again after the port closed them; the "
            "chief held %d descriptors before, up to %d in it" % (
                IDLE + SLOW, IDLE, SLOW, flood.reopened, fds_before,
                most_fds[0]))
        check(most_fds[0] >= fds_before + IDLE,
              "the flood's connections were open at the chief (%d "
              "descriptors)" % most_fds[0])
        check(http_cpu < 0.05 * flood_s,
              "the port's thread used %.2f s of CPU in the flood's %.0f s "
              "(under 5%% of a core)" % (http_cpu, flood_s))
        for name, took in sorted(slowest.items()):
            check(took < 1.0, "%s answered within 1 s during the flood "
                  "(slowest %.3f s)" % (name, took))
        ratio = statistics.mean(during) / statistics.mean(before)
        say("samples/s: %.0f before, %.0f during the flood (%.2fx)" % (
            statistics.mean(before), statistics.mean(during), ratio))
        check(ratio >= args.least_ratio,
              "the run trained on at %.2fx its rate before the flood (at "
              "least %.2fx)" % (ratio, args.least_ratio))
        wait_until("the chief's descriptors back to those before the flood",
                   lambda: len(os.listdir("/proc/%d/fd" % proc.pid))
                   <= fds_before + 2, 15)
        check(True, "the chief's descriptors are back (%d)" % len(
            os.listdir("/proc/%d/fd" % proc.pid)))
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
