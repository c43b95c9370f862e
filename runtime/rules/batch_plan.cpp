#include "runtime/rules/batch_plan.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// Plan numbers of worker streams: (worker + 1) << stream_bits | k. 2^40
/// batches per worker and 2^22 workers fit an int64.
constexpr int stream_bits = 40;
constexpr int64_t stream_mask = (int64_t{1} << stream_bits) - 1;
constexpr int32_t max_worker_id = (1 << 22) - 2;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

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
                       size_t shuffle_block, std::vector<size_t> read_parts)
  : samples_(samples), batch_(batch), seed_(seed), epochs_(epochs),
    max_batches_(max_batches), partition_(partition),
    shuffle_block_(shuffle_block), read_parts_(std::move(read_parts)) {
  per_epoch_ = ceil_div(static_cast<int64_t>(samples), batch);
  if (!per_worker())
    streams_.emplace_back();
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

std::vector<batch_plan::segment>
batch_plan::segments(const stream& s) const {
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
      auto [a, b] = part_span(samples_,
                              static_cast<size_t>(it - members.begin()),
                              members.size());
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
    b.first = p.first + static_cast<size_t>(b.index)
                          * static_cast<size_t>(batch_);
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
          : std::min(o.next, *std::min_element(o.requeued.begin(),
                                               o.requeued.end())));
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

std::optional<lease_grant> batch_plan::lease(int32_t worker,
                                             bool new_batches) {
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
  if (!out_.empty())
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

// -- checkpoints --------------------------------------------------------------

std::string batch_plan::save() const {
  if (!per_worker())
    return {};
  std::ostringstream out;
  out << "troupe-plan 1 " << to_string(partition_) << ' ' << acked_ << ' '
      << handed_ << '\n';
  for (auto& s : streams_) {
    out << "stream " << s.worker << ' ' << s.first_epoch << ' ' << s.next
        << ' ' << s.requeued.size();
    for (auto k : s.requeued)
      out << ' ' << k;
    out << '\n';
  }
  if (partition_ != data_partition::sharded)
    return out.str();
  for (auto& r : runs_) {
    out << "run " << r.first_epoch << ' ' << r.members.size();
    for (auto m : r.members)
      out << ' ' << m;
    out << '\n';
  }
  out << "decided " << decided_through_ << '\n';
  return out.str();
}

void batch_plan::reset() {
  for (auto& s : streams_) {
    s.first_epoch = 0;
    s.next = 0;
    s.requeued.clear();
    s.out = 0;
    s.samples_done.clear();
  }
  runs_.clear();
  decided_through_ = -1;
  handed_ = 0;
  acked_ = 0;
  out_.clear();
  worker_done_.clear();
}

caf::error batch_plan::restore(int64_t position,
                               const std::vector<int64_t>& done_after,
                               const std::string& saved) {
  if (per_worker())
    return restore_streams(position, done_after, saved);
  if (!saved.empty())
    return make_error(errc::bad_format,
                      "the checkpoint's feeder plan is for another data "
                      "partition; this run's is shared");
  auto& s0 = streams_[0];
  int64_t total = stream_total(s0);
  if (max_batches_ > 0)
    total = std::min(total, max_batches_);
  position = std::min(position, total);
  std::vector<int64_t> done(done_after);
  std::sort(done.begin(), done.end());
  for (size_t k = 0; k < done.size(); ++k)
    if (done[k] < position || done[k] >= total
        || (k > 0 && done[k] == done[k - 1]))
      return make_error(errc::invalid_argument,
                        "feeder restore: batch " + std::to_string(done[k])
                          + (done[k] < position || done[k] >= total
                               ? " is outside [" + std::to_string(position)
                                   + ", " + std::to_string(total) + ")"
                               : " is named twice"));
  reset();
  auto& s = streams_[0];
  s.next = done.empty() ? position : std::max(position, done.back() + 1);
  handed_ = s.next;
  acked_ = position + static_cast<int64_t>(done.size());
  for (int64_t b = 0; b < position; ++b)
    count_done(s, b, -1);
  auto d = done.begin();
  for (int64_t b = position; b < s.next; ++b) {
    if (d != done.end() && *d == b) {
      count_done(s, b, -1);
      ++d;
    } else {
      s.requeued.push_back(b);
    }
  }
  return {};
}

caf::error batch_plan::restore_streams(int64_t position,
                                       const std::vector<int64_t>& done_after,
                                       const std::string& saved) {
  auto known_before = known_;
  if (saved.empty()) {
    if (position != 0 || !done_after.empty())
      return make_error(errc::bad_format,
                        "the checkpoint has no feeder plan, which a run with "
                        "data partition "
                          + std::string{to_string(partition_)} + " needs");
    reset();
    return {};
  }
  // Built aside: a bad text or batch leaves this plan as it was.
  batch_plan next{samples_, batch_, seed_, epochs_, max_batches_, partition_};
  if (auto err = next.load(saved))
    return err;
  if (position != next.acked_)
    return make_error(errc::bad_format,
                      "the checkpoint's step " + std::to_string(position)
                        + " is not its feeder plan's "
                        + std::to_string(next.acked_) + " batches done");
  // The batches done after the checkpoint, by stream.
  std::map<size_t, std::set<int64_t>> done;
  for (auto number : done_after) {
    auto worker = static_cast<int32_t>((number >> stream_bits) - 1);
    auto k = number & stream_mask;
    auto* s = number < 0 ? nullptr : next.stream_of(worker);
    bool queued = s != nullptr
                  && std::find(s->requeued.begin(), s->requeued.end(), k)
                       != s->requeued.end();
    if (s == nullptr || (k < s->next && !queued)
        || k >= next.stream_total(*s))
      return make_error(errc::invalid_argument,
                        "feeder restore: batch " + std::to_string(number)
                          + " is not one the checkpoint left to do");
    auto index = static_cast<size_t>(s - next.streams_.data());
    if (!done[index].insert(k).second)
      return make_error(errc::invalid_argument,
                        "feeder restore: batch " + std::to_string(number)
                          + " is named twice");
  }
  for (auto& [index, ks] : done) {
    auto& s = next.streams_[index];
    std::deque<int64_t> still;
    for (auto k : s.requeued)
      if (ks.count(k) == 0)
        still.push_back(k);
    auto end = std::max(s.next, *ks.rbegin() + 1);
    for (auto k = s.next; k < end; ++k)
      if (ks.count(k) == 0)
        still.push_back(k);
    if (partition_ == data_partition::sharded)
      next.decide_through(next.locate(s, end - 1).epoch);
    next.handed_ += end - s.next;
    next.acked_ += static_cast<int64_t>(ks.size());
    s.next = end;
    s.requeued = std::move(still);
  }
  for (auto& s : next.streams_) {
    std::set<int64_t> open(s.requeued.begin(), s.requeued.end());
    for (int64_t k = 0; k < s.next; ++k)
      if (open.count(k) == 0)
        next.count_done(s, k, s.worker);
  }
  // Workers this plan knew and the checkpoint did not (added since).
  for (auto w : known_before)
    next.join(w);
  next.next_id_ = next_id_;
  *this = std::move(next);
  return {};
}

caf::error batch_plan::load(const std::string& saved) {
  std::istringstream in(saved);
  auto bad = [](const std::string& why) {
    return make_error(errc::bad_format, "the checkpoint's feeder plan: " + why);
  };
  // Whole numbers in [lo, hi], one token each.
  auto read = [&](int64_t& v, int64_t lo, int64_t hi) {
    std::string tok;
    if (!(in >> tok))
      return false;
    size_t used = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (...) {
      return false;
    }
    return used == tok.size() && v >= lo && v <= hi;
  };
  constexpr int64_t big = int64_t{1} << 62;
  std::string word, mode;
  int64_t version = 0, acked = 0, handed = 0;
  if (!(in >> word) || word != "troupe-plan" || !read(version, 1, 1))
    return bad("not a troupe plan of version 1");
  if (!(in >> mode) || mode != to_string(partition_))
    return bad("it is for data partition \"" + mode + "\"; this run's is "
               + to_string(partition_));
  if (!read(acked, 0, big) || !read(handed, 0, big) || acked > handed)
    return bad("bad batch counts");
  int64_t requeued_total = 0, next_total = 0;
  while (in >> word) {
    if (word == "stream") {
      int64_t worker = 0, first = 0, nxt = 0, nreq = 0;
      if (!read(worker, 0, max_worker_id) || !read(first, 0, epochs_)
          || !read(nxt, 0, stream_mask) || !read(nreq, 0, nxt))
        return bad("a bad stream line");
      if (stream_index_.count(static_cast<int32_t>(worker)) > 0)
        return bad("worker " + std::to_string(worker) + " has two streams");
      stream s;
      s.worker = static_cast<int32_t>(worker);
      s.first_epoch = static_cast<int32_t>(first);
      s.next = nxt;
      std::set<int64_t> seen;
      for (int64_t i = 0; i < nreq; ++i) {
        int64_t k = 0;
        if (!read(k, 0, nxt - 1) || !seen.insert(k).second)
          return bad("a bad requeued batch of worker "
                     + std::to_string(worker));
        s.requeued.push_back(k);
      }
      requeued_total += nreq;
      next_total += nxt;
      add_stream(std::move(s));
    } else if (word == "run" && partition_ == data_partition::sharded) {
      int64_t first = 0, n = 0;
      if (!read(first, 0, epochs_ - 1) || !read(n, 1, max_worker_id)
          || (!runs_.empty() && first <= runs_.back().first_epoch)
          || (runs_.empty() && first != 0))
        return bad("a bad run line");
      member_run r{static_cast<int32_t>(first), {}};
      for (int64_t i = 0; i < n; ++i) {
        int64_t m = 0;
        if (!read(m, 0, max_worker_id)
            || (!r.members.empty() && m <= r.members.back()))
          return bad("a run's members are not ascending worker ids");
        r.members.push_back(static_cast<int32_t>(m));
      }
      runs_.push_back(std::move(r));
    } else if (word == "decided" && partition_ == data_partition::sharded) {
      int64_t d = 0;
      if (!read(d, -1, epochs_ - 1))
        return bad("a bad decided line");
      decided_through_ = static_cast<int32_t>(d);
    } else {
      return bad("unexpected \"" + word.substr(0, 32) + "\"");
    }
  }
  if (next_total != handed || handed - requeued_total != acked)
    return bad("its streams do not add up to its batch counts");
  if (partition_ == data_partition::sharded) {
    if (runs_.empty() != (decided_through_ < 0)
        || (!runs_.empty() && runs_.back().first_epoch > decided_through_))
      return bad("its runs and decided epochs disagree");
    for (auto& r : runs_)
      for (auto m : r.members)
        if (stream_index_.count(m) == 0)
          return bad("a run names worker " + std::to_string(m)
                     + ", which has no stream");
  }
  for (auto& s : streams_)
    if (s.next > stream_total(s)
        || (partition_ == data_partition::sharded && s.next > 0
            && locate(s, s.next - 1).epoch > decided_through_))
      return bad("worker " + std::to_string(s.worker)
                 + "'s stream goes past its plan");
  handed_ = handed;
  acked_ = acked;
  return {};
}

} // namespace troupe
