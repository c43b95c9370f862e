"""A user's script run again, and a run watched from Python: troupe.train
with fresh=, resume=, epochs= and max_steps=, the hints in the caller's
words (fresh=True, not --fresh), the warning for a parameters file
written anew after the checkpoint it would resume; the progress
callback, the shell's port (listen=) and Prometheus' (metrics_listen=)
of an embedded run; troupe.__version__.

Each script runs in a process of its own, as a user runs it, so that the
test reads what the user reads (the chief's log on standard output).

Run by ctest (python.reruns) with TROUPE_SHELL naming troupe-shell."""

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

import numpy as np

import troupe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import free_ports  # noqa: E402

SAMPLES, BATCH, EPOCHS = 200, 20, 2

# The user's script: a linear model fitted by hand, trained by train() with
# the arguments the test gives on its command line (a JSON object).
SCRIPT = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import troupe

    folder, args = sys.argv[1], json.loads(sys.argv[2])
    os.chdir(folder)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (%(samples)d, 3)).astype(np.float32)
    y = x @ np.float32([1, 2, 3])
    seed = args.pop("init_seed", 0)
    troupe.write_parameters("model.safetensors", {
        "w": np.random.default_rng(seed).normal(size=3).astype(np.float32)})
    with open("run.json", "w") as f:
        json.dump({"model": {"type": "external",
                             "parameters": "model.safetensors"},
                   "data": {"format": "external",
                            "train_samples": %(samples)d},
                   "training": {"batch_size": %(batch)d,
                                "epochs": %(epochs)d,
                                "optimizer": {"type": "sgd",
                                              "learning_rate": 0.1},
                                "checkpoint": {"dir": "ckpt"},
                                "log_every_steps": 5},
                   "cluster": {"mode": "async", "workers": 1,
                               "shards": 1}}, f)

    def step(params, samples):
        err = x[samples] @ params["w"] - y[samples]
        grad = (err @ x[samples] / len(samples)).astype(np.float32)
        return {"w": grad}, float((err * err).sum())

    try:
        summary = troupe.train("run.json", step, **args)
        print("SUMMARY", json.dumps(summary))
    except troupe.Error as e:
        print("ERROR", type(e).__name__, e)
