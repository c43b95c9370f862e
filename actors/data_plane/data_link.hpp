// The data plane between nodes: pulls and pushes travel on a TCP
// connection of their own between a worker's node and a shard's node,
// beside CAF's BASP link, which keeps every control message.
//
// Why not BASP: CAF 0.17 serializes every message into the connection's
// write buffer and deserializes it out of the read buffer, two user-space
// copies of every parameter byte per direction, all on the node's one
// multiplexer thread. Here a float block goes from the shard's (copy on
// write) values, or the worker's gradient buffer, straight to the socket
// with writev, and is received straight into the buffer the receiver
// keeps: the kernel's copies are the only ones. Each connection has its
// own reader and writer threads, so two workers' traffic is handled in
// parallel.
//
// Shape: a shard node runs one data_server (listening on its cluster-file
// host, port from the kernel, announced to the chief at registration); a
// worker node opens one data_client per shard node it needs and gives its
// workers stub actors in place of the remote shards' handles: a worker
// holds every shard as a shard_data_actor (shard_protocol.hpp), the pulls
// and pushes both a local shard and a stub answer, so the compiler checks
// what a worker sends either way. A server session's reader thread puts each
// request into the local shard actor's mailbox as a CAF request whose id
// is the frame's, in arrival order; the shard's reply is written back from
// the shard's thread (replies may come out of order: held pulls), matched
// by request id.
//
// Frames: a 48-byte header (data_frame), then `count` floats (push,
// values, rows), `count` row ids (row_pull; row_push, whose count x dim
// floats come after them), `count` uint64s of parts and ids (row_pulls,
// row_pushes: every table of one shard in one frame) or `count` bytes of
// error text. Host byte order (little-endian, checked in
// shard_data_messages.hpp), as on the BASP path. A header that fails
// check_frame closes the connection: a bad peer loses its own link and
// nothing else. The port sits behind the front door
// (actors/net/front_door.hpp), like every other: a peer proves the cluster
// key, or its certificate, before its first frame is read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/protocol/shard_protocol.hpp"

namespace troupe {

/// The header of every frame on the data plane.
struct data_frame {
  static constexpr uint32_t magic_value = 0x50445254; // "TRDP"
  /// Requests (client to server) and replies (server to client).
  enum op_code : uint8_t {
    pull = 1,     ///< tag: min_version
    push = 2,     ///< tag: the push's tag; count floats follow
    values = 3,   ///< reply to pull; tag: version; count floats follow
    ack = 4,      ///< reply to push or row_push; tag: version; flag: stale
    error = 5,    ///< reply; flag: troupe errc (0: other); count bytes of text
    row_pull = 6, ///< table; flag: peek; count row ids (uint64) follow
    /// table; tag: the push's tag; count row ids follow, then count x dim
    /// floats (the table's dim, which both ends know from the run)
    row_push = 7,
    rows = 8, ///< reply to row_pull; count floats (ids x dim) follow
    /// a primary's replica_op for its replica (actors/shard.hpp): count
    /// bytes of its CAF binary form follow; answered with ack
    replica = 9,
    /// Several tables' row pulls of one shard (row_requests); flag: peek;
    /// table: the number of parts P; count uint64s follow: P pairs (the
    /// part's table, its number of ids), then the parts' ids in order.
    /// Answered with one rows frame: the parts' rows in order.
    row_pulls = 10,
    /// Several tables' row pushes (row_pushes); tag, batch: the pushes';
    /// parts and ids as in row_pulls, then each part's ids x dim floats
    /// in order. Answered with one ack.
    row_pushes = 11,
    /// The client's first frame, when it may use shared memory: count
    /// bytes of its host's boot id follow
    /// (actors/data_plane/shared_upgrade.hpp)
    shared_offer = 12,
    /// The answer to shared_offer; flag: 1 yes, 0 no; count bytes follow:
    /// yes, the Unix socket's name, a newline and the token; no, why not
    shared_answer = 13,
  };
  uint32_t magic = magic_value;
  uint8_t op = 0;
  uint8_t flag = 0;
  uint16_t table = 0; ///< row_pull, row_push, rows: the embedding table
  int32_t shard = 0;
  int32_t worker = 0;
  int64_t tag = 0;
  /// The request's id, echoed by its reply: 1 to 2^60 - 1, as the server
  /// makes it the id of the CAF request it hands its shard.
  uint64_t id = 0;
  uint64_t count = 0;
  int64_t batch = -1; ///< push: the plan batch it was computed on
};
static_assert(sizeof(data_frame) == 48, "the header is 48 bytes on the wire");

/// The most floats one frame may carry (1 GiB), and the most bytes of
/// error text: a header announcing more is refused before anything is
/// allocated for it.
constexpr uint64_t max_frame_floats = uint64_t{1} << 28;
/// The most row ids one row_pull or row_push may name (4M: 32 MiB of ids,
/// forty times the largest batch a click model pulls); a row_push's
/// floats must also stay within max_frame_floats.
constexpr uint64_t max_frame_rows = uint64_t{1} << 22;
constexpr uint64_t max_error_text = 64 * 1024;
/// The most bytes of one replica frame: a shard's whole dense state, or a
/// chunk of table rows (about 8 MB of them: actors/shard_replica.cpp).
constexpr uint64_t max_replica_bytes = uint64_t{1} << 32;
/// The most bytes after a shared_offer or shared_answer.
constexpr uint64_t max_shared_text = 256;

/// What is wrong with a header received by a server (`from_client`) or a
/// client; empty when it is well formed.
std::string check_frame(const data_frame& f, bool from_client);

class data_server_impl;

/// A shard node's end of the data plane. Thread-safe.
class data_server {
public:
  /// Listens on host:port (port 0: one from the kernel); the error names
  /// the address. A request waits for its shard as long as the shard
  /// takes: a shard answers every request (a pull it holds within its
  /// `hold`), and the peer's own request timeout bounds its wait.
  static caf::expected<std::shared_ptr<data_server>>
  start(caf::actor_system& sys, const std::string& host, uint16_t port);

