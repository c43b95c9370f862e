#include "runtime/rules/batch_plan.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/rules/plan_numbers.hpp"

namespace troupe {

using namespace plan_numbers;

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Part `j` of `parts` of an order of `samples`: [j*n/P, (j+1)*n/P).
std::pair<size_t, size_t> part_span(size_t samples, size_t j, size_t parts) {
  return {j * samples / parts, (j + 1) * samples / parts};
}

} // namespace

int64_t plan_steps_per_epoch(data_partition partition, size_t samples,
                             int batch, int workers) {
  auto whole = ceil_div(static_cast<int64_t>(samples), batch);
  if (partition == data_partition::shared || workers < 1)
    return whole;
  if (partition == data_partition::replicated)
    return whole * workers;
  int64_t n = 0;
  for (int j = 0; j < workers; ++j) {
    auto [first, last] = part_span(samples, static_cast<size_t>(j),
                                   static_cast<size_t>(workers));
    n += ceil_div(static_cast<int64_t>(last - first), batch);
  }
  return n;
}

batch_plan::batch_plan(size_t samples, int batch, uint64_t seed, int epochs,
                       int64_t max_batches, data_partition partition,
                       size_t shuffle_block, std::vector<size_t> read_parts,
                       bool in_order)
  : samples_(samples), batch_(batch), seed_(seed), epochs_(epochs),
    max_batches_(max_batches), partition_(partition),
    shuffle_block_(shuffle_block), read_parts_(std::move(read_parts)),
    in_order_(in_order) {
  per_epoch_ = ceil_div(static_cast<int64_t>(samples), batch);
  if (!per_worker())
    streams_.emplace_back();
}

void batch_plan::extend(size_t samples) {
  if (samples <= samples_)
    return;
  samples_ = samples;
  per_epoch_ = ceil_div(static_cast<int64_t>(samples), batch_);
  cache_.clear(); // the orders were of the smaller set
}

// -- where a stream's batches lie ---------------------------------------------

const std::vector<int32_t>& batch_plan::members_of(int32_t epoch) const {
  if (epoch > decided_through_ || runs_.empty())
    return known_;
  auto it = std::upper_bound(runs_.begin(), runs_.end(), epoch,
                             [](int32_t e, const member_run& r) {
                               return e < r.first_epoch;
                             });
  return std::prev(it)->members;
}

std::vector<batch_plan::segment> batch_plan::segments(const stream& s) const {
  std::vector<segment> out;
  if (s.first_epoch >= epochs_)
    return out;
  if (partition_ != data_partition::sharded) {
    out.push_back({s.first_epoch, epochs_, part{0, samples_, per_epoch_}});
    return out;
  }
  auto add = [&](int32_t first, int32_t end,
                 const std::vector<int32_t>& members) {
    first = std::max(first, s.first_epoch);
    end = std::min(end, epochs_);
    if (first >= end)
      return;
    part p;
    auto it = std::lower_bound(members.begin(), members.end(), s.worker);
    if (it != members.end() && *it == s.worker) {
      auto [a, b] = part_span(
        samples_, static_cast<size_t>(it - members.begin()), members.size());
      p = {a, b, ceil_div(static_cast<int64_t>(b - a), batch_)};
    }
    out.push_back({first, end, p});
  };
  for (size_t r = 0; r < runs_.size(); ++r)
    add(runs_[r].first_epoch,
        r + 1 < runs_.size() ? runs_[r + 1].first_epoch : decided_through_ + 1,
        runs_[r].members);
  add(decided_through_ + 1, epochs_, known_);
  return out;
}

int64_t batch_plan::stream_total(const stream& s) const {
  int64_t n = 0;
  for (auto& g : segments(s))
    n += static_cast<int64_t>(g.end - g.first) * g.p.batches;
  return n;
}

batch_plan::batch_ref batch_plan::locate(const stream& s, int64_t k) const {
  auto at = [&](int32_t first, const part& p, int64_t place) {
    batch_ref b;
    b.epoch = first + static_cast<int32_t>(place / p.batches);
    b.index = place % p.batches;
    b.first = p.first
              + static_cast<size_t>(b.index) * static_cast<size_t>(batch_);
    b.last = std::min(b.first + static_cast<size_t>(batch_), p.last);
    return b;
  };
  if (per_epoch_ == 0)
    return batch_ref{epochs_, 0, 0, 0};
  if (partition_ != data_partition::sharded) // no allocation: restores
    return at(s.first_epoch, part{0, samples_, per_epoch_}, k);
  for (auto& g : segments(s)) {
    auto n = static_cast<int64_t>(g.end - g.first) * g.p.batches;
    if (k < n)
      return at(g.first, g.p, k);
    k -= n;
  }
  return batch_ref{epochs_, 0, 0, 0}; // past the stream: callers check
}

