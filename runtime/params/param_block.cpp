#include "runtime/params/param_block.hpp"
#include "runtime/params/buffer_pool.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// Whether no value is NaN or Inf: one branch-free pass (exponent bits all
/// ones means NaN or Inf) that the compiler vectorises, since every push is
/// checked before it touches the shard.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool
all_finite(const float* data, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, data + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

/// to = from, and whether every value is finite: the first push of a sync
/// update is copied into the sum in the pass that checks it.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool
copy_if_finite(float* __restrict to, const float* __restrict from, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, from + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    to[i] = from[i];
  }
  return bad == 0;
}

/// The compensation a block of `o` keeps: only async and ssp pushes are
/// stale, and only the gap and delay compensation need the values.
stale_compensation::options
compensation_options(const param_block::options& o) {
  stale_compensation::options c;
  if (!param_block::logs_batches(o.mode))
    return c;
  c.gap = o.stale_lr == stale_rate::gap;
  c.lambda = o.delay_compensation;
  c.lookahead = o.lookahead > 0;
  // The extrapolation of version v needs version v - 1 too: alone, of the
  // current version; with the gap or DC, of every version they keep.
  if (c.gap || c.lambda > 0)
    c.history = std::max<size_t>(o.history, 2) + (c.lookahead ? 1 : 0);
  else if (c.lookahead)
    c.history = 2;
  return c;
}

/// to = now + k * (now - before): the last step carried on k more times.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
extrapolate(float* __restrict to, const float* __restrict now,
            const float* __restrict before, float k, size_t n) {
  for (size_t i = 0; i < n; ++i)
    to[i] = now[i] + k * (now[i] - before[i]);
}

/// Gives back what `v` holds beyond twice `room` (a vector grows by
/// doubling, so up to twice is what the last `room` entries left).
void keep_room_for(std::vector<int64_t>& v, size_t room) {
  room = std::max<size_t>(room, 1024);
  if (v.capacity() <= 2 * room)
    return;
  std::vector<int64_t> smaller;
  smaller.reserve(room);
  smaller.assign(v.begin(), v.end());
  v.swap(smaller);
}

} // namespace

param_block::param_block(options opts, std::vector<float> initial)
  : opts_(opts),
    values_(std::make_shared<std::vector<float>>(std::move(initial))),
    opt_(opts.optimizer, values_->size()),
    compensation_(compensation_options(opts_), values_->size()) {
  for (auto& r : opts_.buffers)
    if (r.begin > r.end || r.end > values_->size())
      throw std::invalid_argument("param_block: a buffer range outside the "
                                  "block");
  if (opts_.mode == consistency_mode::sync)
    sum_.assign(values_->size(), 0.f);
  compensation_.remember(version_, values_);
}

void param_block::add_worker(int32_t id) {
  clocks_.emplace(id, 0);
}

int64_t param_block::clock(int32_t id) const {
  auto it = clocks_.find(id);
  return it == clocks_.end() ? 0 : it->second;
}

int64_t param_block::min_clock() const {
  int64_t low = std::numeric_limits<int64_t>::max();
  for (auto& [id, c] : clocks_)
    low = std::min(low, c);
  return clocks_.empty() ? 0 : low;
}

std::vector<float>& param_block::writable() {
  if (values_.use_count() > 1) { // a pull still reads the old values
    auto fresh = pooled_floats(values_->size());
    std::copy(values_->begin(), values_->end(), fresh->begin());
    values_ = std::move(fresh);
  }
  return *values_;
}

void param_block::apply_update(const float* grads, stale_adjust adjust) {
  auto& v = writable();
  if (opts_.mode == consistency_mode::easgd) {
    // center += rate * (local - center), as TF's ElasticAverageOptimizer.
    auto rate = static_cast<float>(opts_.elastic_rate);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] += rate * grads[i];
  } else {
    // Buffers are kept aside from the optimizer's step, then take the
    // pushed change as it is.
    buffer_values_.clear();
    for (auto& r : opts_.buffers)
      buffer_values_.insert(buffer_values_.end(), v.begin() + r.begin,
                            v.begin() + r.end);
    // The optimizer's step is the block's version: the learning-rate
    // schedule and Adam's bias correction follow the updates applied here.
    opt_.apply(v.data(), adjust.grads ? adjust.grads : grads, version_,
               adjust.lr_scale, adjust.implicit_momentum, adjust.step_scale);
    size_t k = 0;
    for (auto& r : opts_.buffers)
      for (size_t i = r.begin; i < r.end; ++i)
        v[i] = buffer_values_[k++] - grads[i];
  }
  ++version_;
  if (compensation_.active()) {
    if (auto* before = compensation_.values_at(version_ - 1))
      compensation_.observe(*before, *values_);
    compensation_.remember(version_, values_);
  }
}