''') % {"samples": SAMPLES, "batch": BATCH, "epochs": EPOCHS}

STEPS = EPOCHS * SAMPLES // BATCH


class Reruns(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="troupe-rerun-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.script = os.path.join(self.dir, "user.py")
        with open(self.script, "w") as f:
            f.write(SCRIPT)

    def run_script(self, **args):
        out = subprocess.run([sys.executable, self.script, self.dir,
                              json.dumps(args)], capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        found = re.search(r"^SUMMARY (.*)$", out.stdout, re.M)
        return (json.loads(found.group(1)) if found else None), out.stdout

    def test_a_script_run_again_is_told_the_python_way_out(self):
        first, _ = self.run_script()
        self.assertEqual(first["steps"], STEPS)
        again, log = self.run_script()
        self.assertIn("resuming from ", log)
        self.assertIn("nothing is left to train; epochs= or max_steps= train "
                      "further, fresh=True starts over", log)
        self.assertNotIn("--fresh", log)
        self.assertEqual(again["steps"], STEPS)

    def test_epochs_trains_further_and_fresh_starts_over(self):
        self.run_script()
        further, log = self.run_script(epochs=EPOCHS + 1)
        self.assertIn("at step %d" % STEPS, log)
        self.assertEqual(further["steps"], STEPS + SAMPLES // BATCH)
        capped, _ = self.run_script(fresh=True, max_steps=3)
        self.assertEqual(capped["steps"], 3)
        # The earlier run's checkpoints were set aside, not deleted.
        aside = [f for f in os.listdir(os.path.join(self.dir, "ckpt"))
                 if f.startswith("set-aside-")]
        self.assertEqual(len(aside), 1)

    def test_a_parameters_file_written_anew_is_warned_about(self):
        self.run_script()
        # The script writes its model with other values, then resumes.
        _, log = self.run_script(init_seed=7, epochs=EPOCHS + 1)
        self.assertRegex(log, r"warning: \S*model\.safetensors was written "
                              r"after \S*ckpt-%d\.safetensors and holds other "
                              r"values than this run started from: the run "
                              r"resumes the checkpoint and leaves the file "
                              r"unread; fresh=True starts over from the file"
                         % STEPS)
        # The same values written again are no news.
        _, log = self.run_script(epochs=EPOCHS + 2)
        self.assertNotIn("warning:", log)

    def test_a_model_of_other_shapes_is_told_to_start_fresh(self):
        self.run_script()
        with open(self.script) as f:
            other = f.read().replace("size=3", "size=(3, 1)").replace(
                'x[samples] @ params["w"]', 'x[samples] @ params["w"][:, 0]'
            ).replace('{"w": grad}', '{"w": grad.reshape(3, 1)}')
        with open(self.script, "w") as f:
            f.write(other)
        _, log = self.run_script()
        self.assertIn("ERROR ConfigError no checkpoint in ", log)
        self.assertIn("to start over, fresh=True", log)
        summary, _ = self.run_script(fresh=True)
        self.assertEqual(summary["steps"], STEPS)

    def test_the_shell_command_printed_names_the_key_given(self):
        key = os.path.join(self.dir, "own.key")
        summary, log = self.run_script(listen="127.0.0.1:0", key=key,
                                       max_steps=2)
        self.assertEqual(summary["steps"], 2)
        self.assertRegex(log, r"shell: troupe-shell --connect "
                              r"127\.0\.0\.1:\d+ --key " + re.escape(key))

    def test_bad_arguments_are_named(self):
        for args, text in (({"fresh": True, "resume": True},
                            "resume=True and fresh=True exclude each other"),
                           ({"epochs": 0}, "epochs must be at least 1"),
                           ({"metrics_listen": "nowhere"},
                            "metrics_listen=: ")):
            out = subprocess.run([sys.executable, self.script, self.dir,
                                  json.dumps(args)], capture_output=True,
                                 text=True, timeout=60)
            self.assertNotEqual(out.returncode, 0, args)
            self.assertIn(text, out.stderr, args)


class Watching(unittest.TestCase):
    def linear_run(self, samples, batch, epochs, lr, workers, **training):
        """A folder with the parameters of a linear model of 3 inputs and
        a run config of it (async, one shard); the folder and the
        config's path."""
        tmp = tempfile.TemporaryDirectory(prefix="troupe-watch-")
        self.addCleanup(tmp.cleanup)
        params = os.path.join(tmp.name, "model.safetensors")
        troupe.write_parameters(params, {"w": np.zeros(3, np.float32)})
        config = os.path.join(tmp.name, "run.json")
        with open(config, "w") as f:
            json.dump({"model": {"type": "external", "parameters": params},
                       "data": {"format": "external",
                                "train_samples": samples},
                       "training": dict({"batch_size": batch,
                                         "epochs": epochs,
                                         "optimizer": {"type": "sgd",
                                                       "learning_rate": lr}},
                                        **training),
                       "cluster": {"mode": "async", "workers": workers,
                                   "shards": 1}}, f)
        return tmp, config

    def test_progress_records_the_shell_and_prometheus_of_an_embedded_run(self):
        samples = 4000
        tmp, config = self.linear_run(samples, 10, 1, 0.1, workers=2,
                                      log_every_steps=40,
                                      eval_every_steps=100)
        x = np.random.default_rng(2).uniform(-1, 1, (samples, 3)).astype(
            np.float32)
        y = x @ np.float32([1, -1, 2])

        def step(params, idx):
            err = x[idx] @ params["w"] - y[idx]
            calls.append(1)
            if len(calls) == 50:  # one passing fault
                raise OSError("a passing fault")
            if len(calls) >= 150:  # the run waits for the checks below
                checked.wait(60)
                checked.set()
            return ({"w": (err @ x[idx] / len(idx)).astype(np.float32)},
                    float((err * err).sum()))

        def evaluate(params):
            err = x @ params["w"] - y
            return 1.0 / (1.0 + float((err * err).mean())), 0.0

        calls, records, seen = [], [], {}
        checked = threading.Event()
        key = os.path.join(tmp.name, "cluster.key")

        def progress(record):
            records.append(record)
            if "shell" in seen or record["event"] != "progress" \
                    or record["step"] < 120:
                return
            # While the run trains: the shell on listen=, Prometheus on
            # metrics_listen=, both asked from this thread.
            shell = subprocess.run(
                [os.environ["TROUPE_SHELL"], "--connect",
                 "127.0.0.1:%d" % shell_port, "--key", key, "-c",
                 "workers"], capture_output=True, text=True, timeout=30)
            seen["shell"] = shell.stdout + shell.stderr
            import urllib.request
            with urllib.request.urlopen(
                    "http://127.0.0.1:%d/metrics" % metrics_port,
                    timeout=10) as r:
                seen["metrics"] = r.read().decode()
            checked.set()

        import socket
        shell_port, metrics_port = free_ports(2)
        summary = troupe.train(
            config, step, evaluate=evaluate, quiet=True, progress=progress,
            listen="127.0.0.1:%d" % shell_port, key=key,
            metrics_listen="127.0.0.1:%d" % metrics_port)
        self.assertEqual(summary["restarts"], 1)
        events = {r["event"] for r in records}
        self.assertEqual(events, {"progress", "worker", "eval"}, records)
        steps = [r["step"] for r in records if r["event"] == "progress"]
        self.assertEqual(steps, sorted(steps))
        self.assertGreaterEqual(len(steps), 5, records)
        evals = [r for r in records if r["event"] == "eval"]
        self.assertGreater(evals[-1]["test_accuracy"], 0.5, evals)
        # The shell's workers table: host and last error, in words.
        table = seen["shell"]
        self.assertRegex(table, r"HOST\s+PROGRAM\s+LAST_ERROR", table)
        self.assertIn(socket.gethostname(), table)
        self.assertIn("the step function raised OSError: a passing fault",
                      table)
        self.assertIn("troupe_samples_total", seen["metrics"])

    def test_an_exception_in_progress_stops_the_run_and_is_raised(self):
        _, config = self.linear_run(1000, 1, 1000, 0.001, workers=1,
                                    log_every_steps=10)

        def progress(record):
            raise LookupError("the user's watcher")

        with self.assertRaises(LookupError):
            troupe.train(config, lambda p, s: ({"w": np.zeros(3, np.float32)},
                                               0.0),
                         quiet=True, progress=progress)

    def test_the_module_has_a_version(self):
        self.assertRegex(troupe.__version__, r"^\d+\.\d+\.\d+")


if __name__ == "__main__":
    unittest.main()
