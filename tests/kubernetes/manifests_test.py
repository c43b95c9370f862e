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
import re
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

try:
    import yaml
except ImportError:
    sys.exit("FAILED: no PyYAML for %s (Debian: python3-yaml, which "
             "scripts/setup.sh installs)" % sys.executable)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "kubernetes")
BUILD = os.environ.get("TROUPE_BUILD_DIR", os.path.join(ROOT, "build"))
NODE = os.path.join(BUILD, "apps", "troupe-node")
IP = "/usr/sbin/ip"

# What the training operator (kubeflow.org/v1) does: TF_CONFIG goes into
# the container of this name, with the port of this name (else 2222).
OPERATOR_CONTAINER = "tensorflow"
OPERATOR_PORT_NAME = "tfjob-port"
OPERATOR_DEFAULT_PORT = 2222
NAMESPACE = "default"
REPLICAS = {"Chief": 1, "PS": 2, "Worker": 2}

SECRET = "troupe-cluster-key"
# One cluster's run, from the first start to the last exit (about 5 s on
# 2 cores), and how long its nodes wait for each other: a run that cannot
# form fails inside ctest's 300 s.
RUN_SECONDS = 80
NODE_TIMEOUT_S = 60


# --- the manifests

def load(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    say("%s: %s" % (name, ", ".join(
        "%s %s" % (d["kind"], d["metadata"]["name"]) for d in docs)))
    return docs


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    check(len(found) == 1, "expected one %s, found %d" % (kind, len(found)))
    return found[0]


def tfjob_pod_templates(tfjob):
    """{"Chief": pod template, ...}, the replica counts checked."""
    replicas = tfjob["spec"]["tfReplicaSpecs"]
    counts = {t: s.get("replicas", 1) for t, s in replicas.items()}
    check(counts == REPLICAS, "TFJob replicas: expected %s, found %s"
          % (REPLICAS, counts))
    return {t: s["template"] for t, s in replicas.items()}


def container(pod_spec, name, where):
    found = [c for c in pod_spec["containers"] if c["name"] == name]
    check(len(found) == 1, "%s: no container %r, only %s" % (where, name, [
        c["name"] for c in pod_spec["containers"]]))
    return found[0]


# --- what troupe-node accepts

def node_options():
    """{"--config": True, "--fresh": False, ...}: whether each flag that
    `troupe-node --help` lists takes a value."""
    out = subprocess.run([NODE, "--help"], capture_output=True, text=True,
                         timeout=30)
    check(out.returncode == 0, "troupe-node --help failed", out.stderr)
    options = {}
    for m in re.finditer(r"^\s+(?:-\w,)?(--[a-z][\w-]*)( (?:TEXT|INT|UINT|"
                         r"FLOAT)\b)?", out.stdout, re.M):
        options[m.group(1)] = m.group(2) is not None
    check("--config" in options and "--key" in options,
          "troupe-node --help lists no --config or --key", out.stdout)
    return options


def parse_flags(args, options, where):
    """{"--config": "/etc/...", ...} from a container's args."""
    flags, i = {}, 0
    while i < len(args):
        flag = args[i]
        check(flag in options, "%s: %s is not a troupe-node flag" %
              (where, flag))
        if options[flag]:
            check(i + 1 < len(args), "%s: %s has no value" % (where, flag))
            flags[flag] = args[i + 1]
            i += 2
        else:
            flags[flag] = True
            i += 1
    check("--config" in flags and "--key" in flags,
          "%s: expected --config and --key in %s" % (where, args))
    check("--node" not in flags,
          "%s: --node names the node that TF_CONFIG should" % where)
    return flags


def check_config_is_read(run_json, tmp):
    """troupe-node reads the whole config (and finds the data set) before
    it looks at TF_CONFIG: a TF_CONFIG naming a task that is not there
    fails only after the config has passed."""
    path = os.path.join(tmp, "probe.json")
    with open(path, "w") as f:
        f.write(run_json)
    bad = {"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:3"],
                       "worker": ["127.0.0.1:5"]},
           "task": {"type": "worker", "index": 7}}
    out = subprocess.run([NODE, "--config", path, "--insecure"],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, TF_CONFIG=json.dumps(bad)))
    expected = ("troupe-node: error: TF_CONFIG: /task/index: 7, but "
                "/cluster/worker lists 1 task")
    check(out.returncode != 0 and expected in out.stderr,
          "run.json is not a config troupe-node reads", out.stdout +
          out.stderr)
    say("run.json: troupe-node reads it (and the data set it names), then "
        "turns to TF_CONFIG")


