#include "actors/plain_middleman.hpp"

#include "caf/io/basp_broker.hpp"
#include "caf/io/middleman.hpp"
#include "caf/io/middleman_actor_impl.hpp"
#include "caf/io/network/default_multiplexer.hpp"
#include "caf/io/network/scribe_impl.hpp"
#include "caf/defaults.hpp"
#include "caf/settings.hpp"

#include "actors/link_clock.hpp"
#include "actors/sockets.hpp"

namespace troupe {

namespace {

namespace net = caf::io::network;

/// CAF's own scribe, which starts the link's clock when the BASP broker
/// first configures it.
class clocked_scribe : public net::scribe_impl {
public:
  using scribe_impl::scribe_impl;

  void configure_read(caf::io::receive_policy::config config) override {
    if (!clock_started_) {
      clock_started_ = true;
      start_link_clock(*this);
    }
    scribe_impl::configure_read(config);
  }

private:
  bool clock_started_ = false;
};

class plain_middleman_impl : public caf::io::middleman_actor_impl {
public:
  plain_middleman_impl(caf::actor_config& cfg, caf::actor basp)
    : caf::io::middleman_actor_impl(cfg, std::move(basp)) {
  }

  const char* name() const override { return "troupe_plain_middleman"; }

protected:
  /// Connects within the connection timeout (this actor runs on a
  /// scheduler thread; CAF's own blocks a thread of its own for as long as
  /// the kernel tries).
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host,
                                             uint16_t port) override {
    auto timeout = caf::get_or(system().config(),
                               "middleman.connection-timeout",
                               caf::defaults::middleman::connection_timeout);
    std::string why;
    int fd = connect_within(host, port, timeout, why);
    if (fd < 0)
      return caf::make_error(caf::sec::cannot_connect_to_node,
                             "cannot connect to " + host + ":"
                               + std::to_string(port) + ": " + why);
    set_nonblocking(fd, true);
    auto& mpx = static_cast<net::default_multiplexer&>(
      system().middleman().backend());
    return caf::make_counted<clocked_scribe>(mpx, fd);
  }
};

} // namespace

caf::io::middleman_actor make_plain_middleman(caf::actor_system& sys) {
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(
    caf::atom("BASP"));
  // Scheduled and hidden, as make_tls_middleman's (see there); it lives as
  // long as the BASP broker, which ends it when the middleman stops.
  auto mm = sys.spawn<plain_middleman_impl, caf::hidden>(basp);
  caf::actor_cast<caf::abstract_actor*>(basp)->attach_functor(
    [mm](const caf::error&) {
      caf::anon_send_exit(mm, caf::exit_reason::kill);
    });
  return caf::actor_cast<caf::io::middleman_actor>(mm);
}

} // namespace troupe