void batch_plan::decide_through(int32_t epoch) {
  while (decided_through_ < epoch) {
    ++decided_through_;
    if (runs_.empty() || runs_.back().members != known_)
      runs_.push_back({decided_through_, known_});
  }
}

bool batch_plan::cap_reached() const {
  return max_batches_ > 0 && handed_ >= max_batches_;
}

bool batch_plan::exhausted(const stream& s) const {
  if (open_) // whole batches only: the tail waits for more samples
    return cap_reached()
           || (s.next + 1) * static_cast<int64_t>(batch_)
                > static_cast<int64_t>(samples_);
  return cap_reached() || s.next >= stream_total(s);
}

uint64_t batch_plan::seed_of(const stream& s) const {
  if (partition_ != data_partition::replicated)
    return seed_;
  return seed_ ^ (static_cast<uint64_t>(s.worker + 1) * 0xd1b54a32d192ed03ull);
}

int64_t batch_plan::number_of(const stream& s, int64_t k) const {
  if (!per_worker())
    return k;
  return (static_cast<int64_t>(s.worker) + 1) << stream_bits | k;
}

const std::vector<uint32_t>& batch_plan::order(uint64_t seed, int32_t epoch) {
  // Leases come from each stream's newest epoch or, requeued, the one
  // before: a few cached orders serve nearly every lookup.
  ++uses_;
  for (auto& c : cache_)
    if (c.epoch == epoch && c.seed == seed) {
      c.used = uses_;
      return c.order;
    }
  size_t capacity = partition_ == data_partition::replicated
                      ? streams_.size() + 2
                      : 2;
  if (cache_.size() < capacity) {
    cache_.emplace_back();
  } else {
    auto victim = std::min_element(cache_.begin(), cache_.end(),
                                   [](auto& a, auto& b) {
                                     return a.used < b.used;
                                   });
    std::iter_swap(victim, cache_.end() - 1);
  }
  auto& c = cache_.back();
  if (in_order_) {
    std::vector<uint32_t> order(samples_);
    std::iota(order.begin(), order.end(), uint32_t{0});
    c = cached_order{seed, epoch, uses_, std::move(order)};
    return c.order;
  }
  c = cached_order{seed, epoch, uses_,
                   read_parts_.empty()
                     ? epoch_order(samples_, seed, epoch, shuffle_block_)
                     : interleaved_order(read_parts_, seed, epoch,
                                         shuffle_block_)};
  return c.order;
}

batch_plan::stream* batch_plan::stream_of(int32_t worker) {
  if (!per_worker())
    return &streams_[0];
  auto it = stream_index_.find(worker);
  return it == stream_index_.end() ? nullptr : &streams_[it->second];
}

void batch_plan::count_done(stream& s, int64_t k, int32_t worker,
                            int64_t samples) {
  auto b = locate(s, k);
  auto n = samples >= 0 ? samples : static_cast<int64_t>(b.last - b.first);
  s.samples_done[b.epoch] += n;
  if (worker >= 0)
    worker_done_[worker][b.epoch] += n;
}

// -- leasing ------------------------------------------------------------------

void batch_plan::join(int32_t worker) {
  if (!per_worker() || worker < 0 || stream_index_.count(worker) > 0)
    return;
  stream s;
  s.worker = worker;
  if (partition_ == data_partition::sharded) {
    s.first_epoch = decided_through_ + 1;
  } else if (!streams_.empty()) {
    // The slowest other worker's epoch: that of its oldest batch not done.
    std::vector<int64_t> oldest;
    for (auto& o : streams_)
      oldest.push_back(
        o.requeued.empty()
          ? o.next
          : std::min(o.next,
                     *std::min_element(o.requeued.begin(), o.requeued.end())));
    for (auto& [id, lease] : out_)
      oldest[lease.stream] = std::min(oldest[lease.stream], lease.k);
    int32_t slowest = epochs_;
    for (size_t i = 0; i < streams_.size(); ++i)
      if (oldest[i] < stream_total(streams_[i]))
        slowest = std::min(slowest, locate(streams_[i], oldest[i]).epoch);
    s.first_epoch = slowest;
  }
  s.first_epoch = std::min(s.first_epoch, epochs_);
  add_stream(std::move(s));
}

void batch_plan::add_stream(stream s) {
  known_.insert(std::lower_bound(known_.begin(), known_.end(), s.worker),
                s.worker);
  stream_index_[s.worker] = streams_.size();
  streams_.push_back(std::move(s));
}

