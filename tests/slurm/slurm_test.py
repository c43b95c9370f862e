"""A troupe cluster under a real Slurm on one host: the test starts its own
munged, slurmctld and slurmd (Debian's slurm-wlm and munge) with a
slurm.conf of its own in a temporary folder, and launches five
troupe-node tasks with one srun, each placed by Slurm's step variables
alone (the chief, two shard tasks, two worker tasks). Then:

- the worker1 task is killed with kill -9 after the chief's first
  progress line: the chief says the node is down, the step goes on and
  the other four tasks end with 0, every sample once per epoch;
- while the run goes on, a second srun in the same job restarts a worker
  task that joins the running cluster (troupe-node --join) and trains.

Run by ctest (slurm.cluster) with TROUPE_BUILD_DIR; as root, since slurmd
starts its tasks as their user. Exit 77 (skipped) when Slurm or MUNGE is
not installed (scripts/setup.sh installs them)."""

import functools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
import procs  # noqa: E402 (the path above first)
from procs import (  # noqa: E402
    SKIP, check, free_ports_in_a_row, missing_tools, read, say,
    sbin_which, scratch_run, stop_process, troupe_program)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

TASKS = 5
NAMES = ["chief", "ps0", "ps1", "worker0", "worker1"]
KILLED_TASK = 4  # worker1
JOINED_NODE = "worker1b"
# Long enough that the joined worker still finds steps to train after
# the kill, the restart and its own start; about 2 s an epoch here.
EPOCHS = 8
TRAIN_SAMPLES, BATCH_SIZE = 60000, 128
STEPS = EPOCHS * math.ceil(TRAIN_SAMPLES / BATCH_SIZE)
# Every wait ends by then, so that the teardown runs before ctest's
# TIMEOUT (300 s) kills the test and leaves slurmd's steps behind.
BUDGET_S = 220
deadline = time.monotonic() + BUDGET_S
wait_until = functools.partial(procs.wait_until, deadline=deadline)


# ---------------------------------------------------------------- tools

def find_tools():
    """The programs' paths; exits 77 when one is missing or not root."""
    names = ["srun", "sinfo", "slurmctld", "slurmd", "munged"]
    tools = {n: sbin_which(n) for n in names}
    missing_tools(tools, "apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        say("skipped: slurmd starts tasks as their own user only as root")
        sys.exit(SKIP)
    return tools


# ------------------------------------------------------------ processes

class Processes:
    """What the test started, stopped in reverse order at the end."""

    def __init__(self, env):
        self.env = env
        self.started = []
        self.logs = {}

    def start(self, name, args, log):
        with open(log, "w") as out:
            p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=self.env)
        self.started.append((name, p))
        self.logs[name] = log
        return p

    def stop_all(self, slurm_conf):
        # munged last: the Slurm programs talk to it as they end.
        munged = [p for n, p in self.started if n == "munged"]
        for _, p in reversed(self.started):
            if p not in munged:
                stop_process(p)
        kill_leftovers(slurm_conf, keep={p.pid for p in munged})
        for p in munged:
            stop_process(p)


def environ_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:  # gone, or a kernel thread
        return {}
    env = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def command_of(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def started_here(slurm_conf):
    """The processes whose environment names this test's slurm.conf:
    every daemon, slurmstepd, srun and task it started (slurmd's steps
    are not its children, so stopping slurmd does not end them)."""
    return [pid for pid in pids() if pid != os.getpid()
            and environ_of(pid).get("SLURM_CONF") == slurm_conf]


def kill_leftovers(slurm_conf, keep):
    left = [p for p in started_here(slurm_conf) if p not in keep]
    for pid in left:
        say("stopping leftover %s (pid %d)" % (command_of(pid), pid))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in left if not has_ended(p)]


