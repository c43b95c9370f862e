#include "runtime/base/errc.hpp"

#include "caf/exit_reason.hpp"
#include "caf/message.hpp"
#include "caf/sec.hpp"

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
    case errc::bad_step: return "bad_step";
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
  if (err.category() == caf::atom("exit")) {
    switch (static_cast<caf::exit_reason>(err.code())) {
      case caf::exit_reason::remote_link_unreachable:
        return "its process was lost (the connection to its node broke)";
      case caf::exit_reason::kill: return "it was killed";
      case caf::exit_reason::user_shutdown: return "it was stopped";
      case caf::exit_reason::unhandled_exception:
        return "it raised an exception it did not handle";
      case caf::exit_reason::unreachable:
        return "it could no longer be reached";
      case caf::exit_reason::out_of_workers:
        return "its process had no threads left to run it";
      default: break;
    }
  }
  if (err.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(err.code())) {
      case caf::sec::request_timeout: return "it gave no answer in time";
      case caf::sec::request_receiver_down:
        return "it was gone before it answered";
      case caf::sec::cannot_connect_to_node:
        return "its node cannot be connected to";
      default: break;
    }
  }
  return to_string(err);
}

} // namespace troupe
