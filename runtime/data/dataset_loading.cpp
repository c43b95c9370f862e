#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/base/errc.hpp"
#include "runtime/data/click_lines.hpp"
#include "runtime/data/click_stream.hpp"

namespace troupe {

namespace {

/// The class count of file formats whose labels say it: data.classes, or
/// the largest label of both sets + 1 (at least 2). Labels at or above
/// data.classes are refused, naming the file and the sample.
caf::error settle_classes(train_test& sets, int configured) {
  if (sets.train.has_targets())
    return caf::none; // classes is the targets' width, compared below
  int classes = configured;
  if (classes == 0)
    classes = std::max({2, sets.train.classes, sets.test.classes});
  for (auto* d : {&sets.train, &sets.test}) {
    for (size_t i = 0; i < d->labels.size(); ++i)
      if (d->labels[i] >= classes)
        return make_error(errc::bad_format,
                          d->source + ": label " + std::to_string(d->labels[i])
                            + " of sample " + std::to_string(i)
                            + " is not below data.classes ("
                            + std::to_string(classes) + ")");
    d->classes = classes;
  }
  return caf::none;
}

} // namespace

caf::expected<train_test> load_datasets(const data_config& cfg,
                                        data_needs needs) {
  train_test out;
  out.read = needs;
  switch (cfg.format) {
    case data_config::kind::idx: {
      auto train = load_idx(cfg.train_images, cfg.train_labels, max_classes,
                            needs.train, cfg.cache_dir);
      if (!train)
        return train.error();
      auto test = load_idx(cfg.test_images, cfg.test_labels, max_classes,
                           needs.test, cfg.cache_dir);
      if (!test)
        return test.error();
      out.train = std::move(*train);
      out.test = std::move(*test);
      for (auto* d : {&out.train, &out.test})
        d->classes = d->labels.empty()
                       ? 0
                       : *std::max_element(d->labels.begin(), d->labels.end())
                           + 1;
      if (auto err = settle_classes(out, cfg.file_classes))
        return err;
      break;
    }
    case data_config::kind::npy:
    case data_config::kind::npz:
    case data_config::kind::csv: {
      auto read_part = [&](bool train, size_t k) -> caf::expected<dataset> {
        bool features = train ? needs.train : needs.test;
        const auto& files = train ? cfg.train_files : cfg.test_files;
        switch (cfg.format) {
          case data_config::kind::npy:
            return load_npy(files[k],
                            (train ? cfg.train_label_files
                                   : cfg.test_label_files)[k],
                            cfg.targets, features);
          case data_config::kind::npz: {
            auto i = train ? 0 : 2;
            return load_npz(cfg.archive, cfg.arrays[i], cfg.arrays[i + 1],
                            cfg.targets, features, cfg.cache_dir);
          }
          default: return load_csv(files[k], cfg.label_columns, cfg.targets);
        }
      };
      auto read = [&](bool train) -> caf::expected<dataset> {
        if (cfg.format == data_config::kind::npz)
          return read_part(train, 0);
        std::vector<dataset> parts;
        auto n = (train ? cfg.train_files : cfg.test_files).size();
        for (size_t k = 0; k < n; ++k) {
          auto part = read_part(train, k);
          if (!part)
            return part.error();
          parts.push_back(std::move(*part));
        }
        return join_parts(std::move(parts));
      };
      auto train = read(true);
      if (!train)
        return train.error();
      auto test = read(false);
      if (!test)
        return test.error();
      out.train = std::move(*train);
      out.test = std::move(*test);
      if (auto err = settle_classes(out, cfg.file_classes))
        return err;
      break;
    }
    case data_config::kind::cifar10: {
      auto train = load_cifar10(cfg.train_files);
      if (!train)
        return train.error();
      auto test = load_cifar10(cfg.test_files);
      if (!test)
        return test.error();
      out.train = std::move(*train);
      out.test = std::move(*test);
      break;
    }
    case data_config::kind::click: {
      click_schema schema{cfg.click_numeric, cfg.click_categorical,
                          cfg.click_vocabulary};
      for (auto train : {true, false}) {
        if (train && cfg.stream_train) {
          // Only a node that trains checks every line; the chief counts.
          auto parts = click_stream::open(cfg.train_files, schema,
                                          cfg.click_block, needs.train);
          if (!parts)
            return parts.error();
          out.train = streamed_click_dataset(std::move(*parts));
          continue;
        }
        auto logs = load_click_logs(train ? cfg.train_files : cfg.test_files,
                                    schema);
        if (!logs)
          return logs.error();
        (train ? out.train : out.test) = click_dataset(std::move(*logs));
      }
      break;
    }
    case data_config::kind::external:
      // Never read here: the step function reads the user's own data. The
      // sets are their sample counts, which is all the feeder plans with.
      out.train.source = "external data";
      out.train.count = cfg.train_samples;
      out.test.source = "external data";
      out.test.count = cfg.test_samples;
      break;
    case data_config::kind::synthetic:
      // Bounded by the config's reader; nothing to compare.
      // Same class centres (seed) for both sets, different samples.
      out.train = make_synthetic(cfg.train_samples, cfg.height, cfg.width,
                                 cfg.channels, cfg.classes, cfg.noise, cfg.seed,
                                 cfg.seed * 2 + 1);
      out.test = make_synthetic(cfg.test_samples, cfg.height, cfg.width,
                                cfg.channels, cfg.classes, cfg.noise, cfg.seed,
                                cfg.seed * 2 + 2);
      break;
  }
  // Every test sample must be shaped like the training samples: the model
  // is built from the latter and reads the former with the same size.
  auto& a = out.train;
  auto& b = out.test;
  if (a.height != b.height || a.width != b.width || a.channels != b.channels
      || a.classes != b.classes) {
    auto shape = [](const dataset& d) {
      auto n = std::to_string(d.classes);
      return std::to_string(d.height) + "x" + std::to_string(d.width) + "x"
             + std::to_string(d.channels)
             + (!d.has_targets() ? " in " + n + " classes"
                : d.classes == 1 ? " with 1 target"
                                 : " with " + n + " targets");
    };
    return make_error(errc::bad_format,
                      b.source + ": test samples are " + shape(b) + ", but "
                        + a.source + " has training samples of " + shape(a));
  }
  if (cfg.validation_split > 0) {
    auto held = hold_out(out.train, cfg.validation_split, cfg.validation_seed);
    if (!held)
      return held.error();
    out.validation = std::move(*held);
  }
  return out;
}

dataset click_dataset(click_data logs) {
  dataset d;
  d.source = logs.source;
  d.count = logs.count;
  d.height = 1;
  d.width = logs.schema.numeric;
  d.channels = 1;
  d.classes = 2;
  d.features = feature_store::of_floats(std::move(logs.numeric),
                                        static_cast<size_t>(d.width));
  d.labels.reserve(logs.labels.size());
  for (float y : logs.labels)
    d.labels.push_back(y > 0.5f ? 1 : 0);
  logs.numeric.clear();
  d.clicks = std::make_shared<const click_data>(std::move(logs));
  return d;
}

dataset streamed_click_dataset(std::shared_ptr<const click_stream> parts) {
  dataset d;
  auto files = parts->parts();
  d.source = parts_name(files.front().path, files.size());
  d.count = parts->count();
  d.height = 1;
  d.width = parts->schema().numeric;
  d.channels = 1;
  d.classes = 2;
  for (auto& p : files)
    d.files.push_back({p.path, p.first, p.count});
  d.click_parts = std::move(parts);
  return d;
}

caf::expected<dataset> hold_out(dataset& train, double fraction,
                                uint64_t seed) {
  auto n = train.count;
  auto k = static_cast<int64_t>(
    std::llround(fraction * static_cast<double>(n)));
  if (k < 1 || k >= n)
    return make_error(
      errc::invalid_config,
      "data.validation_split " + std::to_string(fraction) + " of the "
        + std::to_string(n) + " training samples of " + train.source
        + " leaves " + (k < 1 ? "no validation" : "no training") + " sample");
  // The epochs' seeded shuffle, under a seed of its own ("validate"):
  // the same split in every process.
  auto order = epoch_order(static_cast<size_t>(n), seed ^ 0x76616c6964617465ull,
                           0);
  std::vector<char> held(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < k; ++i)
    held[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  // The features stay where they are: each set names its rows of them.
  auto part = [&](std::string source, char which) {
    dataset d;
    d.source = std::move(source);
    d.height = train.height;
    d.width = train.width;
    d.channels = train.channels;
    d.classes = train.classes;
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < n; ++i) {
      if (held[static_cast<size_t>(i)] != which)
        continue;
      rows.push_back(i);
      if (train.has_targets()) {
        auto width = static_cast<ptrdiff_t>(train.classes);
        auto t = train.targets.begin() + i * width;
        d.targets.insert(d.targets.end(), t, t + width);
      } else {
        d.labels.push_back(train.labels[static_cast<size_t>(i)]);
      }
    }
    d.count = static_cast<int64_t>(rows.size());
    d.features = train.features.subset(std::move(rows));
    return d;
  };
  auto kept = part(train.source, 0);
  auto out = part(train.source + " (validation split)", 1);
  train = std::move(kept);
  return out;
}

} // namespace troupe
