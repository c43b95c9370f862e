"""The operator's scripts as an operator meets them: scripts/plot.sh tells
two runs of one config apart and names a regression's score, and
scripts/setup.sh's quiet runner says nothing until a step fails, then
shows the step's last lines, and the soak refuses options it cannot
follow, naming what was wrong, before it starts anything."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import Failure, check, missing_tools  # noqa: E402

BUILD = os.environ["TROUPE_BUILD_DIR"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = """{
  "name": "same-config",
  "model": { "type": "mlp", "hidden": [8] },
  "data": { "format": "synthetic", "width": 6, "classes": 3,
            "train_samples": 96, "test_samples": 32 },
  "training": { "batch_size": 32, "epochs": 2 }
}"""

REGRESSION = """{
  "name": "regression",
  "model": { "layers": [ { "type": "dense", "units": 1 } ],
             "loss": "mean_squared_error" },
  "data": { "format": "csv", "train": "t.csv", "test": "t.csv",
            "label_column": "y" },
  "training": { "batch_size": 8, "epochs": 1 }
}"""


def train(config, metrics_dir):
    run = subprocess.run(
        [BUILD + "/apps/troupe-train", "--config", config, "--metrics-dir",
         metrics_dir], capture_output=True, text=True, timeout=120)
    check(run.returncode == 0, "troupe-train " + os.path.basename(config),
          run.stdout + run.stderr)


def plot_script(tmp, metrics_dir):
    """What plot.sh hands gnuplot, caught by a gnuplot of our own first on
    PATH."""
    fake_bin = os.path.join(tmp, "bin")
    os.makedirs(fake_bin, exist_ok=True)
    caught = os.path.join(tmp, "gnuplot.in")
    fake = os.path.join(fake_bin, "gnuplot")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\ncat > '%s'\n" % caught)
    os.chmod(fake, 0o755)
    env = dict(os.environ, PATH=fake_bin + ":" + os.environ["PATH"])
    run = subprocess.run([ROOT + "/scripts/plot.sh", metrics_dir],
                         capture_output=True, text=True, env=env, timeout=60)
    check(run.returncode == 0, "plot.sh on " + metrics_dir, run.stderr)
    with open(caught) as f:
        return f.read()


def run_ids(metrics_dir):
    ids = []
    for name in sorted(os.listdir(metrics_dir)):
        if name.endswith(".csv") and not name.endswith(".progress.csv"):
            with open(os.path.join(metrics_dir, name)) as f:
                first = f.readline()
            ids.append(first.split(" run_id=")[1].split()[0])
    return ids


def test_plot(tmp):
    config = os.path.join(tmp, "same.json")
    with open(config, "w") as f:
        f.write(CONFIG)
    runs = os.path.join(tmp, "runs")
    train(config, runs)
    train(config, runs)
    script = plot_script(tmp, runs)
    ids = run_ids(runs)
    check(len(ids) == 2 and ids[0] != ids[1], "two runs of one config",
          str(ids))
    # Each run's legend names it by its id (its first 8 digits) and time.
    for run_id in ids:
        check('title "same-config %s ' % run_id[:8] in script,
              "the legend names run " + run_id[:8], script)
    check('set ylabel "test accuracy"' in script,
          "a classifier's axis says test accuracy", script)
    # The real gnuplot draws it.
    png = os.path.join(tmp, "two.png")
    run = subprocess.run([ROOT + "/scripts/plot.sh", runs, png],
                         capture_output=True, text=True, timeout=60)
    check(run.returncode == 0 and os.path.getsize(png) > 1000,
          "gnuplot drew " + png, run.stderr)

    data = os.path.join(tmp, "t.csv")
    with open(data, "w") as f:
        f.write("x,y\n" + "".join("%d,%d\n" % (i % 4, 2 * (i % 4))
                                  for i in range(32)))
    config = os.path.join(tmp, "regression.json")
    with open(config, "w") as f:
        f.write(REGRESSION)
    regression_runs = os.path.join(tmp, "regression-runs")
    train(config, regression_runs)
    script = plot_script(tmp, regression_runs)
    check('set ylabel "test r2"' in script, "a regression's axis says test r2",
          script)


def quietly(tmp, command):
    """scripts/setup.sh's troupe_quietly running `command`: its exit code
    and what the operator saw."""
    log = os.path.join(tmp, "step.log")
    run = subprocess.run(
        ["bash", "-c", 'source "$1"; troupe_quietly "$2" sh -c "$3"', "quietly",
         ROOT + "/scripts/setup.sh", log, command],
        capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr, log


def test_quiet_steps(tmp):
    noisy = "; ".join("echo '[ %d%%] Built target part%d'" % (i * 4, i)
                      for i in range(22))
    code, seen, log = quietly(tmp, noisy)
    check(code == 0 and seen == "", "a step that works says nothing", seen)
    with open(log) as f:
        check(f.read().count("Built target") == 22, "its output is in the log")
    code, seen, _ = quietly(tmp, noisy + "; echo 'error: it broke' >&2; exit 3")
    check(code != 0, "a step that fails fails the script")
    check(seen.startswith("troupe: failed: sh -c ") and "error: it broke" in seen,
          "a step that fails shows its last lines", seen)


def test_soak_options():
    soak = os.path.join(ROOT, "tests", "soak", "soak_test.py")
    for args, said in [
            (["--wrap", "ps3"], "--wrap ps3: give NODE=COMMAND, NODE one of "
             "chief,ps0,ps1,ps2,ps3,w0,w1,w2"),
            (["--wrap", "ps9=heaptrack"], "--wrap ps9=heaptrack: give "
             "NODE=COMMAND"),
            (["--wrap", "w0="], "--wrap w0=: give NODE=COMMAND"),
            (["--kinds", "link,flood"], "--kinds: flood; use some of "
             "worker,shard,chief,link")]:
        run = subprocess.run([sys.executable, soak] + args,
                             capture_output=True, text=True, timeout=60)
        check(run.returncode == 2 and said in run.stderr,
              "soak_test.py %s is refused" % " ".join(args), run.stderr)
        check("seed" not in run.stdout, "and starts nothing", run.stdout)


def main():
    missing_tools({"gnuplot": shutil.which("gnuplot")},
                  "apt-get install gnuplot-nox")
    tmp = tempfile.mkdtemp(prefix="troupe-scripts-")
    try:
        test_plot(tmp)
        test_quiet_steps(tmp)
        test_soak_options()
    except Failure as e:
        sys.exit("FAILED: %s" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
