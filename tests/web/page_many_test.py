"""The page of larger runs, in headless Chromium:

- 200 workers: one troupe-node process trains a small MLP with 200 async
  workers on 2 shards, the chief with --metrics-listen; the page must
  list all 200 workers running, and each of its polls must fetch and
  draw the whole page (the 200-row workers table with the rest) within
  1 s: the page times both (lastPoll, shown in its footer) and the test
  reads them over --polls polls;
- embedding tables: a click model (troupe-clicks' logs) on 2 shards; the
  page's Tables section lists each shard's slice of the table with its
  rows, and it stays hidden for the dense run;
- troupe-train's page: the one-process run with --metrics-listen prints
  the page's address; the page shows the run training in mode local, its
  worker and its node, its charts gain points, /api/log holds its lines,
  and it offers no steering (nothing to steer).

Screenshots go to web-screenshots/200-workers.png and tables.png.

Run by ctest (web.page_many). Exit 77 (skipped) when a tool is missing,
outside CI."""

import argparse
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import (  # noqa: E402 (the path above first)
    check, free_ports, read, say, scratch_run, stop_process, troupe_program,
    wait_until)
from browser import browser, need_browser  # noqa: E402

WORKERS = 200


def config_file(folder):
    config = {
        "name": "page-200-workers",
        "model": {"type": "mlp", "hidden": [16], "seed": 1},
        "data": {"format": "idx", "dir": "/usr/share/datasets/fashion-mnist"},
        "training": {"batch_size": 32, "epochs": 1000, "seed": 1,
                     "threads": 1, "log_every_steps": 2000,
                     "optimizer": {"type": "adam", "learning_rate": 0.001}},
        "cluster": {"shards": 2, "workers": WORKERS, "mode": "async"}}
    path = os.path.join(folder, "page-many.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def click_config_file(folder, apps):
    logs = os.path.join(folder, "click-logs")
    subprocess.run([os.path.join(apps, "troupe-clicks"), "--out", logs,
                    "--train", "50000", "--test", "2000", "--numeric", "2",
                    "--categorical", "4", "--values", "2000", "--seed", "3"],
                   check=True, stdout=subprocess.DEVNULL)
    config = {
        "name": "page-tables",
        "model": {"type": "click", "hidden": [16], "seed": 1,
                  "embedding": {"dim": 8}},
        "data": {"format": "click", "dir": logs, "train": "train.tsv",
                 "test": "test.tsv", "numeric": 2, "categorical": 4,
                 "vocabulary": 1 << 22},
        "training": {"batch_size": 256, "epochs": 1000, "seed": 1,
                     "threads": 1, "log_every_steps": 1000,
                     "eval_every_steps": 100000,
                     "optimizer": {"type": "adam", "learning_rate": 0.001},
                     "sparse_optimizer": {"type": "adagrad",
                                          "learning_rate": 0.05}},
        "cluster": {"shards": 2, "workers": 2, "mode": "async"}}
    path = os.path.join(folder, "page-tables.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def check_tables(driver, node, folder, shots):
    """A click model's table on the page, each shard's slice."""
    js = driver.execute_script
    config = click_config_file(folder, os.path.dirname(node))
    metrics = free_ports(1)[0]
    log = os.path.join(folder, "tables.log")
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [node, "--config", config, "--metrics-listen",
             "127.0.0.1:%d" % metrics],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until("the click run's first steps",
                   lambda: "\nstep " in read(log), 90)
        driver.get("http://127.0.0.1:%d/" % metrics)

        def rows():
            return js("""
              if (document.getElementById('tables-section').hidden)
                return [];
              return [...document.querySelectorAll('#tables tr')].slice(1)
                .map((tr) => [...tr.cells].map((c) => c.textContent));""")
        wait_until("the page to list the table on both shards",
                   lambda: len(rows()) == 2 and all(
                       r[2] not in ("-", "0") for r in rows()), 20)
        check(True, "the Tables section lists each shard's slice with its "
              "rows: %s" % rows())
        driver.save_screenshot(os.path.join(shots, "tables.png"))
        driver.get("about:blank")
    finally:
        stop_process(proc)


def check_troupe_train(driver, node, folder):
    """troupe-train's page."""
    js = driver.execute_script
    train = os.path.join(os.path.dirname(node), "troupe-train")
    config = os.path.join(folder, "page-many.json")  # the 200-worker MLP's
    metrics = free_ports(1)[0]
    log = os.path.join(folder, "train.log")
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [train, "--config", config, "--metrics-listen",
             "127.0.0.1:%d" % metrics],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until("troupe-train to print its page's address", lambda:
                   "page: http://127.0.0.1:%d/" % metrics in read(log), 60)
        driver.get("http://127.0.0.1:%d/" % metrics)
        text = lambda i: js(  # noqa: E731
            "return document.getElementById(arguments[0]).textContent", i)
        wait_until("troupe-train's page to show the run training", lambda:
                   text("run-state") == "training"
                   and text("run-line").startswith("local,"), 30)
        wait_until("its loss chart to gain points",
                   lambda: js("return series.loss.length") >= 3, 30)
        check(text("workers-count") == "1 of 1 running"
              and text("nodes-count") == "1 of 1 up"
              and js("return document.getElementById('steer').hidden"),
              "troupe-train's page shows its worker and node, and no "
              "steering")
        with urllib.request.urlopen("http://127.0.0.1:%d/api/log" % metrics,
                                    timeout=5) as r:
            lines = [l["text"] for l in json.load(r)["lines"]]
        check(any(l.startswith("run: page-200-workers") for l in lines),
              "troupe-train's /api/log holds its lines")
        driver.get("about:blank")
    finally:
        stop_process(proc)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--polls", type=int, default=5)
    args = p.parse_args()
    need_browser()
    node = troupe_program("troupe-node")
    shots = os.path.join(os.environ["TROUPE_BUILD_DIR"], "web-screenshots")
    os.makedirs(shots, exist_ok=True)
    with scratch_run("troupe-page-many-") as run:
        metrics = free_ports(1)[0]
        log = os.path.join(run.folder, "chief.log")
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [node, "--config", config_file(run.folder),
                 "--metrics-listen", "127.0.0.1:%d" % metrics],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        driver = None

        def teardown():
            if driver is not None:
                driver.quit()
            stop_process(proc)
        run.teardown = teardown
        run.on_failure = lambda: say(read(log)[-3000:])
        wait_until("the run's first steps", lambda: "\nstep " in read(log),
                   90)
        driver = browser()
        driver.get("http://127.0.0.1:%d/" % metrics)
        js = driver.execute_script
        wait_until("the page to list %d workers running" % WORKERS,
                   lambda: js("return document.querySelectorAll("
                              "'#workers tr').length") == WORKERS + 1
                   and js("return document.getElementById('workers-count')"
                          ".textContent") == "%d of %d running" % (
                              WORKERS, WORKERS), 30)
        check(True, "the page lists %d workers, all running" % WORKERS)
        costs = []
        for _ in range(args.polls):
            polls = js("return lastPoll.polls")
            wait_until("the page's next poll",
                       lambda: js("return lastPoll.polls") > polls, 10)
            costs.append(js("return [lastPoll.fetch_ms, lastPoll.render_ms]"))
        say("each poll's fetch and drawing, ms: %s" % ", ".join(
            "%.0f + %.0f" % tuple(c) for c in costs))
        worst = max(f + r for f, r in costs)
        check(worst < 1000, "every poll fetched and drew the page with %d "
              "workers within 1 s (at most %.0f ms)" % (WORKERS, worst))
        driver.save_screenshot(os.path.join(shots, "200-workers.png"))
        check(js("return document.getElementById('tables-section').hidden"),
              "the Tables section is hidden for a run without tables")
        # Away from each page before its run stops: a page left open on a
        # stopped run says so in the console, rightly.
        driver.get("about:blank")
        stop_process(proc)
        check_tables(driver, node, run.folder, shots)
        check_troupe_train(driver, node, run.folder)
        errors = [e for e in driver.get_log("browser")
                  if e.get("level") == "SEVERE"]
        check(not errors, "no error in the browser's console on any of "
              "the pages", json.dumps(errors, indent=1))
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