std::optional<lease_grant> batch_plan::lease(int32_t worker, bool new_batches) {
  join(worker);
  auto* s = stream_of(worker);
  if (s == nullptr)
    return std::nullopt;
  for (;;) {
    int64_t k = 0;
    if (!s->requeued.empty()) {
      k = s->requeued.front();
      s->requeued.pop_front();
    } else if (new_batches && !exhausted(*s)) {
      k = s->next++;
      ++handed_;
    } else {
      return std::nullopt;
    }
    auto b = locate(*s, k);
    if (partition_ == data_partition::sharded)
      decide_through(b.epoch);
    lease_grant g;
    g.epoch = b.epoch;
    g.index = b.index;
    g.batch = number_of(*s, k);
    auto& o = order(seed_of(*s), b.epoch);
    g.samples.assign(o.begin() + static_cast<std::ptrdiff_t>(b.first),
                     o.begin() + static_cast<std::ptrdiff_t>(b.last));
    if (!skipped_.empty()) {
      g.samples.erase(std::remove_if(g.samples.begin(), g.samples.end(),
                                     [&](uint32_t i) { return is_skipped(i); }),
                      g.samples.end());
      if (g.samples.empty()) { // nothing left to train: done as it is
        ++acked_;
        continue;
      }
    }
    g.id = next_id_++;
    ++s->out;
    out_.emplace(g.id,
                 out_lease{worker, static_cast<size_t>(s - streams_.data()), k,
                           static_cast<int64_t>(g.samples.size())});
    return g;
  }
}

void batch_plan::skip(int64_t first, int64_t count) {
  // Each worker that meets the file reports it: one range is enough.
  if (count > 0
      && std::find(skipped_.begin(), skipped_.end(),
                   std::make_pair(first, count))
           == skipped_.end())
    skipped_.emplace_back(first, count);
}

bool batch_plan::is_skipped(uint32_t sample) const {
  auto i = static_cast<int64_t>(sample);
  for (auto& [first, count] : skipped_)
    if (i >= first && i < first + count)
      return true;
  return false;
}

bool batch_plan::ack(int64_t lease_id) {
  auto it = out_.find(lease_id);
  if (it == out_.end())
    return false;
  auto o = it->second;
  auto& s = streams_[o.stream];
  count_done(s, o.k, o.worker, o.samples);
  --s.out;
  ++acked_;
  out_.erase(it);
  return true;
}

int batch_plan::requeue(int32_t worker) {
  int n = 0;
  for (auto it = out_.begin(); it != out_.end();) {
    if (it->second.worker == worker) {
      auto& s = streams_[it->second.stream];
      s.requeued.push_back(it->second.k);
      --s.out;
      it = out_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

// -- counters -----------------------------------------------------------------

bool batch_plan::complete() const {
  if (!out_.empty() || (open_ && !cap_reached()))
    return false;
  for (auto& s : streams_)
    if (!s.requeued.empty() || !exhausted(s))
      return false;
  return true;
}

bool batch_plan::done_for(int32_t worker) const {
  if (!per_worker())
    return complete();
  auto it = stream_index_.find(worker);
  if (it == stream_index_.end())
    return false;
  auto& s = streams_[it->second];
  return s.requeued.empty() && s.out == 0 && exhausted(s);
}

size_t batch_plan::queued() const {
  size_t n = 0;
  for (auto& s : streams_)
    n += s.requeued.size();
  return n;
}

bool batch_plan::quiet() const {
  return out_.empty() && (per_worker() || queued() == 0);
}

int64_t batch_plan::total() const {
  int64_t n = 0;
  for (auto& s : streams_)
    n += stream_total(s);
  return max_batches_ > 0 ? std::min(n, max_batches_) : n;
}

int64_t batch_plan::samples_done(int32_t epoch) const {
  int64_t n = 0;
  for (auto& s : streams_)
    if (auto it = s.samples_done.find(epoch); it != s.samples_done.end())
      n += it->second;
  return n;
}

std::vector<int64_t> batch_plan::epoch_samples() const {
  std::vector<int64_t> out;
  for (auto& s : streams_)
    for (auto& [epoch, n] : s.samples_done) {
      if (out.size() <= static_cast<size_t>(epoch))
        out.resize(static_cast<size_t>(epoch) + 1, 0);
      out[static_cast<size_t>(epoch)] += n;
    }
  return out;
}

std::vector<worker_epochs> batch_plan::worker_samples() const {
  std::vector<worker_epochs> out;
  for (auto& [worker, epochs] : worker_done_) {
    worker_epochs w;
    w.worker = worker;
    for (auto& [epoch, n] : epochs) {
      if (w.samples.size() <= static_cast<size_t>(epoch))
        w.samples.resize(static_cast<size_t>(epoch) + 1, 0);
      w.samples[static_cast<size_t>(epoch)] = n;
    }
    out.push_back(std::move(w));
  }
  return out;
}

int64_t batch_plan::position() const {
  return per_worker() ? acked_ : streams_[0].next;
}

} // namespace troupe