# --- the containers and the objects around them

def check_run_config(config_map):
    run_json = config_map["data"]["run.json"]
    cfg = json.loads(run_json)
    cluster = cfg.get("cluster", {})
    check("nodes" not in cluster,
          "run.json lists /cluster/nodes: TF_CONFIG should name them")
    offset = cluster.get("data_port_offset", 0)
    check(offset > 0, "run.json: /cluster/data_port_offset must be set, "
          "else the data planes listen at ports no pod declares")
    return run_json, offset


def check_mounts(pod_spec, spec, flags, config_map, where):
    """The ConfigMap and the Secret mounted where --config and --key look;
    returns {mount path: volume} for the local runs."""
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in spec[
        "volumeMounts"]}
    for m in spec["volumeMounts"]:
        check(m.get("readOnly") is True, "%s: %s is not mounted read-only"
              % (where, m["mountPath"]))
    config_dir, config_file = os.path.split(flags["--config"])
    volume = mounts.get(config_dir, {})
    check(volume.get("configMap", {}).get("name") ==
          config_map["metadata"]["name"],
          "%s: --config %s: no ConfigMap %s mounted at %s" % (
              where, flags["--config"], config_map["metadata"]["name"],
              config_dir))
    check(config_file in config_map["data"], "%s: the ConfigMap has no %s"
          % (where, config_file))
    key_dir, key_file = os.path.split(flags["--key"])
    secret = mounts.get(key_dir, {}).get("secret", {})
    check(secret.get("secretName") == SECRET,
          "%s: --key %s: no Secret %s mounted at %s" % (
              where, flags["--key"], SECRET, key_dir))
    check(secret.get("defaultMode") == 0o400,
          "%s: the key's mode is %04o; troupe refuses one its group or "
          "others may read" % (where, secret.get("defaultMode", 0o644)))
    check("items" not in secret, "%s: the Secret's items rename its key"
          % where)
    return mounts, key_file


def check_ports(spec, control, offset, where):
    ports = {p["containerPort"]: p.get("name") for p in spec["ports"]}
    check(control in ports and control + offset in ports,
          "%s: container ports %s lack the control port %d or the data port "
          "%d" % (where, sorted(ports), control, control + offset))
    return ports


def check_readme(image, key_file):
    with open(os.path.join(EXAMPLES, "README.md")) as f:
        readme = f.read()
    m = re.search(r"kubectl create secret generic (\S+) "
                  r"--from-literal=([\w.-]+)=\$\(openssl rand -hex 32\)",
                  readme)
    check(m is not None, "README.md: no `kubectl create secret generic`")
    check(m.group(1) == SECRET and m.group(2) == key_file,
          "README.md makes Secret %s with key %s; the manifests mount %s "
          "and read %s" % (m.group(1), m.group(2), SECRET, key_file))
    check("docker build -t %s " % image in readme,
          "README.md builds no image %s" % image)
    say("README.md: makes Secret %s with key %s, builds image %s"
        % (SECRET, key_file, image))


