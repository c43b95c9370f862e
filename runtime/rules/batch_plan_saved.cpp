// batch_plan's checkpoints: its place as text (save, load), and a plan
// restored to a checkpoint's position, with the batches done after it.
#include "runtime/rules/batch_plan.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "runtime/base/errc.hpp"
#include "runtime/rules/plan_numbers.hpp"

namespace troupe {

using namespace plan_numbers;

std::string batch_plan::save() const {
  if (!per_worker())
    return {};
  std::ostringstream out;
  out << "troupe-plan 1 " << to_string(partition_) << ' ' << acked_ << ' '
      << handed_ << '\n';
  for (auto& s : streams_) {
    out << "stream " << s.worker << ' ' << s.first_epoch << ' ' << s.next << ' '
        << s.requeued.size();
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
                               const std::string& saved,
                               const std::vector<int64_t>& again) {
  if (per_worker())
    return restore_streams(position, done_after, saved, again);
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
  // Every batch named, done or again, once.
  std::vector<int64_t> named(done);
  named.insert(named.end(), again.begin(), again.end());
  std::sort(named.begin(), named.end());
  for (size_t k = 0; k < named.size(); ++k)
    if (named[k] < position || named[k] >= total
        || (k > 0 && named[k] == named[k - 1]))
      return make_error(errc::invalid_argument,
                        "feeder restore: batch " + std::to_string(named[k])
                          + (named[k] < position || named[k] >= total
                               ? " is outside [" + std::to_string(position)
                                   + ", " + std::to_string(total) + ")"
                               : " is named twice"));
  reset();
  auto& s = streams_[0];
  // Up to the last batch named, those not done come first.
  s.next = named.empty() ? position : std::max(position, named.back() + 1);
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
                                       const std::string& saved,
                                       const std::vector<int64_t>& again) {
  auto known_before = known_;
  if (saved.empty()) {
    if (position != 0 || !done_after.empty() || !again.empty())
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
  // The batches done after the checkpoint, by stream, and how far each
  // stream's named batches (done or again) reach.
  std::map<size_t, std::set<int64_t>> done;
  std::map<size_t, int64_t> reach;
  std::vector<int64_t> named(done_after);
  named.insert(named.end(), again.begin(), again.end());
  for (size_t n = 0; n < named.size(); ++n) {
    auto number = named[n];
    auto worker = static_cast<int32_t>((number >> stream_bits) - 1);
    auto k = number & stream_mask;
    auto* s = number < 0 ? nullptr : next.stream_of(worker);
    bool queued = s != nullptr
                  && std::find(s->requeued.begin(), s->requeued.end(), k)
                       != s->requeued.end();
    if (s == nullptr || (k < s->next && !queued) || k >= next.stream_total(*s))
      return make_error(errc::invalid_argument,
                        "feeder restore: batch " + std::to_string(number)
                          + " is not one the checkpoint left to do");
    auto index = static_cast<size_t>(s - next.streams_.data());
    auto& r = reach[index];
    r = std::max(r, k + 1);
    if (n >= done_after.size()) { // again: not done, named once
      if (done[index].count(k) > 0
          || std::count(again.begin(), again.end(), number) > 1)
        return make_error(errc::invalid_argument, "feeder restore: batch "
                                                    + std::to_string(number)
                                                    + " is named twice");
      continue;
    }
    if (!done[index].insert(k).second)
      return make_error(errc::invalid_argument, "feeder restore: batch "
                                                  + std::to_string(number)
                                                  + " is named twice");
  }
  for (auto& [index, far] : reach) {
    auto& ks = done[index];
    auto& s = next.streams_[index];
    std::deque<int64_t> still;
    for (auto k : s.requeued)
      if (ks.count(k) == 0)
        still.push_back(k);
    auto end = std::max(s.next, far);
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
