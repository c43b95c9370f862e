// libFuzzer target: embedding tables in checkpoints (table_file_reader). How
// the input becomes what the reader takes, and the invariants a successful read
// must keep, are in reader_inputs.hpp; a finding is a crash, a sanitizer
// report, a broken invariant (a trap), a hang (-timeout) or an allocation
// over scripts/fuzz.sh's -malloc_limit_mb.
#include "tests/fuzz/reader_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::run_or_trap(troupe::fuzz::read_table_file, data, size);
  return 0;
}
