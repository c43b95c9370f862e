// troupe-predict: the classes a checkpoint's model predicts for new
// samples, with their probabilities (or a regression's values). The model
// comes from the checkpoint alone (its recorded config and layout); the
// samples from an .npy file of features or a CSV table.
//
// Output by the extension of --output: .csv, a header "label,p0,...,pK"
// and one row per sample (the predicted class, then the softmax
// probabilities); .npy, the probabilities as float32 (N, classes), with the
// predicted classes as int32 (N,) beside them in <name>.labels.npy. By the
// model's loss, binary cross-entropy gives each label's 0 or 1 and
// probability ("label0,...,labelK,p0,...,pK"; (N, K) labels beside the
// .npy), and mean squared error the values alone ("y0,...,yK"; no labels
// file).
//
// With --export DIR instead of --checkpoint, a click model is scored from
// a run's exports (training.export) as a server that applies them would:
// the click log of --input (.tsv, plain or gzipped) gets one probability
// per line in the .csv of --output (header "p"), and the log-loss and AUC
// over its labels are printed (models/export_scoring.hpp).
//
// Exit codes: 0 done; 2 bad input (command line, checkpoint, input file,
// samples that do not fit the model); 1 a failure while running.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "models/backend_factory.hpp"
#include "apps/command_line.hpp"
#include "apps/exit_codes.hpp"
#include "models/checkpoint_model.hpp"
#include "models/export_scoring.hpp"
#include "models/trainer.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/config/run_identity.hpp"
#include "runtime/data/dataset.hpp"
#include "runtime/base/errc.hpp"

