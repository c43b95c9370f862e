// libFuzzer target: a model's layer list (/model/layers), read, built and,
// when small, run for one training and one evaluation pass; see
// layer_list_inputs.hpp. A finding is a crash, a sanitizer report, a
// broken invariant (a trap), a hang or an allocation over the limit.
#include <cstdio>

#include "tests/fuzz/layer_list_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto broken = troupe::fuzz::read_layer_list(data, size);
  if (!broken.empty()) {
    std::fprintf(stderr, "troupe fuzz: %s\n", broken.c_str());
    __builtin_trap();
  }
  return 0;
}
