#!/usr/bin/env python3
# Writes the seed corpus of data_plane_fuzz (corpus/data_plane/); run once,
# by hand, when the frame layout changes. Byte 0 picks the face (even:
# server; 1: client with a pull open; 3: client with a pull of two rows
# open; 7: client with a pull of two parts of a row each open), then
# data_frame headers (actors/data_plane/data_link.hpp) and payloads.
import os
import struct

MAGIC = 0x50445254
(PULL, PUSH, VALUES, ACK, ERROR, ROW_PULL, ROW_PUSH, ROWS, REPLICA,
 ROW_PULLS, ROW_PUSHES, SHARED_OFFER, SHARED_ANSWER) = range(1, 14)


def frame(op, count=0, ident=1, flag=0, shard=0, worker=0, tag=0, table=0):
    # magic, op, flag, table, shard, worker, tag, id, count, batch
    return struct.pack("<IBBHiiqQQq", MAGIC, op, flag, table, shard, worker,
                       tag, ident, count, 0)


def ids(*xs):
    return struct.pack("<%dQ" % len(xs), *xs)


def floats(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def replica_op(kind, worker=0, version=0, tail=b""):
    # A replica_op in CAF's binary form: kind, worker, version, the key
    # (a sequence: its size as one byte below 128), value, then the kind's
    # payload.
    return (struct.pack("<Biq", kind, worker, version) + b"\x00"
            + struct.pack("<d", 0.0) + tail)


def row_chunk(rows):
    # shard, table, rows, pushes, then ids, values and one Adagrad slot as
    # raw sequences (4-float rows).
    n = len(rows)
    return (struct.pack("<iiQq", 0, 0, n, -1) + bytes([n]) + ids(*rows)
            + bytes([4 * n]) + floats(*([0.25] * 4 * n))
            + struct.pack("<Q", 1) + bytes([4 * n])
            + floats(*([0.1] * 4 * n))
            + bytes([n]) + struct.pack("<%dq" % n, *([3] * n))  # ages
            + bytes([n]) + struct.pack("<%dI" % n, *([2] * n)))  # uses


def key_counts(counts, first=0, total=64, replace=0):
    # shard, table, total, first, hashes, replace, then the counters as a
    # raw sequence.
    return (struct.pack("<iiQQi?", 0, 0, total, first, 7, bool(replace))
            + bytes([len(counts)]) + bytes(counts))


def replica_evict(rows):
    return struct.pack("<i", 0) + bytes([len(rows)]) + ids(*rows)


SERVER, CLIENT, ROW_CLIENT, PARTS_CLIENT = (b"\x00", b"\x01", b"\x03",
                                          b"\x07")
JOIN = replica_op(3, worker=5)
ROWS_OP = replica_op(2, tail=row_chunk([7, 8]))
# Ops by their index in replica_op::any, then their raw form.
COUNTS_OP = bytes([7]) + key_counts([1, 2, 255, 0], first=60)
EVICT_OP = bytes([8]) + replica_evict([7, 9])
seeds = {
    "server_pull": SERVER + frame(PULL),
    # An offer of shared memory (the server has it turned off, and no
    # boot id in a corpus is the host's), then a pull; one after the
    # first frame; one announcing too much text.
    "server_shared_offer": SERVER + frame(SHARED_OFFER, 10) + b"not-a-boot"
                           + frame(PULL, ident=2),
    "server_shared_offer_late": SERVER + frame(PULL)
                                + frame(SHARED_OFFER, 4, ident=2) + b"abcd",
    "server_shared_offer_huge": SERVER + frame(SHARED_OFFER, 1 << 20),
    "server_shared_answer": SERVER + frame(SHARED_ANSWER, 4, flag=1)
                            + b"a\nbc",
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
    # The served shard has one table of 4-float rows, vocabulary 1000.
    "server_row_pull": SERVER + frame(ROW_PULL, 2) + ids(3, 999),
    "server_row_push": SERVER + frame(ROW_PUSH, 2) + ids(3, 3)
                       + floats(*([0.5] * 8)) + frame(ROW_PULL, 1, ident=2)
                       + ids(3),
    "server_row_push_no_table": SERVER + frame(ROW_PUSH, 1, table=7) + ids(1),
    "server_row_out_of_vocabulary": SERVER + frame(ROW_PULL, 1) + ids(5000),
    "row_client_rows8": ROW_CLIENT + frame(ROWS, 8) + floats(*range(8)),
    "row_client_rows_too_many": ROW_CLIENT + frame(ROWS, 12)
                                + floats(*range(12)),
    "row_client_ack_to_pull": ROW_CLIENT + frame(ACK),
    # Several tables' rows in one frame: (table, ids) pairs, then the ids
    # (the served shard's one table, twice).
    "server_row_pulls": SERVER + frame(ROW_PULLS, 6, table=2)
                        + ids(0, 1, 0, 1, 3, 999),
    "server_row_pushes": SERVER + frame(ROW_PUSHES, 6, table=2)
                         + ids(0, 1, 0, 1, 3, 4) + floats(*([0.5] * 8))
                         + frame(ROW_PULLS, 4, ident=2, table=1)
                         + ids(0, 2, 3, 4),
    "server_row_pulls_short": SERVER + frame(ROW_PULLS, 5, table=2)
                              + ids(0, 1, 0, 9, 3),
    "server_row_pushes_no_table": SERVER + frame(ROW_PUSHES, 3, table=1)
                                  + ids(7, 1, 1),
    "parts_client_rows8": PARTS_CLIENT + frame(ROWS, 8) + floats(*range(8)),
    "parts_client_rows4": PARTS_CLIENT + frame(ROWS, 4) + floats(*range(4)),
    # A primary's op stream to its replica (actors/shard_replica.cpp).
    "server_replica_join": SERVER + frame(REPLICA, len(JOIN)) + JOIN,
    "server_replica_rows": SERVER + frame(REPLICA, len(ROWS_OP)) + ROWS_OP,
    # A bounded table's admission counts and evictions.
    "server_replica_counts": SERVER + frame(REPLICA, len(COUNTS_OP))
                             + COUNTS_OP,
    "server_replica_evict": SERVER + frame(REPLICA, len(EVICT_OP)) + EVICT_OP,
    "server_replica_truncated_image": SERVER + frame(REPLICA, 16)
                                      + replica_op(1)[:16],
    "server_replica_huge": SERVER + frame(REPLICA, 1 << 40),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "corpus", "data_plane")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
