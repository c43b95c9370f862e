// Answers the chief awaits from member nodes, given up as soon as their
// node is lost. CAF 0.17 answers a request to a process whose link broke
// only when the request times out (cluster.request_timeout_ms, 30 s by
// default): a recovery that waited for such an answer (a replica's
// promotion, a live shard's log, a placement) would stand still that long
// while the node it asked was known to be gone.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace troupe {

class node_answers {
public:
  /// Set once the answer counts as given: by the reply, by its error, or
  /// by the node's loss, whichever comes first.
  using settled = std::shared_ptr<bool>;

  /// An answer now awaited from `node`: `lost` runs if the node is lost
  /// before the answer is settled.
  settled await(const std::string& node, std::function<void()> lost) {
    // Settled answers leave here, so the map holds only those in flight.
    for (auto it = waiting_.begin(); it != waiting_.end();)
      it = *it->second.done ? waiting_.erase(it) : std::next(it);
    auto done = std::make_shared<bool>(false);
    waiting_.emplace(node, entry{done, std::move(lost)});
    return done;
  }

  /// Node `node` is lost: every answer still awaited from it is given up.
  void node_lost(const std::string& node) {
    auto [from, to] = waiting_.equal_range(node);
    std::multimap<std::string, entry> given_up;
    given_up.insert(from, to);
    waiting_.erase(from, to);
    // `lost` may await new answers (of other nodes): it runs after the
    // map is consistent again.
    for (auto& [name, e] : given_up)
      if (first(e.done))
        e.lost();
  }

  /// Answers in flight, for tests.
  size_t in_flight() const {
    size_t n = 0;
    for (auto& [name, e] : waiting_)
      n += *e.done ? 0 : 1;
    return n;
  }

  /// True the first time it is called for `done`: the caller settles it.
  static bool first(const settled& done) { return !std::exchange(*done, true); }

private:
  struct entry {
    settled done;
    std::function<void()> lost;
  };
  std::multimap<std::string, entry> waiting_;
};

} // namespace troupe
