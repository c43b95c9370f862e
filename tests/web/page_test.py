"""The chief's page in a real browser: headless Chromium driven by
Selenium (Debian's chromium, chromium-driver and python3-selenium) against
a live cluster of troupe-node processes on 127.0.0.1 whose run and one
node are named with markup (`<img src=x onerror=...>`):

- the page loads, names the run as text (no element made of the name, no
  alert), says the run is training;
- its charts' points grow while the run trains;
- a worker node killed with kill -9 shows its worker down, and running
  again once the node is started again; every node shows when its
  process started (that node's the latest) and is heard from now;
- its SHA-256 and HMAC give RFC 4231's and hashlib's digests;
- steering from the page: pause is refused without the key (401) and with
  another key (403), and with the cluster key pauses the run, which the
  page and /api/status then show; resume and set lr likewise; a GET of
  /api/steer is refused (405);
- the browser's console holds no error (the refused steering requests'
  own network lines aside);
- every answer of the page and of /api/ says what it is and is not cached;
- the run stopped, the page says it is done before the chief's port
  closes, and that the chief's process has exited after;
- screenshots at five moments (training, a worker lost, back, paused from
  the page, done) are kept under the build folder (web-screenshots/).

Run by ctest (web.page) with TROUPE_BUILD_DIR. Exit 77 (skipped) when a
tool is missing, outside CI (scripts/setup.sh installs them)."""

import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import (  # noqa: E402 (the path above first)
    Failure, check, free_ports, read, say, scratch_run, stop_process,
    troupe_program, wait_until)
from browser import browser, need_browser  # noqa: E402

MARKUP = '<img src=x onerror="document.title=\'pwned\'">'
RUN_NAME = "page " + MARKUP
# A node's name has no spaces (the cluster file refuses them); markup
# does without.
ODD_NODE = "w1<img/src=x/onerror=document.title='pwned'>"
NODES = ["chief", "ps0", "w0", ODD_NODE]


