// What a worker and a shard exchange: pulls and pushes, of dense values
// and of embedding rows, and the shard's answer to a push. Each message's
// wire form is described once (wire_form.hpp): BASP's is derived here, the
// data plane's frame in actors/data_plane/data_frames.hpp.
//
// Parameter and gradient payloads are flat float buffers tagged with shard,
// version/step and worker. They are written as one raw block
// (float_wire.hpp; host byte order, little-endian checked below).
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "actors/protocol/float_wire.hpp"
#include "actors/protocol/ids.hpp"
#include "actors/protocol/wire_form.hpp"
#include "caf/all.hpp"

namespace troupe {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "float payloads travel in host byte order");

/// A pull reply: one shard's values at a version. The pointer is shared with
/// the shard (copy on write there), so an in-process pull copies nothing.
/// Version -1 and no values: the pull waited at the shard for as long as a
/// pull may be held (sync: version not reached; ssp: the worker too far
/// ahead) and is to be sent again; a held pull is answered long before its
/// request times out.
struct float_block {
  int32_t shard = 0;
  int64_t version = 0;
  std::shared_ptr<const std::vector<float>> values;

  static float_block ask_again_for(int32_t shard) { return {shard, -1, {}}; }
  bool ask_again() const { return version < 0; }
};

/// A push: a worker's gradient (or EASGD elastic difference) for one shard.
/// `tag` is the version of the shard's values the worker computed on (the
/// shard counts the updates since as the push's staleness);
/// `batch` the plan number of the batch it was computed on (lease_grant;
/// -1: none), by which a shard applies each batch once. The
/// values are [offset, offset + size) of a buffer the worker shares: in one
/// process every shard reads its slice of the worker's gradient buffer
/// without a copy; on the wire only the slice travels.
struct gradient_push {
  int32_t shard = 0;
  int32_t worker = 0;
  int64_t tag = 0;
  int64_t batch = -1;
  std::shared_ptr<const std::vector<float>> buffer;
  uint64_t offset = 0;
  uint64_t size = 0;

  const float* data() const {
    return buffer ? buffer->data() + offset : nullptr;
  }

  /// A push that owns its values.
  static gradient_push of(int32_t shard, int32_t worker, int64_t tag,
                          std::vector<float> values, int64_t batch = -1) {
    auto n = values.size();
    return {shard,
            worker,
            tag,
            batch,
            std::make_shared<const std::vector<float>>(std::move(values)),
            0,
            n};
  }
};

/// A sparse pull: rows `ids` of embedding table `table` (an index into the
/// run's tables) that one shard holds (runtime/sparse/sparse_table.hpp). A
/// worker asks each shard only for the distinct ids of its batch that live
/// there (shard_of_row), and the reply carries exactly those rows, in that
/// order: the ids do not travel back, the asker knows them.
struct row_request {
  int32_t shard = 0;
  int32_t table = 0;
  int32_t worker = 0;
  std::vector<uint64_t> ids;
  /// Make no row: an absent one is answered as it would be made (the
  /// chief's evaluations, which must not grow the table).
  bool peek = false;
};

/// The answer to a row_request: ids.size() x dim floats.
struct row_block {
  int32_t shard = 0;
  int32_t table = 0;
  std::shared_ptr<const std::vector<float>> values;
};

/// A sparse push: the gradients of rows `ids` (ids.size() x dim floats) of
/// table `table`, computed on plan batch `batch` (-1: none) with the
/// shard's dense values of version `tag`. In async and ssp the shard
/// applies them at once, row by row (the table's optimizer), and answers
/// a push_ack whose version counts the table's pushes. In sync they are
/// the rows of the worker's next dense push of the same tag: held until
/// that push is aggregated into the update of version `tag` (stale: both
/// dropped), applied with that update as the mean of its pushes' rows.
struct row_push {
  int32_t shard = 0;
  int32_t table = 0;
  int32_t worker = 0;
  int64_t batch = -1;
  int64_t tag = 0;
  std::vector<uint64_t> ids;
  std::shared_ptr<const std::vector<float>> grads;
};

/// A shard's answer to a valid push.
struct push_ack {
  int64_t version = 0; ///< the shard's version after the push
  /// Dropped: stale (sync), or its batch was applied before (async, ssp).
  bool stale = false;
};

