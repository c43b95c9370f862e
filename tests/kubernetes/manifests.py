"""The Kubernetes examples' manifests read and checked without running
them (manifests_test.py runs them): every document loads, the containers'
flags are troupe-node's, the ConfigMap's run.json is a config troupe-node
reads, mounts, ports, the README's Secret."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "pylib"))
from procs import check, say  # noqa: E402 (the path above first)

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
