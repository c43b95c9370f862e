#include "apps/shell/chief_request.hpp"

#include <memory>
#include <utility>

#include "apps/shell/shell_render.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

namespace {

/// A handler of the answer's types (a typed response handler needs them
/// spelled out) that hands what `render` makes of it to `done`.
template <class Render, class... Args>
auto render_into(caf::event_based_actor* self,
                 std::shared_ptr<chief_answer> done, Render render,
                 caf::detail::type_list<Args...>) {
  return [self, done, render](Args... answer) mutable {
    self->quit();
    (*done)(render(std::forward<Args>(answer)...));
  };
}

template <class Render, class... Ts>
void ask(caf::actor_system& sys, const chief_actor& chief,
         const std::string& where, caf::timespan patience, chief_answer done,
         Render render, Ts... request) {
  using args = typename caf::detail::get_callable_trait<Render>::arg_types;
  auto gone = "the chief at " + where + " is gone (";
  auto silent =
    "the chief at " + where + " did not answer within "
    + std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(patience).count())
    + " s: it is frozen, overloaded or cut off";
  // Shared by the handlers, of which exactly one runs.
  auto answer = std::make_shared<chief_answer>(std::move(done));
  sys.spawn([=](caf::event_based_actor* self) {
    self->set_down_handler([=](caf::down_msg& dm) {
      self->quit();
      (*answer)(make_error(errc::node_unreachable,
                           gone + to_string(dm.reason)
                             + "): it stopped or its process died"));
    });
    self->monitor(chief);
    self->request(chief, patience, request...)
      .then(render_into(self, answer, render, args{}), [=](caf::error& err) {
        self->quit();
        if (err == caf::sec::request_timeout)
          (*answer)(make_error(errc::node_unreachable, silent));
        else
          (*answer)(std::move(err));
      });
  });
}

} // namespace

bool changes_the_run(const shell_command& c) {
  using verb = shell_command::verb;
  switch (c.what) {
    case verb::help:
    case verb::status:
    case verb::nodes:
    case verb::workers:
    case verb::shards:
    case verb::inspect: return false;
    default: return true;
  }
}

void request_chief(caf::actor_system& sys, const chief_actor& chief,
                   const std::string& where, const shell_command& c,
                   bool raw_json, caf::timespan patience, chief_answer done) {
  auto go = [&](auto render, auto... request) {
    ask(sys, chief, where, patience, std::move(done), std::move(render),
        request...);
  };
  using verb = shell_command::verb;
  switch (c.what) {
    case verb::help: return done(render_view(c, cluster_view{}, raw_json));
    case verb::add_worker:
      return go(
        [raw_json](std::vector<int32_t>& ids, std::string& node) {
          return caf::expected<std::string>{render_added(ids, node, raw_json)};
        },
        join_atom_v, c.count, c.node);
    case verb::kill:
      return go(
        [raw_json, target = c.target](bool) {
          return caf::expected<std::string>{render_killed(target, raw_json)};
        },
        kill_atom_v, c.target);
    case verb::add_shard:
    case verb::drain: {
      auto render = [raw_json, word = c.word](std::string& text) {
        return caf::expected<std::string>{render_moved(word, text, raw_json)};
      };
      return c.what == verb::add_shard
               ? go(render, grow_atom_v, c.node)
               : go(render, drain_atom_v, c.target.index);
    }
    case verb::checkpoint:
      return go(
        [raw_json](std::string& path) {
          return caf::expected<std::string>{render_checkpoint(path, raw_json)};
        },
        snapshot_atom_v);
    case verb::export_tables:
      return go(
        [raw_json](std::string& text) {
          return caf::expected<std::string>{render_export(text, raw_json)};
        },
        export_atom_v);
    case verb::tune:
      return go(
        [raw_json, key = c.key](double value) {
          return caf::expected<std::string>{render_tuned(key, value, raw_json)};
        },
        tune_atom_v, c.key, c.value);
    case verb::pause:
    case verb::resume: {
      auto render = [raw_json](bool paused) {
        return caf::expected<std::string>{render_paused(paused, raw_json)};
      };
      return c.what == verb::pause ? go(render, pause_atom_v)
                                   : go(render, resume_atom_v);
    }
    case verb::stop:
      return go(
        [raw_json](bool) {
          return caf::expected<std::string>{render_stopping(raw_json)};
        },
        stop_atom_v);
    default: // answered from the cluster view
      return go([raw_json,
                 c](cluster_view& v) { return render_view(c, v, raw_json); },
                stats_atom_v);
  }
}

} // namespace troupe