std::shared_ptr<std::vector<float>> param_block::extrapolated(int64_t v) const {
  auto k = static_cast<float>(opts_.lookahead * stale_mean_);
  auto* now = compensation_.values_at(v);
  auto* before = compensation_.values_at(v - 1);
  if (!(k > 0.f) || !now || !before)
    return nullptr;
  auto out = pooled_floats(now->size());
  extrapolate(out->data(), now->data(), before->data(), k, now->size());
  return out;
}

std::shared_ptr<const std::vector<float>> param_block::values_for_workers() {
  if (!(opts_.lookahead > 0) || !logs_batches(opts_.mode))
    return values_;
  if (ahead_version_ != version_) {
    ahead_ = extrapolated(version_);
    ahead_version_ = version_;
  }
  return ahead_ ? ahead_ : values_;
}

stale_adjust param_block::adjust_for_staleness(int64_t tag,
                                               const float* grads) {
  // A tag past the version (values pulled before a restore to an older
  // checkpoint) is as fresh as can be.
  auto stale = std::max<int64_t>(0, version_ - tag);
  stats_.staleness_sum += stale;
  stats_.staleness_max = std::max(stats_.staleness_max, stale);
  stale_adjust adjust;
  // n workers pushing in turn act as heavy-ball momentum of about 1 - 1/n
  // on top of the optimizer's own (Mitliagkas et al., 2016): Adam's beta1
  // of 0.9 with 8 workers makes far more momentum than one worker has.
  // The mean staleness stands for n: lowering the momentum by each push's
  // own staleness switched it back and forth with 2 workers (stale 0 to
  // 3) and cost up to 6 points there.
  stale_mean_ += (static_cast<double>(stale) - stale_mean_) / 32.0;
  if (opts_.stale_momentum == stale_momentum_rule::reduce && stale_mean_ > 1.0)
    adjust.implicit_momentum = 1.0 - 1.0 / stale_mean_;
  bool compensated = false;
  if (compensation_.corrects() && stale > 0) {
    // With lookahead the push was computed on version tag's extrapolation.
    // It is made again here rather than kept from the pull: a replica,
    // which answers no pulls, makes the same one and applies the same
    // update. (The mean staleness may have moved since the pull; the two
    // differ by that alone.)
    std::shared_ptr<std::vector<float>> ahead;
    if (opts_.lookahead > 0)
      ahead = extrapolated(tag);
    if (auto* used = ahead ? ahead.get() : compensation_.values_at(tag)) {
      auto u = compensation_.prepare(*values_, *used, grads);
      adjust.grads = u.grads;
      adjust.step_scale = u.step_scale;
      compensated = true;
    } else {
      ++stats_.uncompensated;
    }
  }
  if (stale <= 1)
    return adjust;
  auto s = static_cast<double>(stale);
  // With n workers a push is about n updates stale, and the pushes in
  // flight were all computed near one point: applied at the full rate they
  // step n times along one old direction. Measured on the MLP with Adam,
  // 8 workers, 4 epochs: test accuracy 0.70-0.78 at the full rate,
  // 0.78-0.82 divided while workers prefetched; 0.8142 and 0.8246 without
  // (docs/benchmarks.md, "Scaling with workers, shards and threads").
  // The gap replaces divide where it has the values the push was
  // computed on, and falls back to it where it has not.
  if (opts_.stale_lr == stale_rate::divide
      || (opts_.stale_lr == stale_rate::gap && !compensated))
    adjust.lr_scale = 1.0 / s;
  return adjust;
}

void param_block::log_update(int64_t batch) {
  if (log_.size() >= max_logged) { // start over at this update
    log_base_ = version_ - 1;
    log_.clear();
    sorted_.clear();
  }
  log_.push_back(batch);
  if (batch < 0) {
    unnamed_through_ = version_;
    return;
  }
  // Batches come nearly in order: the insert is at or close to the end,
  // and forget_through() keeps the capacity of the last stretch between
  // checkpoints, so the steady state allocates nothing.
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), batch),
                 batch);
}