def check_tfjob(docs, options):
    """Returns what the local runs need: the pod specs, the flags, the
    ConfigMap's run.json, the offset and the volumes by mount path."""
    config_map = one(docs, "ConfigMap")
    tfjob = one(docs, "TFJob")
    check(tfjob["apiVersion"] == "kubeflow.org/v1",
          "TFJob apiVersion %s" % tfjob["apiVersion"])
    run_json, offset = check_run_config(config_map)
    templates = tfjob_pod_templates(tfjob)
    specs = {t: template["spec"] for t, template in templates.items()}
    flags = mounts = key_file = None
    images = set()
    for rtype, pod_spec in specs.items():
        where = "TFJob %s" % rtype
        spec = container(pod_spec, OPERATOR_CONTAINER, where)
        images.add(spec["image"])
        check(spec["command"] == ["troupe-node"],
              "%s: command %s" % (where, spec["command"]))
        check(not any(e["name"] == "TF_CONFIG" for e in spec.get("env", [])),
              "%s sets TF_CONFIG, which the operator writes" % where)
        these = parse_flags(spec["args"], options, where)
        check(flags is None or these == flags,
              "%s: flags %s differ from %s" % (where, these, flags))
        flags = these
        mounts, key_file = check_mounts(pod_spec, spec, flags, config_map,
                                        where)
        ports = check_ports(spec, operator_port(pod_spec), offset, where)
        check(ports.get(operator_port(pod_spec)) == OPERATOR_PORT_NAME,
              "%s: the control port must be named %s, or the operator "
              "writes %d" % (where, OPERATOR_PORT_NAME, OPERATOR_DEFAULT_PORT))
        say("%s: troupe-node %s; %s; ports %s" % (
            where, " ".join(spec["args"]), ", ".join(
                "%s at %s" % (kind_of(v), path) for path, v in mounts.items()),
            ", ".join("%s %d" % (n, p) for p, n in ports.items())))
    check(len(images) == 1, "TFJob replicas run different images: %s"
          % images)
    return {"templates": templates, "pod_specs": specs, "flags": flags,
            "args": spec["args"], "run_json": run_json, "offset": offset,
            "mounts": mounts, "key_file": key_file, "image": images.pop(),
            "config_map": config_map}


def check_statefulset(docs, options, tfjob):
    config_map = one(docs, "ConfigMap")
    check(config_map == tfjob["config_map"],
          "the ConfigMaps of statefulset.yaml and tfjob.yaml differ")
    service = one(docs, "Service")
    sts = one(docs, "StatefulSet")
    pod_spec = sts["spec"]["template"]["spec"]
    check(len(pod_spec["containers"]) == 1, "StatefulSet: one container")
    spec = pod_spec["containers"][0]
    where = "StatefulSet %s" % sts["metadata"]["name"]
    check(spec["image"] == tfjob["image"], "%s runs %s, the TFJob %s" % (
        where, spec["image"], tfjob["image"]))
    check(spec["command"][:2] == ["/bin/sh", "-c"]
          and spec["command"][3:] == ["troupe-node"],
          "%s: expected command /bin/sh -c SNIPPET troupe-node, found %s"
          % (where, spec["command"]))
    flags = parse_flags(spec["args"], options, where)
    check(flags == tfjob["flags"], "%s: flags %s differ from the TFJob's"
          % (where, flags))
    check_mounts(pod_spec, spec, flags, config_map, where)
    env = {e["name"]: e["value"] for e in spec.get("env", [])}
    replicas = sts["spec"]["replicas"]
    check(replicas == 1 + int(env["TROUPE_PS"]) + int(env["TROUPE_WORKERS"]),
          "%s: %d replicas, but TROUPE_PS %s and TROUPE_WORKERS %s"
          % (where, replicas, env["TROUPE_PS"], env["TROUPE_WORKERS"]))
    named = {p.get("name"): p["containerPort"] for p in spec["ports"]}
    check("control" in named, "%s: no container port named control" % where)
    control = named["control"]
    ports = check_ports(spec, control, tfjob["offset"], where)
    # A headless Service: the pods' names resolve to their own addresses.
    check(service["spec"].get("clusterIP") == "None"
          and service["spec"].get("publishNotReadyAddresses") is True,
          "Service %s: expected clusterIP None and publishNotReadyAddresses"
          % service["metadata"]["name"])
    check(sts["spec"]["serviceName"] == service["metadata"]["name"],
          "%s: serviceName %s, but the Service is %s" % (
              where, sts["spec"]["serviceName"],
              service["metadata"]["name"]))
    labels = sts["spec"]["template"]["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in
              service["spec"]["selector"].items()),
          "Service selector %s does not select the pods (%s)"
          % (service["spec"]["selector"], labels))
    check(sts["spec"]["selector"]["matchLabels"] == labels,
          "%s: selector and pod labels differ" % where)
    for rtype, template in tfjob["templates"].items():
        theirs = template.get("metadata", {}).get("labels", {})
        check(not all(theirs.get(k) == v for k, v in
                      service["spec"]["selector"].items()),
              "Service %s would select the TFJob's %s pods too" % (
                  service["metadata"]["name"], rtype))
    exposed = {p.get("targetPort", p["port"]) for p in
               service["spec"]["ports"]}
    check(set(ports) <= exposed, "Service %s exposes %s, the pods listen at "
          "%s" % (service["metadata"]["name"], sorted(exposed),
                  sorted(ports)))
    say("%s: %d pods, sh -c SNIPPET troupe-node %s; Service %s (headless) "
        "exposes %s" % (where, replicas, " ".join(spec["args"]),
                        service["metadata"]["name"],
                        ", ".join(str(p) for p in sorted(exposed))))
    return {"spec": spec, "env": env, "replicas": replicas,
            "service": service["metadata"]["name"],
            "name": sts["metadata"]["name"], "control": control,
            "mounts": tfjob["mounts"]}


