// The configuration reference (docs/configuration.md) against the config
// reader. The reader records every key it looks up, present or not
// (config_detail::keys_looked_up); the configs below take each of its
// branches (every model type, data format, optimizer, mode, and the
// optional objects). A key the reader accepts without a row in the
// reference fails the test, and so does a row the reader never asks for.
#include "runtime/config/config_reader.hpp"

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/base/errc.hpp"
#include "test_util.hpp"

using namespace troupe;
using json = nlohmann::json;

namespace {

/// The first column of every table row of the reference that names a
/// key: "| `/pointer` | type | default | meaning |".
std::set<std::string> documented_keys() {
  std::ifstream in{std::string{TROUPE_SOURCE_DIR} + "/docs/configuration.md"};
  BOOST_REQUIRE_MESSAGE(in, "docs/configuration.md is missing");
  std::set<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `/", 0) != 0)
      continue;
    auto end = line.find('`', 3);
    BOOST_REQUIRE_MESSAGE(end != std::string::npos, line);
    keys.insert(line.substr(3, end - 3));
  }
  return keys;
}

/// Reads `cfg` with the recorder on; the config must be valid, so that the
/// reader reaches every key of its branch.
void read_recording(const json& cfg, const std::string& what,
                    std::set<std::string>& keys) {
  config_detail::keys_looked_up = &keys;
  auto parsed = parse_run_config(cfg.dump(), what);
  config_detail::keys_looked_up = nullptr;
  BOOST_REQUIRE_MESSAGE(
    parsed, what << ": " << (parsed ? "" : describe(parsed.error())));
}

/// A small valid run: an MLP on synthetic data.
json base_config() {
  return json::parse(R"({
    "name": "reference",
    "model": { "type": "mlp", "hidden": [8] },
    "data": { "format": "synthetic", "width": 8, "classes": 3 },
    "training": { "batch_size": 4, "epochs": 1 }
  })");
}

