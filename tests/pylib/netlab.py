"""A lab of Linux network namespaces for the tests that run real nodes as
if on several hosts: each member gets a namespace with eth0 at an address
of its own, all on one bridge in a further namespace (the switch), so no
traffic or interface ever touches the host's own network. The switch's
port of a member can be taken down and up again: the member's links are
cut while its process runs on, as when a cable or a switch fails. Only as
root."""

import os
import subprocess

from procs import Failure

# From the Debian package iproute2. A fixed path, not a PATH lookup, so a
# test never runs some other `ip` as root.
IP = "/usr/sbin/ip"


def ip(*args):
    out = subprocess.run([IP] + list(args), capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0:
        raise Failure("ip %s: %s" % (" ".join(args), out.stderr.strip()))


class Lab:
    """`members` namespaces named PREFIX<pid>-n<i>, member i at
    10.<net>.<subnet>.<i + 1>/24 (subnet from the pid, so that two labs
    at once do not share addresses)."""

    def __init__(self, members, prefix="trlab", net=215):
        self.prefix = "%s%d" % (prefix, os.getpid())
        self.net = net
        self.subnet = os.getpid() % 250 + 1
        self.made = []
        try:
            sw = self.switch()
            self.add_ns(sw)
            ip("-n", sw, "link", "add", "name", "br0", "type", "bridge")
            ip("-n", sw, "link", "set", "br0", "up")
            for i in range(members):
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

    @classmethod
    def unavailable(cls, probe=None):
        """Why this machine cannot build a lab ("" when it can), tried with
        a lab of one member that runs `probe` (argv; default /bin/true)."""
        if os.geteuid() != 0:
            return "not root"
        if not os.access(IP, os.X_OK):
            return "no %s (iproute2)" % IP
        try:
            lab = cls(1)
        except Failure as e:
            return str(e)
        try:
            out = subprocess.run(probe(lab) if probe else
                                 lab.command(0, ["/bin/true"]),
                                 capture_output=True, text=True, timeout=30)
            if out.returncode != 0:
                return "running in a namespace: " + out.stderr.strip()
        finally:
            lab.remove()
        return ""

    def add_ns(self, name):
        ip("netns", "add", name)
        self.made.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def switch(self):
        return self.prefix + "-sw"

    def ns(self, i):
        return "%s-n%d" % (self.prefix, i)

    def address(self, i):
        return "10.%d.%d.%d" % (self.net, self.subnet, i + 1)

    def command(self, i, argv):
        """argv in member i's namespace."""
        return [IP, "netns", "exec", self.ns(i)] + list(argv)

    def command_with_hosts(self, i, hosts_file, argv):
        """argv in member i's namespace, with hosts_file as its /etc/hosts
        (`ip netns exec` gives it a mount namespace of its own)."""
        return [IP, "netns", "exec", self.ns(i), "/bin/sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"',
                hosts_file] + list(argv)

    def cut(self, i):
        """Takes member i's switch port down: its links carry nothing (TCP
        connections stay open and stall) until mend(i)."""
        ip("-n", self.switch(), "link", "set", "p%d" % i, "down")

    def mend(self, i):
        ip("-n", self.switch(), "link", "set", "p%d" % i, "up")

    def remove(self):
        for name in reversed(self.made):
            subprocess.run([IP, "netns", "del", name], capture_output=True,
                           timeout=30)
        self.made = []
