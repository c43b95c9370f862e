#include "runtime/backend.hpp"

namespace troupe {

const char* to_string(activation act) {
  switch (act) {
    case activation::identity: return "identity";
    case activation::sigmoid: return "sigmoid";
    case activation::tanh: return "tanh";
    case activation::relu: return "relu";
  }
  return "?";
}

} // namespace troupe
