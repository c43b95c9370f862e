#include "tests/fuzz/front_door_inputs.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/net/basp_check.hpp"
#include "actors/net/cluster_key.hpp"
#include "actors/net/key_handshake.hpp"

namespace troupe::fuzz {

namespace {

using bytes = std::vector<uint8_t>;
using nonce = std::array<uint8_t, key_exchange::nonce_size>;
using role = key_exchange::role;

constexpr size_t hello_size = 8 + key_exchange::id_size
                              + key_exchange::nonce_size;
constexpr size_t answer_size = key_exchange::id_size + key_exchange::nonce_size
                               + key_exchange::mac_size;
constexpr size_t proof_size = key_exchange::mac_size;

const cluster_key& the_key() {
  static const cluster_key key{fuzz_key_secret(), "fuzz.key"};
  return key;
}

nonce filled(uint8_t x) {
  nonce n{};
  n.fill(x);
  return n;
}

nonce nonce_at(const uint8_t* p) {
  nonce n{};
  std::memcpy(n.data(), p, n.size());
  return n;
}

/// A refusal is one line (it goes into a log line naming the peer).
std::string check_refusal(const std::string& why) {
  if (why.find('\n') != std::string::npos)
    return "a refusal of several lines: " + why;
  return {};
}

/// What a server holding the key answers a client whose hello is `hello`
/// when its own nonce is `server_nonce`; empty when it takes no such hello.
bytes true_answer(const uint8_t* hello, const nonce& server_nonce) {
  key_exchange s{the_key(), role::server, server_nonce};
  if (!s.take(hello).empty() || !s.take(hello + 8).empty())
    return {};
  return s.to_send();
}

// -- server face ---------------------------------------------------------

front_door_outcome server_face(const uint8_t* data, size_t size) {
  front_door_outcome o;
  key_exchange s{the_key(), role::server, filled(0x5e)};
  if (!s.to_send().empty()) {
    o.broken = "a server sends before the client's hello";
    return o;
  }
  const uint8_t* hello = nullptr;
  size_t at = 0;
  while (s.wants() > 0 && size - at >= s.wants()) {
    auto n = s.wants();
    auto why = s.take(data + at);
    if (!why.empty()) {
      o.refused = why;
      o.broken = check_refusal(why);
      if (s.wants() != 0 || s.done() || !s.to_send().empty())
        o.broken = "a refused server still wants, sends or is done";
      return o;
    }
    if (at == 8) {
      // The hello's id and nonce: the answer is queued, and it must be
      // the one a client with that nonce accepts.
      hello = data;
      auto& answer = s.to_send();
      key_exchange c{the_key(), role::client, nonce_at(data + 16)};
      if (answer.size() != answer_size || !c.take(answer.data()).empty()) {
        o.broken = "the server's answer does not prove the key";
        return o;
      }
      answer.clear();
    } else if (!s.to_send().empty()) {
      o.broken = "the server sends after the magic or the proof";
      return o;
    }
    at += n;
  }
  if (s.done()) {
    // Only the key's holder can compute the proof: a stranger's bytes
    // that get through mean a forgery, or a comparison that leaks the
    // expected proof to the fuzzer (memcmp, whose arguments libFuzzer
    // reads, instead of CRYPTO_memcmp).
    key_exchange c{the_key(), role::client, nonce_at(hello + 16)};
    auto answer = true_answer(hello, filled(0x5e));
    bool true_proof = answer.size() == answer_size
                      && c.take(answer.data()).empty()
                      && std::equal(c.to_send().begin() + hello_size,
                                    c.to_send().end(), hello + hello_size);
    o.broken = true_proof ? "a stranger's input made the key's own proof"
                          : "a server accepted a proof the key does not make";
    o.admitted = true;
  }
  return o;
}

// -- client face ---------------------------------------------------------

front_door_outcome client_face(const uint8_t* data, size_t size) {
  front_door_outcome o;
  key_exchange c{the_key(), role::client, filled(0xc1)};
  bytes hello = c.to_send();
  c.to_send().clear();
  if (hello.size() != hello_size
      || std::memcmp(hello.data(), key_exchange::magic, 8) != 0) {
    o.broken = "the client's hello is not magic, key id and nonce";
    return o;
  }
  if (c.wants() != answer_size) {
    o.broken = "the client does not wait for the whole answer";
    return o;
  }
  if (size < answer_size)
    return o;
  auto why = c.take(data);
  if (!why.empty()) {
    o.refused = why;
    o.broken = check_refusal(why);
    // It checks the answer before it proves anything itself.
    if (c.wants() != 0 || c.done() || !c.to_send().empty())
      o.broken = "a client that refused the answer still wants, sends a "
                 "proof or is done";
    return o;
  }
  o.admitted = true;
  if (!c.done() || c.wants() != 0 || c.to_send().size() != proof_size) {
    o.broken = "a client that took the answer is not done with one proof "
               "queued";
    return o;
  }
  // The one answer it may take: the key holder's for its nonce and the
  // answer's own server nonce.
  auto server_nonce = nonce_at(data + key_exchange::id_size);
  auto truth = true_answer(hello.data(), server_nonce);
  if (truth.size() != answer_size
      || !std::equal(data, data + answer_size, truth.begin())) {
    o.broken = "a client accepted an answer the key's holder does not give";
    return o;
  }
  key_exchange s{the_key(), role::server, server_nonce};
  (void)s.take(hello.data());
  (void)s.take(hello.data() + 8);
  if (!s.take(c.to_send().data()).empty() || !s.done())
    o.broken = "the server refuses the proof of a client it answered";
  return o;
}

// -- relay face ----------------------------------------------------------

/// The bytes each end finds after the handshake: the start of what the
/// protocol behind the door sends. The handshake must leave them unread.
constexpr char after_answer[] = "BASP from the server";
constexpr char after_proof[] = "BASP from the client";

/// One direction of the wire: reads what one end sent, changes the byte
/// the input picked, adds what follows the handshake, and forwards it to
/// the other end in the input's pieces.
struct direction {
  int from = -1; ///< the wire's end of the sender's pair
  int to = -1;   ///< the wire's end of the receiver's pair
  /// Stream offset of the handshake's last byte + 1 and what follows it.
  size_t handshake_end = 0;
  const char* after = nullptr;
  /// The byte to change (stream offset) and how; mask 0: none.
  size_t flip_at = 0;
  uint8_t mask = 0;
  size_t read = 0; ///< bytes read from the sender so far
  bytes pending;
  bool sender_closed = false;
  bool shut = false; ///< the receiver was told no more comes