caf::expected<param_block::outcome> param_block::push(int32_t worker,
                                                      int64_t tag,
                                                      const float* data,
                                                      size_t n, int64_t batch) {
  auto refuse = [&](errc code, std::string what) {
    ++stats_.refused;
    return make_error(code, std::move(what));
  };
  if (n != size())
    return refuse(errc::wrong_size, "push from worker " + std::to_string(worker)
                                      + " has " + std::to_string(n)
                                      + " values, the shard holds "
                                      + std::to_string(size()));
  auto clock = clocks_.find(worker);
  if (clock == clocks_.end())
    return refuse(errc::invalid_argument,
                  "push from unknown worker " + std::to_string(worker));
  auto non_finite = [&] {
    size_t i = 0;
    while (std::isfinite(data[i]))
      ++i;
    return refuse(errc::non_finite, "push from worker " + std::to_string(worker)
                                      + " holds a non-finite value at offset "
                                      + std::to_string(i));
  };
  if (opts_.mode != consistency_mode::sync) {
    if (!all_finite(data, n))
      return non_finite();
    if (logs_batches(opts_.mode) && batch >= 0
        && (batch < done_below_
            || std::binary_search(sorted_.begin(), sorted_.end(), batch))) {
      // Its worker pushed it before, or another worker trained it again
      // after that one was lost: applying it twice would weigh it twice.
      // It still counts as the worker's step for ssp.
      ++clock->second;
      ++stats_.stale;
      return outcome::duplicate;
    }
    apply_update(data, logs_batches(opts_.mode)
                         ? adjust_for_staleness(tag, data)
                         : stale_adjust{});
    if (logs_batches(opts_.mode))
      log_update(batch);
    ++clock->second;
    ++stats_.accepted;
    return outcome::applied;
  }
  // sync. A push the update does not take is still checked first, so a
  // non-finite one is refused whatever its version.
  if (tag != version_ || pushed_.count(worker) > 0) {
    if (!all_finite(data, n))
      return non_finite();
    if (tag > version_)
      return refuse(errc::invalid_argument,
                    "push from worker " + std::to_string(worker)
                      + " for version " + std::to_string(tag)
                      + ", the shard is at " + std::to_string(version_));
    // An old version, or a second push of one worker for one version
    // (which would weigh it twice).
    ++stats_.stale;
    return outcome::stale;
  }
  // The values are checked in the pass that takes them in: a push that
  // completes the update alone (one worker, or aggregate 1) is applied
  // straight from `data`, the first of several is copied into the sum as
  // it is checked; later ones are checked, then added. Each pass over a
  // large block is memory-bound, and a Python worker's 4 MB sync step
  // paid for five of them (docs/benchmarks.md).
  if (pushed_.empty() && updates_needed() <= 1) {
    if (!all_finite(data, n))
      return non_finite();
    apply_update(data);
    last_update_ = {worker};
  } else if (pushed_.empty()) {
    if (!copy_if_finite(sum_.data(), data, n))
      return non_finite();
    pushed_.insert(worker);
  } else {
    if (!all_finite(data, n))
      return non_finite();
    for (size_t i = 0; i < n; ++i)
      sum_[i] += data[i];
    pushed_.insert(worker);
  }
  ++clock->second;
  ++stats_.accepted;
  if (pushed_.empty())
    return outcome::applied;
  return apply_aggregate_if_complete() ? outcome::applied : outcome::aggregated;
}

size_t param_block::updates_needed() const {
  return std::min<size_t>(static_cast<size_t>(opts_.aggregate), clocks_.size());
}

bool param_block::apply_aggregate_if_complete() {
  if (pushed_.empty() || pushed_.size() < updates_needed())
    return false;
  if (pushed_.size() > 1) {
    auto inv = 1.f / static_cast<float>(pushed_.size());
    for (auto& g : sum_)
      g *= inv;
  }
  stale_adjust adjust;
  // The scaled rate is reached over the first sync_warmup updates, from
  // the rate given (Goyal et al.'s gradual warm-up).
  adjust.lr_scale = sync_rate_scale(opts_.sync_lr,
                                    static_cast<double>(pushed_.size()),
                                    version_, opts_.sync_warmup);
  apply_update(sum_.data(), adjust);
  last_update_ = std::move(pushed_);
  pushed_.clear();
  return true;
}

void param_block::remove_worker(int32_t id) {
  clocks_.erase(id);
  if (opts_.mode == consistency_mode::sync)
    apply_aggregate_if_complete();
}

