// Each data message's two wire forms, BASP's and the data plane's frame,
// come from its one description in shard_data_messages.hpp: a message sent
// either way arrives with every field and every payload byte it left
// with, and its frame puts each field in the header slot the description
// names. A replica's ops, written and read from one description each,
// arrive as they left too.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "actors/data_plane/data_frames.hpp"
#include "actors/protocol/protocol.hpp"
#include "actors/protocol/system_config.hpp"
#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"

using namespace troupe;

namespace {

/// A message flattened by its own description: every field as a number,
/// then every payload's contents. A field the description gains is
/// compared without a change here.
struct flattened {
  std::vector<int64_t> fields;
  std::vector<uint64_t> ids;
  std::vector<float> floats;
  bool operator==(const flattened& o) const {
    return fields == o.fields && ids == o.ids && floats == o.floats;
  }
};

std::ostream& operator<<(std::ostream& os, const flattened& x) {
  os << x.fields.size() << " fields:";
  for (auto v : x.fields)
    os << ' ' << v;
  return os << ", " << x.ids.size() << " ids, " << x.floats.size() << " floats";
}

struct flattener {
  flattened out;

  template <class... Parts>
  void operator()(const char*, Parts... parts) {
    (take(parts), ...);
  }
  template <wire::slot Slot, class T>
  void take(wire::field<Slot, T> p) {
    out.fields.push_back(static_cast<int64_t>(p.value));
  }
  void take(wire::floats p) {
    if (p.values)
      out.floats.insert(out.floats.end(), p.values->begin(), p.values->end());
  }
  void take(wire::float_slice p) {
    if (p.buffer)
      out.floats.insert(out.floats.end(), p.buffer->begin() + p.offset,
                        p.buffer->begin() + p.offset + p.size);
  }
  void take(wire::row_ids p) { out.ids = p.values; }
};

template <class Message>
flattened flatten(Message m) {
  flattener f;
  wire_form(f, m);
  return f.out;
}

std::shared_ptr<const std::vector<float>> floats(std::vector<float> v) {
  return std::make_shared<const std::vector<float>>(std::move(v));
}

struct basp_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;

