#include "actors/system_config.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include "actors/protocol.hpp"
#include "caf/settings.hpp"
#include "runtime/buffer_pool.hpp"
#include "runtime/errc.hpp"

namespace troupe {

void init_config(caf::actor_system_config& cfg) {
  keep_freed_memory();
  // An id no other system of this process has (node ids are per host and
  // process): security_of finds the system's link security by it.
  static std::atomic<int64_t> next_system_id{1};
  caf::put(cfg.content, "troupe.system-id", next_system_id++);
  cfg.add_message_types<caf::id_block::troupe>();
  cfg.add_message_types<caf::id_block::troupe_cluster>();
  cfg.add_error_category(caf::atom("troupe"),
                         [](uint8_t code, caf::atom_value,
                            const caf::message& ctx) {
                           std::string out = "troupe::"
                                             + to_string(static_cast<errc>(code));
                           if (ctx.size() == 1
                               && ctx.match_element<std::string>(0))
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

} // namespace troupe
