// libFuzzer target for the cluster key's handshake (actors/net/key_handshake):
// the first input byte picks the face, the rest is what the other side
// sends (mod 3):
//   0: the server face: a stranger's bytes to a keyed port's server;
//   1: the client face: a server's answer to a client;
//   2: the relay face: a real client and server (the socket drivers) with
//      the input choosing one byte of their exchange to change and the
//      pieces the bytes travel in.
// How the input becomes the handshake's bytes, and the promises checked
// (no stranger gets through, any change to a proof or nonce is refused,
// no end reads past the handshake), are in front_door_inputs.hpp; a
// finding is a crash, a sanitizer report, a broken promise (a trap), a
// hang (-timeout) or an allocation over scripts/fuzz.sh's
// -malloc_limit_mb.
#include "tests/fuzz/front_door_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::trap_if_broken(troupe::fuzz::run_key_handshake(data, size));
  return 0;
}
