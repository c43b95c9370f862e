"""What the Python tests that start real programs share: checks that say
what held, bounded waits, free ports below the ephemeral range, stopping
a process, and the skip status ctest reads.

Each test script finds this folder on PYTHONPATH (tests/CMakeLists.txt,
troupe_python_test)."""

import os
import random
import shutil
import socket
import subprocess
import sys
import time

# ctest's SKIP_RETURN_CODE for these tests.
SKIP = 77


class Failure(Exception):
    pass


def say(text):
    print(text, flush=True)


def check(ok, what, detail=""):
    """Raises Failure with `what` (and `detail`) unless `ok`; else says
    what held."""
    if not ok:
        raise Failure(what + (":\n" + detail if detail else ""))
    say("ok: " + what)


def wait_until(what, ready, timeout_s, given_up=None, deadline=None):
    """ready() until it returns something true, at most timeout_s (and
    never past the monotonic `deadline`, a whole test's budget); given_up()
    returning a text ends the wait at once (a process that has ended
    cannot make ready() true any more)."""
    until = time.monotonic() + timeout_s
    if deadline is not None:
        until = min(until, deadline)
    while time.monotonic() < until:
        value = ready()
        if value:
            return value
        why = given_up() if given_up else None
        if why:
            raise Failure("gave up waiting for %s: %s" % (what, why))
        time.sleep(0.2)
    raise Failure("timed out after %d s waiting for %s" % (timeout_s, what))


def read(path):
    """The file's text, "" when it is not there (yet)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def missing_tools(tools, install_hint):
    """Exits when a tool of {name: path or None} is missing: 77 (skipped)
    on a developer's machine, 1 under CI=..., which installs them
    (scripts/setup.sh) and where a skip would hide a broken set-up."""
    missing = [n for n, p in tools.items() if p is None]
    if missing:
        say("%s not installed (Debian: %s)" % (", ".join(missing),
                                               install_hint))
        sys.exit(1 if os.environ.get("CI") else SKIP)


def sbin_which(name):
    """shutil.which, also in /usr/sbin and /sbin, where Debian puts the
    daemons and which a user's PATH may lack."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return shutil.which(name, path=path)


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(count, offset=1, spacing=1):
    """`count` ports p, each free on 127.0.0.1 now with p + offset, ...
    (spacing ports in all from each p); below the ephemeral range, so that
    no outgoing connection takes one between this check and a bind."""
    taken, ports = set(), []
    rng = random.SystemRandom()
    for _ in range(2000):
        p = rng.randrange(20000, 32000 - max(offset, spacing))
        wanted = {p + i * offset for i in range(spacing)}
        if wanted & taken or not all(port_is_free(q) for q in wanted):
            continue
        taken |= wanted
        ports.append(p)
        if len(ports) == count:
            return ports
    raise Failure("no %d free ports on 127.0.0.1" % count)


def free_port():
    return free_ports(1)[0]


def free_ports_in_a_row(count):
    """The first of `count` free ports in a row."""
    return free_ports(1, offset=1, spacing=count)[0]


def stop_process(p, grace_s=10):
    """SIGTERM, then SIGKILL after grace_s; reaps it."""
    if p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(grace_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(5)
