// libFuzzer target for the BASP check (actors/net/basp_check): byte 0 picks
// the side, the payload bound and how many chunk sizes follow; the rest is
// the BASP stream a peer sends after the key handshake.
// How the input becomes the stream and its chunks, and the promises
// checked (the same verdict whole and in chunks, only headers CAF 0.17
// can take get through, no complete header goes unchecked, a refusal
// sticks), are in front_door_inputs.hpp; a finding is a crash, a
// sanitizer report, a broken promise (a trap), a hang (-timeout) or an
// allocation over scripts/fuzz.sh's -malloc_limit_mb.
#include "tests/fuzz/front_door_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::trap_if_broken(troupe::fuzz::run_basp_check(data, size));
  return 0;
}
