#!/usr/bin/env python3
# Writes the seed corpus of data_plane_fuzz (corpus/data_plane/); run once,
# by hand, when the frame layout changes. Byte 0 picks the face (0: server,
# 1: client), then data_frame headers (actors/data_link.hpp) and payloads.
import os
import struct

MAGIC = 0x50445254
PULL, PUSH, VALUES, ACK, ERROR = 1, 2, 3, 4, 5


def frame(op, count=0, ident=1, flag=0, shard=0, worker=0, tag=0):
    # magic, op, flag, reserved, shard, worker, tag, id, count, batch
    return struct.pack("<IBBHiiqQQq", MAGIC, op, flag, 0, shard, worker, tag,
                       ident, count, 0)


def floats(*xs):
    return struct.pack("<%df" % len(xs), *xs)


SERVER, CLIENT = b"\x00", b"\x01"
seeds = {
    "server_pull": SERVER + frame(PULL),
    "server_push3": SERVER + frame(PUSH, 3) + floats(1, 1, 1),
    "server_push_then_pull": SERVER + frame(PUSH, 3) + floats(0.5, 0, -1)
                             + frame(PULL, ident=2, tag=1),
    "server_huge_count": SERVER + frame(PUSH, 1 << 40),
    "server_garbage": SERVER + b"x" * 60,
    "client_values3": CLIENT + frame(VALUES, 3) + floats(1, 2, 3),
    "client_ack": CLIENT + frame(ACK, tag=4, flag=1),
    "client_error": CLIENT + frame(ERROR, 5, flag=9) + b"oops!",
    "client_huge_count": CLIENT + frame(VALUES, 1 << 40),
    "client_garbage": CLIENT + b"\xff" * 60,
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "corpus", "data_plane")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