  /// Reads what the sender has sent; true when something came.
  bool pull() {
    if (sender_closed)
      return false;
    bool got = false;
    uint8_t buf[256];
    for (;;) {
      auto n = ::recv(from, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0
          || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK
              && errno != EINTR)) {
        sender_closed = true;
        return true;
      }
      if (n < 0)
        return got;
      got = true;
      for (ssize_t i = 0; i < n; ++i, ++read) {
        uint8_t b = buf[i];
        if (read == flip_at)
          b ^= mask;
        pending.push_back(b);
        if (read + 1 == handshake_end)
          pending.insert(pending.end(), after, after + std::strlen(after));
      }
    }
  }

  /// Forwards at most `piece` pending bytes; true when any went.
  bool push(size_t piece) {
    if (pending.empty()) {
      if (sender_closed && !shut) {
        ::shutdown(to, SHUT_WR);
        shut = true;
        return true;
      }
      return false;
    }
    auto n = ::send(to, pending.data(), std::min(piece, pending.size()),
                    MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return false;
      pending.clear(); // the receiver is gone
      return true;
    }
    pending.erase(pending.begin(), pending.begin() + n);
    return n > 0;
  }
};

/// One end of the handshake: a key_handshake on its own socket, which it
/// closes.
struct peer {
  int fd = -1;
  key_handshake shake;
  int state = 0; ///< step()'s last: 1 done, -1 failed, 0 going
  bool refused = false;
  std::string why;

  peer(role r, int socket) : fd(socket), shake(the_key(), r, socket) {}
  peer(const peer&) = delete;
  peer& operator=(const peer&) = delete;
  ~peer() {
    if (fd >= 0)
      ::close(fd);
  }

  /// One step; true when it finished now. A failed end closes its socket,
  /// as the front door closes a refused connection.
  bool step() {
    if (state != 0)
      return false;
    short events = 0;
    state = shake.step(events, why);
    if (state == -1) {
      refused = shake.refused();
      ::close(fd);
      fd = -1;
    }
    return state != 0;
  }

  /// What is left to read on its socket after the handshake (until EOF or
  /// nothing more).
  std::string rest() const {
    std::string out;
    char buf[256];
    for (;;) {
      auto n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0)
        return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }
};

/// Two socket pairs; the wire's ends are closed when the input is over,
/// the others by their peer.
struct sockets {
  int client[2] = {-1, -1}; ///< [0]: the client's, [1]: the wire's
  int server[2] = {-1, -1};
  bool ok = false;

  sockets() {
    ok = ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, client) == 0
         && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, server) == 0;
  }
  ~sockets() {
    for (int fd : {client[1], server[1]})
      if (fd >= 0)
        ::close(fd);
    if (!ok) // no peer took them
      for (int fd : {client[0], server[0]})
        if (fd >= 0)
          ::close(fd);
  }
};