def has_ended(pid):
    """Whether `pid` has ended (gone, or not yet reaped by its parent)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_environment(slurm_conf, folder):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SRUN_", "SALLOC_", "SBATCH_"))}
    # A test run inside a Slurm job would otherwise send srun there.
    env["SLURM_CONF"] = slurm_conf
    # The cluster key in the test's folder, not the user's: as on a fresh
    # machine, the first task of the step makes it.
    env["XDG_CONFIG_HOME"] = os.path.join(folder, "config")
    return env


# ---------------------------------------------------------------- munge

def start_munged(procs, tools, folder):
    key = os.path.join(folder, "munge.key")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.write(os.urandom(128))
    sock = os.path.join(folder, "munge.socket")
    # munged refuses a socket in a folder that others cannot enter.
    os.chmod(folder, 0o755)
    log = os.path.join(folder, "munged.log")
    p = procs.start("munged", [
        tools["munged"], "--foreground", "--socket", sock,
        "--key-file", key, "--pid-file", os.path.join(folder, "munged.pid"),
        "--seed-file", os.path.join(folder, "munged.seed")], log)
    wait_until("munged's socket", lambda: os.path.exists(sock), 30,
               ended_with_output(p, "munged", log))
    return sock


# ---------------------------------------------------------------- slurm

def slurm_conf_text(folder, ctld_port, slurmd_port, munge_socket):
    def f(name):
        return os.path.join(folder, name)

    return "\n".join([
        "ClusterName=troupetest",
        # slurmctld takes "localhost" as its own host whatever the
        # machine's name; NodeAddr keeps every link on 127.0.0.1.
        "SlurmctldHost=localhost(127.0.0.1)",
        "SlurmctldPort=%d" % ctld_port,
        "SlurmdPort=%d" % slurmd_port,
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "AuthInfo=socket=" + munge_socket,
        "StateSaveLocation=" + f("state"),
        "SlurmdSpoolDir=" + f("spool"),
        "SlurmctldPidFile=" + f("slurmctld.pid"),
        "SlurmdPidFile=" + f("slurmd.pid"),
        "SlurmctldLogFile=" + f("slurmctld.log"),
        "SlurmdLogFile=" + f("slurmd.log"),
        # No site SPANK plugins from /etc/slurm.
        "PlugStackConfig=" + f("plugstack.conf"),
        # proctrack/cgroup, the default, needs a cgroup tree of its own,
        # which a container may not give.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        # Steps ended at teardown get SIGKILL soon after SIGTERM.
        "KillWait=5",
        # The step's five tasks, a CPU each, on a machine of any size:
        # the CPUs configured count, not the cores found.
        "SlurmdParameters=config_overrides",
        "NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN",
        "PartitionName=troupe Nodes=localhost Default=YES "
        "MaxTime=INFINITE State=UP",
    ]) + "\n"


def write_slurm_conf(folder, ctld_port, slurmd_port, munge_socket):
    for sub in ("state", "spool"):
        os.makedirs(os.path.join(folder, sub))
    open(os.path.join(folder, "plugstack.conf"), "w").close()
    path = os.path.join(folder, "slurm.conf")
    with open(path, "w") as f:
        f.write(slurm_conf_text(folder, ctld_port, slurmd_port, munge_socket))
    return path


def node_state(tools, env):
    try:
        out = subprocess.run(
            [tools["sinfo"], "--noheader", "--Node", "--nodes=localhost",
             "--format=%t"], capture_output=True, text=True, env=env,
            timeout=10)
    except subprocess.TimeoutExpired:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def start_slurm(procs, tools, folder):
    procs.start("slurmctld", [tools["slurmctld"], "-D"],
                os.path.join(folder, "slurmctld.out"))
    # -N: the node is "localhost", whatever this machine is called.
    procs.start("slurmd", [tools["slurmd"], "-D", "-N", "localhost"],
                os.path.join(folder, "slurmd.out"))

    def daemon_ended():
        for name, p in procs.started:
            if p.poll() is not None:
                return "%s exited with %d:\n%s" % (
                    name, p.returncode, read(procs.logs[name])[-3000:])
        return None

    wait_until("the node to be idle in sinfo",
               lambda: node_state(tools, procs.env) == "idle", 60,
               daemon_ended)
    say("slurm: munged, slurmctld and slurmd up, node localhost idle")


# --------------------------------------------------------------- troupe

def write_run_config(folder, base_port):
    with open(os.path.join(ROOT, "config", "local.json")) as f:
        cfg = json.load(f)
    cfg["training"]["epochs"] = EPOCHS
    cfg["training"]["log_every_steps"] = 100
    cfg["cluster"] = {"shards": 2, "workers": 2, "base_port": base_port,
                      "node_timeout_s": 60, "heartbeat_interval_ms": 200,
                      "connection_timeout_ms": 1500, "on_node_loss": "move"}
    path = os.path.join(folder, "run.json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return path


def task_output(folder, task):
    return read(os.path.join(folder, "task-%d.out" % task))


def start_training_step(procs, tools, folder, troupe_node, config):
    # srun folds the tasks' exit statuses into one; each task writes its
    # own next to its output.
    record_exit = ('"$@"; rc=$?; echo $rc > "$0/task-$SLURM_PROCID.rc"; '
                   'exit $rc')
    return procs.start("srun (training)", [
        tools["srun"], "--ntasks=%d" % TASKS, "--job-name=troupe",
        # A task that ends, even by a signal, does not end the step's
        # others, whatever KillOnBadExit and WaitTime a site sets.
        "--kill-on-bad-exit=0", "--wait=0",
        "--chdir=" + folder, "--output=" + folder + "/task-%t.out",
        "/bin/sh", "-c", record_exit, folder,
        troupe_node, "--config", config],
        os.path.join(folder, "srun-training.log"))


def find_task(slurm_conf, procid):
    """(pid, job id) of troupe-node in task `procid` of step 0."""
    for pid in pids():
        if command_of(pid) != "troupe-node":
            continue
        env = environ_of(pid)
        if (env.get("SLURM_CONF") == slurm_conf
                and env.get("SLURM_STEP_ID") == "0"
                and env.get("SLURM_PROCID") == str(procid)):
            return pid, env.get("SLURM_JOB_ID")
    return None


def start_joining_step(procs, tools, folder, troupe_node, job, base_port):
    # --overlap: the training step holds all the job's CPUs.
    return procs.start("srun (join)", [
        tools["srun"], "--jobid=" + job, "--overlap", "--ntasks=1",
        "--chdir=" + folder, "--output=" + folder + "/join.out",
        troupe_node, "--join", "localhost:%d" % base_port,
        "--workers", "1", "--name", JOINED_NODE],
        os.path.join(folder, "srun-join.log"))


def summary_row(out):
    lines = out.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("run ") and "steps" in line:
            return lines[i + 1].split()
    return []


def epoch_samples(out):
    m = re.search(r"^samples trained per epoch:(.*)$", out, re.M)
    return [int(x) for x in m.group(1).split()] if m else []


def worker_steps_after(out, marker):
    """{worker: [steps]} of the chief's per-worker lines after `marker`."""
    at = out.find(marker)
    steps = {}
    if at < 0:
        return steps
    for m in re.finditer(r"^worker (\d+): step (\d+),", out[at:], re.M):
        steps.setdefault(int(m.group(1)), []).append(int(m.group(2)))
    return steps


