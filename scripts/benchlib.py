"""The benchmark scripts' shared pieces, in one module instead of a copy in
each script's Python: a free loopback port, a scratch folder that goes away
at exit, and a results file of "key ... value" lines read into lists per key
for medians. scripts/setup.sh puts this folder on PYTHONPATH, so the
scripts' inline Python says `from benchlib import ...`; from bash,
`python3 scripts/benchlib.py port` prints a free port."""

import atexit
import shutil
import socket
import sys
import tempfile
from collections import defaultdict


def free_port():
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scratch_dir():
    """A new folder, removed with what it holds when the script ends."""
    path = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, path, True)
    return path


def read_results(path, key_words):
    """The lines of `path` that are `key_words` words and a number, as
    {(word, ...): [number, ...]} in file order; other lines are skipped."""
    values = defaultdict(list)
    with open(path) as lines:
        for line in lines:
            parts = line.split()
            if len(parts) == key_words + 1:
                values[tuple(parts[:key_words])].append(float(parts[-1]))
    return values


if __name__ == "__main__":
    if sys.argv[1:] == ["port"]:
        print(free_port())
    else:
        sys.exit("usage: benchlib.py port")
