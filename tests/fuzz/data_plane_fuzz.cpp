// libFuzzer target for both faces of the data plane
// (actors/data_plane/data_link): the first input byte picks the face, the rest
// is what a peer sends.
//   even: the server face: bytes sent to a data_server, as a client would
//         (its shard holds one embedding table too);
//   1, 3, 7 (mod 4, 8): the client face: bytes sent back to a data_client,
//         as a server would, while one pull through its stub is open
//         (request id 1): of values (1 mod 4), of two rows of the table
//         (3 mod 8), or of one row each of two parts of one message
//         (row_requests: 7 mod 8).
// A finding is a crash, a sanitizer report, a hang (-timeout) or an
// allocation over -malloc_limit_mb/-rss_limit_mb. Only 127.0.0.1 is used
// and every wait below is bounded, so one input cannot stall the run.
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/data_plane/data_link.hpp"
#include "actors/shard.hpp"
#include "actors/protocol/system_config.hpp"
#include "caf/all.hpp"

using namespace troupe;
using namespace std::chrono_literals;

namespace {

/// The served shard's size: a push or values frame announcing more floats
/// must be refused before anything is allocated for it (scripts/fuzz.sh's
/// -malloc_limit_mb turns a large allocation into a finding).
constexpr uint64_t shard_floats = 3;
/// Its embedding table: rows are made as frames touch them, so the
/// vocabulary bounds what a run of inputs can make.
constexpr uint64_t table_vocabulary = 1000;
constexpr int row_dim = 4;

/// One actor system, shard and data_server for the whole run: made once
/// (as tests/actors/data_plane/data_link_test.cpp does) and never destroyed,
/// since libFuzzer exits without unwinding and the threads would outlive main.
struct world {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  shard_actor shard;
  std::shared_ptr<data_server> server;