# --------------------------------------------------------------- checks

def check_placement(folder, base_port):
    everyone = ("the chief on chief (localhost:%d); shards on ps0, ps1 (2); "
                "workers on worker0, worker1 (2)" % base_port)
    for task, name in enumerate(NAMES):
        out = task_output(folder, task)
        check("membership: Slurm: this is node %s; %s" % (name, everyone)
              in out, "task %d is node %s from Slurm's variables"
              % (task, name), out[-2000:])
        port = base_port + 2 * task
        check("node %s: listening on localhost:%d, data plane on "
              "localhost:%d" % (name, port, port + 1) in out,
              "node %s listens at %d, its data plane at %d"
              % (name, port, port + 1), out[-2000:])


def check_exit_statuses(folder):
    for task, name in enumerate(NAMES):
        rc = read(os.path.join(folder, "task-%d.rc" % task)).strip()
        want = str(128 + signal.SIGKILL) if task == KILLED_TASK else "0"
        check(rc == want, "task %d (%s) exit status %s" % (task, name, want),
              "it was %r; its output:\n%s"
              % (rc, task_output(folder, task)[-2000:]))


def check_training(chief_out):
    check(epoch_samples(chief_out) == [TRAIN_SAMPLES] * EPOCHS,
          "every sample trained once per epoch (%d epochs)" % EPOCHS,
          chief_out[-3000:])
    row = summary_row(chief_out)
    check(len(row) > 4 and row[4] == str(STEPS),
          "the summary row's steps %d" % STEPS, " ".join(row))


