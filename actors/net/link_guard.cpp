#include "actors/net/link_guard.hpp"

#include <cerrno>
#include <cstring>

#include <poll.h>

#include "actors/net/key_handshake.hpp"

namespace troupe {

namespace {

class tls_proof : public peer_proof {
public:
  explicit tls_proof(ssl_ptr ssl) : ssl_(std::move(ssl)) {}

  int step(short& events, std::string& why) override {
    if (!ssl_) {
      why = "cannot create a TLS session";
      return -1;
    }
    errno = 0;
    return handshake_step(ssl_.get(), events, why);
  }

  ssl_ptr take_session() override { return std::move(ssl_); }

private:
  ssl_ptr ssl_;
};

class tls_guard : public link_guard {
public:
  explicit tls_guard(std::shared_ptr<const tls_context> tls)
    : tls_(std::move(tls)) {}

  std::unique_ptr<peer_proof> accept(int fd, bool bulk) const override {
    return std::make_unique<tls_proof>(tls_->session(fd, true, bulk));
  }

  std::unique_ptr<peer_proof> connect(int fd, bool bulk) const override {
    return std::make_unique<tls_proof>(tls_->session(fd, false, bulk));
  }

  std::chrono::milliseconds timeout() const override {
    return tls_->handshake_timeout;
  }

  std::string describe() const override { return "mutual TLS"; }

  std::string handshake() const override { return "TLS handshake"; }

  std::string hint() const override {
    return "do both sides have certificates of the same CA, and does the "
           "peer use TLS?";
  }

private:
  std::shared_ptr<const tls_context> tls_;
};

class key_proof : public peer_proof {
public:
  key_proof(const cluster_key& key, key_exchange::role r, int fd)
    : handshake_(key, r, fd) {}

  int step(short& events, std::string& why) override {
    return handshake_.step(events, why);
  }

  bool refused() const override { return handshake_.refused(); }

private:
  key_handshake handshake_;
};

class key_guard : public link_guard {
public:
  key_guard(cluster_key key, std::chrono::milliseconds timeout)
    : key_(std::move(key)), timeout_(timeout) {}

  std::unique_ptr<peer_proof> accept(int fd, bool) const override {
    return std::make_unique<key_proof>(key_, key_exchange::role::server, fd);
  }

  std::unique_ptr<peer_proof> connect(int fd, bool) const override {
    return std::make_unique<key_proof>(key_, key_exchange::role::client, fd);
  }

  std::chrono::milliseconds timeout() const override { return timeout_; }

  std::string describe() const override {
    return "cluster " + troupe::describe(key_);
  }

  std::string handshake() const override { return "key handshake"; }

  std::string hint() const override {
    return "it may use TLS (give --tls-ca, --tls-cert and --tls-key) or "
           "run --insecure; this process proves the key in "
           + key_.path();
  }

  const cluster_key* key() const override { return &key_; }

private:
  cluster_key key_;
  std::chrono::milliseconds timeout_;
};

class open_proof : public peer_proof {
public:
  int step(short&, std::string&) override { return 1; }
};

class open_guard : public link_guard {
public:
  std::unique_ptr<peer_proof> accept(int, bool) const override {
    return std::make_unique<open_proof>();
  }

  std::unique_ptr<peer_proof> connect(int, bool) const override {
    return std::make_unique<open_proof>();
  }

  std::chrono::milliseconds timeout() const override {
    return std::chrono::seconds(5);
  }

  std::string describe() const override { return "none"; }

  bool admits_anyone() const override { return true; }

  std::string handshake() const override { return "connection"; }

  std::string hint() const override {
    return "does the peer use a key or TLS?";
  }
};

} // namespace

std::shared_ptr<const link_guard>
make_tls_guard(std::shared_ptr<const tls_context> tls) {
  return std::make_shared<tls_guard>(std::move(tls));
}

std::shared_ptr<const link_guard>
make_key_guard(cluster_key key, std::chrono::milliseconds timeout) {
  return std::make_shared<key_guard>(std::move(key), timeout);
}

std::shared_ptr<const link_guard> make_open_guard() {
  static const auto guard = std::make_shared<open_guard>();
  return guard;
}

std::string finish_proof(peer_proof& proof, int fd,
                         std::chrono::steady_clock::time_point deadline) {
  using namespace std::chrono;
  for (;;) {
    short events = 0;
    std::string why;
    auto step = proof.step(events, why);
    if (step == 1)
      return {};
    if (step < 0)
      return why;
    auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0)
      return "no handshake within the deadline";
    pollfd p{fd, events, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR)
      return std::strerror(errno);
  }
}

} // namespace troupe