  world() {
    init_config(cfg);
    // TCP only: an offer of shared memory is refused, which still reads
    // and answers it (no boot id in a corpus is the host's, and the Unix
    // socket's hand-over is tested in shared_link_test.cpp), and a client
    // reads the server's bytes as replies from its first on.
    caf::put(cfg.content, "troupe.shared-memory", false);
    sys = std::make_unique<caf::actor_system>(cfg);
    shard_options o;
    o.initial.assign(shard_floats, 1.f);
    o.hold = 100ms; // a pull for a future version is not parked for long
    embedding_table_config t;
    t.vocabulary = table_vocabulary;
    t.dim = row_dim;
    o.tables = {{t, sparse_optimizer_config{}}};
    shard = sys->spawn(shard_impl, o);
    caf::scoped_actor self{*sys};
    self->request(shard, 5s, join_atom_v, int32_t{0})
      .receive([](int64_t) {}, [](caf::error&) {});
    // A short relay timeout: a request the shard sits on ends quickly.
    auto s = data_server::start(*sys, "127.0.0.1", 0);
    if (!s)
      std::abort(); // nothing to fuzz without a server
    server = *s;
    server->serve(0, shard, shard_floats, {row_dim});
  }
};

world& the_world() {
  static auto* w = new world;
  return *w;
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/// Both directions of `fd` time out after 200 ms, so no call blocks longer.
void bound_waits(int fd) {
  timeval tv{0, 200 * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/// Sends what it can; a peer that closed early is expected, not an error
/// (MSG_NOSIGNAL: no SIGPIPE).
void send_all(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    auto n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0)
      return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

/// Reads and drops what comes until EOF, an error, 1 MiB (so a chatty peer
/// cannot keep the input running) or `patience` of silence, in 200 ms
/// slices (SO_RCVTIMEO); true when the peer closed.
bool drain(int fd, std::chrono::milliseconds patience) {
  char buf[4096];
  auto silent_since = std::chrono::steady_clock::now();
  for (size_t total = 0; total < (size_t{1} << 20);) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0)
      return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return true; // reset: closed as well
    if (n > 0) {
      total += static_cast<size_t>(n);
      silent_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - silent_since > patience) {
      return false;
    }
  }
  return true;
}

/// The server face: one connection to the data_server carrying `data`.
void fuzz_server(const uint8_t* data, size_t size) {
  auto& w = the_world();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  bound_waits(fd);
  auto a = loopback(w.server->port());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    send_all(fd, data, size);
    ::shutdown(fd, SHUT_WR); // the server's reader sees EOF after the input
    // Wait for the server to close too, so that no session outlives its
    // input: inputs do not overlap and every finding replays on its own.
    // It must close once it has read our EOF, so 10 s of silence without a
    // close is a hang, reported as a crash (the stack shows this line).
    if (!drain(fd, 10s)) {
      std::fprintf(stderr, "data_plane_fuzz: the server kept the connection "
                           "open 10 s after the input ended\n");
      std::abort();
    }
  }
  ::close(fd);
}

/// What the client face has open while the input answers it.
enum class open_pull { values, rows, parts };

/// The client face: a data_client connected to a listener of ours, one pull
/// (of values, of two rows, or of two parts of a row each) open through
/// its stub, and `data` as everything the "server" says.
void fuzz_client(const uint8_t* data, size_t size, open_pull pull) {
  auto& w = the_world();
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0)
    return;
  auto a = loopback(0);
  socklen_t len = sizeof(a);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0
      || ::listen(lfd, 1) != 0
      || ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(lfd);
    return;
  }
  auto client = data_client::open(*w.sys, "127.0.0.1", ntohs(a.sin_port), 1s);
  auto stub = client->stub(0, shard_floats, {row_dim});
  caf::scoped_actor self{*w.sys};
  auto answer_with_input = [&] {
    pollfd p{lfd, POLLIN, 0};
    int fd = ::poll(&p, 1, 1000) == 1
               ? ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)
               : -1;
    ::close(lfd);
    if (fd < 0)
      return;
    bound_waits(fd);
    // Read the pull request first: closing a socket with unread data sends
    // a reset, which could discard the input before the client reads it.
    char request[sizeof(data_frame) + 6 * sizeof(uint64_t)];
    size_t words = pull == open_pull::rows    ? 2 // two ids
                   : pull == open_pull::parts ? 6 // two (table, 1), two ids
                                              : 0;
    auto request_size = sizeof(data_frame) + words * sizeof(uint64_t);
    (void)::recv(fd, request, request_size, MSG_WAITALL);
    send_all(fd, data, size);
    ::close(fd); // no drain: the client sends nothing but that request
  };
  // Sent first, answered (or failed) after the input; its id on the wire
  // is 1. Values, rows, an error frame, a broken link or the 500 ms
  // timeout: all fine.
  if (pull == open_pull::rows) {
    auto pending = self->request(stub, 500ms, pull_atom_v,
                                 row_request{0, 0, 0, {3, 7}});
    answer_with_input();
    pending.receive([](row_block&) {}, [](caf::error&) {});
  } else if (pull == open_pull::parts) {
    auto pending = self->request(
      stub, 500ms, pull_atom_v,
      row_requests{{row_request{0, 0, 0, {3}}, row_request{0, 0, 0, {7}}}});
    answer_with_input();
    pending.receive([](row_blocks&) {}, [](caf::error&) {});
  } else {
    auto pending = self->request(stub, 500ms, pull_atom_v, int32_t{0},
                                 int64_t{0});
    answer_with_input();
    pending.receive([](float_block&) {}, [](caf::error&) {});
  }
  client->close();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  if (data[0] % 2 == 0)
    fuzz_server(data + 1, size - 1);
  else
    fuzz_client(data + 1, size - 1,
                data[0] % 4 == 1   ? open_pull::values
                : data[0] % 8 == 3 ? open_pull::rows
                                   : open_pull::parts);
  return 0;
}