def check_joined(folder, chief_out, join_rc):
    up = r"^node %s \(.*\) is up, joining with 1 worker$" % JOINED_NODE
    check(re.search(up, chief_out, re.M),
          "the chief took node %s in with 1 worker" % JOINED_NODE,
          chief_out[-3000:])
    steps = worker_steps_after(chief_out,
                               "adding 1 worker on node " + JOINED_NODE)
    # Workers 0 and 1 are the step's own (1 moved to worker0's node).
    new = {w: s for w, s in steps.items() if w >= 2}
    check(len(new) == 1, "the joined worker trained: %s" % ", ".join(
          "worker %d to step %d" % (w, s[-1]) for w, s in new.items()),
          chief_out[-3000:])
    join_out = read(os.path.join(folder, "join.out"))
    check(join_rc == 0 and "node %s: the run is over" % JOINED_NODE
          in join_out, "the joining task ended with 0 at the run's end",
          "exit %s:\n%s" % (join_rc, join_out[-2000:]))


# ----------------------------------------------------------------- run

def ended_with_output(p, what, *logs):
    """A given_up() for wait_until: `what` and the logs once p ended."""
    def ended():
        if p.poll() is None:
            return None
        return "%s exited with %d:\n%s" % (
            what, p.returncode, "".join(read(log) for log in logs))
    return ended


def kill_worker1_task(folder, slurm_conf, base_port, training_ended):
    """Kills worker1's troupe-node as a crash would; returns the job id."""
    pid, job = wait_until("worker1's troupe-node process",
                          lambda: find_task(slurm_conf, KILLED_TASK), 10,
                          training_ended)
    os.kill(pid, signal.SIGKILL)
    say("killed worker1's task (pid %d) in job %s with SIGKILL" % (pid, job))
    down = "node worker1 (localhost:%d) is down" % (base_port + 8)
    wait_until("'%s'" % down, lambda: down in task_output(folder, 0), 60,
               training_ended)
    say("ok: the chief says " + down)
    return job


def join_a_worker(procs, tools, folder, troupe_node, job, base_port):
    joining = start_joining_step(procs, tools, folder, troupe_node, job,
                                 base_port)
    say("started a second srun in job %s: troupe-node --join localhost:%d"
        % (job, base_port))
    wait_until("node %s to join" % JOINED_NODE,
               lambda: "node %s (" % JOINED_NODE in task_output(folder, 0),
               60, ended_with_output(
                   joining, "the joining srun",
                   os.path.join(folder, "join.out"),
                   os.path.join(folder, "srun-join.log")))
    return joining


def run_scenario(procs, tools, folder, troupe_node, base_port, slurm_conf):
    config = write_run_config(folder, base_port)
    training = start_training_step(procs, tools, folder, troupe_node, config)
    training_log = os.path.join(folder, "srun-training.log")
    training_ended = ended_with_output(training, "srun", training_log)
    wait_until("the chief's first progress line",
               lambda: re.search(r"^step \d+, epoch", task_output(folder, 0),
                                 re.M), 120, training_ended)
    check_placement(folder, base_port)
    job = kill_worker1_task(folder, slurm_conf, base_port, training_ended)
    joining = join_a_worker(procs, tools, folder, troupe_node, job,
                            base_port)
    wait_until("the training step to end",
               lambda: training.poll() is not None, 180)
    wait_until("the joining step to end",
               lambda: joining.poll() is not None, 30)
    say("the training srun exited with %d; its messages:\n%s"
        % (training.returncode, read(training_log).strip()))
    check_exit_statuses(folder)
    chief_out = task_output(folder, 0)
    check_training(chief_out)
    check_joined(folder, chief_out, joining.returncode)


def show_outputs(folder):
    names = (["task-%d.out" % t for t in range(TASKS)]
             + ["join.out", "srun-training.log", "srun-join.log",
                "slurmctld.log", "slurmd.log", "munged.log"])
    for name in names:
        text = read(os.path.join(folder, name))
        if text:
            say("---- %s (end)\n%s" % (name, text[-2500:].rstrip()))


def main():
    tools = find_tools()
    with scratch_run("troupe-slurm-") as run:
        troupe_node = troupe_program("troupe-node")
        folder = run.folder
        slurm_conf = os.path.join(folder, "slurm.conf")
        procs = Processes(test_environment(slurm_conf, folder))
        run.on_failure = lambda: show_outputs(folder)
        run.teardown = lambda: procs.stop_all(slurm_conf)
        # 10 ports for the 5 tasks (control and data plane), 2 for Slurm.
        base_port = free_ports_in_a_row(12)
        socket_path = start_munged(procs, tools, folder)
        write_slurm_conf(folder, base_port + 10, base_port + 11, socket_path)
        start_slurm(procs, tools, folder)
        run_scenario(procs, tools, folder, troupe_node, base_port,
                     slurm_conf)
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main())
