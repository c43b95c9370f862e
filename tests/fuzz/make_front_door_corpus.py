#!/usr/bin/env python3
# Writes the seed corpora of the front door's fuzz targets
# (corpus/key_handshake, corpus/basp_check): valid handshakes and BASP
# streams, the bytes of other protocols a keyed port meets, and the
# headers that crash CAF 0.17. Run by hand when the handshake or the input
# layout changes; files it does not write (regress_*: reproducers of fixed
# findings, copied in as the fuzzer saved them) are left alone. How an
# input becomes the handshake's or the stream's bytes is in
# front_door_inputs.hpp.
import hashlib
import hmac
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(corpus, seeds):
    out = os.path.join(HERE, "corpus", corpus)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


# -- key_handshake ---------------------------------------------------------
# The key the targets hold (fuzz_key_secret()) and another one.
KEY = bytes(0xa0 + i for i in range(32))
OTHER_KEY = bytes(0x10 + i for i in range(32))
MAGIC = b"troupek1"
# The targets' fixed nonces: the server face's, the client face's.
SERVER_NONCE = b"\x5e" * 32
CLIENT_NONCE = b"\xc1" * 32


def key_id(key):
    # cluster_key::id_bytes(): an HMAC of a fixed text, not the key.
    return hmac.new(key, b"troupe cluster key id", hashlib.sha256).digest()[:8]


def mac(key, label, client_nonce, server_nonce):
    return hmac.new(key, label + client_nonce + server_nonce,
                    hashlib.sha256).digest()


def hello(key, client_nonce):
    return MAGIC + key_id(key) + client_nonce


def answer(key, client_nonce, server_nonce):
    return (key_id(key) + server_nonce
            + mac(key, b"troupe server", client_nonce, server_nonce))


def proof(key, client_nonce, server_nonce):
    return mac(key, b"troupe client", client_nonce, server_nonce)


# A TLS 1.2/1.3 ClientHello's record header and start, as a TLS client
# sends a port it takes for a TLS one.
TLS_CLIENT_HELLO = (bytes([0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00,
                           0xc4, 0x03, 0x03]) + bytes(range(32)) + b"\x20"
                    + bytes(range(32, 64)) + b"\x00\x08\x13\x01\x13\x02")
TLS_SERVER_HELLO = (bytes([0x16, 0x03, 0x03, 0x00, 0x7a, 0x02, 0x00, 0x00,
                           0x76, 0x03, 0x03]) + bytes(range(61)))
HTTP = b"GET / HTTP/1.1\r\nHost: troupe\r\nUser-Agent: curl/7.88\r\n\r\n"


def basp(op, payload, op_data=0, source=0, dest=0, flags=0, padding=0):
    # caf/io/basp/header.hpp: operation, 2 padding bytes, flags, payload
    # length, operation data, source and destination actor; big-endian.
    return struct.pack(">BHBIQQQ", op, padding, flags, payload, op_data,
                       source, dest)


CLIENT_HANDSHAKE, SERVER_HANDSHAKE, DIRECT, HEARTBEAT = 1, 0, 2, 6

SERVER, CLIENT, RELAY = b"\x00", b"\x01", b"\x02"


def relay(flip_at, mask, *pieces):
    # Byte 1: the position of the changed byte (hello 0-47, answer 48-119,
    # proof 120-151, above: none), byte 2: its XOR mask, then piece sizes
    # (size % 64 + 1).
    return RELAY + bytes([flip_at, mask]) + bytes(pieces)


key_handshake = {
    # A keyed client's hello: the server answers and waits for the proof.
    "server_hello": SERVER + hello(KEY, b"\x11" * 32),
    "server_hello_no_proof": SERVER + hello(KEY, b"\x11" * 32) + b"\x00" * 32,
    # A client's proof recorded against another server nonce: a replay.
    "server_replayed_proof": SERVER + hello(KEY, b"\x11" * 32)
                             + proof(KEY, b"\x11" * 32, b"\x77" * 32),
    "server_other_key": SERVER + hello(OTHER_KEY, b"\x11" * 32)
                        + proof(OTHER_KEY, b"\x11" * 32, SERVER_NONCE),
    "server_tls_client_hello": SERVER + TLS_CLIENT_HELLO,
    # A plaintext CAF client's first header (the one that crashes CAF 0.17
    # unchecked: a client handshake without payload).
    "server_plaintext_basp": SERVER + basp(CLIENT_HANDSHAKE, 0),
    "server_http": SERVER + HTTP,
    "server_short_magic": SERVER + MAGIC[:7],
    # The key holder's answer to the client face's hello: it proves its own.
    "client_true_answer": CLIENT + answer(KEY, CLIENT_NONCE, b"\x33" * 32),
    "client_true_answer_and_more": CLIENT
                                   + answer(KEY, CLIENT_NONCE, SERVER_NONCE)
                                   + basp(SERVER_HANDSHAKE, 8, 1),
    # The key holder's answer to another client's hello: replayed.
    "client_answer_for_another_nonce": CLIENT
                                       + answer(KEY, b"\x22" * 32,
                                                b"\x33" * 32),
    "client_other_key": CLIENT + answer(OTHER_KEY, CLIENT_NONCE,
                                        b"\x33" * 32),
    "client_no_mac": CLIENT + key_id(KEY) + b"\x33" * 32 + b"\x00" * 32,
    # A server that runs --insecure starts with its BASP handshake.
    "client_plaintext_basp": CLIENT + basp(SERVER_HANDSHAKE, 40, 1)
                             + b"\x00" * 40,
    "client_tls_server_hello": CLIENT + TLS_SERVER_HELLO,
    "client_http": CLIENT + b"HTTP/1.1 400 Bad Request\r\n" + b"\r\n" * 23,
    # A real client and server: unchanged in one piece and a byte at a
    # time, then one byte of each part changed.
    "relay_unchanged": relay(255, 0),
    "relay_unchanged_bytewise": relay(255, 0, 0),
    "relay_unchanged_pieces": relay(200, 0x55, 6, 40, 0, 63, 21),
    "relay_magic": relay(3, 0x01, 4, 12),
    "relay_client_key_id": relay(10, 0x80, 9),
    "relay_client_nonce": relay(30, 0x04, 47),
    "relay_answer_key_id": relay(50, 0x01),
    "relay_answer_nonce": relay(70, 0x10, 1, 2, 3),
    "relay_answer_mac": relay(119, 0x01, 7, 0, 63),
    "relay_proof": relay(130, 0xff, 31, 0),
    "relay_proof_last_byte": relay(151, 0x01, 0),
}

