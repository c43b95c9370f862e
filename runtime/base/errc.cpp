#include "runtime/base/errc.hpp"

#include "caf/message.hpp"

namespace troupe {

std::string to_string(errc code) {
  switch (code) {
    case errc::invalid_config: return "invalid_config";
    case errc::file_not_found: return "file_not_found";
    case errc::io_error: return "io_error";
    case errc::bad_format: return "bad_format";
    case errc::wrong_size: return "wrong_size";
    case errc::layout_mismatch: return "layout_mismatch";
    case errc::non_finite: return "non_finite";
    case errc::backend_unavailable: return "backend_unavailable";
    case errc::invalid_argument: return "invalid_argument";
    case errc::worker_failed: return "worker_failed";
    case errc::restart_limit: return "restart_limit";
    case errc::actor_down: return "actor_down";
    case errc::node_unreachable: return "node_unreachable";
    case errc::stopped: return "stopped";
    case errc::unauthorized: return "unauthorized";
    case errc::data_changed: return "data_changed";
  }
  return "errc(" + std::to_string(static_cast<int>(code)) + ")";
}

caf::error make_error(errc code, std::string what) {
  return caf::make_error(code, std::move(what));
}

std::string describe(const caf::error& err) {
  if (!err)
    return "no error";
  const auto& ctx = err.context();
  if (err.category() == caf::atom("troupe") && ctx.size() == 1
      && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return to_string(err);
}

} // namespace troupe
