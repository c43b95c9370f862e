"""The page of a run with 200 workers, in headless Chromium: one
troupe-node process trains a small MLP with 200 async workers on 2
shards, the chief with --metrics-listen; the page must list all 200
workers running, and each of its polls must fetch and draw the whole
page (the 200-row workers table with the rest) within 1 s: the page
times both (lastPoll, shown in its footer) and the test reads them over
--polls polls. A screenshot goes to web-screenshots/200-workers.png.

Run by ctest (web.page_many). Exit 77 (skipped) when a tool is missing,
outside CI."""

import argparse
import json
import os
import subprocess
import sys

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
        errors = [e for e in driver.get_log("browser")
                  if e.get("level") == "SEVERE"]
        check(not errors, "no error in the browser's console",
              json.dumps(errors, indent=1))
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