  ~data_server();

  uint16_t port() const;

  /// Serves shard `id`, which holds `size` floats and rows of embedding
  /// tables of widths `row_dims`, through `handle` from now on (a
  /// restarted shard replaces the one before). A push announcing more
  /// floats than that, or a row push to a table the shard does not have,
  /// closes its connection before anything is allocated for it; a shorter
  /// push gets the shard's wrong_size error.
  void serve(int32_t id, shard_data_actor handle, uint64_t size,
             std::vector<int> row_dims = {});

  /// Closes the listener and every connection, ends their actors and
  /// joins their threads. Idempotent; the destructor calls it.
  void stop();

  explicit data_server(std::unique_ptr<data_server_impl> impl);

private:
  std::unique_ptr<data_server_impl> impl_;
};

class data_client_impl;

/// A worker node's connection to one shard node. Thread-safe.
class data_client {
public:
  /// Connects to host:port in the background (within `timeout`, which
  /// also bounds each request's wait for its answer); requests made
  /// before the connection is up wait for it, and fail if it never comes.
  static std::shared_ptr<data_client> open(caf::actor_system& sys,
                                           const std::string& host,
                                           uint16_t port,
                                           caf::timespan timeout);

  ~data_client();

  /// A local actor that stands for shard `shard` of that node, which holds
  /// `size` floats and rows of tables of widths `row_dims`: it answers
  /// pull and push, of values and of rows, over this connection (the
  /// other shard messages are not in its interface). When the connection
  /// breaks, every open and later request fails with
  /// errc::node_unreachable; a request left unanswered for open()'s
  /// `timeout` fails with caf::sec::request_timeout (times_out_itself).
  /// Values of any other size from the server, or rows other than those
  /// asked for (by number), break the connection.
  shard_data_actor stub(int32_t shard, uint64_t size,
                        std::vector<int> row_dims = {});

  /// Sends a push, a row push or a replica op for shard `shard` (made a
  /// stub of first: its size and tables) on behalf of actor `to`, with no
  /// stub in between: a primary shard forwarding to its replica saves
  /// two hand-offs between threads per push. The answer comes to `to` as
  /// (data_atom, id, push_ack) or (data_atom, id, caf::error), also when
  /// the connection breaks with the request open. The request's id
  /// (unique in this process), or why it did not leave (the connection is
  /// gone, or the push does not fit the shard's tables).
  caf::expected<uint64_t> send(int32_t shard, gradient_push g,
                               const caf::actor& to);
  caf::expected<uint64_t> send(int32_t shard, row_push p, const caf::actor& to);
  caf::expected<uint64_t> send(int32_t shard, const replica_op& op,
                               const caf::actor& to);

  /// Whether the connection is up (false before it is and after it broke).
  bool connected() const;

  /// Whether the connection could not be made or broke: its stubs fail
  /// every request, and a new data_client is needed.
  bool failed() const;

  /// Closes the connection, ends the stubs and joins the threads.
  /// Idempotent; the destructor calls it.
  void close();

  explicit data_client(std::shared_ptr<data_client_impl> impl);

private:
  std::shared_ptr<data_client_impl> impl_;
};

} // namespace troupe
