#include "actors/net/key_handshake.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>

namespace troupe {

namespace {

/// What a first message that is not the handshake most likely is.
std::string guess_protocol(const uint8_t* data, size_t n) {
  if (n > 0 && data[0] == 0x16)
    return "a TLS client? This port wants the cluster key, not TLS";
  if (n > 0 && data[0] <= 0x06)
    return "plaintext CAF (BASP) without troupe's key handshake?";
  return "not troupe's key handshake";
}

std::string hex(const uint8_t* data, size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 0xf];
  }
  return out;
}

} // namespace

key_exchange::key_exchange(const cluster_key& key, role r,
                           const std::array<uint8_t, nonce_size>& nonce)
  : key_(key), state_(r == role::server ? state::magic : state::answer) {
  if (r == role::server) {
    server_nonce_ = nonce;
    return;
  }
  client_nonce_ = nonce;
  out_.assign(magic, magic + 8);
  out_.insert(out_.end(), key_.id_bytes().begin(), key_.id_bytes().end());
  out_.insert(out_.end(), client_nonce_.begin(), client_nonce_.end());
}

size_t key_exchange::wants() const {
  switch (state_) {
    case state::magic: return 8;
    case state::hello: return id_size + nonce_size;
    case state::proof: return mac_size;
    case state::answer: return id_size + nonce_size + mac_size;
    default: return 0;
  }
}

std::array<uint8_t, key_exchange::mac_size>
key_exchange::mac(const char* label) const {
  std::vector<uint8_t> text(label, label + std::strlen(label));
  text.insert(text.end(), client_nonce_.begin(), client_nonce_.end());
  text.insert(text.end(), server_nonce_.begin(), server_nonce_.end());
  std::array<uint8_t, mac_size> out{};
  unsigned int len = 0;
  // A failed HMAC would leave a proof of zeros that anyone can send.
  if (HMAC(EVP_sha256(), key_.secret().data(),
           static_cast<int>(key_.secret().size()), text.data(), text.size(),
           out.data(), &len)
        == nullptr
      || len != mac_size)
    std::abort();
  return out;
}

std::string key_exchange::fail(std::string why) {
  state_ = state::failed;
  out_.clear();
  return why;
}

std::string key_exchange::take(const uint8_t* data) {
  switch (state_) {
    case state::magic:
      if (std::memcmp(data, magic, 8) != 0)
        return fail("sent no key handshake (" + guess_protocol(data, 8) + ")");
      state_ = state::hello;
      return {};
    case state::hello: {
      if (std::memcmp(data, key_.id_bytes().data(), id_size) != 0)
        peer_id_ = hex(data, id_size); // told when its proof fails
      std::memcpy(client_nonce_.data(), data + id_size, nonce_size);
      out_.insert(out_.end(), key_.id_bytes().begin(), key_.id_bytes().end());
      out_.insert(out_.end(), server_nonce_.begin(), server_nonce_.end());
      auto m = mac("troupe server");
      out_.insert(out_.end(), m.begin(), m.end());
      state_ = state::proof;
      return {};
    }
    case state::proof: {
      auto expected = mac("troupe client");
      if (CRYPTO_memcmp(expected.data(), data, mac_size) != 0)
        return fail(peer_id_.empty()
                      ? "wrong key proof (a replayed or forged handshake)"
                      : "holds another cluster key (id " + peer_id_
                          + ", this node's is " + key_.id() + ")");
      state_ = state::done;
      return {};
    }
    case state::answer: {
      if (std::memcmp(data, key_.id_bytes().data(), id_size) != 0) {
        // A server that admits anyone (--insecure) starts with its BASP
        // handshake: operation 0, zero padding and flags.
        if (data[0] == 0 && data[1] == 0 && data[2] == 0 && data[3] == 0)
          return fail("the peer speaks plaintext CAF without a key (does it "
                      "run --insecure?)");
        return fail("the peer holds another cluster key (id "
                    + hex(data, id_size) + ") than " + describe(key_)
                    + ": copy the cluster's key file here from the host "
                      "that made it (or name it with --key FILE)");
      }
      std::memcpy(server_nonce_.data(), data + id_size, nonce_size);
      auto expected = mac("troupe server");
      if (CRYPTO_memcmp(expected.data(), data + id_size + nonce_size, mac_size)
          != 0)
        return fail("the peer's answer does not prove the cluster key "
                    "(not a troupe node holding "
                    + describe(key_) + ")");
      auto m = mac("troupe client");
      out_.insert(out_.end(), m.begin(), m.end());
      state_ = state::done;
      return {};
    }
    default:
      // Done or failed: nothing more is wanted, and the outcome stands.
      return "the handshake is over";
  }
}

std::array<uint8_t, key_exchange::nonce_size> key_exchange::random_nonce() {
  std::array<uint8_t, nonce_size> out{};
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1)
    std::abort(); // no randomness: a nonce must never repeat
  return out;
}

key_handshake::key_handshake(const cluster_key& key, key_exchange::role r,
                             int fd)
  : role_(r), fd_(fd), exchange_(key, r, key_exchange::random_nonce()) {}

int key_handshake::step(short& events, std::string& why) {
  for (;;) {
    auto& out = exchange_.to_send();
    while (!out.empty()) {
      auto sent = ::send(fd_, out.data(), out.size(),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
          events = POLLOUT;
          return 0;
        }
        why = std::string{"cannot send the key handshake: "}
              + std::strerror(errno);
        return -1;
      }
      out.erase(out.begin(), out.begin() + sent);
    }
    auto want = exchange_.wants();
    if (exchange_.done())
      return 1;
    in_.resize(want);
    auto got = ::recv(fd_, in_.data() + have_, want - have_, MSG_DONTWAIT);
    if (got == 0) {
      if (role_ == key_exchange::role::client)
        why = "the peer closed the connection before answering the key "
              "handshake";
      else if (got_total_ == 0)
        why = "closed the connection without a key handshake";
      else if (!exchange_.other_key_id().empty())
        why = "holds another cluster key (id " + exchange_.other_key_id()
              + ") and closed the connection";
      else
        why = "closed the connection during the key handshake (after "
              + std::to_string(got_total_) + " bytes)";
      return -1;
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        events = POLLIN;
        return 0;
      }
      why = std::string{"key handshake: "} + std::strerror(errno);
      return -1;
    }
    have_ += static_cast<size_t>(got);
    got_total_ += static_cast<size_t>(got);
    if (have_ < want)
      continue;
    have_ = 0;
    if (auto bad = exchange_.take(in_.data()); !bad.empty()) {
      why = std::move(bad);
      refused_ = true;
      return -1;
    }
  }
}

} // namespace troupe