caf::error param_block::set_learning_rate(double lr) {
  if (!(lr > 0) || !std::isfinite(lr))
    return make_error(errc::invalid_argument,
                      "learning rate must be a finite number > 0, got "
                        + std::to_string(lr));
  opts_.optimizer.learning_rate = lr;
  opt_.set_learning_rate(lr);
  return {};
}

caf::error param_block::set_aggregate(int aggregate) {
  if (aggregate < 1)
    return make_error(errc::invalid_argument,
                      "replicas to aggregate must be >= 1, got "
                        + std::to_string(aggregate));
  opts_.aggregate = aggregate;
  if (opts_.mode == consistency_mode::sync)
    apply_aggregate_if_complete();
  return {};
}

bool param_block::pull_ready(int32_t worker, int64_t min_version) const {
  switch (opts_.mode) {
    case consistency_mode::sync: return version_ >= min_version;
    case consistency_mode::ssp:
      return clock(worker) - min_clock() <= opts_.staleness;
    default: return true;
  }
}

caf::error param_block::restore(
  std::vector<float> values,
  const std::vector<std::pair<std::string, std::vector<float>>>& slots,
  int64_t version) {
  if (values.size() != size())
    return make_error(errc::wrong_size,
                      "restore with " + std::to_string(values.size())
                        + " values, the shard holds " + std::to_string(size()));
  auto mine = opt_.slots();
  if (mine.size() != slots.size())
    return make_error(errc::layout_mismatch,
                      "restore with " + std::to_string(slots.size())
                        + " optimizer slots, the shard's optimizer has "
                        + std::to_string(mine.size()));
  for (size_t i = 0; i < mine.size(); ++i)
    if (mine[i].first != slots[i].first
        || mine[i].second->size() != slots[i].second.size())
      return make_error(errc::layout_mismatch,
                        "restore: optimizer slot " + slots[i].first
                          + " does not fit the shard's " + mine[i].first);
  for (size_t i = 0; i < mine.size(); ++i)
    *mine[i].second = slots[i].second;
  values_ = std::make_shared<std::vector<float>>(std::move(values));
  version_ = version;
  ahead_version_ = -1;
  compensation_.forget();
  compensation_.remember(version_, values_);
  pushed_.clear();
  log_base_ = version;
  log_.clear();
  sorted_.clear();
  // The batches after the restored checkpoint are trained again, whatever
  // a newer forget_through() had done.
  done_below_ = 0;
  unnamed_through_ = -1;
  return {};
}

std::optional<std::vector<int64_t>>
param_block::applied_since(int64_t version) const {
  if (!logs_batches(opts_.mode) || version < log_base_ || version > version_
      || unnamed_through_ > version)
    return std::nullopt;
  auto first = log_.begin() + (version - log_base_);
  std::vector<int64_t> out(first, log_.end());
  std::sort(out.begin(), out.end());
  return out;
}

void param_block::forget_through(int64_t version) {
  if (version <= log_base_)
    return;
  auto n = static_cast<size_t>(
    std::min<int64_t>(version - log_base_, static_cast<int64_t>(log_.size())));
  std::vector<int64_t> gone(log_.begin(),
                            log_.begin() + static_cast<std::ptrdiff_t>(n));
  std::sort(gone.begin(), gone.end());
  if (opts_.ordered_batches && !gone.empty())
    done_below_ = std::max(done_below_, gone.back() + 1);
  sorted_.erase(std::remove_if(sorted_.begin(), sorted_.end(),
                               [&](int64_t b) {
                                 return std::binary_search(gone.begin(),
                                                           gone.end(), b);
                               }),
                sorted_.end());
  log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(n));
  log_base_ += static_cast<int64_t>(n);
  // A vector keeps its capacity, so without this the heap would hold the
  // longest stretch between two checkpoints the shard ever saw, for good,
  // and every chief lost before its checkpoint stretches one (a shard node
  // of 4 shards without checkpoints: 5.7, 7.7, 11.8 MB in doubling steps;
  // docs/benchmarks.md, "The soak"). Room for the stretch just ended is
  // kept, so stretches of one length allocate nothing.
  const size_t stretch = n + log_.size();
  keep_room_for(log_, stretch);
  keep_room_for(sorted_, stretch);
}

void param_block::forget_workers() {
  clocks_.clear();
  pushed_.clear();
}