# -- basp_check ------------------------------------------------------------
ACCEPTED, CONNECTED, SMALL_BOUND = 0, 1, 2


def stream(mode, sizes, data):
    # Byte 0: side (bit 0), the 1 MiB bound (bit 1), how many chunk sizes
    # follow (bits 2-5); then the sizes; then the stream.
    assert len(sizes) < 16
    return bytes([mode | len(sizes) << 2]) + bytes(sizes) + data


# What a client sends after the key: its handshake with a payload, a
# heartbeat, a message to actor 2 from actor 1.
GOOD = (basp(CLIENT_HANDSHAKE, 10) + b"\xab" * 10 + basp(HEARTBEAT, 0)
        + basp(DIRECT, 5, 7, 1, 2) + b"\xcd" * 5)
# What a server sends on a connection we made: its handshake (operation
# data: its BASP version), then a heartbeat.
GOOD_SERVER = basp(SERVER_HANDSHAKE, 20, 1) + b"\x11" * 20 + basp(HEARTBEAT, 0)

basp_check = {
    "good_client_bytewise": stream(ACCEPTED, [], GOOD),
    "good_client_chunks": stream(ACCEPTED | SMALL_BOUND, [1, 31, 5, 0, 64],
                                 GOOD),
    "good_server_chunks": stream(CONNECTED, [33, 2], GOOD_SERVER),
    # Payload bytes that have not all come yet: still fine.
    "good_client_partial_payload": stream(ACCEPTED, [7], GOOD[:40]),
    # The header that crashes CAF 0.17: a client handshake, all zero.
    "caf_crash_header": stream(ACCEPTED, [], basp(CLIENT_HANDSHAKE, 0)),
    "caf_crash_header_connected": stream(CONNECTED, [16],
                                         basp(SERVER_HANDSHAKE, 0, 1)),
    # A 4 GiB payload (CAF allocates it before reading).
    "payload_4gib": stream(ACCEPTED, [], basp(CLIENT_HANDSHAKE, 0xffffffff)),
    # 2 MiB: over the small bound, under the default one.
    "payload_2mib_small_bound": stream(ACCEPTED | SMALL_BOUND, [32],
                                       basp(CLIENT_HANDSHAKE, 2 << 20)),
    "payload_2mib_default_bound": stream(ACCEPTED, [32],
                                         basp(CLIENT_HANDSHAKE, 2 << 20)),
    "second_server_handshake": stream(CONNECTED, [3],
                                      GOOD_SERVER + basp(SERVER_HANDSHAKE,
                                                         20, 1)),
    "heartbeat_first": stream(ACCEPTED, [], basp(HEARTBEAT, 0) + GOOD),
    "message_without_receiver": stream(ACCEPTED, [9],
                                       GOOD + basp(DIRECT, 5, 7, 1, 0)),
    "unknown_flags": stream(ACCEPTED, [], basp(CLIENT_HANDSHAKE, 4, flags=0x80)
                            + b"\x00" * 4),
    "nonzero_padding": stream(ACCEPTED, [], basp(CLIENT_HANDSHAKE, 4,
                                                 padding=1) + b"\x00" * 4),
    "tls_client_hello": stream(ACCEPTED, [5], TLS_CLIENT_HELLO),
    "plaintext_http": stream(CONNECTED, [], HTTP),
    # The key handshake's hello sent where BASP is expected.
    "key_hello": stream(ACCEPTED, [8], hello(KEY, b"\x11" * 32)),
}

write("key_handshake", key_handshake)
write("basp_check", basp_check)
