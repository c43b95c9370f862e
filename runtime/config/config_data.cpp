// The "data" section of a run config: the dataset's format and files
// (one file, a glob or a list of parts, each resolved from the config's
// folder and required to exist), and how it is read.
#include <string>
#include <vector>

#include <glob.h>
#include <sys/stat.h>

#include "runtime/base/errc.hpp"
#include "runtime/config/config_reader.hpp"
#include "runtime/data/inflated_cache.hpp"

namespace troupe::config_detail {

namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || (!name.empty() && name.front() == '/'))
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

/// A dataset file's resolved `path`, checked and required to exist;
/// `where` is its key's pointer, for errors.
std::string existing_file(std::string path, const std::string& where) {
  check_path(path, where);
  if (!file_exists(path))
    throw config_error{errc::file_not_found, where,
                       "dataset file not found: " + path};
  return path;
}

/// A dataset file: resolved against dir and required to exist.
std::string data_file(object_reader& r, const std::string& key,
                      const std::string& dir, const std::string& fallback,
                      bool required = false) {
  if (required)
    r.require(key);
  return existing_file(r.from_base(join(dir, r.string(key, fallback))),
                       r.at(key));
}

/// A dataset given as one file, a glob ("parts/x-*.npy", matched in name
/// order) or a list of files or globs: each resolved against dir and
/// required to exist; a glob that matches no file is an error.
std::vector<std::string> data_files(object_reader& r, const std::string& key,
                                    const std::string& dir) {
  r.require(key);
  auto* v = r.find(key);
  std::vector<std::string> names = v->is_array()
                                     ? r.string_list(key)
                                     : std::vector{r.string(key, "")};
  if (names.empty())
    throw config_error{errc::invalid_config, r.at(key),
                       "expected a file, a glob or a list of them"};
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    auto where = v->is_array() ? r.at(key) + "/" + std::to_string(i)
                               : r.at(key);
    auto path = r.from_base(join(dir, names[i]));
    if (path.find_first_of("*?[") == std::string::npos) {
      out.push_back(existing_file(std::move(path), where));
      continue;
    }
    check_path(path, where);
    glob_t found{};
    int rc = ::glob(path.c_str(), GLOB_ERR, nullptr, &found);
    std::vector<std::string> matched;
    for (size_t k = 0; rc == 0 && k < found.gl_pathc; ++k)
      if (file_exists(found.gl_pathv[k]))
        matched.push_back(found.gl_pathv[k]);
    ::globfree(&found);
    if (matched.empty())
      throw config_error{errc::file_not_found, where,
                         "no dataset file matches " + path};
    // glob(3) sorts by the locale's collation; parts are numbered, and
    // every node must see them in one order.
    std::sort(matched.begin(), matched.end());
    out.insert(out.end(), matched.begin(), matched.end());
  }
  return out;
}

/// Feature files and their label files, paired in order.
void paired_files(object_reader& r, const std::string& features,
                  const std::string& labels, const std::string& dir,
                  std::vector<std::string>& feature_files,
                  std::vector<std::string>& label_files) {
  feature_files = data_files(r, features, dir);
  label_files = data_files(r, labels, dir);
  if (feature_files.size() != label_files.size())
    throw config_error{errc::invalid_config, r.at(labels),
                       std::to_string(label_files.size()) + " label files for "
                         + std::to_string(feature_files.size())
                         + " feature files in " + r.at(features)
                         + " (one of each per part, in the same order)"};
}

} // namespace

