"""What the tests that run every node of a cluster file as a Python process
share (supervision_test.py, table_failures_test.py): a folder of the run's
own, a free port, and the nodes' processes with their logs in files,
started, waited for, read and killed."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import free_port  # noqa: E402,F401  (the tests import it here)


class python_nodes:
    """The nodes of the cluster file `config` in the run's folder `dir`,
    each a process of `script` (SCRIPT CONFIG NODE KEY STEP_SECONDS); the
    chief listens at `chief_port`, which the subclass sets."""

    def __init__(self, test, prefix, script, step_seconds):
        self.tmp = tempfile.TemporaryDirectory(prefix=prefix)
        test.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        self.config = os.path.join(self.dir, "run.json")
        self.key = os.path.join(self.dir, "cluster.key")
        self.script = script
        self.step_seconds = step_seconds
        self.procs = {}
        test.addCleanup(self.kill_all)

    def start(self, node, label=None):
        label = label or node
        log = open(os.path.join(self.dir, label + ".log"), "w")
        self.procs[label] = subprocess.Popen(
            [sys.executable, self.script, self.config, node, self.key,
             self.step_seconds], stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def log(self, label):
        with open(os.path.join(self.dir, label + ".log")) as f:
            return f.read()

    def logs(self):
        return "\n".join("--- %s\n%s" % (k, self.log(k)) for k in self.procs)

    def wait_for(self, label, test, seconds):
        """Waits until `test` (a string or a function of the log) holds
        for `label`'s log; fails with every log when it does not."""
        check = test if callable(test) else (lambda text: test in text)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check(self.log(label)):
                return
            if self.procs[label].poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("%s: never saw %r\n%s" % (label, test,
                                                        self.logs()))

    @staticmethod
    def step_reached(n):
        def reached(text):
            steps = re.findall(r"^step (\d+), epoch [\d.]+, loss", text,
                               re.M)
            return steps and int(steps[-1]) >= n
        return reached

    def shell(self, command):
        """troupe-shell's answer to `command` (JSON), asked of the chief
        at self.chief_port."""
        out = subprocess.run(
            [os.environ["TROUPE_SHELL"], "--connect",
             "127.0.0.1:%d" % self.chief_port, "--key", self.key, "-c",
             command, "--json"], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise AssertionError("shell %s: %s%s" % (command, out.stdout,
                                                      out.stderr))
        return json.loads(out.stdout)

    def wait(self, label, seconds=120):
        try:
            return self.procs[label].wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s did not end\n%s" % (label, self.logs()))

    def kill_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()


def epoch_samples(log):
    """The chief's "samples trained per epoch" counts."""
    found = re.search(r"samples trained per epoch:((?: \d+)+)", log)
    return [int(n) for n in found.group(1).split()] if found else None
