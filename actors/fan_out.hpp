// "Ask all, gather, time out" for event-based actors: one request to each
// of n peers at once, their replies gathered in order. Every request
// carries its own timeout (the caller's self->request), so a silent peer
// ends as an error, never as a wait without end.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "caf/error.hpp"
#include "caf/expected.hpp"

namespace troupe {

/// A fan-out whose parts are not all requests (shards restored by request
/// beside shards placed through an agent's callback): returns the
/// function each part calls once it is done; the n-th call runs `then`
/// (n == 0: `then` runs now, and the function does nothing).
inline std::function<void()> countdown(size_t n, std::function<void()> then) {
  if (n == 0) {
    then();
    return [] {};
  }
  auto left = std::make_shared<size_t>(n);
  return [left, then = std::move(then)] {
    if (*left > 0 && --*left == 0)
      then();
  };
}

/// Sends make(i) for every i < n (each returns the response handle of a
/// request); once every reply is in, `done` gets them in order. The first
/// error goes to `failed` instead, once, and `done` never runs.
template <class Reply, class Make, class Done, class Failed>
void ask_all(size_t n, Make make, Done done, Failed failed) {
  auto replies = std::make_shared<std::vector<Reply>>(n);
  if (n == 0)
    return done(*replies);
  auto left = std::make_shared<size_t>(n);
  auto broken = std::make_shared<bool>(false);
  for (size_t i = 0; i < n; ++i)
    make(i).then(
      [=](Reply& r) mutable {
        (*replies)[i] = std::move(r);
        if (--*left == 0 && !*broken)
          done(*replies);
      },
      [=](caf::error& err) mutable {
        if (*broken)
          return;
        *broken = true;
        failed(err);
      });
}

/// The same, where an error is an answer too: `done` gets every reply or
/// error, in order, once all are in (a peer that may be gone already, as
/// a node told that the run is over).
template <class Reply, class Make, class Done>
void ask_all_settled(size_t n, Make make, Done done) {
  using outcome = caf::expected<Reply>;
  auto replies = std::make_shared<std::vector<outcome>>(n,
                                                        outcome{caf::error{}});
  if (n == 0)
    return done(*replies);
  auto left = std::make_shared<size_t>(n);
  for (size_t i = 0; i < n; ++i)
    make(i).then(
      [=](Reply& r) mutable {
        (*replies)[i] = std::move(r);
        if (--*left == 0)
          done(*replies);
      },
      [=](caf::error& err) mutable {
        (*replies)[i] = std::move(err);
        if (--*left == 0)
          done(*replies);
      });
}

} // namespace troupe
