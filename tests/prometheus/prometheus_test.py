"""troupe-node's metrics endpoint under a real Prometheus (Debian's
prometheus package): the test runs config/local.json in the embedded mode
with --metrics-listen 127.0.0.1:0, then

- checks one GET /metrics with `promtool check metrics` (the format and
  promtool's lint rules, e.g. counters end in _total);
- starts its own prometheus, on a free port with a temporary storage
  folder, scraping the run every second, and asks its HTTP API for the
  target's health, up, rate(troupe_samples_total), increase() of steps
  and samples, and the labels of troupe_run_info;
- ends the run with SIGTERM, which troupe-node takes as a clean stop.

Run by ctest (prometheus.scrape) with TROUPE_BUILD_DIR. Exit 77
(skipped) when prometheus or promtool is not installed
(scripts/setup.sh installs them)."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import (  # noqa: E402 (the path above first)
    Failure, check, free_port, missing_tools, read, say, scratch_run,
    stop_process, troupe_program, wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

CONFIG = os.path.join(ROOT, "config", "local.json")
with open(CONFIG) as _f:
    _run = json.load(_f)
RUN_NAME = _run["name"]  # local-mlp-fashion
MODE = _run["cluster"]["mode"]  # async
BATCH_SIZE = _run["training"]["batch_size"]
# About 1.3 s an epoch on two cores: the run outlasts the checks by far,
# and the test ends it with SIGTERM once they pass.
EPOCHS = 40
JOB = "troupe"
# rate() needs two samples in its window; five scrapes a second apart
# leave room for a late one on a busy machine.
SCRAPE_INTERVAL = "1s"
WINDOW = "5s"


def find_tools():
    """The programs' paths; exits 77 when one is missing."""
    tools = {n: shutil.which(n) for n in ("prometheus", "promtool")}
    missing_tools(tools, "apt-get install prometheus")
    return tools


# ------------------------------------------------------------ processes

class Processes:
    """What the test started, stopped in reverse order at the end."""

    def __init__(self, folder):
        self.folder = folder
        self.started = []

    def log(self, name):
        return os.path.join(self.folder, name + ".log")

    def start(self, name, args):
        with open(self.log(name), "w") as out:
            p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, cwd=self.folder)
        self.started.append((name, p))
        return p

    def ended(self, name, p):
        """A text for wait_until's given_up once `p` has exited."""
        if p.poll() is None:
            return None
        return "%s exited with %d:\n%s" % (name, p.returncode,
                                           read(self.log(name))[-3000:])

    def stop_all(self):
        for _, p in reversed(self.started):
            stop_process(p)

    def show_logs(self):
        for name, _ in self.started:
            text = read(self.log(name))
            if text:
                say("---- %s (end)\n%s" % (name, text[-2500:].rstrip()))


# ------------------------------------------------------------------ http

