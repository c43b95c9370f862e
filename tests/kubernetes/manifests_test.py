"""The Kubernetes examples (examples/kubernetes) against the programs they
start, run here as far as a machine without Kubernetes allows:

- every document of tfjob.yaml and statefulset.yaml loads; each
  container's flags are ones `troupe-node --help` lists; the ConfigMap's
  run.json is a config troupe-node reads; the ConfigMap and the Secret are
  mounted where the flags look; the Secret's key is the one the README
  creates; the containers declare the control port and the data port
  (control + /cluster/data_port_offset), and the StatefulSet's Service
  both;
- the TFJob runs: the TF_CONFIG the training operator writes for each of
  its 5 replicas, each host mapped to its own port pair on 127.0.0.1, and
  5 troupe-node processes started with the container's arguments (the
  volumes' paths moved into a folder laid out as the kubelet lays them
  out) and TF_CONFIG, one epoch; all exit 0 and each data plane listens
  at its control port plus the offset;
- the StatefulSet's shell snippet gives pods troupe-0..4 the right task in
  one and the same cluster, and refuses a sixth;
- as root, in network namespaces of its own: both manifests run with the
  pods' own host names and the manifests' ports, every pod at 2222 and
  2223 on an address of its own, the TFJob's chief name resolving only
  after its members have started, as pod DNS records appear.

Run by ctest (kubernetes.manifests) with TROUPE_BUILD_DIR set; exits 1
with the reason when a check fails."""

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import (  # noqa: E402 (the path above first)
    Failure, check, free_ports, say)
import netlab  # noqa: E402
from manifests import (  # noqa: E402
    NAMESPACE, NODE, NODE_TIMEOUT_S, REPLICAS, RUN_SECONDS,
    check_config_is_read, check_readme, check_statefulset, check_tfjob,
    load, node_options, one, operator_port)


def operator_tf_configs(job, pod_specs):
    """{(type, index): TF_CONFIG} for every replica: the cluster lists
    "<job>-<type>-<index>.<namespace>.svc:<port>" under the lower-cased
    replica type, with "environment": "cloud", as Go's encoding/json
    writes it."""
    cluster = {}
    for rtype in sorted(pod_specs, key=str.lower):
        rt = rtype.lower()
        port = operator_port(pod_specs[rtype])
        cluster[rt] = ["%s-%s-%d.%s.svc:%d" % (job, rt, i, NAMESPACE, port)
                       for i in range(REPLICAS[rtype])]
    return {(rt, i): json.dumps(
        {"cluster": cluster, "task": {"type": rt, "index": i},
         "environment": "cloud"}, separators=(",", ":"))
        for rt, hosts in cluster.items() for i in range(len(hosts))}


def node_name(task_type, index):
    return "chief" if task_type == "chief" else "%s%d" % (task_type, index)


# --- local files laid out as the kubelet lays out the volumes

def atomic_volume(path, files, mode):
    """A ConfigMap's or Secret's volume: each file a link into ..data,
    which links to a timestamped folder (troupe-node follows both)."""
    stamp = "..2024_01_01_00_00_00.000000001"
    os.makedirs(os.path.join(path, stamp))
    for name, text in files.items():
        target = os.path.join(path, stamp, name)
        with open(target, "w") as f:
            f.write(text)
        os.chmod(target, mode)
        os.symlink(os.path.join("..data", name), os.path.join(path, name))
    os.symlink(stamp, os.path.join(path, "..data"))


def make_volumes(tmp, mounts, run_json, key_file, epochs):
    """The volumes under tmp/volumes, run.json cut to `epochs`; returns
    {mount path: local folder}."""
    cfg = json.loads(run_json)
    cfg["training"]["epochs"] = epochs
    cfg["cluster"]["node_timeout_s"] = NODE_TIMEOUT_S
    # The Secret as `openssl rand -hex 32` makes it: no newline.
    key = secrets.token_hex(32)
    roots = {}
    for i, (path, volume) in enumerate(sorted(mounts.items())):
        local = os.path.join(tmp, "volumes", str(i))
        if "configMap" in volume:
            atomic_volume(local, {"run.json": json.dumps(cfg, indent=1)},
                          0o644)
        else:
            atomic_volume(local, {key_file: key},
                          volume["secret"]["defaultMode"])
        roots[path] = local
    return roots


def local_args(args, roots):
    """The container's args with each path in a volume moved onto the
    volume's local folder."""
    def local(arg):
        folder, name = os.path.split(arg)
        return os.path.join(roots[folder], name) if folder in roots else arg
    return [local(a) for a in args]


# --- processes

