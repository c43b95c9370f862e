// Click logs with a planted model (click_data.hpp), and the two scores a
// click model is judged by: log-loss and ROC AUC.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>

#include "runtime/data/click_data.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/base/random.hpp"

namespace troupe {

namespace {

/// Draws ranks 0..n-1 with weights 1 / (rank + 1)^s by inverting the CDF.
class zipf_sampler {
public:
  zipf_sampler(uint64_t n, double s) : cdf_(n) {
    double sum = 0;
    for (uint64_t r = 0; r < n; ++r)
      cdf_[r] = sum += std::pow(static_cast<double>(r + 1), -s);
    for (auto& c : cdf_)
      c /= sum;
  }
  uint64_t draw(splitmix64& rng) const {
    auto it = std::lower_bound(cdf_.begin(), cdf_.end(), rng.uniform01());
    return std::min<uint64_t>(static_cast<uint64_t>(it - cdf_.begin()),
                              cdf_.size() - 1);
  }

private:
  std::vector<double> cdf_;
};

/// The planted model's parameters of one raw value, drawn from (seed,
/// field, value) alone: its weight, then its embedding.
void planted_value(uint64_t seed, int field, uint64_t value, int dim,
                   double* out) {
  splitmix64 rng{
    mix64(seed ^ mix64((static_cast<uint64_t>(field) << 40) ^ value))};
  out[0] = 0.5 * rng.normal();
  for (int j = 0; j < dim; ++j)
    out[1 + j] = 0.3 * rng.normal();
}

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

} // namespace

caf::expected<planted_scores>
generate_click_logs(const click_generator_config& cfg,
                    const std::string& train_path,
                    const std::string& test_path) {
  return generate_click_logs(cfg, std::vector<std::string>{train_path},
                             test_path);
}

caf::expected<planted_scores>
generate_click_logs(const click_generator_config& cfg,
                    const std::vector<std::string>& train_paths,
                    const std::string& test_path) {
  const int K = cfg.schema.numeric, F = cfg.schema.categorical;
  const int dim = cfg.planted_dim;
  if (K < 0 || F < 0 || cfg.values_per_field < 1 || cfg.max_values < 1
      || dim < 0 || cfg.zipf <= 0 || cfg.drift < 0 || train_paths.empty())
    return make_error(errc::invalid_argument,
                      "click generator: fields, values, max_values, zipf "
                      "and files must be positive, drift at least 0");
  zipf_sampler zipf{cfg.values_per_field, cfg.zipf};
  splitmix64 coef_rng{mix64(cfg.seed ^ 0xc0ef)};
  std::vector<double> coef(static_cast<size_t>(K));
  for (auto& c : coef)
    c = 0.5 * coef_rng.normal();
  planted_scores scores;
  std::vector<double> pooled(static_cast<size_t>(F) * (1 + dim));
  std::vector<double> one(static_cast<size_t>(1 + dim));
  std::string line; // one log line, reused
  char buf[64];
  for (int part = 0; part < 2; ++part) {
    const int64_t n = part == 0 ? cfg.train : cfg.test;
    // The training lines go to their files in turn, the file of line i
    // being i * files / n.
    const size_t files = part == 0 ? train_paths.size() : 1;
    std::unique_ptr<std::FILE, file_closer> out;
    std::string path;
    size_t file = 0;
    auto open_file = [&](size_t f) -> caf::error {
      if (out && std::fflush(out.get()) != 0)
        return make_error(errc::io_error, path + ": write failed");
      path = part == 0 ? train_paths[f] : test_path;
      out.reset(std::fopen(path.c_str(), "wb"));
      if (!out)
        return make_error(errc::io_error, path + ": cannot create");
      file = f;
      return caf::none;
    };
    if (auto err = open_file(0))
      return err;
    splitmix64 rng{mix64(cfg.seed * 2 + 1 + static_cast<uint64_t>(part))};
    std::vector<double> p(static_cast<size_t>(n));
    std::vector<float> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      auto into = static_cast<size_t>(static_cast<double>(i)
                                      * static_cast<double>(files)
                                      / static_cast<double>(n));
      if (into != file)
        if (auto err = open_file(into))
          return err;
      // Where the stream is: the test lines are drawn as it stands at the
      // end of the training lines.
      const int64_t at = part == 0 ? i : cfg.train;
      const auto shift = static_cast<uint64_t>(
        std::floor(cfg.drift * static_cast<double>(at) / 1000.0));
      double logit = cfg.bias;
      line.assign(1, '0'); // the label, set once the logit is known
      for (int k = 0; k < K; ++k) {
        double x = rng.normal();
        logit += coef[static_cast<size_t>(k)] * x;
        std::snprintf(buf, sizeof buf, "\t%.6g", x);
        line += buf;
      }
      std::fill(pooled.begin(), pooled.end(), 0.0);
      for (int f = 0; f < F; ++f) {
        int count = f < cfg.multi_valued
                      ? 1
                          + static_cast<int>(
                            rng.below(static_cast<uint64_t>(cfg.max_values)))
                      : 1;
        line += '\t';
        double* pool = pooled.data() + static_cast<size_t>(f) * (1 + dim);
        for (int v = 0; v < count; ++v) {
          auto raw = zipf.draw(rng) + shift;
          planted_value(cfg.seed, f, raw, dim, one.data());
          for (int j = 0; j <= dim; ++j)
            pool[j] += one[static_cast<size_t>(j)] / count;
          // The token a log would hold: a hash of the raw value, in hex.
          std::snprintf(buf, sizeof buf, "%s%016" PRIx64, v > 0 ? "," : "",
                        mix64(cfg.seed ^ (static_cast<uint64_t>(f) << 48)
                              ^ raw));
          line += buf;
        }
        logit += pool[0];
      }
      for (int f = 0; f < F; ++f)
        for (int g = f + 1; g < F; ++g) {
          const double* a = pooled.data() + static_cast<size_t>(f) * (1 + dim)
                            + 1;
          const double* b = pooled.data() + static_cast<size_t>(g) * (1 + dim)
                            + 1;
          for (int j = 0; j < dim; ++j)
            logit += a[j] * b[j];
        }
      double prob = 1.0 / (1.0 + std::exp(-logit));
      bool click = rng.uniform01() < prob;
      p[static_cast<size_t>(i)] = prob;
      y[static_cast<size_t>(i)] = click ? 1.f : 0.f;
      line[0] = click ? '1' : '0';
      line += '\n';
      if (std::fwrite(line.data(), 1, line.size(), out.get()) != line.size())
        return make_error(errc::io_error, path + ": write failed");
    }
    if (std::fflush(out.get()) != 0)
      return make_error(errc::io_error, path + ": write failed");
    if (part == 0) {
      scores.train_log_loss = log_loss(p, y);
    } else {
      scores.test_log_loss = log_loss(p, y);
      scores.test_auc = roc_auc(p, y);
      scores.test_click_rate = n > 0
                                 ? std::accumulate(y.begin(), y.end(), 0.0) / n
                                 : 0;
    }
  }
  return scores;
}

double log_loss(const std::vector<double>& p, const std::vector<float>& y) {
  if (p.empty())
    return 0;
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    double q = std::clamp(p[i], 1e-7, 1 - 1e-7);
    sum -= y[i] > 0.5f ? std::log(q) : std::log(1 - q);
  }
  return sum / static_cast<double>(p.size());
}

double roc_auc(const std::vector<double>& scores, const std::vector<float>& y) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // The Mann-Whitney U statistic: each positive's rank among all, ties
  // given their mean rank.
  double positives = 0, rank_sum = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]])
      ++j;
    double mean_rank = (static_cast<double>(i + j) + 1) / 2; // 1-based
    for (size_t k = i; k < j; ++k)
      if (y[order[k]] > 0.5f) {
        positives += 1;
        rank_sum += mean_rank;
      }
    i = j;
  }
  double negatives = static_cast<double>(scores.size()) - positives;
  if (positives == 0 || negatives == 0)
    return 0.5;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

} // namespace troupe
