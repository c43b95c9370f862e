// What a worker's row requests must be to leave for a shard, and their
// frames (actors/data_plane/outgoing_rows.hpp).
#include "actors/data_plane/outgoing_rows.hpp"

#include <string>
#include <type_traits>

#include "runtime/base/errc.hpp"

namespace troupe::data_wire {

uint64_t dim_of(const std::vector<int>& row_dims, int32_t t) {
  if (t < 0 || static_cast<size_t>(t) >= row_dims.size())
    return 0;
  return static_cast<uint64_t>(row_dims[static_cast<size_t>(t)]);
}

caf::error no_table(int32_t shard, const std::vector<int>& row_dims,
                    int32_t t) {
  return make_error(errc::invalid_argument,
                    "shard " + std::to_string(shard)
                      + " has no embedding table " + std::to_string(t)
                      + " (the run has " + std::to_string(row_dims.size())
                      + ")");
}

namespace {

/// The wrong_size error of row push `p` to a table of width `dim` whose
/// floats are not its ids x dim. The server reads that many floats after
/// the ids: a push of any other size would lose the stream, so it never
/// leaves here.
caf::error check_push_size(const row_push& p, uint64_t dim) {
  auto floats = p.grads ? p.grads->size() : 0;
  if (floats != p.ids.size() * dim)
    return make_error(errc::wrong_size, "a push of " + std::to_string(floats)
                                          + " floats for "
                                          + std::to_string(p.ids.size())
                                          + " rows of " + std::to_string(dim));
  return {};
}

/// Why several parts (row requests or pushes for shard `shard`, whose
/// tables are `row_dims` wide) cannot travel in one frame: none, a
/// table the shard lacks, more parts or rows than a frame holds, or parts
/// that differ in what the frame's header holds once for all.
template <class Part>
caf::error check_parts(int32_t shard, const std::vector<int>& row_dims,
                       const std::vector<Part>& parts) {
  if (parts.empty() || parts.size() > 0xFFFF)
    return make_error(errc::invalid_argument, "a request of "
                                                + std::to_string(parts.size())
                                                + " tables' rows (1 to 65535)");
  uint64_t words = 2 * parts.size();
  for (auto& p : parts) {
    if (dim_of(row_dims, p.table) == 0)
      return no_table(shard, row_dims, p.table);
    words += p.ids.size();
    auto& first = parts.front();
    bool same = p.worker == first.worker;
    if constexpr (std::is_same_v<Part, row_request>)
      same = same && p.peek == first.peek;
    else
      same = same && p.tag == first.tag && p.batch == first.batch;
    if (!same)
      return make_error(errc::invalid_argument,
                        "rows of several tables whose worker, tag, batch "
                        "or peek differ");
  }
  if (words > max_frame_rows)
    return make_error(errc::invalid_argument,
                      "a request of " + std::to_string(words)
                        + " rows and parts (at most "
                        + std::to_string(max_frame_rows) + " per request)");
  return {};
}

} // namespace

caf::expected<outgoing>
row_push_frame(int32_t shard, const std::vector<int>& row_dims, row_push& p) {
  auto dim = dim_of(row_dims, p.table);
  if (dim == 0)
    return no_table(shard, row_dims, p.table);
  if (auto err = check_push_size(p, dim))
    return err;
  auto floats = p.grads ? p.grads->size() : 0;
  if (p.ids.size() > max_frame_rows || floats > max_frame_floats)
    return make_error(errc::invalid_argument,
                      "a push of " + std::to_string(p.ids.size())
                        + " rows (at most " + std::to_string(max_frame_rows)
                        + " per request)");
  return request_frame(p);
}

caf::expected<std::vector<row_part>>
row_pulls_parts(int32_t shard, const std::vector<int>& row_dims,
                const row_requests& r) {
  if (auto err = check_parts(shard, row_dims, r.parts))
    return err;
  std::vector<row_part> out;
  for (auto& p : r.parts)
    out.push_back({p.table, p.ids.size() * dim_of(row_dims, p.table)});
  return out;
}

caf::error check_row_pushes(int32_t shard, const std::vector<int>& row_dims,
                            row_pushes& p) {
  if (auto err = check_parts(shard, row_dims, p.parts))
    return err;
  uint64_t floats = 0;
  for (auto& part : p.parts) {
    if (auto err = check_push_size(part, dim_of(row_dims, part.table)))
      return err;
    floats += part.grads ? part.grads->size() : 0;
  }
  if (floats > max_frame_floats)
    return make_error(errc::invalid_argument,
                      "a push of " + std::to_string(floats)
                        + " floats (at most " + std::to_string(max_frame_floats)
                        + " per request)");
  return {};
}

caf::expected<outgoing> replica_frame(const replica_op& op) {
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  if (auto err = inspect(sink, const_cast<replica_op&>(op)))
    return err;
  outgoing o;
  o.head.op = data_frame::replica;
  o.head.count = bytes.size();
  o.text.assign(bytes.begin(), bytes.end());
  return o;
}

} // namespace troupe::data_wire
