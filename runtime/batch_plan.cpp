#include "runtime/batch_plan.hpp"

#include <algorithm>

#include "runtime/dataset.hpp"
#include "runtime/errc.hpp"

namespace troupe {

batch_plan::batch_plan(size_t samples, int batch, uint64_t seed, int epochs,
                       int64_t max_batches)
  : samples_(samples), batch_(batch), seed_(seed), epochs_(epochs) {
  per_epoch_ = static_cast<int64_t>((samples + static_cast<size_t>(batch) - 1)
                                    / static_cast<size_t>(batch));
  total_ = per_epoch_ * epochs;
  if (max_batches > 0)
    total_ = std::min(total_, max_batches);
}

const std::vector<uint32_t>& batch_plan::order(int32_t epoch) {
  // Leases come from the newest epoch or, requeued, from the one before, so
  // two cached orders serve nearly every lookup; the older one is evicted.
  for (auto& c : cache_)
    if (c.epoch == epoch)
      return c.order;
  auto& victim = cache_[cache_[0].epoch < cache_[1].epoch ? 0 : 1];
  victim.epoch = epoch;
  victim.order = epoch_order(samples_, seed_, epoch);
  return victim.order;
}

std::pair<size_t, size_t> batch_plan::span(int64_t index) const {
  size_t first = static_cast<size_t>(index) * static_cast<size_t>(batch_);
  return {first, std::min(first + static_cast<size_t>(batch_), samples_)};
}

void batch_plan::count_done(batch_ref b) {
  auto [first, last] = span(b.index);
  samples_done_[b.epoch] += static_cast<int64_t>(last - first);
}

batch_plan::batch_ref batch_plan::ref_of(int64_t number) const {
  return {static_cast<int32_t>(number / per_epoch_), number % per_epoch_};
}

lease_grant batch_plan::make_grant(batch_ref b) {
  lease_grant g;
  g.id = next_id_++;
  g.epoch = b.epoch;
  g.index = b.index;
  g.batch = static_cast<int64_t>(b.epoch) * per_epoch_ + b.index;
  auto& o = order(b.epoch);
  auto [first, last] = span(b.index);
  g.samples.assign(o.begin() + static_cast<std::ptrdiff_t>(first),
                   o.begin() + static_cast<std::ptrdiff_t>(last));
  return g;
}

std::optional<lease_grant> batch_plan::lease(int32_t worker,
                                             bool new_batches) {
  batch_ref b{};
  if (!requeued_.empty()) {
    b = requeued_.front();
    requeued_.pop_front();
  } else if (new_batches && next_ < total_) {
    b = ref_of(next_);
    ++next_;
  } else {
    return std::nullopt;
  }
  auto g = make_grant(b);
  out_.emplace(g.id, out_lease{worker, b});
  return g;
}

bool batch_plan::ack(int64_t lease_id) {
  auto it = out_.find(lease_id);
  if (it == out_.end())
    return false;
  auto b = it->second.batch;
  count_done(b);
  ++acked_;
  out_.erase(it);
  return true;
}

int batch_plan::requeue(int32_t worker) {
  int n = 0;
  for (auto it = out_.begin(); it != out_.end();) {
    if (it->second.worker == worker) {
      requeued_.push_back(it->second.batch);
      it = out_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

bool batch_plan::complete() const {
  return next_ >= total_ && out_.empty() && requeued_.empty();
}

int64_t batch_plan::samples_done(int32_t epoch) const {
  auto it = samples_done_.find(epoch);
  return it == samples_done_.end() ? 0 : it->second;
}

std::vector<int64_t> batch_plan::epoch_samples() const {
  std::vector<int64_t> out;
  for (auto& [epoch, n] : samples_done_) {
    if (out.size() <= static_cast<size_t>(epoch))
      out.resize(static_cast<size_t>(epoch) + 1, 0);
    out[static_cast<size_t>(epoch)] = n;
  }
  return out;
}

caf::error batch_plan::restore(int64_t position,
                               const std::vector<int64_t>& done_after) {
  position = std::min(position, total_);
  std::vector<int64_t> done(done_after);
  std::sort(done.begin(), done.end());
  for (size_t k = 0; k < done.size(); ++k)
    if (done[k] < position || done[k] >= total_
        || (k > 0 && done[k] == done[k - 1]))
      return make_error(errc::invalid_argument,
                        "feeder restore: batch " + std::to_string(done[k])
                          + (done[k] < position || done[k] >= total_
                               ? " is outside [" + std::to_string(position)
                                   + ", " + std::to_string(total_) + ")"
                               : " is named twice"));
  next_ = done.empty() ? position : std::max(position, done.back() + 1);
  acked_ = position + static_cast<int64_t>(done.size());
  out_.clear();
  requeued_.clear();
  samples_done_.clear();
  for (int64_t b = 0; b < position; ++b)
    count_done(ref_of(b));
  auto d = done.begin();
  for (int64_t b = position; b < next_; ++b) {
    if (d != done.end() && *d == b) {
      count_done(ref_of(b));
      ++d;
    } else {
      requeued_.push_back(ref_of(b));
    }
  }
  return {};
}

} // namespace troupe
