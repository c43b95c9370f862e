// What a stale push's update needs beyond its staleness: the values it was
// computed on. With n workers a push is about n updates stale; dividing its
// learning rate by that (stale_rate::divide) slows every coordinate alike,
// also those that have hardly moved since. Two rules look at the values:
//
// - Gap-aware (Barkai et al., ICLR 2020; stale_rate::gap): the gap of
//   coordinate i is |w_now,i - w_used,i| / C_i, where C_i is the moving
//   mean (over about 100 updates) of that coordinate's step; the push's
//   step there is divided by max(1, gap). A coordinate that oscillated
//   back keeps the full step, one that moved on steadily is slowed as
//   much as divide would. Adam's step is scaled after its normalisation
//   (a scaled gradient would be normalised away); SGD's and momentum's
//   gradient is scaled, as in the paper.
// - Delay compensation (DC-ASGD-a, Zheng et al., ICML 2017): the gradient
//   at w_now is estimated to first order from the one at w_used with the
//   diagonal of g g^T as the Hessian: g + lambda * g*g / sqrt(ms + 1e-7)
//   * (w_now - w_used), ms the moving mean (0.95) of g*g; lambda is
//   cluster.delay_compensation.
//
// Both need w_used, so the block keeps the values of its last `history`
// versions (the ring below; each version's buffer is the one that version
// was answered from, so keeping it costs one copy per update and the
// memory of the ring). A push computed on a version older than the ring
// (more stale than the cluster's workers make, e.g. after workers were
// added) is updated as divide would, and counted as uncompensated.
//
// Look-ahead (param_block::values_for_workers) extrapolates a version
// from the one before it, so it keeps the ring as well: two versions
// alone, and with a rule above, w_used is the extrapolation of the
// version the push was computed on (made from the ring again).
//
// Every push reaches the primary and its replica in the same order, so
// both rings hold the same versions and both apply the same update; the
// ring, the step means and the mean squares travel in a replica's image.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

namespace troupe {

/// The versions a block of `floats` values keeps for `workers` workers:
/// twice the workers and two (with prefetch a push is two pulls behind),
/// at most 64 and at most what fits in 256 MiB, at least 2.
size_t compensation_history(int workers, size_t floats);

class stale_compensation {
public:
  struct options {
    bool gap = false;
    /// DC-ASGD's lambda; 0: off.
    double lambda = 0;
    /// The block extrapolates the values workers pull (param_block's
    /// `lookahead`): the ring keeps the versions for it alone too.
    bool lookahead = false;
    /// Versions kept (0: none, which turns both rules off).
    size_t history = 0;
  };

  /// The ring and the moving means, for a replica's exact copy.
  struct image {
    std::vector<int64_t> versions;
    std::vector<std::vector<float>> values;
    std::vector<float> step_mean, square_mean;
  };

  stale_compensation(options opts, size_t size);

  /// Whether a rule is on (and the block must remember its versions).
  bool active() const {
    return opts_.history > 0
           && (opts_.gap || opts_.lambda > 0 || opts_.lookahead);
  }
  /// Whether gap or delay compensation is on (prepare changes the update).
  bool corrects() const {
    return opts_.history > 0 && (opts_.gap || opts_.lambda > 0);
  }
  const options& opts() const { return opts_; }

  /// Keeps `values` as version `version`'s (after each update, and after
  /// a restore, which forgets the rest).
  void remember(int64_t version, std::shared_ptr<std::vector<float>> values);
  void forget();

  /// The values of `version`, or null when the ring no longer has them.
  const std::vector<float>* values_at(int64_t version) const;

  /// What the optimizer applies for a push with gradient `grads`
  /// computed on `used`, the block's values being `now`: the gradient
  /// (compensated, or `grads` itself) and the per-coordinate step scale
  /// (the gap's, or null).
  struct update {
    const float* grads;
    const float* step_scale;
  };
  update prepare(const std::vector<float>& now, const std::vector<float>& used,
                 const float* grads);

  /// After an update from `before` to `after`: the step means move.
  void observe(const std::vector<float>& before,
               const std::vector<float>& after);

  image copy() const;
  /// false when `img` does not fit (sizes); the state is unchanged then.
  bool load(const image& img);

private:
  options opts_;
  size_t size_;
  std::deque<std::pair<int64_t, std::shared_ptr<std::vector<float>>>> ring_;
  std::vector<float> step_mean_;     ///< gap: C, 0 until the first update
  bool stepped_ = false;             ///< whether step_mean_ holds a step
  std::vector<float> square_mean_;   ///< DC: ms
  std::vector<float> grads_, scale_; ///< prepare's results
};

} // namespace troupe
