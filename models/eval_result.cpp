#include "models/eval_result.hpp"

#include <cstdio>

namespace troupe {

const char* headline_name(const eval_result& r) {
  return r.regression ? "r2" : "accuracy";
}

double headline(const eval_result& r) {
  return r.regression ? r.r2 : r.accuracy;
}

std::string describe_scores(const eval_result& r, const std::string& set) {
  char buf[256];
  if (r.regression)
    std::snprintf(buf, sizeof(buf), "%s mse = %.4g, mae = %.4g, r2 = %.4f",
                  set.c_str(), r.loss, r.mae, r.r2);
  else
    std::snprintf(buf, sizeof(buf), "%s accuracy = %.4f, %s loss = %.4f",
                  set.c_str(), r.accuracy, set.c_str(), r.loss);
  return buf;
}

} // namespace troupe
