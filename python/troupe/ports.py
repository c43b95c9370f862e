"""Free TCP ports for a cluster file whose nodes all run on one host.

A cluster file names each node's port before any node starts, so a script
that writes one picks ports that are free now and must stay free until the
nodes bind them. A port from bind(("127.0.0.1", 0)) is drawn from the
kernel's ephemeral range, the range every outgoing connection on the host
(a node's own links, a data plane that binds port 0) also draws its local
port from: one of them can take the port first, and the node then fails
with "cannot listen on 127.0.0.1:PORT: Address already in use". Ports
outside that range are handed out only to whoever asks for them by number.
"""
import random
import socket

_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def _ephemeral_range():
    """The kernel's (low, high) ephemeral ports; Linux's default where the
    file cannot be read (another system)."""
    try:
        with open(_RANGE_FILE) as f:
            low, high = (int(v) for v in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _is_free(host, port):
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def local_ports(count, host="127.0.0.1"):
    """`count` distinct TCP ports of `host` that are free now and lie
    outside the kernel's ephemeral range (below it where there is room,
    10000 up; else above it). Raises OSError when too few are free."""
    if count < 0:
        raise ValueError("count must be >= 0, found %r" % (count,))
    low, high = _ephemeral_range()
    candidates = list(range(10000, low)) or list(
        range(high + 1, 65536))
    rng = random.SystemRandom()
    rng.shuffle(candidates)
    ports = []
    for port in candidates[:5000]:
        if len(ports) == count:
            break
        if _is_free(host, port):
            ports.append(port)
    if len(ports) < count:
        raise OSError("no %d free ports on %s outside the ephemeral range "
                      "%d-%d" % (count, host, low, high))
    return ports
