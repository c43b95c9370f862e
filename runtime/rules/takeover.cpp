#include "runtime/rules/takeover.hpp"

#include <algorithm>

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
  for (size_t i = 1; i < shards; ++i)
    if (by_id[i]->batches != by_id[0]->batches)
      return refuse("shards 0 and " + num(static_cast<int64_t>(i))
                    + " applied different batches since update " + num(since)
                    + " (" + num(static_cast<int64_t>(by_id[0]->batches.size()))
                    + " and "
                    + num(static_cast<int64_t>(by_id[i]->batches.size()))
                    + "): a push reached one and not the other");
  v.keep_live = true;
  if (shards > 0)
    v.done = by_id[0]->batches;
  return v;
}

} // namespace troupe