  basp_fixture() {
    init_config(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  /// `m` through CAF's binary serializer and back, as BASP carries it.
  template <class Message>
  Message through_basp(Message m) {
    std::vector<char> buf;
    caf::binary_serializer sink{*sys, buf};
    BOOST_REQUIRE(!sink(m));
    Message back;
    caf::binary_deserializer source{*sys, buf};
    BOOST_REQUIRE(!source(back));
    BOOST_TEST(source.remaining() == 0u);
    return back;
  }
};

/// `m` through a data-plane frame and back: the header, the ids and the
/// floats as the reader takes them off the socket.
template <class Message>
Message through_frame(Message m, data_frame* head = nullptr) {
  auto o = data_wire::request_frame(m);
  o.head.id = 1; // set by the stub that sends it
  BOOST_TEST(o.head.op == data_wire::op_of<Message>);
  // The header passes the check of the end that receives it.
  bool request = o.head.op == data_frame::push
                 || o.head.op == data_frame::row_pull
                 || o.head.op == data_frame::row_push;
  BOOST_TEST(check_frame(o.head, request) == "");
  if (head != nullptr)
    *head = o.head;
  auto ids = o.ids;
  auto values = std::make_shared<std::vector<float>>(o.data, o.data + o.floats);
  return data_wire::message_of<Message>(o.head, std::move(ids),
                                        std::move(values));
}

template <class Message>
void travels_both_ways(basp_fixture& fx, const Message& m) {
  auto sent = flatten(m);
  BOOST_TEST(flatten(fx.through_basp(m)) == sent);
  BOOST_TEST(flatten(through_frame(m)) == sent);
}

/// `x` written by CAF's binary serializer (BASP's) and read back.
template <class T>
T through_bytes(T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  BOOST_REQUIRE(!inspect(sink, x));
  T back;
  caf::binary_deserializer source{nullptr, buf};
  BOOST_REQUIRE(!inspect(source, back));
  BOOST_TEST(source.remaining() == 0u);
  return back;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(wire_form, basp_fixture)

BOOST_AUTO_TEST_CASE(every_replica_op_arrives_as_it_left) {
  replica_image image;
  auto& b = image.block;
  b.values = {1.f, 2.f, 3.f};
  b.slot_names = {"m", "v"};
  b.slots = {{0.5f, 0.25f, 0.125f}, {4.f, 5.f, 6.f}};
  b.version = 17;
  b.learning_rate = 0.05;
  b.workers = {0, 3};
  b.clocks = {9, 11};
  b.log = {4, 5, 6};
  b.log_base = 2;
  b.sum = {7.f, 8.f, 9.f};
  b.pushed = {3};
  b.last_update = {0, 3};
  b.staleness_max = 4;
  image.held.push_back({3,
                        1,
                        16,
                        {10, 1ull << 40},
                        std::make_shared<const std::vector<float>>(
                          std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f})});
  image.held.push_back({0, 0, 16, {}, nullptr}); // no gradients: none sent
  auto got = std::get<replica_image>(through_bytes(replica_op{image}).op);
  BOOST_TEST(got.block.values == b.values);
  BOOST_TEST(got.block.slot_names == b.slot_names);
  BOOST_TEST(got.block.slots == b.slots);
  BOOST_TEST(got.block.version == b.version);
  BOOST_TEST(got.block.learning_rate == b.learning_rate);
  BOOST_TEST(got.block.workers == b.workers);
  BOOST_TEST(got.block.clocks == b.clocks);
  BOOST_TEST(got.block.log == b.log);
  BOOST_TEST(got.block.log_base == b.log_base);
  BOOST_TEST(got.block.sum == b.sum);
  BOOST_TEST(got.block.pushed == b.pushed);
  BOOST_TEST(got.block.last_update == b.last_update);
  BOOST_TEST(got.block.staleness_max == b.staleness_max);
  BOOST_REQUIRE(got.held.size() == 2u);
  BOOST_TEST(got.held[0].worker == 3);
  BOOST_TEST(got.held[0].table == 1);
  BOOST_TEST(got.held[0].tag == 16);
  BOOST_TEST(got.held[0].ids == image.held[0].ids);
  BOOST_TEST(*got.held[0].grads == *image.held[0].grads);
  BOOST_TEST(got.held[1].ids.empty());
  BOOST_TEST(got.held[1].grads->empty());

  row_chunk c{2, 1, 40, 7, {5, 6}, {1.f, 2.f}, {{3.f, 4.f}}, {9, 0}, {3, 1}};
  auto rows = std::get<row_chunk>(through_bytes(replica_op{c}).op);
  BOOST_TEST(rows.shard == 2);
  BOOST_TEST(rows.rows == 40u);
  BOOST_TEST(rows.pushes == 7);
  BOOST_TEST(rows.ids == c.ids);
  BOOST_TEST(rows.values == c.values);
  BOOST_TEST(rows.slots == c.slots);
  BOOST_TEST(rows.ages == c.ages);
  BOOST_TEST(rows.uses == c.uses);

  BOOST_TEST(
    std::get<replica_join>(through_bytes(replica_op{replica_join{4}}).op).worker
    == 4);
  BOOST_TEST(
    std::get<replica_leave>(through_bytes(replica_op{replica_leave{5}}).op)
      .worker
    == 5);
  auto tune = std::get<replica_tune>(
    through_bytes(replica_op{replica_tune{"lr", 0.25}}).op);
  BOOST_TEST(tune.key == "lr");
  BOOST_TEST(tune.value == 0.25);
  BOOST_TEST(
    std::get<replica_forget>(through_bytes(replica_op{replica_forget{12}}).op)
      .version
    == 12);
  BOOST_TEST(std::holds_alternative<replica_adopt>(
    through_bytes(replica_op{replica_adopt{}}).op));
}

BOOST_AUTO_TEST_CASE(
  every_data_message_arrives_as_it_left_on_basp_and_on_a_frame) {
  // A push of a slice in the middle of the worker's buffer: only the
  // slice travels.
  gradient_push g{3, 7, 41, 12, floats({9.f, 1.5f, -2.f, 3.25f, 9.f}), 1, 3};
  travels_both_ways(*this, g);
  travels_both_ways(*this, float_block{2, 17, floats({0.5f, -1.f})});
  travels_both_ways(*this, float_block::ask_again_for(4));
  travels_both_ways(*this, row_request{1, 2, 5, {10, 1ull << 40, 7}, true});
  travels_both_ways(*this, row_request{1, 0, 5, {3}, false});
  travels_both_ways(*this, row_block{1, 2, floats({1.f, 2.f, 3.f, 4.f})});
  travels_both_ways(
    *this, row_push{0, 1, 6, 99, 14, {8, 9}, floats({0.1f, 0.2f, 0.3f, 0.4f})});
  travels_both_ways(*this, push_ack{123, true});
  travels_both_ways(*this, push_ack{-1, false});
}

BOOST_AUTO_TEST_CASE(
  a_frame_puts_each_field_in_the_slot_its_description_names) {
  data_frame h;
  through_frame(gradient_push::of(3, 7, 41, {1.f, 2.f}, 12), &h);
  BOOST_TEST(h.op == data_frame::push);
  BOOST_TEST(h.shard == 3);
  BOOST_TEST(h.worker == 7);
  BOOST_TEST(h.tag == 41);
  BOOST_TEST(h.batch == 12);
  BOOST_TEST(h.count == 2u);

  through_frame(row_push{0, 4, 6, 99, 14, {8, 9, 10}, floats({1.f, 2.f, 3.f})},
                &h);
  BOOST_TEST(h.op == data_frame::row_push);
  BOOST_TEST(h.table == 4);
  BOOST_TEST(h.count == 3u); // the ids; their floats follow them

  through_frame(row_request{1, 2, 5, {10}, true}, &h);
  BOOST_TEST(h.op == data_frame::row_pull);
  BOOST_TEST(h.flag == 1);

  through_frame(push_ack{123, true}, &h);
  BOOST_TEST(h.op == data_frame::ack);
  BOOST_TEST(h.tag == 123);
  BOOST_TEST(h.flag == 1);

  through_frame(float_block{2, 17, floats({0.5f})}, &h);
  BOOST_TEST(h.op == data_frame::values);
  BOOST_TEST(h.tag == 17);
  BOOST_TEST(h.count == 1u);
}

BOOST_AUTO_TEST_CASE(a_reply_echoes_its_request_id_and_shard) {
  push_ack a{5, false};
  auto o = data_wire::reply_frame(77, 3, a);
  BOOST_TEST(o.head.id == 77u);
  BOOST_TEST(o.head.shard == 3);
  BOOST_TEST(o.head.tag == 5);
}

BOOST_AUTO_TEST_CASE(a_message_reads_as_its_fields_with_payload_lengths) {
  auto text = caf::deep_to_string(
    gradient_push{3, 7, 41, 12, floats({1.f, 2.f, 3.f}), 1, 2});
  BOOST_TEST(text == "gradient_push(3, 7, 41, 12, 2)");
  BOOST_TEST(caf::deep_to_string(push_ack{9, true}) == "push_ack(9, true)");
}

BOOST_AUTO_TEST_SUITE_END()
