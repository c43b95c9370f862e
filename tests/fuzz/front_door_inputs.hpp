// Turns arbitrary bytes into what troupe's front door meets on a new
// connection and runs the front door's checks on them: the key handshake
// (actors/net/key_handshake.hpp) and the BASP check
// (actors/net/basp_check.hpp). The libFuzzer targets key_handshake_fuzz and
// basp_check_fuzz call these functions, and so does
// tests/actors/fuzz_corpus_test.cpp in the default build, so an input of
// tests/fuzz/corpus/ replays there exactly as the fuzzer ran it.
//
// Besides crashes and sanitizer reports, each function checks what the
// front door promises (a stranger never gets through, any change to a
// handshake's bytes is refused, the BASP check lets through only headers
// CAF can take, whatever the chunking); a broken promise is a finding,
// reported in front_door_outcome::broken.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::fuzz {

/// What one input did.
struct front_door_outcome {
  /// The handshake completed (client face, or both ends of the relay), or
  /// the BASP stream passed the check.
  bool admitted = false;
  std::string refused; ///< the first refusal's text; or empty
  std::string broken;  ///< the promise the input broke; or empty
};

/// The cluster key every face holds (a stranger's input does not).
std::array<uint8_t, 32> fuzz_key_secret();

/// Byte 0 picks the face (mod 3); the rest is:
///   0: the server face: what a stranger sends a keyed port, fed to a
///      server key_exchange (nonce: 32 bytes of 0x5e) in pieces of
///      exactly wants() bytes until it refuses, is done or the input
///      ends. Done is a finding: only the key's holder can make the proof.
///   1: the client face: what a server answers a client key_exchange
///      (nonce: 32 bytes of 0xc1). Done is allowed only for the one true
///      answer (the answer a server with the key and the answer's own
///      server nonce gives), and then the queued proof must satisfy that
///      server; a refusal must queue nothing.
///   2: the relay face: a client and a server key_handshake (the socket
///      drivers, fresh random nonces) on two socket pairs, with this
///      function as the wire between them. Byte 1: the position of one
///      byte of the 152 the handshake sends (hello 0-47, answer 48-119,
///      proof 120-151; beyond: none) that is XORed with byte 2; the
///      bytes after it are the sizes of the pieces the wire forwards
///      (1-64 each, taken in turn; one piece of all when there are none).
///      A change to the magic, the client's nonce or the answer must make
///      the client or the server refuse, a change to the proof the server;
///      no change (or one to the client's key id, which only names the
///      key) must let both through. Each end must leave the bytes that
///      follow the handshake unread.
front_door_outcome run_key_handshake(const uint8_t* data, size_t size);

/// Byte 0: bit 0 picks the side (0: a connection we accepted, 1: one we
/// made); bit 1 bounds payloads at 1 MiB (else basp_check's default);
/// bits 2-5: how many of the bytes after byte 0 are chunk sizes (0-255
/// each, taken in turn; 0 is an empty feed; none, or all 0: a byte at a
/// time). The rest is the BASP stream, fed to one basp_check whole and to
/// another in those chunks: both must give the same verdict, text and
/// messages() count, refusals must stick, and every header counted must be
/// complete and keep the rules CAF 0.17 relies on (a BASP operation, zero
/// padding, the payload within the bound and present for a handshake, the right
/// handshake first); no complete header may go unchecked.
front_door_outcome run_basp_check(const uint8_t* data, size_t size);

/// For the fuzz targets: a broken promise is printed and trapped, so
/// libFuzzer records the input.
void trap_if_broken(const front_door_outcome& o);

} // namespace troupe::fuzz
