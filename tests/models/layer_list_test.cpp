// Layer lists as a user writes them: what the config reader and the model
// builder accept, and the one-line errors, naming the layer, for what they
// do not; and the fuzz corpus of the list's reader.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "models/gradient_check.hpp"
#include "models/layer_registry.hpp"
#include "models/model.hpp"
#include "runtime/base/errc.hpp"
#include "runtime/compute/cpu_backend.hpp"
#include "runtime/config/config.hpp"
#include "corpus_files.hpp"
#include "tests/fuzz/layer_list_inputs.hpp"

#include "test_util.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

std::string config_with(const std::string& model) {
  return R"({"model": )" + model
         + R"(, "data": {"format": "synthetic", "height": 12, "width": 10,
               "channels": 3, "classes": 5}})";
}

/// The reader's error for a model object, or "" when it reads.
std::string read_error(const std::string& model) {
  auto cfg = parse_run_config(config_with(model), "cfg.json");
  return cfg ? "" : describe(cfg.error());
}

/// The builder's error for a layer list on 12x10x3 samples of 5 classes
/// (the reader must accept it), or "".
std::string build_error(const std::string& layers,
                        compute_backend* backend = nullptr) {
  auto cfg = parse_run_config(config_with(R"({"layers": )" + layers + "}"),
                              "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  auto cpu = make_cpu_backend(1);
  auto m = make_model(cfg->model, 12, 10, 3, 5,
                      backend != nullptr ? *backend : *cpu);
  return m ? "" : describe(m.error());
}

/// A backend whose memory the host cannot reach, as a GPU's: enough for
/// make_model to decide which layers run on it (it allocates nothing
/// before).
class device_like_backend final : public compute_backend {
public:
  std::string describe() const override { return "a device backend"; }
  bool host_accessible() const override { return false; }
  backend_buffer allocate(size_t) override { std::abort(); }
  void release(void*) noexcept override {}
  backend_buffer allocate_host(size_t) override { std::abort(); }
  void release_host(void*) noexcept override {}
  void upload(void*, const void*, size_t) override { std::abort(); }
  void download(void*, const void*, size_t) override { std::abort(); }
  void fill(float*, size_t, float) override { std::abort(); }
  void gemm(bool, bool, int, int, int, float, const float*, int, const float*,
            int, float, float*, int) override {
    std::abort();
  }
  void axpy(size_t, float, const float*, float*) override { std::abort(); }
  void bias_activation_forward(activation, float*, const float*, int,
                               int) override {
    std::abort();
  }
  void activation_backward(activation, const float*, float*, size_t) override {
    std::abort();
  }
  void bias_backward(const float*, float*, int, int) override { std::abort(); }
  batch_loss softmax_cross_entropy(const float*, const int32_t*, int, int,
                                   float*, float) override {
    std::abort();
  }
  void im2col(const float*, const conv_shape&, float*) override {
    std::abort();
  }
  void col2im(const float*, const conv_shape&, float*) override {
    std::abort();
  }
  void maxpool_forward(const float*, int, int, int, int, int, int, float*,
                       int32_t*) override {
    std::abort();
  }
  void maxpool_backward(const float*, const int32_t*, size_t, float*,
                        size_t) override {
    std::abort();
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(layer_list)

BOOST_AUTO_TEST_CASE(a_list_reads_with_its_defaults) {
  auto cfg = parse_run_config(config_with(R"({"layers": [
      {"type": "conv2d", "filters": 8, "stride": 2},
      {"type": "maxpool"}, {"type": "avgpool", "size": 3},
      {"type": "dropout"}, {"type": "layernorm"}, {"type": "flatten"},
      {"type": "dense", "units": 5}]})"),
                              "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  const auto& l = cfg->model.layers;
  BOOST_TEST((cfg->model.type == model_config::kind::layers));
  BOOST_REQUIRE(l.size() == 7u);
  BOOST_TEST(to_string(l[0])
             == "conv2d filters=8 kernel=3 stride=2 padding=same "
                "activation=identity");
  BOOST_TEST(l[0].padding == 1);
  BOOST_TEST(to_string(l[1]) == "maxpool size=2 stride=2");
  BOOST_TEST(to_string(l[2]) == "avgpool size=3 stride=3");
  BOOST_TEST(to_string(l[3]) == "dropout rate=0.5");
  BOOST_TEST(to_string(l[4]) == "layernorm epsilon=1e-05");
  BOOST_TEST(to_string(l[6]) == "dense units=5 activation=identity");
  BOOST_TEST((cfg->model.loss == loss_kind::softmax_cross_entropy));
  // What a checkpoint records of each layer reads back to the same layer.
  for (auto& spec : l) {
    auto back = parse_layer_spec(to_string(spec));
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST(to_string(*back) == to_string(spec));
    BOOST_TEST(back->padding == spec.padding);
  }
  BOOST_TEST(!parse_layer_spec("dense units=x").has_value());
  BOOST_TEST(!parse_layer_spec("conv2d filters=3 colour=red").has_value());
}

BOOST_AUTO_TEST_CASE(the_reader_names_the_layer_and_what_is_wrong) {
  BOOST_TEST(read_error(R"({"layers": [{"type": "flatten"},
                                        {"type": "residual"}]})")
             == "cfg.json: /model/layers/1/type: expected one of "
                "dense|conv2d|maxpool|avgpool|flatten|dropout|layernorm|"
                "activation, found \"residual\"");
  BOOST_TEST(read_error(R"({"layers": [{"type": "dense"}]})")
             == "cfg.json: /model/layers/0/units: missing required key "
                "\"units\"");
  BOOST_TEST(read_error(R"({"layers": [{"type": "conv2d", "filters": 4,
                                         "kernel": 4}]})")
             == "cfg.json: /model/layers/0/kernel: \"same\" padding needs "
                "an odd kernel (kernel / 2 zeros on every side), found 4; "
                "give \"padding\" as a count");
  BOOST_TEST(read_error(R"({"layers": [{"type": "conv2d", "filters": 4,
                                         "padding": 3}]})")
             == "cfg.json: /model/layers/0/padding: expected \"same\", "
                "\"valid\" or an integer from 0 to kernel - 1 (2), found 3");
  BOOST_TEST(read_error(R"({"layers": [{"type": "dropout", "rate": 1}]})")
             == "cfg.json: /model/layers/0/rate: expected a number >= 0 "
                "and < 1, found 1");
  BOOST_TEST(read_error(R"({"layers": [{"type": "maxpool", "units": 3}]})")
             == "cfg.json: /model/layers/0/units: unknown key \"units\"");
  BOOST_TEST(read_error(R"({"layers": []})")
             == "cfg.json: /model/layers: expected an array of 1 to 256 "
                "layer objects, found an array");
  BOOST_TEST(read_error(R"({"type": "mlp", "layers": [{"type": "flatten"}]})")
             == "cfg.json: /model/type: a model with \"layers\" has no "
                "other type (found \"mlp\"): the layers are the model");
  BOOST_TEST(read_error(R"({"type": "layers"})")
             == "cfg.json: /model/layers: missing required key \"layers\" "
                "(type \"layers\")");
  BOOST_TEST(read_error(R"({"layers": [{"type": "flatten"}],
                            "hidden": [4]})")
             == "cfg.json: /model/hidden: unknown key \"hidden\"");
  BOOST_TEST(read_error(R"({"layers": [{"type": "flatten"}],
                            "loss": "hinge"})")
             == "cfg.json: /model/loss: expected one of "
                "softmax_cross_entropy|binary_cross_entropy|"
                "mean_squared_error|mse, found \"hinge\"");
}

