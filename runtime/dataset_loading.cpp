#include "runtime/dataset.hpp"

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
      // Same class centres (seed) for both sets, different samples.
      out.train = make_synthetic(cfg.train_samples, cfg.height, cfg.width,
                                 cfg.channels, cfg.classes, cfg.noise, cfg.seed,
                                 cfg.seed * 2 + 1);
      out.test = make_synthetic(cfg.test_samples, cfg.height, cfg.width,
                                cfg.channels, cfg.classes, cfg.noise, cfg.seed,
                                cfg.seed * 2 + 2);
      break;
  }
  return out;
}

} // namespace troupe