data_config read_data(object_reader r) {
  using dk = data_config::kind;
  data_config d;
  d.format = r.choice<dk>("format", dk::idx,
                          {{"idx", dk::idx},
                           {"cifar10", dk::cifar10},
                           {"synthetic", dk::synthetic},
                           {"npy", dk::npy},
                           {"npz", dk::npz},
                           {"csv", dk::csv},
                           {"click", dk::click},
                           {"external", dk::external}},
                          true);
  if (d.format == dk::idx || d.format == dk::npy || d.format == dk::npz
      || d.format == dk::csv)
    d.file_classes = static_cast<int>(r.integer("classes", 0, 2, max_classes));
  switch (d.format) {
    case dk::npy: {
      auto dir = r.string("dir", "");
      paired_files(r, "train", "train_labels", dir, d.train_files,
                   d.train_label_files);
      paired_files(r, "test", "test_labels", dir, d.test_files,
                   d.test_label_files);
      break;
    }
    case dk::npz: {
      d.archive = data_file(r, "file", r.string("dir", ""), "", true);
      const char* keys[] = {"train", "train_labels", "test", "test_labels"};
      for (size_t i = 0; i < 4; ++i) {
        d.arrays[i] = r.string(keys[i], d.arrays[i]);
        if (d.arrays[i].empty() || has_control(d.arrays[i]))
          throw config_error{errc::invalid_config, r.at(keys[i]),
                             "expected the name of an array in the archive"};
      }
      break;
    }
    case dk::csv: {
      auto dir = r.string("dir", "");
      d.train_files = data_files(r, "train", dir);
      d.test_files = data_files(r, "test", dir);
      // A name, or (for float targets) a list of names.
      auto* names = r.find("label_column");
      if (names != nullptr && names->is_array()) {
        d.label_columns = r.string_list("label_column");
        if (d.label_columns.empty())
          throw config_error{errc::invalid_config, r.at("label_column"),
                             "expected a column name or a list of them"};
      } else {
        d.label_columns = {r.string("label_column", "label")};
      }
      for (size_t i = 0; i < d.label_columns.size(); ++i)
        if (d.label_columns[i].empty() || has_control(d.label_columns[i]))
          throw config_error{errc::invalid_config,
                             r.at("label_column")
                               + (names != nullptr && names->is_array()
                                    ? "/" + std::to_string(i)
                                    : std::string{}),
                             "expected a column name"};
      break;
    }
    case dk::click: {
      auto dir = r.string("dir", "");
      d.train_files = data_files(r, "train", dir);
      d.test_files = data_files(r, "test", dir);
      // Streamed unless asked otherwise where memory could not hold the
      // set as text: gzipped or in many parts.
      bool large = d.train_files.size() > 1;
      for (auto& f : d.train_files)
        large = large
                || (f.size() > 3 && f.compare(f.size() - 3, 3, ".gz") == 0);
      if (auto* f = r.find("follow")) {
        auto fr = r.inner(*f, "follow");
        d.follow = true;
        auto* train = r.find("train");
        if (!train->is_string())
          throw config_error{errc::invalid_config, r.at("train"),
                             "with data.follow, one glob of the folder that "
                             "grows (e.g. \"logs/part-*.tsv.gz\")"};
        d.follow_glob = r.from_base(join(dir, train->get<std::string>()));
        d.follow_poll_s = fr.number("poll_seconds", 10, 0.05, 86400);
        d.follow_idle_stop_s = fr.number("stop_after_idle_seconds", 0, 0, 1e9);
        fr.finish();
        large = true; // parts come while it is read
        if (auto* read = r.find("read"); read != nullptr && *read == "memory")
          throw config_error{errc::invalid_config, r.at("read"),
                             "a followed folder is read as a stream (its "
                             "parts come while it is read)"};
      }
      d.stream_train = r.choice<bool>("read", large,
                                      {{"memory", false}, {"stream", true}});
      d.click_numeric = static_cast<int>(r.integer("numeric", 0, 0, 1024));
      r.require("categorical"); // no default: it is the file's shape
      d.click_categorical = static_cast<int>(
        r.integer("categorical", 0, 1, 1024));
      d.click_vocabulary = static_cast<uint64_t>(
        r.integer("vocabulary", int64_t{1} << 24, 1, int64_t{1} << 40));
      break;
    }
    case dk::idx: {
      auto dir = r.string("dir", "");
      d.train_images = data_file(r, "train_images", dir,
                                 "train-images-idx3-ubyte.gz");
      d.train_labels = data_file(r, "train_labels", dir,
                                 "train-labels-idx1-ubyte.gz");
      d.test_images = data_file(r, "test_images", dir,
                                "t10k-images-idx3-ubyte.gz");
      d.test_labels = data_file(r, "test_labels", dir,
                                "t10k-labels-idx1-ubyte.gz");
      break;
    }
    case dk::cifar10: {
      auto dir = r.string("dir", "");
      auto resolve = [&](const std::string& key,
                         std::vector<std::string> fallback) {
        auto names = r.string_list(key);
        if (names.empty())
          names = std::move(fallback);
        for (size_t i = 0; i < names.size(); ++i)
          names[i] = existing_file(r.from_base(join(dir, names[i])),
                                   r.at(key) + "/" + std::to_string(i));
        return names;
      };
      d.train_files = resolve("train_files",
                              {"data_batch_1.bin", "data_batch_2.bin",
                               "data_batch_3.bin", "data_batch_4.bin",
                               "data_batch_5.bin"});
      d.test_files = resolve("test_files", {"test_batch.bin"});
      break;
    }
    case dk::external:
      // Only indices travel: any count a 64-bit plan holds.
      r.require("train_samples");
      d.train_samples = r.integer("train_samples", 1, 1, int64_t{1} << 40);
      d.test_samples = r.integer("test_samples", 0, 0, int64_t{1} << 40);
      break;
    case dk::synthetic:
      d.train_samples = r.integer("train_samples", 1000, 1);
      d.test_samples = r.integer("test_samples", 200, 1);
      d.height = static_cast<int>(r.integer("height", 1, 1, 4096));
      d.width = static_cast<int>(r.integer("width", 16, 1, 4096));
      d.channels = static_cast<int>(r.integer("channels", 1, 1, 4096));
      d.classes = static_cast<int>(r.integer("classes", 4, 2, max_classes));
      d.noise = r.number("noise", 0.1, 0, 1e3);
      d.seed = static_cast<uint64_t>(r.integer("seed", 1, 0));
      {
        // Generated in memory: bounded before anything is allocated.
        auto per_sample = static_cast<uint64_t>(d.height) * d.width
                          * d.channels;
        if (per_sample > (uint64_t{1} << 24))
          throw config_error{errc::invalid_config, r.at("height"),
                             "samples of " + std::to_string(per_sample)
                               + " values (at most 2^24)"};
        for (auto* key : {"train_samples", "test_samples"}) {
          auto n = static_cast<uint64_t>(key[1] == 'r' ? d.train_samples
                                                       : d.test_samples);
          if (n > (uint64_t{1} << 30) / per_sample)
            throw config_error{errc::invalid_config, r.at(key),
                               std::to_string(n) + " samples of "
                                 + std::to_string(per_sample)
                                 + " values: more than 2^30 values"};
        }
      }
      break;
  }
  if (d.format == dk::idx || d.format == dk::npz) {
    // Compressed files are inflated once into a cache on local disk and
    // mapped, unless memory is asked for.
    bool cached = r.choice<bool>("read", true,
                                 {{"map", true}, {"memory", false}});
    auto dir = r.string("cache_dir", "");
    if (cached)
      d.cache_dir = dir.empty() ? default_data_cache_dir() : r.from_base(dir);
  }
  d.validation_split = r.number("validation_split", 0, 0, 0.9);
  d.validation_seed = static_cast<uint64_t>(r.integer("validation_seed", 1, 0));
  d.skip_changed_files = r.choice<bool>("on_file_change", false,
                                        {{"stop", false}, {"skip", true}});
  r.finish();
  return d;
}

} // namespace troupe::config_detail