namespace {

using namespace troupe;

int fail(const caf::error& err) {
  return report_failure("troupe-predict", err);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size()
         && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// An .npy file as np.save writes it (version 1, header padded to 64).
bool write_npy(const std::string& path, const char* descr,
               const std::vector<size_t>& shape, const void* data,
               size_t bytes) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    dims += ",";
  std::string dict = std::string{"{'descr': '"} + descr
                     + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  dict += std::string(63 - (10 + dict.size()) % 64, ' ') + "\n";
  std::ofstream out{path, std::ios::binary};
  out.write("\x93NUMPY\x01\x00", 8);
  char len[2] = {static_cast<char>(dict.size() & 0xff),
                 static_cast<char>(dict.size() >> 8)};
  out.write(len, 2);
  out << dict;
  out.write(static_cast<const char*>(data),
            static_cast<std::streamsize>(bytes));
  return static_cast<bool>(out.flush());
}

/// The CSV columns a checkpoint's run read its labels from (its recorded
/// data.label_column: a name, or "[a,b]" for several); none for other data.
std::vector<std::string> trained_label_columns(const checkpoint& ckpt) {
  auto meta = ckpt.metadata.find("config");
  if (meta == ckpt.metadata.end())
    return {};
  auto id = parse_identity(meta->second);
  auto it = id.find("/data/label_column");
  if (it == id.end() || it->second.empty())
    return {};
  const auto& v = it->second;
  if (v.size() < 2 || v.front() != '[' || v.back() != ']')
    return {v};
  std::vector<std::string> out;
  size_t from = 1;
  for (size_t comma; (comma = v.find(',', from)) != std::string::npos;
       from = comma + 1)
    out.push_back(v.substr(from, comma - from));
  out.push_back(v.substr(from, v.size() - 1 - from));
  return out;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Predict classes with a troupe checkpoint."};
  std::string checkpoint_path, input, output, label_column, export_dir;
  int64_t sequence = -1;
  int batch = 256;
  auto* from_checkpoint = app.add_option("--checkpoint", checkpoint_path,
                                         "a ckpt-<step>.safetensors");
  auto* from_export = app.add_option(
    "--export", export_dir,
    "a run's export folder (training.export.dir): a click model scored "
    "from its full export and deltas");
  from_checkpoint->excludes(from_export);
  app
    .add_option("--sequence", sequence,
                "with --export: the export to score (default: the newest)")
    ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  app
    .add_option("--input", input,
                "samples: an .npy array of features, or a .csv table")
    ->required();
  app
    .add_option("--output", output,
                "predictions: .csv (label and probabilities) or .npy")
    ->required();
  app.add_option("--label-column", label_column,
                 "a .csv input's column to leave out (default: the columns "
                 "the run was trained to predict, where the input has "
                 "them)");
  app.add_option("--batch-size", batch, "samples per forward pass")
    ->check(CLI::Range(1, 1 << 16));
  if (auto code = parse_command_line(app, argc, argv, "troupe-predict"))
    return *code;
  if (checkpoint_path.empty() && export_dir.empty())
    return fail(
      make_error(errc::invalid_config, "--checkpoint or --export is required"));
  if (!export_dir.empty()) {
    if (!ends_with(output, ".csv"))
      return fail(make_error(errc::invalid_config,
                             "--output: " + output
                               + ": expected a .csv file name (--export "
                                 "writes one probability per line)"));
    try {
      auto scored = score_clicks_from_export(export_dir, sequence, input);
      if (!scored)
        return fail(scored.error());
      std::ofstream out{output};
      out << "p\n";
      char text[32];
      for (auto p : scored->p) {
        std::snprintf(text, sizeof text, "%.9g\n", p);
        out << text;
      }
      if (!out.flush())
        return fail(make_error(errc::io_error, output + ": cannot write"));
      std::printf("export %lld (step %lld, %llu table rows): log-loss %.6f, "
                  "AUC %.6f over %lld samples of %s -> %s\n",
                  static_cast<long long>(scored->sequence),
                  static_cast<long long>(scored->step),
                  static_cast<unsigned long long>(scored->rows),
                  scored->log_loss, scored->auc,
                  static_cast<long long>(scored->count), input.c_str(),
                  output.c_str());
    } catch (const std::exception& e) {
      std::cerr << "troupe-predict: error: " << e.what() << std::endl;
      return 1;
    }
    return 0;
  }
  bool as_csv = ends_with(output, ".csv");
  if (!as_csv && !ends_with(output, ".npy"))
    return fail(make_error(errc::invalid_config,
                           "--output: " + output
                             + ": expected a .csv or .npy file name"));
  if (!ends_with(input, ".npy") && !ends_with(input, ".csv"))
    return fail(
      make_error(errc::invalid_config,
                 "--input: " + input + ": expected a .npy or .csv file name"));
  auto ckpt = read_checkpoint(checkpoint_path);
  if (!ckpt)
    return fail(ckpt.error());
  caf::expected<dataset> data = ends_with(input, ".npy")
                                  ? load_npy_features(input)
                                  : load_csv(input, label_column);
  // A CSV that still has the columns the model was trained to predict
  // (the run's data.label_column): they are left out, not read as
  // features the model does not take.
  if (data && !ends_with(input, ".npy") && label_column.empty()) {
    auto trained = trained_label_columns(*ckpt);
    if (!trained.empty()) {
      auto without = load_csv(input, trained, target_kind::values);
      if (without) {
        data = std::move(without);
        std::string names;
        for (auto& c : trained)
          names += (names.empty() ? "" : ", ") + c;
        std::cout << "leaving out " << names
                  << " (the model was trained to predict "
                  << (trained.size() == 1 ? "it" : "them") << ")" << std::endl;
      }
    }
  }
  if (!data)
    return fail(data.error());
  try {
    auto backend = make_backend(device_spec{}, compute_threads(0, 1));
    if (!backend)
      return fail(backend.error());
    auto made = model_from_checkpoint(*ckpt, checkpoint_path, data->height,
                                      data->width, data->channels, **backend);
    if (!made)
      return fail(made.error());
    model& m = **made;
    const auto classes = static_cast<size_t>(m.classes());
    const auto n = static_cast<size_t>(data->count);
    const loss_kind loss = m.loss();
    // Per sample: the probabilities (classes, labels) or the values
    // (regression); the predicted class, or each label (0 or 1).
    std::vector<float> outputs(n * classes);
    const size_t label_width = loss == loss_kind::binary_cross_entropy ? classes
                               : loss == loss_kind::softmax_cross_entropy ? 1
                                                                          : 0;
    std::vector<int32_t> labels(n * label_width);
    std::vector<float> inputs(static_cast<size_t>(batch) * data->sample_size());
    for (size_t first = 0; first < n; first += static_cast<size_t>(batch)) {
      auto count = std::min(n - first, static_cast<size_t>(batch));
      float* z = outputs.data() + first * classes;
      data->features.read_range(static_cast<int64_t>(first),
                                static_cast<int64_t>(count), inputs.data());
      m.logits(inputs.data(), static_cast<int>(count), z);
      for (size_t i = 0; i < count; ++i) {
        float* row = z + i * classes;
        if (loss == loss_kind::softmax_cross_entropy) {
          auto r = read_logits(row, classes);
          double top = row[r.best];
          for (size_t c = 0; c < classes; ++c)
            row[c] = static_cast<float>(std::exp(row[c] - top - r.log_sum));
          labels[first + i] = static_cast<int32_t>(r.best);
        } else if (loss == loss_kind::binary_cross_entropy) {
          for (size_t c = 0; c < classes; ++c) {
            labels[(first + i) * classes + c] = row[c] > 0 ? 1 : 0;
            row[c] = static_cast<float>(1 / (1 + std::exp(-double{row[c]})));
          }
        }
      }
    }
    bool written = false;
    if (as_csv) {
      std::ofstream out{output};
      const char* value = loss == loss_kind::mean_squared_error ? "y" : "p";
      std::string header;
      if (label_width == 1)
        header = "label,";
      for (size_t c = 0; label_width > 1 && c < classes; ++c)
        header += "label" + std::to_string(c) + ",";
      for (size_t c = 0; c < classes; ++c)
        header += value + std::to_string(c) + ",";
      header.back() = '\n';
      out << header;
      char buf[32];
      for (size_t i = 0; i < n; ++i) {
        std::string line;
        for (size_t c = 0; c < label_width; ++c)
          line += std::to_string(labels[i * label_width + c]) + ",";
        for (size_t c = 0; c < classes; ++c) {
          std::snprintf(buf, sizeof buf, "%.6g,", outputs[i * classes + c]);
          line += buf;
        }
        line.back() = '\n';
        out << line;
      }
      written = static_cast<bool>(out.flush());
    } else {
      auto stem = output.substr(0, output.size() - 4);
      written = write_npy(output, "<f4", {n, classes}, outputs.data(),
                          outputs.size() * sizeof(float));
      // (N,) classes, or (N, K) labels; a regression has none.
      auto shape = label_width == 1 ? std::vector<size_t>{n}
                                    : std::vector<size_t>{n, classes};
      if (label_width > 0)
        written = written
                  && write_npy(stem + ".labels.npy", "<i4", shape,
                               labels.data(), labels.size() * sizeof(int32_t));
    }
    if (!written)
      return fail(make_error(errc::io_error, output + ": cannot write"));
    std::cout << "predicted " << n << " samples of " << input << " with "
              << checkpoint_path << " (" << m.summary() << ") -> " << output
              << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "troupe-predict: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
