#include "actors/protocol/system_config.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "actors/protocol/protocol.hpp"
#include "caf/io/middleman.hpp"
#include "caf/settings.hpp"
#include "runtime/params/buffer_pool.hpp"
#include "runtime/base/errc.hpp"

// Each role's block stays inside its range (ids.hpp).
static_assert(caf::id_block::troupe_shard_data::end
              <= troupe::type_ids::replica);
static_assert(caf::id_block::troupe_replica::end <= troupe::type_ids::shard);
static_assert(caf::id_block::troupe_shard::end <= troupe::type_ids::feeder);
static_assert(caf::id_block::troupe_feeder::end <= troupe::type_ids::worker);
static_assert(caf::id_block::troupe_worker::end
              <= troupe::type_ids::node_agent);
static_assert(caf::id_block::troupe_node_agent::end <= troupe::type_ids::chief);
static_assert(caf::id_block::troupe_chief::end <= troupe::type_ids::end);

namespace troupe {

void init_config(caf::actor_system_config& cfg) {
  keep_freed_memory();
  // An id no other system of this process has (node ids are per host and
  // process): security_of finds the system's link security by it.
  static std::atomic<int64_t> next_system_id{1};
  caf::put(cfg.content, "troupe.system-id", next_system_id++);
  cfg.add_message_types<caf::id_block::troupe_shard_data>();
  cfg.add_message_types<caf::id_block::troupe_replica>();
  cfg.add_message_types<caf::id_block::troupe_shard>();
  cfg.add_message_types<caf::id_block::troupe_feeder>();
  cfg.add_message_types<caf::id_block::troupe_worker>();
  cfg.add_message_types<caf::id_block::troupe_node_agent>();
  cfg.add_message_types<caf::id_block::troupe_chief>();
  cfg.add_error_category(caf::atom("troupe"), [](uint8_t code, caf::atom_value,
                                                 const caf::message& ctx) {
    std::string out = "troupe::" + to_string(static_cast<errc>(code));
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      out += ": " + ctx.get_as<std::string>(0);
    return out;
  });
  cfg.set("scheduler.policy", caf::atom("sharing"));
  // One scheduler thread per hardware thread, not CAF's default of at least
  // four: workers compute inside their handlers, and on a 2-core machine
  // the extra threads only add context switches (an in-process run with 1
  // worker went from 112k to 126k samples/s, with 2 workers from 154k to
  // 180k-196k).
  auto threads = std::max(1u, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<int>(threads));
}

void init_network(caf::actor_system_config& cfg, const cluster_config& c) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval",
          caf::timespan{std::chrono::milliseconds(c.heartbeat_interval_ms)});
  cfg.set("middleman.connection-timeout",
          caf::timespan{std::chrono::milliseconds(c.connection_timeout_ms)});
  // Deserialize arriving messages on the middleman's own thread instead of
  // handing each payload to a BASP worker thread: that hand-off copies the
  // payload once more, and on small machines the extra thread only adds a
  // context switch. bench-transfer, 4 MB pull+push: 1120-1150 MB/s with
  // one worker, 1300-1440 MB/s without (100 MB: 1200-1380 vs 1400-1500).
  cfg.set("middleman.workers", size_t{0});
  caf::put(cfg.content, "troupe.shared-memory", c.shared_memory);
}

} // namespace troupe
