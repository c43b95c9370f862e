#include "runtime/rules/takeover.hpp"

#include <algorithm>
#include <iterator>

namespace troupe {

namespace {

std::string num(int64_t x) {
  return std::to_string(x);
}

} // namespace

takeover_verdict judge_takeover(size_t shards, int64_t since,
                                const std::vector<shard_history>& live) {
  takeover_verdict v;
  for (auto& h : live)
    v.newest_version = std::max(v.newest_version, h.version);
  auto refuse = [&](std::string why) {
    v.keep_live = false;
    v.why_not = std::move(why);
    v.done.clear();
    return v;
  };
  std::vector<const shard_history*> by_id(shards, nullptr);
  for (auto& h : live) {
    if (h.shard < 0 || static_cast<size_t>(h.shard) >= shards)
      return refuse("a node holds shard " + num(h.shard) + ", the run has "
                    + num(static_cast<int64_t>(shards)));
    if (by_id[static_cast<size_t>(h.shard)])
      return refuse("shard " + num(h.shard) + " lives on two nodes");
    by_id[static_cast<size_t>(h.shard)] = &h;
  }
  for (size_t i = 0; i < shards; ++i) {
    auto* h = by_id[i];
    auto id = num(static_cast<int64_t>(i));
    if (!h)
      return refuse("shard " + id + " did not survive its chief");
    if (h->since != since)
      return refuse("shard " + id + " answered for version " + num(h->since)
                    + ", not " + num(since));
    if (!h->complete)
      return refuse("shard " + id + " (at update " + num(h->version)
                    + ") cannot name the batches it applied since update "
                    + num(since));
    if (h->version != since + static_cast<int64_t>(h->batches.size()))
      return refuse("shard " + id + " is at update " + num(h->version)
                    + " but names "
                    + num(static_cast<int64_t>(h->batches.size()))
                    + " batches since update " + num(since));
    if (!std::is_sorted(h->batches.begin(), h->batches.end())
        || std::adjacent_find(h->batches.begin(), h->batches.end())
             != h->batches.end())
      return refuse("shard " + id + " names a batch twice");
  }
  // A push that reached some shards and not others (its worker stopped
  // with the chief): that batch is not done; it comes again, and the
  // shards that applied it drop it as a duplicate (their logs), so every
  // shard still applies every batch once.
  v.keep_live = true;
  if (shards == 0)
    return v;
  std::vector<int64_t> all = by_id[0]->batches;
  v.done = by_id[0]->batches;
  for (size_t i = 1; i < shards; ++i) {
    auto& b = by_id[i]->batches;
    std::vector<int64_t> common, either;
    std::set_intersection(v.done.begin(), v.done.end(), b.begin(), b.end(),
                          std::back_inserter(common));
    std::set_union(all.begin(), all.end(), b.begin(), b.end(),
                   std::back_inserter(either));
    v.done = std::move(common);
    all = std::move(either);
  }
  std::set_difference(all.begin(), all.end(), v.done.begin(), v.done.end(),
                      std::back_inserter(v.again));
  return v;
}

} // namespace troupe
