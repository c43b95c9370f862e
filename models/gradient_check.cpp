#include "models/gradient_check.hpp"

#include <cmath>
#include <sstream>
#include <vector>

namespace troupe {

gradient_check_report check_layer_gradients(layer& l, compute_backend& be,
                                            float* params, size_t n_params,
                                            image_shape in, int batch,
                                            uint64_t seed, int samples) {
  splitmix64 rng{seed};
  const size_t nx = static_cast<size_t>(batch) * in.size();
  const size_t ny = static_cast<size_t>(batch) * l.output_size();
  std::vector<float> x(nx), r(ny), y(ny), dy(ny), dx(nx), grads(n_params, 0.f);
  for (auto& v : x)
    v = static_cast<float>(rng.normal());
  for (auto& v : r)
    v = static_cast<float>(rng.normal());
  l.reserve(be, batch);
  l.set_training(true);
  const uint64_t stream = rng.next();
  // L in double, so that rounding in the sum stays below the differences.
  auto loss = [&]() {
    l.set_random_stream(stream);
    l.forward(be, params, x.data(), y.data(), batch);
    double sum = 0;
    for (size_t i = 0; i < ny; ++i)
      sum += static_cast<double>(y[i]) * r[i];
    return sum;
  };
  loss();
  dy = r;
  l.backward(be, params, x.data(), y.data(), dy.data(), dx.data(), grads.data(),
             batch);

  gradient_check_report report;
  const float eps = 1e-3f;
  auto compare = [&](float* value, float analytic, const std::string& what) {
    const float kept = *value;
    *value = kept + eps;
    const double plus = loss();
    *value = kept - eps;
    const double minus = loss();
    *value = kept;
    const double numeric = (plus - minus) / (2.0 * eps);
    ++report.checked;
    if (std::fabs(numeric - analytic) > 2e-3 + 2e-2 * std::fabs(numeric)) {
      if (report.wrong++ == 0) {
        std::ostringstream out;
        out << what << ": backward " << analytic << ", finite differences "
            << numeric;
        report.first = out.str();
      }
    }
  };
  const auto range = l.param_range();
  const size_t np = range.end - range.begin;
  for (size_t i = 0; np > 0 && i < np; i += 1 + np / samples)
    compare(params + range.begin + i, grads[range.begin + i],
            "d/dparam[" + std::to_string(range.begin + i) + "]");
  for (size_t i = 0; i < nx; i += 1 + nx / samples)
    compare(&x[i], dx[i], "d/dx[" + std::to_string(i) + "]");
  return report;
}

} // namespace troupe
