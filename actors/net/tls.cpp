#include "actors/net/tls.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/stat.h>

#include "runtime/base/errc.hpp"

namespace troupe {

void ssl_free_fn::operator()(ssl_st* s) const {
  SSL_free(s);
}

std::string ssl_errors(const std::string& fallback) {
  std::string out;
  while (auto code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    // "error:0A000086:SSL routines::certificate verify failed" -> the
    // reason, which is what a user can act on.
    std::string text = buf;
    auto colon = text.rfind(':');
    if (colon != std::string::npos)
      text = text.substr(colon + 1);
    if (out.find(text) == std::string::npos)
      out += (out.empty() ? "" : "; ") + text;
  }
  return out.empty() ? fallback : out;
}

namespace {

caf::error bad_file(const std::string& what, const std::string& path,
                    const std::string& why) {
  return make_error(errc::invalid_config,
                    "TLS " + what + " " + path + ": " + why);
}

/// Empty when `path` names a readable regular file, else why not.
std::string check_readable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return "not a regular file";
  std::ifstream in{path};
  if (!in)
    return "cannot be read";
  return {};
}

/// OpenSSL must never prompt on the terminal for a passphrase.
int no_passphrase(char*, int, int, void*) {
  return 0;
}

std::string subject_of(X509* cert) {
  char buf[256] = "?";
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

} // namespace

caf::expected<std::shared_ptr<tls_context>>
tls_context::load(const tls_files& files) {
  // SSL_write to a peer that has gone raises SIGPIPE; the error return is
  // what every caller handles.
  std::signal(SIGPIPE, SIG_IGN);
  struct {
    const char* what;
    const std::string& path;
  } parts[] = {{"CA file", files.ca},
               {"certificate", files.certificate},
               {"key", files.key}};
  for (auto& p : parts) {
    if (p.path.empty())
      return make_error(errc::invalid_config,
                        std::string{"TLS needs a CA file, a certificate and a "
                                    "key; the "}
                          + p.what + " is missing");
    if (auto why = check_readable(p.path); !why.empty())
      return bad_file(p.what, p.path, why);
  }
  ERR_clear_error();
  auto* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr)
    return make_error(errc::invalid_config,
                      "cannot create a TLS context: " + ssl_errors("?"));
  std::shared_ptr<tls_context> out{new tls_context(ctx)};
  SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
  // TLS 1.3 only: one round trip fewer than 1.2, and AES-GCM or ChaCha20
  // only. AES-128-GCM first: with AES-NI it is the fastest of them, and
  // as strong as a cluster's traffic needs.
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:"
                                "TLS_AES_256_GCM_SHA384:"
                                "TLS_CHACHA20_POLY1305_SHA256");
  // No session tickets: nodes connect once and stay connected, and a
  // ticket would arrive after the handshake as data the peer must read.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE
                          | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.certificate.c_str()) != 1)
    return bad_file("certificate", files.certificate,
                    "not a PEM certificate (" + ssl_errors("?") + ")");
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1
      || SSL_CTX_check_private_key(ctx) != 1) {
    auto why = ssl_errors("?");
    return bad_file("key", files.key,
                    why.find("mismatch") != std::string::npos
                      ? "does not belong to certificate " + files.certificate
                      : "not an unencrypted PEM private key (" + why + ")");
  }
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1)
    return bad_file("CA file", files.ca,
                    "not a PEM certificate (" + ssl_errors("?") + ")");
  // The CA must have signed our own certificate, or every peer would
  // refuse us: say so now rather than at the first connection.
  auto* cert = SSL_CTX_get0_certificate(ctx);
  out->subject_ = subject_of(cert);
  auto* check = X509_STORE_CTX_new();
  X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(ctx), cert, nullptr);
  bool signed_by_ca = X509_verify_cert(check) == 1;
  auto why = X509_verify_cert_error_string(X509_STORE_CTX_get_error(check));
  X509_STORE_CTX_free(check);
  if (!signed_by_ca)
    return bad_file("certificate", files.certificate,
                    std::string{"not accepted by the CA in "} + files.ca + " ("
                      + why + ")");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     nullptr);
  ERR_clear_error();
  return out;
}

tls_context::~tls_context() {
  SSL_CTX_free(ctx_);
}

ssl_ptr tls_context::session(int fd, bool server, bool bulk) const {
  ssl_ptr s{SSL_new(ctx_)};
  if (!s)
    return s;
  if (bulk)
    SSL_set_default_read_buffer_len(s.get(), bulk_buffer);
  SSL_set_fd(s.get(), fd);
  if (server)
    SSL_set_accept_state(s.get());
  else
    SSL_set_connect_state(s.get());
  return s;
}

int handshake_step(ssl_st* ssl, short& events, std::string& why) {
  ERR_clear_error();
  auto rc = SSL_do_handshake(ssl);
  if (rc == 1)
    return 1;
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ: events = POLLIN; return 0;
    case SSL_ERROR_WANT_WRITE: events = POLLOUT; return 0;
    case SSL_ERROR_SYSCALL:
      why = ssl_errors(errno != 0 ? std::strerror(errno)
                                  : "the peer closed the connection");
      return -1;
    default: why = ssl_errors("TLS handshake failed"); return -1;
  }
}

} // namespace troupe