class Cluster:
    """Processes started in their own sessions, killed with their groups
    when the test leaves early."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = {}

    def start(self, name, argv, env):
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        self.procs[name] = (subprocess.Popen(
            argv, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True), log)

    def out(self, name):
        with open(os.path.join(self.tmp, name + ".log")) as f:
            return f.read()

    def outputs(self):
        return "\n".join("--- %s:\n%s" % (n, self.out(n)[-2500:])
                         for n in self.procs)

    def wait_for(self, name, text, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if text in self.out(name):
                return
            check(self.procs[name][0].poll() is None,
                  "%s exited before printing %r" % (name, text),
                  self.outputs())
            time.sleep(0.1)
        raise Failure("%s printed no %r in %d s\n%s" % (
            name, text, seconds, self.outputs()))

    def wait_all(self, seconds):
        """Until every process has exited 0; fails at the first that
        exits otherwise, which the others would wait for."""
        deadline = time.monotonic() + seconds
        while True:
            codes = {n: p.poll() for n, (p, _) in self.procs.items()}
            bad = {n: c for n, c in codes.items() if c not in (None, 0)}
            check(not bad, "exit codes %s" % bad, self.outputs())
            running = [n for n, c in codes.items() if c is None]
            if not running:
                return
            check(time.monotonic() < deadline, "still running after %d s: "
                  "%s" % (seconds, ", ".join(running)), self.outputs())
            time.sleep(0.1)

    def kill(self):
        for p, log in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
            log.close()


# --- the TFJob on 127.0.0.1

def run_tfjob_locally(tfjob, job_name):
    """The 5 replicas as processes here: TF_CONFIG as the operator writes
    it, each host moved to a port pair of its own on 127.0.0.1."""
    tf_configs = operator_tf_configs(job_name, tfjob["pod_specs"])
    offset = tfjob["offset"]
    # Each host's control port p and its data port p + offset.
    ports = dict(zip(sorted(tf_configs),
                     free_ports(len(tf_configs), offset=offset, spacing=2)))
    moved = {}
    for (rt, i), text in tf_configs.items():
        host = json.loads(text)["cluster"][rt][i]
        moved[host] = "127.0.0.1:%d" % ports[(rt, i)]
    with tempfile.TemporaryDirectory(prefix="troupe-k8s-") as tmp:
        roots = make_volumes(tmp, tfjob["mounts"], tfjob["run_json"],
                             tfjob["key_file"], epochs=1)
        args = local_args(tfjob["args"], roots)
        cluster = Cluster(tmp)
        try:
            # Pods start in any order; the chief last shows the members
            # waiting for it.
            for (rt, i) in sorted(tf_configs, key=lambda t: t[0] == "chief"):
                text = tf_configs[(rt, i)]
                for host, local in moved.items():
                    text = text.replace('"%s"' % host, '"%s"' % local)
                name = node_name(rt, i)
                cluster.start(name, [NODE] + args,
                              dict(os.environ, TF_CONFIG=text))
            say("TFJob here: 5 troupe-node %s, TF_CONFIG %s" % (
                " ".join(args), tf_configs[("chief", 0)]))
            started = time.monotonic()
            cluster.wait_all(RUN_SECONDS)
            say("TFJob here: all 5 exited 0 in %.1f s" %
                (time.monotonic() - started))
            chief_at = "127.0.0.1:%d" % ports[("chief", 0)]
            expect(cluster, "chief",
                   "membership: TF_CONFIG: this is node chief; the chief on "
                   "chief (%s); shards on ps0, ps1 (2); workers on worker0, "
                   "worker1 (2)" % chief_at)
            expect_run_done(cluster)
            for (rt, i), p in sorted(ports.items()):
                name = node_name(rt, i)
                if rt != "chief":
                    expect(cluster, name, "membership: TF_CONFIG: this is "
                           "node %s;" % name)
                expect(cluster, name, "node %s: listening on 127.0.0.1:%d, "
                       "data plane on 127.0.0.1:%d" % (name, p, p + offset))
        finally:
            cluster.kill()


def expect(cluster, name, text):
    check(text in cluster.out(name), "%s printed no %r" % (name, text),
          cluster.out(name)[-3000:])
    say("  %s: %s" % (name, text))


def expect_run_done(cluster, chief="chief"):
    for line in ("all 5 nodes are up", "samples trained per epoch: 60000"):
        expect(cluster, chief, line)


# --- the StatefulSet's snippet

def statefulset_pod_env(sts, hostname, path):
    env = {"PATH": path, "HOSTNAME": hostname}
    env.update(sts["env"])
    return env


def expected_sts_cluster(sts):
    def host(n):
        return "%s-%d.%s:%d" % (sts["name"], n, sts["service"],
                                sts["control"])
    ps = int(sts["env"]["TROUPE_PS"])
    workers = int(sts["env"]["TROUPE_WORKERS"])
    return {"chief": [host(0)], "ps": [host(n) for n in range(1, 1 + ps)],
            "worker": [host(n) for n in range(1 + ps, 1 + ps + workers)]}


def expected_sts_task(ordinal, ps):
    if ordinal == 0:
        return {"type": "chief", "index": 0}
    if ordinal <= ps:
        return {"type": "ps", "index": ordinal - 1}
    return {"type": "worker", "index": ordinal - 1 - ps}


def check_statefulset_snippet(sts):
    """Runs the container's command for each pod with a troupe-node that
    prints what it was given."""
    spec = sts["spec"]
    cluster = expected_sts_cluster(sts)
    ps = int(sts["env"]["TROUPE_PS"])
    with tempfile.TemporaryDirectory(prefix="troupe-k8s-sh-") as tmp:
        fake = os.path.join(tmp, "troupe-node")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\nprintf "%s\\n" "$TF_CONFIG" "$@"\n')
        os.chmod(fake, 0o755)
        path = tmp + ":/usr/bin:/bin"
        for n in range(sts["replicas"] + 1):
            pod = "%s-%d" % (sts["name"], n)
            out = subprocess.run(
                spec["command"] + spec["args"], capture_output=True,
                text=True, timeout=30,
                env=statefulset_pod_env(sts, pod, path))
            if n == sts["replicas"]:
                check(out.returncode != 0 and "no role" in out.stderr,
                      "pod %s, one beyond the replicas, should fail" % pod,
                      out.stdout + out.stderr)
                say("  %s: refused: %s" % (pod, out.stderr.strip()))
                continue
            check(out.returncode == 0, "pod %s: the snippet failed" % pod,
                  out.stderr)
            lines = out.stdout.splitlines()
            tf_config = json.loads(lines[0])
            check(lines[1:] == spec["args"], "pod %s: troupe-node got %s"
                  % (pod, lines[1:]))
            want = {"cluster": cluster, "task": expected_sts_task(n, ps)}
            check(tf_config == want, "pod %s: TF_CONFIG %s, expected %s" % (
                pod, lines[0], json.dumps(want)))
            say("  %s: task %s" % (pod, json.dumps(tf_config["task"])))
        say("StatefulSet snippet: every pod's TF_CONFIG has the cluster %s"
            % json.dumps(cluster))


# --- network namespaces: the pods' own names and ports

class Lab(netlab.Lab):
    """One network namespace per pod (tests/pylib/netlab.py)."""

    def __init__(self, pods):
        super().__init__(pods, prefix="trk8s", net=215)

    def command(self, i, hosts_file, argv):
        return self.command_with_hosts(i, hosts_file, argv)

    @classmethod
    def unavailable(cls):
        """Why no lab ("" when one can be made), tried with a pod that
        binds a hosts file of its own."""
        with tempfile.NamedTemporaryFile("w") as hosts:
            return super().unavailable(
                lambda lab: lab.command(0, hosts.name, ["/bin/true"]))


def write_hosts(path, entries):
    with open(path, "a") as f:
        for address, name in entries:
            f.write("%s %s\n" % (address, name))


def run_tfjob_in_lab(tfjob, job_name):
    """The operator's TF_CONFIG unchanged, each replica in a pod of its
    own at the manifest's ports. The chief's name resolves only once its
    members have started, as its DNS record appears when its pod runs."""
    tf_configs = operator_tf_configs(job_name, tfjob["pod_specs"])
    order = sorted(tf_configs, key=lambda t: t[0] == "chief")
    hosts = {key: json.loads(text)["cluster"][key[0]][key[1]].rsplit(":", 1)
             for key, text in tf_configs.items()}
    lab = Lab(len(order))
    with tempfile.TemporaryDirectory(prefix="troupe-k8s-lab-") as tmp:
        cluster = Cluster(tmp)
        try:
            roots = make_volumes(tmp, tfjob["mounts"], tfjob["run_json"],
                                 tfjob["key_file"], epochs=1)
            args = local_args(tfjob["args"], roots)
            hosts_file = os.path.join(tmp, "hosts")
            write_hosts(hosts_file, [("127.0.0.1", "localhost")] + [
                (lab.address(order.index(k)), hosts[k][0]) for k in order
                if k[0] != "chief"])
            for n, (rt, i) in enumerate(order):
                name = node_name(rt, i)
                if rt == "chief":
                    for member in order[:-1]:
                        cluster.wait_for(node_name(*member),
                                         "connecting to the chief", 30)
                    time.sleep(1)
                    write_hosts(hosts_file, [(lab.address(n), hosts[(rt, i)][
                        0])])
                cluster.start(name, lab.command(n, hosts_file, [NODE] + args),
                              dict(os.environ, TF_CONFIG=tf_configs[(rt, i)]))
            started = time.monotonic()
            cluster.wait_all(RUN_SECONDS)
            say("TFJob in pods: all 5 exited 0 in %.1f s" %
                (time.monotonic() - started))
            expect(cluster, "chief", "membership: TF_CONFIG: this is node "
                   "chief; the chief on chief (%s)" % ":".join(
                       hosts[("chief", 0)]))
            expect_run_done(cluster)
            offset = tfjob["offset"]
            for (rt, i) in order:
                name = node_name(rt, i)
                host, port = hosts[(rt, i)]
                expect(cluster, name, "listening on 0.0.0.0:%s, data plane "
                       "on 0.0.0.0:%d (reached at %s)" % (
                           port, int(port) + offset, host))
        finally:
            cluster.kill()
            lab.remove()


def run_statefulset_in_lab(tfjob, sts):
    """The StatefulSet's own command in each pod: the snippet, then the
    real troupe-node, every pod named troupe-N.troupe."""
    lab = Lab(sts["replicas"])
    with tempfile.TemporaryDirectory(prefix="troupe-k8s-lab-") as tmp:
        cluster = Cluster(tmp)
        try:
            roots = make_volumes(tmp, sts["mounts"], tfjob["run_json"],
                                 tfjob["key_file"], epochs=1)
            bin_dir = os.path.join(tmp, "bin")
            os.mkdir(bin_dir)
            os.symlink(NODE, os.path.join(bin_dir, "troupe-node"))
            hosts_file = os.path.join(tmp, "hosts")
            pods = ["%s-%d" % (sts["name"], n) for n in range(sts["replicas"])]
            write_hosts(hosts_file, [("127.0.0.1", "localhost")] + [
                (lab.address(n), "%s.%s" % (pod, sts["service"]))
                for n, pod in enumerate(pods)])
            argv = sts["spec"]["command"] + local_args(sts["spec"]["args"],
                                                       roots)
            for n, pod in enumerate(pods):
                env = dict(os.environ)
                env.update(statefulset_pod_env(
                    sts, pod, bin_dir + ":" + os.environ.get("PATH", "")))
                cluster.start(pod, lab.command(n, hosts_file, argv), env)
            started = time.monotonic()
            cluster.wait_all(RUN_SECONDS)
            say("StatefulSet in pods: all %d exited 0 in %.1f s" % (
                len(pods), time.monotonic() - started))
            chief = pods[0]
            expect(cluster, chief, "membership: TF_CONFIG: this is node "
                   "chief; the chief on chief (%s.%s:%d)" % (
                       chief, sts["service"], sts["control"]))
            expect_run_done(cluster, chief)
            for pod in pods[1:]:
                expect(cluster, pod, "data plane on 0.0.0.0:%d (reached at "
                       "%s.%s)" % (sts["control"] + tfjob["offset"], pod,
                                   sts["service"]))
        finally:
            cluster.kill()
            lab.remove()


# --- main

def main():
    check(os.access(NODE, os.X_OK), "no %s: build troupe-node first" % NODE)
    options = node_options()
    tfjob_docs = load("tfjob.yaml")
    sts_docs = load("statefulset.yaml")
    tfjob = check_tfjob(tfjob_docs, options)
    job_name = one(tfjob_docs, "TFJob")["metadata"]["name"]
    sts = check_statefulset(sts_docs, options, tfjob)
    check_readme(tfjob["image"], tfjob["key_file"])
    with tempfile.TemporaryDirectory(prefix="troupe-k8s-probe-") as tmp:
        check_config_is_read(tfjob["run_json"], tmp)
    say("StatefulSet snippet, pods %s-0..%d:" % (sts["name"],
                                                 sts["replicas"]))
    check_statefulset_snippet(sts)
    run_tfjob_locally(tfjob, job_name)
    why = Lab.unavailable()
    if why:
        say("pods in network namespaces: skipped (%s)" % why)
    else:
        say("TFJob in network namespaces, one per pod:")
        run_tfjob_in_lab(tfjob, job_name)
        say("StatefulSet in network namespaces, one per pod:")
        run_statefulset_in_lab(tfjob, sts)
    say("kubernetes manifests: all checks passed")


if __name__ == "__main__":
    # Stopped from outside (timeout(1), a CI runner): leave through the
    # finally blocks, which end the processes and remove the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAILED: SIGTERM"))
    try:
        main()
    except Failure as e:
        print("FAILED: %s" % e, file=sys.stderr, flush=True)
        sys.exit(1)