/// Several tables' row pulls of one shard in one message, each part a
/// row_request for that shard: a worker whose model has more than one
/// table asks each shard once a step, not once per table. The reply
/// holds each part's row_block, in order; a part that fails fails the
/// whole request.
struct row_requests {
  std::vector<row_request> parts;
};

struct row_blocks {
  std::vector<row_block> parts;
};

/// Several tables' row pushes to one shard in one message. Every part is
/// checked before any is applied, so a bad one refuses them all and
/// changes nothing; the ack is the last part's.
struct row_pushes {
  std::vector<row_push> parts;
};

// -- the data messages' wire form ---------------------------------------------
//
// What a worker and a shard exchange, described once (actors/protocol/
// wire_form.hpp): BASP's form is derived below, the data plane's frame in
// actors/data_plane/data_frames.hpp. The order of the fields is BASP's;
// the slot is where a field sits in a frame header.

template <class Form>
auto wire_form(Form& w, float_block& x) {
  using wire::slot;
  return w("float_block", wire::at<slot::shard>(x.shard),
           wire::at<slot::tag>(x.version), wire::floats{x.values});
}

template <class Form>
auto wire_form(Form& w, gradient_push& x) {
  using wire::slot;
  return w("gradient_push", wire::at<slot::shard>(x.shard),
           wire::at<slot::worker>(x.worker), wire::at<slot::tag>(x.tag),
           wire::at<slot::batch>(x.batch),
           wire::float_slice{x.buffer, x.offset, x.size});
}

template <class Form>
auto wire_form(Form& w, row_request& x) {
  using wire::slot;
  return w("row_request", wire::at<slot::shard>(x.shard),
           wire::at<slot::table>(x.table), wire::at<slot::worker>(x.worker),
           wire::at<slot::flag>(x.peek), wire::row_ids{x.ids});
}

template <class Form>
auto wire_form(Form& w, row_block& x) {
  using wire::slot;
  return w("row_block", wire::at<slot::shard>(x.shard),
           wire::at<slot::table>(x.table), wire::floats{x.values});
}

template <class Form>
auto wire_form(Form& w, row_push& x) {
  using wire::slot;
  return w("row_push", wire::at<slot::shard>(x.shard),
           wire::at<slot::table>(x.table), wire::at<slot::worker>(x.worker),
           wire::at<slot::batch>(x.batch), wire::at<slot::tag>(x.tag),
           wire::row_ids{x.ids}, wire::floats{x.grads});
}

template <class Form>
auto wire_form(Form& w, push_ack& x) {
  using wire::slot;
  return w("push_ack", wire::at<slot::tag>(x.version),
           wire::at<slot::flag>(x.stale));
}

/// The data messages, which CAF inspects through their wire form.
template <class T>
constexpr bool is_data_message =
  std::is_same_v<
    T,
    float_block> || std::is_same_v<T, gradient_push> || std::is_same_v<T, row_request> || std::is_same_v<T, row_block> || std::is_same_v<T, row_push> || std::is_same_v<T, push_ack>;

template <class Inspector, class Message>
std::enable_if_t<is_data_message<Message>, typename Inspector::result_type>
inspect(Inspector& f, Message& x) {
  return wire::inspect(f, x);
}

/// On BASP, the parts one after the other; the data plane's frames of
/// them are written by hand (actors/data_plane/data_frames.hpp).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_requests& x) {
  return f(caf::meta::type_name("row_requests"), x.parts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_blocks& x) {
  return f(caf::meta::type_name("row_blocks"), x.parts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, row_pushes& x) {
  return f(caf::meta::type_name("row_pushes"), x.parts);
}

} // namespace troupe

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(troupe_shard_data, troupe::type_ids::shard_data)
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::float_block))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::gradient_push))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::push_ack))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::row_request))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::row_block))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::row_push))
  CAF_ADD_TYPE_ID(troupe_shard_data, (std::vector<int64_t>))
  CAF_ADD_TYPE_ID(troupe_shard_data, (std::vector<int32_t>))
  CAF_ADD_TYPE_ID(troupe_shard_data, (std::vector<uint64_t>))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::row_requests))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::row_blocks))
  CAF_ADD_TYPE_ID(troupe_shard_data, (troupe::row_pushes))
CAF_END_TYPE_ID_BLOCK(troupe_shard_data)
// clang-format on
