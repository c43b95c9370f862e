#!/usr/bin/env bash
# What watching a run in the browser costs it, side by side in one run:
# config/local.json (MLP 784-256-128-10, Adam, batch 128, 2 shards and 2
# async workers in one troupe-node process) for EPOCHS epochs, run in
# turn (ROUNDS rounds, so that the machine's slow moments fall on each
# alike) as
#   - plain: no metrics port;
#   - page: --metrics-listen on 127.0.0.1 with the page open in headless
#     Chromium (started before the run, on this machine), which polls
#     /api/status and /api/nodes every second;
# and prints the medians of the chief's samples/s (its summary row) and
# test accuracy, the ratio page/plain, the CPU seconds per second of run
# of the chief's threads that serve the page (troupe-http: the port;
# troupe-view: the view asked of the chief every 500 ms while someone
# looks), and the browser's CPU per second (its processes, from /proc).
# Usage: scripts/bench-page.sh [epochs, default 60: about 30 s a run]
#                              [rounds, default 3]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/benchlib.sh"
troupe_bench_setup
exec /usr/bin/python3 - "${1:-60}" "${2:-3}" <<'PY'
import json, os, shutil, subprocess, sys, tempfile, time
sys.path.insert(0, "scripts")
sys.path.insert(0, "tests/pylib")
sys.path.insert(0, "tests/web")
from benchlib import chief_summary, free_port, medians_of_rounds
from browser import browser, need_browser

epochs, rounds = int(sys.argv[1]), int(sys.argv[2])
need_browser()
node = os.path.join(os.environ["TROUPE_BUILD"], "apps", "troupe-node")
work = tempfile.mkdtemp(prefix="troupe-bench-page-")
with open("config/local.json") as f:
    config = json.load(f)
config["training"]["epochs"] = epochs
path = os.path.join(work, "local.json")
with open(path, "w") as f:
    json.dump(config, f)
tick = os.sysconf("SC_CLK_TCK")


def cpu_of(stat_path):
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def threads_cpu(pid, names):
    total = 0.0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if f.read().strip() in names:
                    total += cpu_of("/proc/%d/task/%s/stat" % (pid, tid))
        except OSError:
            pass
    return total


def browser_cpu():
    """CPU seconds of every chromium process (children and all)."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                if not f.read().startswith("chrom"):
                    continue
            total += cpu_of("/proc/%s/stat" % pid)
        except OSError:
            pass
    return total


def plain():
    out = subprocess.run([node, "--config", path], capture_output=True,
                         text=True, check=True)
    rate, accuracy = chief_summary(out.stdout)
    return rate, accuracy, float("nan"), float("nan")


def page():
    driver = browser()
    try:
        port = free_port()
        log = os.path.join(work, "page.log")
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [node, "--config", path, "--metrics-listen",
                 "127.0.0.1:%d" % port], stdout=out, stderr=subprocess.STDOUT)
        while "page: " not in open(log).read():
            time.sleep(0.05)
        started, browser_start = time.monotonic(), browser_cpu()
        driver.get("http://127.0.0.1:%d/" % port)
        serving = 0.0
        while proc.poll() is None:  # the last reading before it exits
            try:
                serving = threads_cpu(proc.pid, ("troupe-http",
                                                 "troupe-view"))
            except OSError:
                pass
            time.sleep(0.5)
        seconds = time.monotonic() - started
        browser_used = browser_cpu() - browser_start
        if proc.returncode != 0:
            sys.exit("troupe-node failed:\n" + open(log).read()[-2000:])
        polls = driver.execute_script("return lastPoll.polls")
        rate, accuracy = chief_summary(open(log).read())
        print("  page: %d polls in %.0f s" % (polls, seconds), flush=True)
        return rate, accuracy, serving / seconds, browser_used / seconds
    finally:
        driver.quit()


def say(r, name, result):
    print("round %d %-5s %9.0f samples/s, test accuracy %.4f" % (
        r, name, result[0], result[1]), flush=True)


print("config/local.json, %d epochs, %d rounds; %s" % (
    epochs, rounds, subprocess.run(["lscpu"], capture_output=True,
                                   text=True).stdout.split("Model name:")[1]
    .splitlines()[0].strip()), flush=True)
medians = medians_of_rounds({"plain": plain, "page": page}, rounds, say)
p, g = medians["plain"], medians["page"]
print("| run | samples/s (median) | test accuracy | ratio | chief's page "
      "threads, CPU s/s | browser, CPU s/s |")
print("|---|---|---|---|---|---|")
print("| plain | %.0f | %.4f | 1.00 | - | - |" % (p[0], p[1]))
print("| page open, polled every second | %.0f | %.4f | %.3f | %.4f | %.3f |"
      % (g[0], g[1], g[0] / p[0], g[2], g[3]))
shutil.rmtree(work, ignore_errors=True)
PY