def kind_of(volume):
    if "configMap" in volume:
        return "ConfigMap " + volume["configMap"]["name"]
    if "secret" in volume:
        return "Secret " + volume["secret"]["secretName"]
    return "volume " + volume["name"]


def operator_port(pod_spec):
    for c in pod_spec["containers"]:
        if c["name"] == OPERATOR_CONTAINER:
            for p in c.get("ports", []):
                if p.get("name") == OPERATOR_PORT_NAME:
                    return p["containerPort"]
    return OPERATOR_DEFAULT_PORT


# --- TF_CONFIG as the training operator writes it

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

class Lab:
    """One network namespace per pod, each with eth0 at an address of its
    own on a bridge in a further namespace; nothing reaches the host's
    network. Only as root."""

    def __init__(self, pods):
        self.prefix = "trk8s%d" % os.getpid()
        self.subnet = os.getpid() % 250 + 1
        self.made = []
        try:
            sw = self.prefix + "-sw"
            self.add_ns(sw)
            ip("-n", sw, "link", "add", "name", "br0", "type", "bridge")
            ip("-n", sw, "link", "set", "br0", "up")
            for i in range(pods):
                ns = self.ns(i)
                self.add_ns(ns)
                ip("-n", sw, "link", "add", "name", "p%d" % i, "type", "veth",
                   "peer", "name", "eth0", "netns", ns)
                ip("-n", sw, "link", "set", "p%d" % i, "master", "br0")
                ip("-n", sw, "link", "set", "p%d" % i, "up")
                ip("-n", ns, "addr", "add", self.address(i) + "/24", "dev",
                   "eth0")
                ip("-n", ns, "link", "set", "eth0", "up")
        except Exception:
            self.remove()
            raise

    @staticmethod
    def unavailable():
        """Why this machine cannot build a lab ("" when it can), tried with
        a lab of one pod."""
        if os.geteuid() != 0:
            return "not root"
        if not os.access(IP, os.X_OK):
            return "no %s (iproute2)" % IP
        try:
            lab = Lab(1)
        except Failure as e:
            return str(e)
        try:
            with tempfile.NamedTemporaryFile("w") as hosts:
                out = subprocess.run(lab.command(0, hosts.name, ["/bin/true"]),
                                     capture_output=True, text=True,
                                     timeout=30)
            if out.returncode != 0:
                return "a hosts file of its own: " + out.stderr.strip()
        finally:
            lab.remove()
        return ""

    def add_ns(self, name):
        ip("netns", "add", name)
        self.made.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def ns(self, i):
        return "%s-n%d" % (self.prefix, i)

    def address(self, i):
        return "10.215.%d.%d" % (self.subnet, i + 1)

    def command(self, i, hosts_file, argv):
        """argv in pod i's namespace, with hosts_file as its /etc/hosts
        (`ip netns exec` gives it a mount namespace of its own)."""
        return [IP, "netns", "exec", self.ns(i), "/bin/sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"',
                hosts_file] + argv

    def remove(self):
        for name in reversed(self.made):
            subprocess.run([IP, "netns", "del", name], capture_output=True,
                           timeout=30)
        self.made = []


def ip(*args):
    out = subprocess.run([IP] + list(args), capture_output=True, text=True,
                         timeout=30)
    check(out.returncode == 0, "ip %s: %s" % (" ".join(args),
                                              out.stderr.strip()))


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
