"""What the Python tests that start real programs share: checks that say
what held, bounded waits, free ports below the ephemeral range, stopping
a process, the skip status ctest reads, troupe's programs in the build
folder, and the frame of a test's run: its scratch folder and teardown.

Each test script finds this folder on PYTHONPATH (tests/CMakeLists.txt,
troupe_python_test)."""

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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


_handed_out = set()


def free_ports(count, offset=1, spacing=1):
    """`count` ports p, each free on 127.0.0.1 now with p + offset, ...
    (spacing ports in all from each p); below the ephemeral range, so that
    no outgoing connection takes one between this check and a bind, and
    none handed out before by this process (two nodes of one cluster file
    given one port fail the file's check)."""
    taken, ports = _handed_out, []
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


def troupe_program(name):
    """The path of troupe's program `name` in TROUPE_BUILD_DIR/apps; a
    Failure when it is not there."""
    path = os.path.join(os.environ["TROUPE_BUILD_DIR"], "apps", name)
    if not os.access(path, os.X_OK):
        raise Failure("no program " + path)
    return path


class ScratchRun:
    """What scratch_run yields: the run's scratch folder, what to show when
    it fails and how to stop what it started (both set by the test once it
    has something to show and to stop), and the exit code at the end."""

    def __init__(self, folder):
        self.folder = folder
        self.on_failure = lambda: None
        self.teardown = lambda: None
        self.exit_code = 1


def _stopped_by_signal(signum, _frame):
    raise Failure("stopped by signal %d" % signum)


@contextlib.contextmanager
def scratch_run(prefix):
    """The frame of a test that starts daemons and programs: a scratch
    folder named `prefix`..., a SIGTERM (a stopped ctest) turned into a
    Failure so that the teardown still runs, a Failure said with what
    on_failure() shows, then teardown() in full and the folder removed,
    and the outcome with the time it took. After the with block, the
    ScratchRun's exit_code is 0 when the block ran through."""
    signal.signal(signal.SIGTERM, _stopped_by_signal)
    run = ScratchRun(tempfile.mkdtemp(prefix=prefix))
    started = time.monotonic()
    try:
        yield run
        run.exit_code = 0
    except Failure as e:
        say("FAILED: %s" % e)
        run.on_failure()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a teardown in full
        run.teardown()
        shutil.rmtree(run.folder, ignore_errors=True)
    say("%s in %.1f s" % ("failed" if run.exit_code else "passed",
                          time.monotonic() - started))
