// The layer-list fuzz target's input (tests/fuzz/layer_list_fuzz.cpp),
// also replayed from tests/fuzz/corpus/layer_list/ by
// tests/models/layer_list_test.cpp in the default build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::fuzz {

/// The input is the value of /model/layers in a config that is otherwise
/// valid. Each layer the reader accepts must read back from the form a
/// checkpoint records (parse_layer_spec). A list it accepts is built for
/// 12x10x3 samples of 5
/// classes; one that builds and is small (under 2^20 parameters and
/// activations) also runs a training pass and an evaluation pass of 2
/// samples. Returns the invariant a successful read or build broke (an
/// error that is not one line naming /model, a shape that does not add
/// up, a non-finite loss), or "".
std::string read_layer_list(const uint8_t* data, size_t size);

} // namespace troupe::fuzz