def cluster_file(folder, ports):
    nodes = [{"name": "chief", "host": "127.0.0.1", "port": ports[0]},
             {"name": "ps0", "host": "127.0.0.1", "port": ports[1],
              "shards": 2},
             {"name": "w0", "host": "127.0.0.1", "port": ports[2],
              "workers": 2},
             {"name": ODD_NODE, "host": "127.0.0.1", "port": ports[3],
              "workers": 1}]
    config = {
        "name": RUN_NAME,
        "model": {"type": "mlp", "hidden": [64], "seed": 1},
        "data": {"format": "idx",
                 "dir": "/usr/share/datasets/fashion-mnist"},
        "training": {
            "batch_size": 128, "epochs": 1000, "seed": 1, "threads": 1,
            "log_every_steps": 200, "eval_every_steps": 400,
            "checkpoint": {"dir": os.path.join(folder, "checkpoints")},
            "optimizer": {"type": "adam", "learning_rate": 0.001}},
        "cluster": {"mode": "async", "chief": "chief", "nodes": nodes,
                    "metrics_dir": os.path.join(folder, "metrics"),
                    "heartbeat_interval_ms": 200,
                    "connection_timeout_ms": 1500,
                    "on_node_loss": "wait"}}
    path = os.path.join(folder, "page.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def headers_of(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return {k.lower(): v for k, v in r.getheaders()}


def status_of(url):
    """The HTTP status of a GET of `url`."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def run_of(base):
    with urllib.request.urlopen(base + "/api/status", timeout=5) as r:
        return json.load(r)["run"]


def write_older_run(folder):
    """An earlier run's CSV files in the metrics folder, as troupe writes
    them, for the page to chart beside the live one."""
    os.makedirs(folder, exist_ok=True)
    label = ("# run=older run_id=0123456789abcdef mode=async workers=3 "
             "data_partition=shared\n")
    with open(os.path.join(folder, "older-0123456789abcdef.csv"), "w") as f:
        f.write(label + "seconds,step,epoch,test_accuracy,test_loss\n")
        for i in range(1, 6):
            f.write("%.3f,%d,%.4f,%.6f,%.6g\n" % (
                2.0 * i, 400 * i, 0.85 * i, 0.80 + 0.01 * i, 0.5 - 0.02 * i))
    with open(os.path.join(folder, "older-0123456789abcdef.progress.csv"),
              "w") as f:
        f.write(label + "seconds,step,epoch,loss,examples_per_sec\n")
        for i in range(1, 11):
            f.write("%.3f,%d,%.4f,%.6g,%.1f\n" % (
                1.0 * i, 200 * i, 0.43 * i, 0.6 - 0.02 * i, 50000.0))


def check_history(js, base):
    """The metrics folder's runs: listed, charted side by side, their
    CSV files downloadable, and no path past the folder."""
    with urllib.request.urlopen(base + "/api/runs", timeout=5) as r:
        runs = json.load(r)
    check(len(runs) == 2 and runs[0]["file"] == "older-0123456789abcdef"
          and runs[1]["label"].startswith("run=" + RUN_NAME),
          "/api/runs lists the older run and this one, oldest first",
          json.dumps(runs))
    wait_until("the page to chart both runs", lambda: js(
        "return history.runs.length === 2 && history.runs.every("
        "(h) => h.progress.length > 0) && !document.getElementById("
        "'history').hidden"), 20)
    check(True, "the page charts both runs of the metrics folder")
    links = js("return [...document.querySelectorAll('#runs a')]"
               ".map((a) => a.getAttribute('href'))")
    check(len(links) == 4, "each run offers its two CSV files", str(links))
    live = runs[1]["progress"]
    with urllib.request.urlopen(base + live, timeout=5) as r:
        headers = {k.lower(): v for k, v in r.getheaders()}
        body = r.read().decode()
    check(headers["content-type"] == "text/csv; charset=utf-8"
          and headers["content-disposition"].startswith(
              "attachment; filename=\"")
          and all(c not in headers["content-disposition"][22:-1]
                  for c in "<>\"' ")
          and body.startswith("# run=" + RUN_NAME)
          and "seconds,step,epoch,loss,examples_per_sec" in body,
          "a run's CSV comes as a download, its file name made safe",
          str(headers))
    for bad in ("/api/runs/..%2F..%2Fetc%2Fpasswd",
                "/api/runs/../page.json", "/api/runs/older.csv",
                "/api/runs/older-0123456789abcdef.jsonl"):
        check(status_of(base + bad) == 404,
              "%s is refused (404): only the folder's runs' CSV files" % bad)


def check_digests(js):
    """The page's SHA-256 and HMAC-SHA256 against RFC 4231 and hashlib."""
    got = js("const t = (s) => new TextEncoder().encode(s);"
             "return toHex(hmacSha256(t('Jefe'), "
             "t('what do ya want for nothing?')))")
    check(got == "5bdcc146bf60754e6a042426089575c7"
                 "5a003f089d2739839dec58b964ec3843",
          "the page's HMAC-SHA256 gives RFC 4231's test case 2", got)
    for n in (0, 55, 56, 64, 1000):
        data = bytes((7 * i + 3) % 256 for i in range(n))
        key = bytes(range(100))  # longer than a block: hashed first
        page = js("const d = new Uint8Array(arguments[0]);"
                  "const k = new Uint8Array(arguments[1]);"
                  "return [toHex(sha256(d)), toHex(hmacSha256(k, d))]",
                  list(data), list(key))
        check(page == [hashlib.sha256(data).hexdigest(),
                       hmac.new(key, data, hashlib.sha256).hexdigest()],
              "the page's SHA-256 and HMAC of %d bytes are hashlib's" % n,
              str(page))


def check_steering(driver, js, text, base, chief_log, shots):
    """Pause, resume and set lr from the page: refused without the key
    and with another, carried out with the cluster key."""
    from selenium.webdriver.common.by import By
    path = re.search(r"cluster key [0-9a-f]+ in (\S+)", chief_log).group(1)
    with open(path) as f:
        key = f.read().strip()
    check(status_of(base + "/api/steer") == 405,
          "a GET of /api/steer is refused (405): steering never goes over "
          "GET")
    js("document.getElementById('steer').open = true")

    def answer():
        return text("steer-answer")

    def send(command_button):
        js("document.getElementById('steer-answer').textContent = ''")
        driver.find_element(By.CSS_SELECTOR,
                            "button[data-command='%s']" % command_button
                            ).click()
        wait_until("the page's answer to " + command_button,
                   lambda: answer() and not answer().endswith("sending"), 15)
        return answer()

    def give_key(hex_text):
        field = driver.find_element(By.ID, "key")
        field.send_keys(hex_text)
        driver.find_element(By.CSS_SELECTOR, "#key-form button").click()

    said = send("pause")
    check("refused (401)" in said and "cluster key" in said
          and not run_of(base)["paused"],
          "pause without the key is refused, and the run goes on", said)
    give_key("ab" * 32)
    said = send("pause")
    check("refused (403)" in said and "another key" in said
          and not run_of(base)["paused"],
          "pause with another key is refused, and the run goes on", said)
    give_key(key)
    check(text("key-state") == "key given", "the page holds the key")
    said = send("pause")
    check(said.startswith("pause: ") and "refused" not in said,
          "pause with the cluster key is carried out", said)
    # /api/status is the view polled every 500 ms.
    wait_until("/api/status to say the run is paused",
               lambda: run_of(base)["paused"], 5)
    wait_until("the page to show the run paused",
               lambda: text("run-state") == "paused", 10)
    wait_until("the page's events to say the run was paused",
               lambda: "paused (by the shell or the page)" in text("events"),
               10)
    check(True, "the page's events say the run was paused")
    steps = run_of(base)["steps"]
    time.sleep(1.5)
    check(run_of(base)["steps"] - steps <= 8,
          "the paused run takes no new batches (at most those in flight)")
    driver.save_screenshot(os.path.join(shots, "4-paused.png"))
    said = send("resume")
    check(said.startswith("resume: "), "resume from the page is carried out",
          said)
    wait_until("/api/status to say the run is not paused",
               lambda: not run_of(base)["paused"], 5)
    wait_until("the page to show the run training",
               lambda: text("run-state") == "training", 10)
    said = send("checkpoint")
    check(said.startswith("checkpoint: ") and "refused" not in said,
          "checkpoint now from the page is carried out", said)
    wait_until("/api/status to name the checkpoint's step and age",
               lambda: (run_of(base).get("checkpoint") or {}).get("step", 0)
               > 0, 10)
    ckpt = run_of(base)["checkpoint"]
    check(0 <= ckpt["age_seconds"] < 30 and ckpt["took_seconds"] >= 0,
          "the checkpoint's age and pause are stated", json.dumps(ckpt))
    wait_until("the page's figures to show the checkpoint's step",
               lambda: "step %s" % format(ckpt["step"], ",") in text(
                   "figures"), 10)
    wait_until("the page's events to show the checkpoint",
               lambda: ": checkpoint " in text("events"), 10)
    check(True, "the page shows the checkpoint's step, age and event")
    js("document.getElementById('lr').value = '0.0005'")
    js("document.getElementById('steer-answer').textContent = ''")
    driver.find_element(By.CSS_SELECTOR, "#lr-form button").click()
    wait_until("the page's answer to set lr",
               lambda: answer() and not answer().endswith("sending"), 15)
    check(answer().startswith("set lr 0.0005: "),
          "set lr from the page is carried out", answer())
    wait_until("/api/status to show the learning rate set",
               lambda: abs(run_of(base)["learning_rate"] - 0.0005) < 1e-9, 5)


def main():
    need_browser()
    node = troupe_program("troupe-node")
    shots = os.path.join(os.environ["TROUPE_BUILD_DIR"], "web-screenshots")
    os.makedirs(shots, exist_ok=True)
    with scratch_run("troupe-page-") as run:
        *ports, metrics = free_ports(5)
        path = cluster_file(run.folder, ports)
        write_older_run(os.path.join(run.folder, "metrics"))
        logs = {n: os.path.join(run.folder, "node%d.log" % i)
                for i, n in enumerate(NODES)}
        procs = {}
        driver = None

        def start(name):
            args = [node, "--config", path, "--node", name]
            if name == "chief":
                args += ["--metrics-listen", "127.0.0.1:%d" % metrics]
            with open(logs[name], "a") as out:
                procs[name] = subprocess.Popen(
                    args, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL)

        def teardown():
            if driver is not None:
                driver.quit()
            for p in procs.values():
                stop_process(p)
        run.teardown = teardown
        run.on_failure = lambda: say("\n".join(
            "--- %s\n%s" % (n, read(logs[n])[-3000:]) for n in NODES))
        for name in NODES:
            start(name)
        base = "http://127.0.0.1:%d" % metrics
        wait_until("the chief's first steps", lambda: "\nstep " in
                   read(logs["chief"]), 60)

        # What the page and its views say they are.
        page = headers_of(base + "/")
        check(page["content-type"] == "text/html; charset=utf-8"
              and page["cache-control"] == "no-store"
              and "script-src 'self'" in page["content-security-policy"],
              "the page is HTML, not cached, and runs only its own script",
              str(page))
        api = headers_of(base + "/api/status")
        check(api["content-type"] == "application/json; charset=utf-8"
              and api["cache-control"] == "no-store"
              and api["x-content-type-options"] == "nosniff",
              "/api/status is JSON, not cached, not sniffed", str(api))

        driver = browser()
        driver.get(base + "/")
        js = driver.execute_script

        def text(id_):
            return js("return document.getElementById(arguments[0])"
                      ".textContent", id_)

        wait_until("the page to show the run training",
                   lambda: text("run-state") == "training", 20)
        check(text("run-name") == RUN_NAME,
              "the run's name shows as text, markup and all", text("run-name"))
        check(js("return document.querySelectorAll('img').length") == 0
              and driver.title != "pwned",
              "no element was made of a name (the run's, a node's)")
        points = js("return series.loss.length")
        wait_until("the loss chart to gain points",
                   lambda: js("return series.loss.length") >= points + 3, 20)
        check(js("return series.rate.length") >= 2,
              "the samples/s chart has points too")
        def shard_rates():
            return js("""
              const t = document.getElementById('shards');
              const head = [...t.rows[0].cells].map((c) => c.textContent);
              return [...t.rows].slice(1).map((r) => [
                r.cells[head.indexOf('pulls')].textContent,
                r.cells[head.indexOf('pushes')].textContent]);""")
        wait_until("the shards' pull and push rates", lambda: shard_rates()
                   and all(p.endswith("/s") and not p.startswith("0 ")
                           for row in shard_rates() for p in row), 20)
        check(True, "each shard shows its pull and push rates: %s" %
              shard_rates())
        driver.save_screenshot(os.path.join(shots, "1-training.png"))

        # A worker node killed with kill -9: its worker shows down, then
        # running again once the node is back.
        def worker_row(state):
            return js("""
              for (const tr of document.querySelectorAll('#workers tr'))
                if (tr.cells[0].textContent === 'worker:2')
                  return tr.cells[2].textContent === arguments[0];
              return false;""", state)
        wait_until("worker:2 listed running", lambda: worker_row("running"),
                   20)
        procs[ODD_NODE].kill()
        procs[ODD_NODE].wait()
        wait_until("the page to show worker:2 not running",
                   lambda: not worker_row("running") and js(
                       "return document.querySelectorAll("
                       "'#workers tr.down').length") == 1, 15)
        check(True, "a worker node killed with kill -9 shows as down")
        driver.save_screenshot(os.path.join(shots, "2-worker-lost.png"))
        start(ODD_NODE)
        wait_until("worker:2 running again", lambda: worker_row("running"),
                   30)
        check(True, "the node started again shows its worker running")
        check(any(ODD_NODE == r for r in js(
            "return [...document.querySelectorAll('#nodes tr')]"
            ".map(r => r.cells[0].textContent)")),
              "the node's name shows as text in the nodes table")

        # Each node's process: up since when (the one started again the
        # latest), heard from now.
        def node_times():
            return js("""
              const t = document.getElementById('nodes');
              const head = [...t.rows[0].cells].map((c) => c.textContent);
              return [...t.rows].slice(1).map((r) => [r.cells[0].textContent,
                r.cells[head.indexOf('up since')].textContent,
                r.cells[head.indexOf('heard')].textContent]);""")

        def up_seconds(text):  # "12:34:56 (1m05s)" -> 65
            m = re.search(r"\((?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?\)$", text)
            if not m:
                return None
            h, mi, se = (int(g) if g else 0 for g in m.groups())
            return 3600 * h + 60 * mi + se

        wait_until("every node heard from now", lambda: all(
            heard == "now" for _, _, heard in node_times()), 15)
        times = {name: up_seconds(up) for name, up, _ in node_times()}
        check(all(v is not None for v in times.values())
              and times[ODD_NODE] == min(times.values())
              and times[ODD_NODE] < max(times.values()),
              "each node shows when its process started, the one started "
              "again the latest: %s" % node_times())
        driver.save_screenshot(os.path.join(shots, "3-back.png"))

        # The chief's log: /api/log, and the page's events and log tail.
        with urllib.request.urlopen(base + "/api/log?after=0",
                                    timeout=5) as r:
            logged = json.load(r)
        seqs = [l["seq"] for l in logged["lines"]]
        check(seqs == sorted(seqs) and logged["last"] == seqs[-1]
              and any(l["text"].startswith("step ")
                      for l in logged["lines"]),
              "/api/log lists the chief's lines in order (%d)" % len(seqs))
        events = js("return [...document.querySelectorAll('#events li')]"
                    ".map((li) => li.lastChild.textContent)")
        progress = re.compile(r"^(step \d+, |worker \d+: step \d+)")
        check(any("lost" in e for e in events)
              and not any(progress.match(e) for e in events),
              "the page's events name the lost node, without progress "
              "lines", "\n".join(events))
        check("step " in text("log-tail"),
              "the page's log tail holds the progress lines too")
        check_history(js, base)
        check_digests(js)
        check_steering(driver, js, text, base, read(logs["chief"]), shots)

        # A refused request's status is a network line in the console, not
        # a script's error: those of the refusals above are expected.
        errors = [e for e in driver.get_log("browser")
                  if e.get("level") == "SEVERE"
                  and not (e.get("source") == "network"
                           and "/api/steer" in e.get("message", ""))]
        check(not errors, "no error in the browser's console",
              json.dumps(errors, indent=1))

        # The run stopped (the chief's first SIGTERM, as the shell's stop):
        # the page, which watches, is shown how it ended before the port
        # closes, and keeps saying so once the chief's process is gone.
        procs["chief"].send_signal(signal.SIGTERM)
        wait_until("the page to say the run is done",
                   lambda: text("run-state") == "done", 30)
        check(procs["chief"].wait(30) == 0, "the chief exits 0")
        wait_until("the page to say the chief's process has exited",
                   lambda: "has exited" in text("run-error"), 10)
        check(text("run-state") == "done",
              "the page says the run is done, and that the chief's process "
              "has exited: %r" % text("run-error"))
        driver.save_screenshot(os.path.join(shots, "5-done.png"))
        say("screenshots in " + shots)
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
