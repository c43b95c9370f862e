#include "runtime/dataset.hpp"

#include "runtime/errc.hpp"

namespace troupe {

caf::expected<train_test> load_datasets(const data_config& cfg) {
  train_test out;
  switch (cfg.format) {
    case data_config::kind::idx: {
      auto train = load_idx(cfg.train_images, cfg.train_labels);
      if (!train)
        return train.error();
      auto test = load_idx(cfg.test_images, cfg.test_labels);
      if (!test)
        return test.error();
      out.train = std::move(*train);
      out.test = std::move(*test);
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
      || a.classes != b.classes)
    return make_error(errc::bad_format,
                      b.source + ": test samples are "
                        + std::to_string(b.height) + "x"
                        + std::to_string(b.width) + "x"
                        + std::to_string(b.channels) + " in "
                        + std::to_string(b.classes) + " classes, but "
                        + a.source + " has training samples of "
                        + std::to_string(a.height) + "x"
                        + std::to_string(a.width) + "x"
                        + std::to_string(a.channels) + " in "
                        + std::to_string(a.classes));
  return out;
}

} // namespace troupe