BOOST_AUTO_TEST_CASE(shapes_are_checked_at_build_naming_the_layer) {
  BOOST_TEST(build_error(R"([{"type": "maxpool", "size": 4},
                             {"type": "maxpool", "size": 4}])")
             == "/model/layers/1 (maxpool): a 4x4 pool is larger than its "
                "3x2x3 input");
  BOOST_TEST(build_error(R"([{"type": "dense", "units": 5}])")
             == "/model/layers/0 (dense): needs flat input, found 12x10x3 "
                "values per sample: put a flatten layer before it");
  BOOST_TEST(build_error(R"([{"type": "conv2d", "filters": 2, "kernel": 13,
                              "padding": "valid"}])")
             == "/model/layers/0 (conv2d): a 13x13 kernel is larger than "
                "its 12x10x3 input with 0 zeros of padding");
  BOOST_TEST(build_error(R"([{"type": "flatten"},
                             {"type": "dense", "units": 3}])")
             == "/model/layers/1: the last layer gives 3 values per sample; "
                "softmax_cross_entropy needs 5, one logit per class of the "
                "data: end with a dense layer of 5 units");
  BOOST_TEST(build_error(R"([{"type": "flatten"},
                             {"type": "dense", "units": 5,
                              "activation": "softmax"}])")
             == "/model/layers/1: softmax_cross_entropy takes the last "
                "layer's logits and applies the softmax itself: drop the "
                "softmax");
  BOOST_TEST(build_error(R"([{"type": "conv2d", "filters": 4096,
                              "kernel": 15},
                             {"type": "conv2d", "filters": 4096,
                              "kernel": 15}])")
             == "/model/layers/1 (conv2d): brings the model to 3777646592 "
                "parameters (at most 2^30)");
  BOOST_TEST(build_error(R"([{"type": "maxpool", "size": 10},
                             {"type": "flatten"}, {"type": "dropout"},
                             {"type": "avgpool", "size": 1}])")
             == "/model/layers/3: the model has no parameters to train: add "
                "a dense, conv2d or layernorm layer");
  BOOST_TEST(build_error(R"([{"type": "conv2d", "filters": 4, "stride": 2},
                             {"type": "layernorm"}, {"type": "flatten"},
                             {"type": "dense", "units": 5}])")
             == "");
}

