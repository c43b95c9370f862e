// The training identity of a config (runtime/config/run_identity.hpp): what two
// processes of one run must agree on, and how a difference is named.
#include "runtime/config/run_identity.hpp"

#include <boost/test/unit_test.hpp>

#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

const char* base = R"({
  "name": "t",
  "model": { "type": "mlp", "hidden": [8] },
  "data": { "format": "synthetic", "width": 4, "classes": 3 },
  "training": { "batch_size": 16, "optimizer": { "type": "adam" } }
})";

identity_map identity_of(const std::string& text) {
  auto cfg = parse_run_config(text, "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  return training_identity(*cfg);
}

} // namespace

BOOST_AUTO_TEST_SUITE(run_identity)

BOOST_AUTO_TEST_CASE(defaults_stated_or_left_out_agree) {
  auto a = identity_of(base);
  auto b = identity_of(replace_first(base, R"("type": "adam")",
                                     R"("type": "adam", "beta1": 0.9)"));
  BOOST_TEST(identity_difference(a, "a", b, "b").empty());
  BOOST_TEST(identity_digest(a) == identity_digest(b));
  BOOST_TEST(identity_digest(a).size() == 16u);
  // What may differ between nodes is not part of it.
  auto c = identity_of(
    replace_first(base, R"("batch_size": 16)",
                  R"("batch_size": 16, "threads": 4, "epochs": 3)"));
  BOOST_TEST(identity_difference(a, "a", c, "c").empty());
  BOOST_TEST(parse_identity(identity_text(a)) == a);
}

BOOST_AUTO_TEST_CASE(a_difference_names_the_keys_and_both_values) {
  auto chief = identity_of(base);
  auto node = identity_of(
    replace_first(base, R"("type": "adam")", R"("type": "sgd")"));
  auto diff = identity_difference(chief, "chief", node, "node w1");
  BOOST_TEST(diff.find("/training/optimizer/type (chief: adam, node w1: sgd)")
               != std::string::npos,
             diff);
  // Adam's own settings are not set on the sgd side.
  BOOST_TEST(diff.find("/training/optimizer/type (chief: adam, node w1: sgd); "
                       "/training/optimizer/beta1 (chief: 0.9, node w1: not "
                       "set)")
               != std::string::npos,
             diff);
  BOOST_TEST(identity_digest(chief) != identity_digest(node));
  auto bigger = identity_of(
    replace_first(base, R"("hidden": [8])", R"("hidden": [8, 4])"));
  diff = identity_difference(chief, "chief", bigger, "node");
  BOOST_TEST(diff == "/model/hidden (chief: [8], node: [8,4])");
  // At most max_keys are named.
  identity_map many_a, many_b;
  for (int i = 0; i < 9; ++i)
    many_a["/k" + std::to_string(i)] = "x";
  diff = identity_difference(many_a, "a", many_b, "b", 3);
  BOOST_TEST(diff.find("and 6 more") != std::string::npos, diff);
}

// A resume matches what was trained, not where: the shard count and the
// nodes' placement leave it, the workers' total stays.
BOOST_AUTO_TEST_CASE(a_resume_leaves_the_placement_out_but_not_the_workers) {
  auto cluster = [](const std::string& shards, const std::string& nodes) {
    std::string text = base;
    return text.replace(text.rfind('}'), 1,
                        R"(, "cluster": { "shards": )" + shards
                          + R"(, "chief": "c", "nodes": [)" + nodes + "] } }");
  };
  auto two = identity_of(
    cluster("2", R"({"name": "c", "port": 7000, "shards": 2, "workers": 2})"));
  auto four = identity_of(
    cluster("4", R"({"name": "c", "port": 7000, "shards": 1, "workers": 2},
            {"name": "p", "host": "10.0.0.9", "port": 7001, "shards": 3})"));
  BOOST_TEST(identity_digest(two) != identity_digest(four)); // nodes agree
  auto r2 = resume_identity(two), r4 = resume_identity(four);
  BOOST_TEST(identity_difference(r2, "a", r4, "b").empty(),
             identity_difference(r2, "a", r4, "b"));
  BOOST_TEST(identity_digest(r2) == identity_digest(r4));
  BOOST_TEST(r2.count("/cluster/shards") == 0u);
  BOOST_TEST(r2.at("/cluster/workers") == "2");
  BOOST_TEST(r2.at("/training/optimizer/type") == "adam");
  auto three_workers = identity_of(
    cluster("2", R"({"name": "c", "port": 7000, "shards": 2, "workers": 3})"));
  BOOST_TEST(identity_difference(r2, "checkpoint",
                                 resume_identity(three_workers), "this run")
             == "/cluster/workers (checkpoint: 2, this run: 3)");
}

BOOST_AUTO_TEST_SUITE_END()
