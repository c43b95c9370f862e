#include "actors/system_config.hpp"

#include "actors/protocol.hpp"
#include "runtime/errc.hpp"

namespace troupe {

void init_config(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::troupe>();
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
}

} // namespace troupe
