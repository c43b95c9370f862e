#include "apps/link_options.hpp"

#include "actors/remote.hpp"
#include "runtime/errc.hpp"

namespace troupe {

void add_link_options(CLI::App& app, link_options& opts) {
  app.add_option("--tls-ca", opts.files.ca,
                 "the cluster's CA certificate (PEM); with --tls-cert and "
                 "--tls-key every link is mutual TLS");
  app.add_option("--tls-cert", opts.files.certificate,
                 "this process's certificate, signed by the CA (PEM)");
  app.add_option("--tls-key", opts.files.key,
                 "the certificate's private key (PEM, unencrypted)");
  app.add_flag("--insecure", opts.insecure,
               "allow plaintext links on addresses other than loopback "
               "(anyone who reaches them can steer or crash the run)");
}

caf::expected<std::shared_ptr<const tls_context>>
load_link_tls(const link_options& opts, const cluster_config* cluster,
              const std::string& node) {
  tls_files files = opts.files;
  int64_t timeout_ms = 5000;
  if (cluster != nullptr && cluster->tls.enabled()) {
    timeout_ms = cluster->tls.handshake_timeout_ms;
    auto* me = cluster->node(node);
    bool own = me != nullptr && !me->certificate.empty();
    if (files.ca.empty())
      files.ca = cluster->tls.ca;
    if (files.certificate.empty())
      files.certificate = own ? me->certificate : cluster->tls.certificate;
    if (files.key.empty())
      files.key = own ? me->key : cluster->tls.key;
  }
  if (files.empty())
    return std::shared_ptr<const tls_context>{};
  if (opts.insecure)
    return make_error(errc::invalid_config,
                      "--insecure and TLS exclude each other");
  auto ctx = tls_context::load(files);
  if (!ctx)
    return ctx.error();
  (*ctx)->handshake_timeout = std::chrono::milliseconds{timeout_ms};
  return std::shared_ptr<const tls_context>{std::move(*ctx)};
}

void apply_link_security(caf::actor_system& sys,
                         std::shared_ptr<const tls_context> tls,
                         const link_options& opts) {
  secure_links(sys, std::move(tls), opts.insecure);
}

} // namespace troupe
