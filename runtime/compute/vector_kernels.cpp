// The baseline set and the choice of set. This file is built for the
// compiler's default target; vector_kernels_avx2.cpp and
// vector_kernels_avx512.cpp build the same loops for their sets.
#include "runtime/compute/cpu_features.hpp"
#include "runtime/compute/vector_loops.hpp"

namespace troupe::vec {

const kernels& generic_kernels() {
  static const kernels set = make_set("generic");
  return set;
}

const kernels& chosen_kernels() {
  static const kernels& chosen = pick_kernels(avx512_kernels(), avx2_kernels(),
                                              generic_kernels());
  return chosen;
}

} // namespace troupe::vec