front_door_outcome relay_face(const uint8_t* data, size_t size) {
  front_door_outcome o;
  constexpr size_t hello_end = hello_size;
  constexpr size_t answer_end = hello_end + answer_size;
  constexpr size_t proof_end = answer_end + proof_size;
  size_t flip_at = size > 0 ? data[0] : proof_end;
  uint8_t mask = size > 1 ? data[1] : 0;
  const uint8_t* pieces = data + std::min<size_t>(size, 2);
  size_t piece_count = size > 2 ? size - 2 : 0;
  if (mask == 0)
    flip_at = proof_end;
  sockets pairs;
  if (!pairs.ok)
    return o; // out of descriptors: nothing to learn from this input
  peer client{role::client, pairs.client[0]};
  peer server{role::server, pairs.server[0]};
  // The client's stream is its hello then its proof; the server's, its
  // answer.
  direction up;
  up.from = pairs.client[1];
  up.to = pairs.server[1];
  up.handshake_end = hello_size + proof_size;
  up.after = after_proof;
  direction down;
  down.from = pairs.server[1];
  down.to = pairs.client[1];
  down.handshake_end = answer_size;
  down.after = after_answer;
  if (flip_at < hello_end || (flip_at >= answer_end && flip_at < proof_end)) {
    up.flip_at = flip_at < hello_end ? flip_at : flip_at - answer_size;
    up.mask = mask;
  } else if (flip_at < answer_end) {
    down.flip_at = flip_at - hello_end;
    down.mask = mask;
  }
  size_t next_piece = 0;
  auto piece = [&] {
    if (piece_count == 0)
      return size_t{1} << 20;
    return size_t{pieces[next_piece++ % piece_count] % 64u} + 1;
  };
  // Every round moves a byte or ends a step, so a handshake of 152 bytes
  // in pieces of one byte ends within a few hundred; a round that does
  // nothing while an end still waits is a stall.
  for (int round = 0;; ++round) {
    bool moved = client.step();
    moved |= server.step();
    moved |= up.pull();
    moved |= down.pull();
    moved |= up.push(piece());
    moved |= down.push(piece());
    if (!moved) {
      if (client.state == 0 || server.state == 0)
        o.broken = "the handshake stalled: an end waits for bytes that "
                   "have all been delivered";
      break;
    }
    if (round > 10000) {
      o.broken = "the handshake did not end in 10000 rounds";
      break;
    }
  }
  o.admitted = client.state == 1 && server.state == 1;
  for (auto* e : {&client, &server})
    if (e->refused && o.refused.empty())
      o.refused = e->why;
  if (!o.broken.empty())
    return o;
  if (auto bad = check_refusal(o.refused); !bad.empty()) {
    o.broken = bad;
    return o;
  }
  // What each change must do. The client's key id only names its key (the
  // server tells it in a refusal), so changing it changes nothing.
  bool in_magic = flip_at < 8;
  bool in_id = flip_at >= 8 && flip_at < 8 + key_exchange::id_size;
  bool in_client_nonce = flip_at >= 8 + key_exchange::id_size
                         && flip_at < hello_end;
  bool in_answer = flip_at >= hello_end && flip_at < answer_end;
  bool in_proof = flip_at >= answer_end && flip_at < proof_end;
  if (!in_magic && !in_client_nonce && !in_answer && !in_proof) {
    if (!o.admitted)
      o.broken = std::string{"an unchanged handshake"}
                 + (in_id ? " (but for the client's key id)" : "")
                 + " failed: " + client.why + " / " + server.why;
  } else if (in_magic) {
    if (!server.refused || client.state == 1)
      o.broken = "a changed magic was not refused by the server";
  } else if (in_client_nonce || in_answer) {
    if (!client.refused || server.state == 1)
      o.broken = std::string{"a changed "}
                 + (in_answer ? "answer" : "client nonce")
                 + " was not refused by the client";
  } else if (!server.refused || client.state != 1) {
    o.broken = "a changed proof was not refused by the server alone";
  }
  if (!o.broken.empty())
    return o;
  // Neither end reads past the handshake: what followed it is still there.
  if (client.state == 1 && client.rest() != after_answer)
    o.broken = "the client read past the server's answer";
  else if (server.state == 1 && server.rest() != after_proof)
    o.broken = "the server read past the client's proof";
  return o;
}

// -- BASP check ----------------------------------------------------------

uint64_t big_endian(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v = v << 8 | p[i];
  return v;
}