/// Configs that together take every branch of the reader. Dataset files
/// are empty files in `dir`: the reader only checks that they exist.
std::vector<std::pair<std::string, json>> every_branch(const std::string& dir) {
  for (auto name :
       {"x.npy", "y.npy", "t.csv", "a.npz", "train.tsv", "test.tsv", "b1.bin",
        "b2.bin", "tr-img", "tr-lab", "te-img", "te-lab", "model.safetensors"})
    test::write_file(dir + "/" + name, "");
  std::vector<std::pair<std::string, json>> out;
  auto add = [&](const std::string& what, json cfg) {
    out.emplace_back(what, std::move(cfg));
  };

  add("mlp on synthetic data", base_config());
  {
    auto c = base_config();
    c["model"] = {{"type", "softmax"}};
    add("softmax", c);
    c["model"] = {
      {"type", "cnn"}, {"conv_channels", {2, 4}}, {"kernel_size", 3}};
    c["data"] = {{"format", "synthetic"},
                 {"height", 8},
                 {"width", 8},
                 {"channels", 1},
                 {"classes", 3}};
    add("cnn", c);
    // Every layer type, with every option.
    c["model"] = {
      {"layers",
       {{{"type", "conv2d"},
         {"filters", 4},
         {"kernel", 3},
         {"stride", 2},
         {"padding", "same"},
         {"activation", "relu"}},
        {{"type", "maxpool"}, {"size", 2}, {"stride", 1}},
        {{"type", "avgpool"}, {"size", 2}, {"stride", 1}},
        {{"type", "layernorm"}, {"epsilon", 1e-5}},
        {{"type", "activation"}, {"activation", "gelu"}},
        {{"type", "flatten"}},
        {{"type", "dropout"}, {"rate", 0.25}},
        {{"type", "dense"}, {"units", 3}, {"activation", "identity"}}}},
      {"loss", "softmax_cross_entropy"}};
    add("layers", c);
  }
  // Data formats.
  {
    auto c = base_config();
    c["data"] = {{"format", "idx"},          {"dir", dir},
                 {"train_images", "tr-img"}, {"train_labels", "tr-lab"},
                 {"test_images", "te-img"},  {"test_labels", "te-lab"}};
    add("idx", c);
    c["data"] = {{"format", "npy"},  {"dir", dir},
                 {"train", "x.npy"}, {"train_labels", "y.npy"},
                 {"test", "x.npy"},  {"test_labels", "y.npy"},
                 {"classes", 3}};
    add("npy", c);
    c["data"] = {{"format", "npz"}, {"dir", dir}, {"file", "a.npz"}};
    add("npz", c);
    c["data"] = {{"format", "csv"},     {"dir", dir},
                 {"train", "t.csv"},    {"test", "t.csv"},
                 {"label_column", "y"}, {"validation_split", 0.1}};
    add("csv", c);
    c["data"] = {{"format", "cifar10"},
                 {"dir", dir},
                 {"train_files", {"b1.bin"}},
                 {"test_files", {"b2.bin"}}};
    add("cifar10", c);
  }
  // The click model on click logs, with each sparse optimizer.
  for (auto sparse : {"sgd", "adagrad", "adam"}) {
    auto c = base_config();
    c["model"] = {{"type", "click"},
                  {"embedding", {{"dim", 4}, {"rows", "on_touch"}}}};
    c["data"] = {{"format", "click"},  {"dir", dir},   {"train", "train.tsv"},
                 {"test", "test.tsv"}, {"numeric", 2}, {"categorical", 3}};
    c["training"]["sparse_optimizer"] = {{"type", sparse}};
    if (std::string{sparse} == "adam") {
      c["model"]["embedding"]["admit"] = {
        {"min_count", 3}, {"expected_keys", 100}, {"false_positive", 0.05}};
      c["model"]["embedding"]["evict"] = {
        {"steps_to_live", 10}, {"max_rows", 50}, {"victims", "lru"}};
    }
    if (std::string{sparse} == "adagrad")
      c["model"]["embedding"]["admit"] = {{"probability", 0.5}};
    add(std::string{"click, sparse "} + sparse, c);
  }
  // The click model following a folder that grows (no epochs there).
  {
    auto c = base_config();
    c["model"] = {{"type", "click"}, {"embedding", {{"dim", 4}}}};
    c["data"] = {{"format", "click"},
                 {"dir", dir},
                 {"train", "train*.tsv"},
                 {"test", "test.tsv"},
                 {"numeric", 2},
                 {"categorical", 3},
                 {"follow",
                  {{"poll_seconds", 5}, {"stop_after_idle_seconds", 60}}}};
    c["training"].erase("epochs");
    add("click, following a folder", c);
  }
  // An external model on the user's own data.
  {
    auto c = base_config();
    c["model"] = {{"type", "external"},
                  {"parameters", dir + "/model.safetensors"}};
    c["data"] = {
      {"format", "external"}, {"train_samples", 100}, {"test_samples", 10}};
    add("external", c);
    c["model"]["seed"] = 7;
    c["model"]["tables"] = json::array(
      {{{"name", "user"},
        {"vocabulary", 1000},
        {"dim", 8},
        {"init_scale", 0.01},
        {"optimizer", {{"type", "adam"}}}},
       {{"name", "item"},
        {"vocabulary", 50},
        {"optimizer", {{"type", "adagrad"}}}}});
    add("external with tables", c);
    c["model"]["tables"][0]["admit"] = {
      {"min_count", 2}, {"expected_keys", 5000}, {"false_positive", 0.02}};
    c["model"]["tables"][0]["evict"] = {
      {"steps_to_live", 100}, {"max_rows", 500}, {"victims", "lfu"}};
    c["model"]["tables"][1]["admit"] = {{"probability", 0.5}};
    add("external with bounded tables", c);
    c["training"]["export"] = {{"dir", dir + "/exports"},
                               {"every_steps", 10},
                               {"every_seconds", 60},
                               {"keep", 2}};
    add("external with tables exported", c);
  }
  // Optimizers, the schedule, checkpoints and the other training keys.
  for (auto type : {"sgd", "momentum", "adam"}) {
    auto c = base_config();
    c["training"]["optimizer"] = {
      {"type", type},
      {"schedule", {{"type", "exponential"}, {"decay_steps", 10}}}};
    c["training"]["checkpoint"] = {{"dir", dir + "/ckpt"}};
    c["training"]["threads"] = "auto";
    add(std::string{"optimizer "} + type, c);
  }
  // Modes in one process, and a cluster of nodes with TLS.
  for (auto mode : {"async", "sync", "ssp", "easgd"}) {
    auto c = base_config();
    c["cluster"] = {{"mode", mode}, {"shards", 1}, {"workers", 2}};
    add(std::string{"mode "} + mode, c);
  }
  {
    auto c = base_config();
    c["cluster"] = {
      {"nodes",
       {{{"name", "chief"}, {"port", 7400}},
        {{"name", "ps0"}, {"port", 7401}, {"shards", 1}},
        {{"name", "w0"},
         {"port", 7402},
         {"workers", 1},
         {"device", "cpu"},
         {"certificate", "w0.pem"},
         {"key", "w0.key"}}}},
      {"chief", "chief"},
      {"tls", {{"ca", "ca.pem"}, {"certificate", "c.pem"}, {"key", "c.key"}}}};
    add("a cluster of nodes with TLS", c);
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(config_reference)

BOOST_AUTO_TEST_CASE(every_key_the_reader_accepts_has_a_row_and_no_other) {
  test::temp_dir dir;
  std::set<std::string> read;
  for (auto& [what, cfg] : every_branch(dir.path()))
    read_recording(cfg, what, read);
  auto documented = documented_keys();
  BOOST_TEST_MESSAGE(read.size()
                     << " keys read, " << documented.size() << " documented");
  for (auto& key : read)
    BOOST_TEST(documented.count(key) == 1,
               "the reader accepts " << key
                                     << ", docs/configuration.md has no row");
  for (auto& key : documented)
    BOOST_TEST(read.count(key) == 1, "docs/configuration.md has a row for "
                                       << key
                                       << ", which the reader never looks up");
}

BOOST_AUTO_TEST_CASE(the_recorder_writes_array_indices_as_a_star) {
  BOOST_TEST(config_detail::key_pattern("/cluster/nodes/12/host")
             == "/cluster/nodes/*/host");
  BOOST_TEST(config_detail::key_pattern("/data/train_files/0")
             == "/data/train_files/*");
  BOOST_TEST(config_detail::key_pattern("/model/hidden") == "/model/hidden");
  BOOST_TEST(config_detail::key_pattern("/a1/2b") == "/a1/2b");
}

BOOST_AUTO_TEST_SUITE_END()
