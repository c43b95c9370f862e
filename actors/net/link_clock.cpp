#include "actors/net/link_clock.hpp"

#include "caf/io/basp_broker.hpp"
#include "caf/io/scribe.hpp"

namespace troupe {

void start_link_clock(caf::io::scribe& s) {
  auto* basp = dynamic_cast<caf::io::basp_broker*>(s.parent());
  if (basp == nullptr)
    return;
  auto it = basp->ctx.find(s.hdl());
  if (it == basp->ctx.end())
    return;
  auto& last_seen = it->second.last_seen;
  if (last_seen == caf::actor_clock::time_point{})
    last_seen = basp->clock().now();
}

} // namespace troupe