/// Walks the headers `check` counted, independently of basp_check's
/// code: each must be complete and safe for CAF 0.17 to parse; then a
/// refusal must be of a complete header, and a stream that passed must
/// hold no further complete header.
std::string check_counted(const uint8_t* stream, size_t size,
                          const basp_check& check, bool refused,
                          basp_check::side side, uint32_t max_payload) {
  constexpr size_t header = basp_check::header_size;
  uint64_t at = 0;
  for (uint64_t i = 0; i < check.messages(); ++i) {
    if (at + header > size)
      return "counted header " + std::to_string(i + 1)
             + ", which the stream does not hold";
    const uint8_t* h = stream + at;
    auto payload = big_endian(h + 4, 4);
    if (h[0] > 6 || h[1] != 0 || h[2] != 0)
      return "passed header " + std::to_string(i + 1)
             + " with an operation CAF does not know or padding";
    if (payload > max_payload)
      return "passed header " + std::to_string(i + 1)
             + " with a payload over the bound";
    if (h[0] <= 1 && payload == 0)
      return "passed header " + std::to_string(i + 1)
             + ": a handshake without payload (crashes CAF 0.17)";
    uint8_t first = side == basp_check::side::accepted ? 1 : 0;
    if (i == 0 && h[0] != first)
      return "passed a first header that is not the peer's handshake";
    at += header + payload;
  }
  bool complete_header_left = at + header <= size;
  if (refused && !complete_header_left)
    return "refused a header the stream does not hold yet";
  if (!refused && complete_header_left)
    return "left header " + std::to_string(check.messages() + 1) + " unchecked";
  return {};
}

} // namespace

std::array<uint8_t, 32> fuzz_key_secret() {
  std::array<uint8_t, 32> secret{};
  for (size_t i = 0; i < secret.size(); ++i)
    secret[i] = static_cast<uint8_t>(0xa0 + i);
  return secret;
}

front_door_outcome run_key_handshake(const uint8_t* data, size_t size) {
  if (size == 0)
    return {};
  switch (data[0] % 3) {
    case 0: return server_face(data + 1, size - 1);
    case 1: return client_face(data + 1, size - 1);
    default: return relay_face(data + 1, size - 1);
  }
}

front_door_outcome run_basp_check(const uint8_t* data, size_t size) {
  front_door_outcome o;
  if (size == 0)
    return o;
  auto side = data[0] & 1 ? basp_check::side::connected
                          : basp_check::side::accepted;
  uint32_t max_payload = data[0] & 2 ? uint32_t{1} << 20
                                     : basp_check::default_max_payload;
  size_t sizes_count = std::min<size_t>((data[0] >> 2) & 0xf, size - 1);
  const uint8_t* sizes = data + 1;
  const uint8_t* stream = sizes + sizes_count;
  size_t stream_size = size - 1 - sizes_count;
  if (std::all_of(sizes, sizes + sizes_count, [](uint8_t b) { return b == 0; }))
    sizes_count = 0;

  basp_check whole{side, max_payload};
  auto verdict = whole.feed(stream, stream_size);
  basp_check chunked{side, max_payload};
  auto chunked_verdict = chunked.feed(stream, 0);
  // Not all sizes are 0, so every round of them moves on.
  for (size_t at = 0, i = 0; at < stream_size; ++i) {
    size_t n = sizes_count == 0 ? 1 : sizes[i % sizes_count];
    n = std::min(n, stream_size - at);
    chunked_verdict = chunked.feed(stream + at, n);
    at += n;
  }
  o.admitted = verdict.empty();
  o.refused = verdict;
  if (verdict != chunked_verdict || whole.messages() != chunked.messages()) {
    o.broken = "fed whole: \"" + verdict + "\" after "
               + std::to_string(whole.messages()) + " headers; in chunks: \""
               + chunked_verdict + "\" after "
               + std::to_string(chunked.messages()) + " headers";
    return o;
  }
  if (auto bad = check_refusal(verdict); !bad.empty()) {
    o.broken = bad;
    return o;
  }
  o.broken = check_counted(stream, stream_size, whole, !verdict.empty(), side,
                           max_payload);
  if (!o.broken.empty() || verdict.empty())
    return o;
  // Refused once, refused for good: a valid heartbeat changes nothing.
  uint8_t heartbeat[basp_check::header_size] = {6};
  auto messages = whole.messages();
  if (whole.feed(heartbeat, sizeof(heartbeat)) != verdict
      || whole.feed(heartbeat, 0) != verdict || whole.messages() != messages)
    o.broken = "a refused stream took more";
  return o;
}

void trap_if_broken(const front_door_outcome& o) {
  if (o.broken.empty())
    return;
  std::fprintf(stderr, "troupe fuzz: %s\n", o.broken.c_str());
  __builtin_trap();
}

} // namespace troupe::fuzz