block_image param_block::image() const {
  block_image img;
  img.values = *values_;
  for (auto& [name, v] : opt_.copy_slots()) {
    img.slot_names.push_back(name);
    img.slots.push_back(std::move(v));
  }
  img.lowered_beta1_ratio = opt_.lowered_beta1_ratio();
  img.version = version_;
  img.learning_rate = opts_.optimizer.learning_rate;
  img.aggregate = opts_.aggregate;
  for (auto& [id, c] : clocks_) {
    img.workers.push_back(id);
    img.clocks.push_back(c);
  }
  img.log = log_;
  img.log_base = log_base_;
  img.unnamed_through = unnamed_through_;
  img.done_below = done_below_;
  img.stale_mean = stale_mean_;
  if (!pushed_.empty())
    img.sum = sum_;
  img.pushed.assign(pushed_.begin(), pushed_.end());
  img.last_update.assign(last_update_.begin(), last_update_.end());
  img.accepted = stats_.accepted;
  img.stale = stats_.stale;
  img.refused = stats_.refused;
  img.staleness_sum = stats_.staleness_sum;
  img.staleness_max = stats_.staleness_max;
  img.uncompensated = stats_.uncompensated;
  img.compensation = compensation_.copy();
  return img;
}

caf::error param_block::load(const block_image& img) {
  auto fail = [&](errc code, const std::string& what) {
    return make_error(code, "a copy of a shard " + what);
  };
  if (img.values.size() != size())
    return fail(errc::wrong_size, "holds " + std::to_string(img.values.size())
                                    + " values, this one "
                                    + std::to_string(size()));
  auto mine = opt_.slots();
  if (mine.size() != img.slots.size() || img.slot_names.size() != mine.size())
    return fail(errc::layout_mismatch, "has " + std::to_string(img.slots.size())
                                         + " optimizer slots, this one "
                                         + std::to_string(mine.size()));
  for (size_t i = 0; i < mine.size(); ++i)
    if (mine[i].first != img.slot_names[i]
        || mine[i].second->size() != img.slots[i].size())
      return fail(errc::layout_mismatch,
                  "has optimizer slot " + img.slot_names[i]
                    + ", which does not fit this one's " + mine[i].first);
  bool log_fits = img.version >= img.log_base
                  && (!logs_batches(opts_.mode)
                      || static_cast<int64_t>(img.log.size())
                           == img.version - img.log_base);
  if (img.workers.size() != img.clocks.size()
      || (!img.sum.empty() && img.sum.size() != size())
      || img.pushed.empty() != img.sum.empty() || img.aggregate < 1
      || !log_fits)
    return fail(errc::invalid_argument,
                "is inconsistent (its clocks, sync sum or applied log)");
  stale_compensation compensation{compensation_.opts(), size()};
  if (!compensation.load(img.compensation))
    return fail(errc::wrong_size, "keeps versions or step means of another "
                                  "size than its values");
  for (size_t i = 0; i < mine.size(); ++i)
    *mine[i].second = img.slots[i];
  opt_.set_lowered_beta1_ratio(img.lowered_beta1_ratio);
  values_ = std::make_shared<std::vector<float>>(img.values);
  version_ = img.version;
  ahead_version_ = -1;
  opts_.optimizer.learning_rate = img.learning_rate;
  opt_.set_learning_rate(img.learning_rate);
  opts_.aggregate = img.aggregate;
  clocks_.clear();
  for (size_t i = 0; i < img.workers.size(); ++i)
    clocks_[img.workers[i]] = img.clocks[i];
  log_ = img.log;
  sorted_.clear();
  for (auto b : log_)
    if (b >= 0)
      sorted_.push_back(b);
  std::sort(sorted_.begin(), sorted_.end());
  log_base_ = img.log_base;
  unnamed_through_ = img.unnamed_through;
  done_below_ = img.done_below;
  stale_mean_ = img.stale_mean;
  if (!img.sum.empty())
    sum_ = img.sum;
  pushed_ = {img.pushed.begin(), img.pushed.end()};
  last_update_ = {img.last_update.begin(), img.last_update.end()};
  stats_ = {img.accepted,      img.stale,         img.refused,
            img.staleness_sum, img.staleness_max, img.uncompensated};
  compensation_ = std::move(compensation);
  if (!compensation_.values_at(version_)) // an image of another rule
    compensation_.remember(version_, values_);
  return {};
}

} // namespace troupe
