#include "apps/launch/link_options.hpp"

#include <iostream>

#include "actors/net/remote.hpp"
#include "runtime/base/errc.hpp"

namespace troupe {

void add_link_options(CLI::App& app, link_options& opts) {
  app.add_option("--key", opts.key_file,
                 "the cluster key's file (default: "
                 "$XDG_CONFIG_HOME/troupe/cluster.key, else "
                 "~/.config/troupe/cluster.key; the first node of a run "
                 "makes it)");
  app.add_option("--tls-ca", opts.files.ca,
                 "the cluster's CA certificate (PEM); with --tls-cert and "
                 "--tls-key every link is mutual TLS");
  app.add_option("--tls-cert", opts.files.certificate,
                 "this process's certificate, signed by the CA (PEM)");
  app.add_option("--tls-key", opts.files.key,
                 "the certificate's private key (PEM, unencrypted)");
  app.add_flag("--insecure", opts.insecure,
               "no cluster key and no TLS: plaintext links on any address "
               "(anyone who reaches them can steer or crash the run)");
}

namespace {

caf::expected<std::shared_ptr<const tls_context>>
load_tls(const link_options& opts, const cluster_config* cluster,
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

} // namespace

caf::expected<std::shared_ptr<const link_guard>>
load_link_guard(const link_options& opts, const cluster_config* cluster,
                const std::string& node, key_use use) {
  auto tls = load_tls(opts, cluster, node);
  if (!tls)
    return tls.error();
  if (*tls) {
    if (!opts.key_file.empty())
      return make_error(errc::invalid_config,
                        "--key and TLS exclude each other: TLS proves the "
                        "cluster's certificates instead of a key");
    return make_tls_guard(std::move(*tls));
  }
  if (opts.insecure) {
    if (!opts.key_file.empty())
      return make_error(errc::invalid_config,
                        "--key and --insecure exclude each other");
    return std::shared_ptr<const link_guard>{};
  }
  if (use == key_use::none)
    return std::shared_ptr<const link_guard>{};
  auto path = opts.key_file.empty() ? default_key_path() : opts.key_file;
  bool made = false;
  auto key = use == key_use::make_if_missing ? load_or_make_key(path, made)
                                             : load_key(path);
  if (!key)
    return key.error();
  if (made)
    std::cout << "cluster key: made " << key->id() << " in " << path
              << " (mode 0600); nodes on other hosts need a copy of it"
              << std::endl;
  return make_key_guard(std::move(*key));
}

void apply_link_security(caf::actor_system& sys,
                         std::shared_ptr<const link_guard> guard,
                         const link_options& opts) {
  guard_links(sys, std::move(guard), opts.insecure);
}

} // namespace troupe