def http_get(url, timeout_s=5):
    """(status, content type, body); status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return (r.status, r.headers.get("Content-Type", ""),
                    r.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), ""
    except (urllib.error.URLError, OSError):
        return 0, "", ""


class PrometheusApi:
    def __init__(self, port):
        self.base = "http://127.0.0.1:%d" % port

    def ready(self):
        return http_get(self.base + "/-/ready")[0] == 200

    def get(self, path, **params):
        url = self.base + path + "?" + urllib.parse.urlencode(params)
        status, _, body = http_get(url)
        if status != 200:
            raise Failure("GET %s answered %d:\n%s" % (url, status, body))
        answer = json.loads(body)
        if answer.get("status") != "success":
            raise Failure("GET %s: %s" % (url, body))
        return answer["data"]

    def query(self, promql, at=None):
        """The instant vector's [(labels, value)] at unix time `at`, or
        at this moment."""
        params = {"query": promql}
        if at is not None:
            params["time"] = "%.3f" % at
        data = self.get("/api/v1/query", **params)
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def series(self, match):
        return self.get("/api/v1/series", **{"match[]": match})

    def targets(self):
        return self.get("/api/v1/targets", state="active")["activeTargets"]


# --------------------------------------------------------------- troupe

def start_troupe(procs, troupe_node):
    p = procs.start("troupe-node", [
        troupe_node, "--config", CONFIG, "--epochs", str(EPOCHS),
        "--metrics-listen", "127.0.0.1:0"])
    port = wait_until(
        "troupe-node's metrics line",
        lambda: re.search(r"^metrics: http://127\.0\.0\.1:(\d+)/metrics$",
                          read(procs.log("troupe-node")), re.M), 60,
        lambda: procs.ended("troupe-node", p))
    port = int(port.group(1))
    say("troupe-node serves http://127.0.0.1:%d/metrics" % port)
    return p, port


def check_with_promtool(tools, metrics_port):
    status, content_type, text = http_get(
        "http://127.0.0.1:%d/metrics" % metrics_port)
    check(status == 200 and text, "GET /metrics answers 200 with a body",
          "status %d" % status)
    say("Content-Type: " + content_type)
    check(content_type.startswith("text/plain")
          and "version=0.0.4" in content_type,
          "the text format 0.0.4 (Content-Type)", content_type)
    out = subprocess.run([tools["promtool"], "check", "metrics"],
                         input=text, capture_output=True, text=True,
                         timeout=30)
    report = (out.stdout + out.stderr).strip()
    # promtool prints its lint findings and still exits 0 for some.
    say("promtool check metrics: exit %d, %s" % (
        out.returncode, "said:\n" + report if report else "said nothing"))
    check(out.returncode == 0, "promtool check metrics exits 0", report)
    return text


def run_id_of(metrics_text):
    m = re.search(r'^troupe_steps_total\{run="([^"]*)",'
                  r'run_id="([0-9a-f]{16})"\}', metrics_text, re.M)
    check(m is not None and m.group(1) == RUN_NAME,
          "troupe_steps_total carries run=%r and a 16-hex run_id" % RUN_NAME,
          metrics_text[:2000])
    return m.group(2)


# ----------------------------------------------------------- prometheus

def write_prometheus_config(folder, metrics_port):
    text = "\n".join([
        "global:",
        "  scrape_interval: " + SCRAPE_INTERVAL,
        "  scrape_timeout: " + SCRAPE_INTERVAL,
        "  evaluation_interval: " + SCRAPE_INTERVAL,
        "scrape_configs:",
        "  - job_name: " + JOB,
        "    static_configs:",
        "      - targets: ['127.0.0.1:%d']" % metrics_port,
    ]) + "\n"
    path = os.path.join(folder, "prometheus.yml")
    with open(path, "w") as f:
        f.write(text)
    return path


def start_prometheus(procs, tools, folder, metrics_port):
    config = write_prometheus_config(folder, metrics_port)
    port = free_port()
    p = procs.start("prometheus", [
        tools["prometheus"], "--config.file=" + config,
        "--storage.tsdb.path=" + os.path.join(folder, "tsdb"),
        "--web.listen-address=127.0.0.1:%d" % port,
        "--log.level=warn"])
    api = PrometheusApi(port)
    wait_until("prometheus' /-/ready", api.ready, 60,
               lambda: procs.ended("prometheus", p))
    say("prometheus ready at http://127.0.0.1:%d" % port)
    return p, api


def one_series(api, promql, run_id, at=None):
    """The value of `promql`'s one series of this run, or None while it
    has none."""
    for labels, value in api.query(promql, at):
        if labels.get("run") == RUN_NAME and labels.get("run_id") == run_id:
            return labels, value
    return None


def positive_series(api, promql, run_id):
    found = one_series(api, promql, run_id)
    return found if found and found[1] > 0 else None


def check_prometheus_view(procs, troupe, api, metrics_port, run_id):
    troupe_ended = lambda: procs.ended("troupe-node", troupe)

    rate = "rate(troupe_samples_total[%s])" % WINDOW
    # Empty until prometheus holds two scrapes of the run.
    labels, value = wait_until(
        "%s > 0 for run %s" % (rate, run_id),
        lambda: positive_series(api, rate, run_id), 60, troupe_ended)
    say("ok: %s = %.0f samples/s, labels %s" % (rate, value,
                                                 json.dumps(labels)))

    target = "127.0.0.1:%d" % metrics_port
    targets = api.targets()
    ours = [t for t in targets if t["labels"].get("instance") == target]
    check(len(ours) == 1 and ours[0]["health"] == "up"
          and ours[0]["labels"].get("job") == JOB,
          "/api/v1/targets: %s of job %s is up" % (target, JOB),
          json.dumps(targets, indent=1))
    up = api.query('up{job="%s"}' % JOB)
    check([v for _, v in up] == [1.0], 'up{job="%s"} is 1' % JOB,
          json.dumps(up))

    # Both at one moment, so over the same scrapes: a window moved by a
    # scrape between two queries would compare different stretches.
    at = time.time()
    steps = one_series(api, "increase(troupe_steps_total[%s])" % WINDOW,
                       run_id, at)
    samples = one_series(api, "increase(troupe_samples_total[%s])" % WINDOW,
                         run_id, at)
    check(steps is not None and steps[1] > 0,
          "increase(troupe_steps_total[%s]) = %.1f steps" % (
              WINDOW, steps[1] if steps else 0), str(steps))
    # Both counters come from one snapshot per scrape, so their increases
    # over one window differ by the batch size (short last batches of an
    # epoch aside; the slack above it is for increase()'s extrapolation,
    # which stops where a counter would reach zero).
    per_step = samples[1] / steps[1] if samples else 0
    check(0.75 * BATCH_SIZE <= per_step <= BATCH_SIZE * 1.01,
          "increase of samples / increase of steps = %.1f (batch size %d)"
          % (per_step, BATCH_SIZE), str(samples))

    info = api.series("troupe_run_info")
    ours = [s for s in info if s.get("run_id") == run_id]
    check(len(ours) == 1 and ours[0].get("run") == RUN_NAME
          and ours[0].get("mode") == MODE,
          "series troupe_run_info: run=%s, run_id=%s, mode=%s" % (
              RUN_NAME, run_id, MODE), json.dumps(info, indent=1))
    say("troupe_run_info labels: " + json.dumps(ours[0], sort_keys=True))


def stop_troupe(procs, troupe):
    # The first SIGTERM asks the chief to end the run cleanly: the steps
    # in flight, an evaluation, the summary, exit 0.
    troupe.send_signal(signal.SIGTERM)
    try:
        troupe.wait(30)
    except subprocess.TimeoutExpired:
        raise Failure("troupe-node did not end within 30 s of SIGTERM")
    out = read(procs.log("troupe-node"))
    check(troupe.returncode == 0 and "stop requested by SIGTERM" in out
          and re.search(r"^run +mode +workers", out, re.M),
          "troupe-node ended its run cleanly on SIGTERM (exit 0, summary)",
          "exit %d:\n%s" % (troupe.returncode, out[-2000:]))


# ----------------------------------------------------------------- run

def run_scenario(procs, tools, troupe_node):
    troupe, metrics_port = start_troupe(procs, troupe_node)
    metrics_text = check_with_promtool(tools, metrics_port)
    run_id = run_id_of(metrics_text)
    prometheus, api = start_prometheus(procs, tools, procs.folder,
                                       metrics_port)
    check_prometheus_view(procs, troupe, api, metrics_port, run_id)
    stop_troupe(procs, troupe)
    stop_process(prometheus)


def main():
    tools = find_tools()
    with scratch_run("troupe-prometheus-") as run:
        troupe_node = troupe_program("troupe-node")
        procs = Processes(run.folder)
        run.on_failure, run.teardown = procs.show_logs, procs.stop_all
        run_scenario(procs, tools, troupe_node)
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