// Layers that loop on the host are refused on a device backend at start,
// by index and name; those made of the backend's operations are not.
BOOST_AUTO_TEST_CASE(host_only_layers_are_refused_on_a_device_backend) {
  device_like_backend device;
  BOOST_TEST(build_error(R"([{"type": "conv2d", "filters": 4, "stride": 2,
                              "activation": "relu"},
                             {"type": "dropout", "rate": 0.1},
                             {"type": "flatten"},
                             {"type": "dense", "units": 5}])",
                         &device)
             == "/model/layers/1 (dropout 0.1): runs on the CPU backend "
                "only, not on a device backend: set \"device\": \"cpu\"");
  BOOST_TEST(build_error(R"([{"type": "flatten"},
                             {"type": "dense", "units": 8,
                              "activation": "gelu"},
                             {"type": "dense", "units": 5}])",
                         &device)
             == "/model/layers/1 (gelu): runs on the CPU backend only, not "
                "on a device backend: set \"device\": \"cpu\"");
}

namespace {

/// A layer of a program's own: y = scale * x^2, one parameter "scale"
/// (initial value from the config), to register under a test's name.
class square_layer final : public layer {
public:
  square_layer(param_layout& layout, const std::string& name, image_shape in,
               double scale)
    : in_(in), scale_(static_cast<float>(scale)) {
    at_ = layout.add(name + "/scale", {1});
  }
  std::string describe() const override { return "square"; }
  size_t output_size() const override { return in_.size(); }
  image_shape output_shape() const override { return in_; }
  void init(float* flat, const model_config&, splitmix64&) const override {
    flat[at_] = scale_;
  }
  void reserve(compute_backend&, int) override {}
  void forward(compute_backend&, const float* params, const float* x, float* y,
               int batch) override {
    for (size_t i = 0; i < batch * in_.size(); ++i)
      y[i] = params[at_] * x[i] * x[i];
  }
  void backward(compute_backend&, const float* params, const float* x,
                const float*, float* dy, float* dx, float* grads,
                int batch) override {
    double dscale = 0;
    for (size_t i = 0; i < batch * in_.size(); ++i) {
      dscale += dy[i] * x[i] * x[i];
      if (dx != nullptr)
        dx[i] = dy[i] * 2 * params[at_] * x[i];
    }
    grads[at_] = static_cast<float>(dscale);
  }
  flat_range param_range() const override { return {at_, at_ + 1}; }
  double gemm_flops(int, bool) const override { return 0; }

private:
  image_shape in_;
  float scale_;
  size_t at_;
};

void register_square_once() {
  static bool done = [] {
    auto err = register_layer(
      "square", [](layer_args& a) -> caf::expected<std::unique_ptr<layer>> {
        double scale = a.number("scale", 1.0, -10, 10);
        if (a.input().size() > 1000)
          return a.fail("takes at most 1000 values, found "
                        + a.input().to_string());
        return std::make_unique<square_layer>(a.layout(), a.name(), a.input(),
                                              scale);
      });
    BOOST_REQUIRE_MESSAGE(!err, describe(err));
    return true;
  }();
  (void)done;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_registered_layer_is_named_in_a_list_like_a_built_in) {
  register_square_once();
  // Built-in names and a second registration are refused.
  auto factory = [](layer_args&) -> caf::expected<std::unique_ptr<layer>> {
    return nullptr;
  };
  BOOST_TEST((register_layer("dense", factory) == errc::invalid_argument));
  BOOST_TEST((register_layer("square", factory) == errc::invalid_argument));

  auto cfg = parse_run_config(config_with(R"({"layers": [{"type": "flatten"},
                               {"type": "dense", "units": 6},
                               {"type": "square", "scale": 0.5},
                               {"type": "dense", "units": 5}]})"),
                              "cfg.json");
  BOOST_REQUIRE_MESSAGE(cfg, troupe::test::why(cfg));
  BOOST_TEST(to_string(cfg->model.layers[2]) == R"(square {"scale":0.5})");
  auto be = make_cpu_backend(1);
  auto m = make_model(cfg->model, 12, 10, 3, 5, *be);
  BOOST_REQUIRE_MESSAGE(m, troupe::test::why(m));
  BOOST_TEST((*m)->summary()
             == "layers 12x10x3: dense 360->6 identity, square, "
                "dense 6->5 identity");
  auto names = (*m)->layout().tensors();
  BOOST_REQUIRE(names.size() == 5u);
  BOOST_TEST(names[2].name == "square0/scale");
  BOOST_TEST((*m)->initial_params()[names[2].offset] == 0.5f);

  // Its options are checked, and its own refusals name the layer.
  BOOST_TEST(build_error(R"([{"type": "square", "scale": 11}, {"type":
                             "flatten"}, {"type": "dense", "units": 5}])")
             == "/model/layers/0/scale: expected a number from -10 to 10, "
                "found 11");
  BOOST_TEST(build_error(R"([{"type": "square", "power": 3}, {"type":
                             "flatten"}, {"type": "dense", "units": 5}])")
             == "/model/layers/0/power: unknown key \"power\"");
  BOOST_TEST(build_error(R"([{"type": "square"}, {"type": "flatten"},
                             {"type": "dense", "units": 5}])")
             == "");
  BOOST_TEST(build_error(R"([{"type": "flatten"}, {"type": "dense",
                             "units": 2000}, {"type": "square"},
                             {"type": "dense", "units": 5}])")
             == "/model/layers/2 (square): takes at most 1000 values, "
                "found 2000");
  // Host loops: not on a device backend.
  device_like_backend device;
  BOOST_TEST(build_error(R"([{"type": "square"}, {"type": "flatten"},
                             {"type": "dense", "units": 5}])",
                         &device)
             == "/model/layers/0 (square): runs on the CPU backend only, "
                "not on a device backend: set \"device\": \"cpu\"");
  // And the gradient check tells a right backward pass from a wrong one.
  std::vector<float> params{0.7f};
  param_layout layout;
  square_layer square{layout, "s", {1, 1, 4}, 0.7};
  auto report = check_layer_gradients(square, *be, params.data(), 1, {1, 1, 4},
                                      3, 1);
  BOOST_TEST(report.wrong == 0, report.first);
}

// tests/fuzz/corpus/layer_list/: the seeds, and reproducers of findings.
BOOST_AUTO_TEST_CASE(fuzz_corpus_replays) {
  auto files = troupe::test::corpus_files(fs::path{TROUPE_SOURCE_DIR}
                                          / "tests/fuzz/corpus/layer_list");
  BOOST_TEST(files.size() >= 8u);
  for (auto& f : files) {
    auto bytes = troupe::test::file_bytes(f);
    auto broken = fuzz::read_layer_list(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    BOOST_TEST(broken.empty(), f.filename() << ": " << broken);
  }
}

BOOST_AUTO_TEST_SUITE_END()
