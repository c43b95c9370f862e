// File readers for runtime/data/dataset.hpp: IDX (MNIST, Fashion-MNIST) and the
// CIFAR-10 binary format. zlib's gz* functions read gzipped and plain files
// alike, so one code path serves both.
#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime/base/errc.hpp"
#include "runtime/base/file_checks.hpp"
#include "runtime/data/gz_file.hpp"
#include "runtime/data/inflated_cache.hpp"
#include "runtime/data/mapped_file.hpp"

namespace troupe {

namespace {

constexpr uint64_t max_pixels = max_dataset_values;

/// `where`: "after the labels", "before any record".
caf::error cut_short(const std::string& path, const std::string& where) {
  return make_error(errc::bad_format,
                    path
                      + ": corrupt compressed data: the gzip stream ends "
                        "early (its trailer with the CRC-32 is missing or "
                        "cut) "
                      + where);
}

/// After the last byte a format has, the file must end: reading on makes
/// zlib check the gzip trailer (CRC-32 and length), which it does only at
/// the end of the stream, and catches data that does not belong.
caf::error check_end(gz_file& f, const std::string& path, const char* what) {
  unsigned char extra;
  auto got = f.read(&extra, 1);
  if (got < 0)
    return make_error(errc::bad_format,
                      path
                        + ": corrupt compressed data (CRC or length "
                          "mismatch) after "
                        + what);
  if (got > 0)
    return make_error(errc::bad_format,
                      path + ": more data than its header announces after "
                        + what);
  if (f.ended_early())
    return cut_short(path, std::string{"after "} + what);
  return caf::none;
}

uint32_t big_endian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8)
         | uint32_t{p[3]};
}

caf::error read_exact(gz_file& f, const std::string& path, void* dst, size_t n,
                      const char* what) {
  auto got = f.read(dst, n);
  if (got < 0)
    return make_error(errc::bad_format,
                      path + ": corrupt compressed data while reading " + what);
  if (static_cast<size_t>(got) != n)
    return make_error(errc::bad_format, path + ": truncated: " + what
                                          + " needs " + std::to_string(n)
                                          + " bytes, file has "
                                          + std::to_string(got));
  return caf::none;
}

/// Checks an IDX image header (16 bytes) and fills count and shape.
caf::error read_idx_header(const unsigned char* header, dataset& out,
                           const std::string& images_path) {
  uint32_t magic = big_endian(header);
  if (magic != 0x803) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0x%x", magic);
    return make_error(errc::bad_format, images_path
                                          + ": not an IDX image file (magic "
                                          + buf + ", expected 0x803)");
  }
  out.count = big_endian(header + 4);
  out.height = static_cast<int>(big_endian(header + 8));
  out.width = static_cast<int>(big_endian(header + 12));
  if (out.height <= 0 || out.width <= 0 || out.height > 4096
      || out.width > 4096)
    return make_error(errc::bad_format, images_path
                                          + ": implausible image size "
                                          + std::to_string(out.height) + "x"
                                          + std::to_string(out.width));
  // Bounded before anything is allocated: a header is only a claim.
  if (out.count == 0)
    return make_error(errc::bad_format, images_path + ": holds no images");
  if (static_cast<uint64_t>(out.count) * out.sample_size() > max_pixels)
    return make_error(errc::bad_format,
                      images_path + ": announces " + std::to_string(out.count)
                        + " images of " + std::to_string(out.height) + "x"
                        + std::to_string(out.width) + " (more than "
                        + std::to_string(max_pixels) + " pixels)");
  return caf::none;
}

/// An uncompressed IDX image file, mapped: its pixels are read where they
/// lie, a batch at a time.
caf::error map_idx_images(std::shared_ptr<const mapped_file> file, dataset& out,
                          const std::string& images_path, bool read_features) {
  if (file->size() < 16)
    return make_error(errc::bad_format,
                      images_path
                        + ": truncated: the IDX header needs 16 "
                          "bytes, file has "
                        + std::to_string(file->size()));
  if (auto err = read_idx_header(file->data(), out, images_path))
    return err;
  const size_t want = static_cast<size_t>(out.count) * out.sample_size();
  const size_t has = file->size() - 16;
  if (has < want)
    return make_error(errc::bad_format,
                      images_path + ": truncated: the pixel data needs "
                        + std::to_string(want) + " bytes, file has "
                        + std::to_string(has));
  if (has > want)
    return make_error(errc::bad_format,
                      images_path
                        + ": more data than its header announces "
                          "after the pixel data");
  if (read_features)
    out.features = feature_store{feature_store::type::u8, file->data() + 16,
                                 out.count, out.sample_size(), file};
  return caf::none;
}

/// Reads a gzipped IDX image file's pixels (after its header) in slices,
/// handing each to `take`, then checks the gzip trailer. In slices, so a
/// header that claims more than the file holds costs what the file holds,
/// not what it claims.
template <class Take>
caf::error inflate_idx_pixels(gz_file& f, const std::string& images_path,
                              size_t want, Take&& take) {
  std::vector<uint8_t> slice(std::min<size_t>(want, 1 << 20));
  for (size_t done = 0; done < want;) {
    auto n = std::min(want - done, slice.size());
    auto got = f.read(slice.data(), n);
    if (got < 0)
      return make_error(errc::bad_format, images_path
                                            + ": corrupt compressed data "
                                              "while reading the pixel data");
    if (static_cast<size_t>(got) != n)
      return make_error(errc::bad_format,
                        images_path + ": truncated: the pixel data needs "
                          + std::to_string(want) + " bytes, file has "
                          + std::to_string(done + static_cast<size_t>(got)));
    if (auto err = take(slice.data(), n))
      return err;
    done += n;
  }
  return check_end(f, images_path, "the pixel data");
}

/// Opens a gzipped IDX image file and reads its header into `out`.
caf::error open_gz_idx(gz_file& f, dataset& out, const std::string& images_path,
                       unsigned char (&header)[16]) {
  if (!f.is_open())
    return open_error(images_path);
  if (auto err = read_exact(f, images_path, header, 16, "the IDX header"))
    return err;
  return read_idx_header(header, out, images_path);
}

/// A gzipped IDX image file inflated into memory, as bytes (a quarter of
/// what they take as floats); without read_features, its header alone.
caf::error inflate_idx_images(dataset& out, const std::string& images_path,
                              bool read_features) {
  gz_file f{images_path};
  unsigned char header[16];
  if (auto err = open_gz_idx(f, out, images_path, header))
    return err;
  if (!read_features)
    return caf::none;
  std::vector<uint8_t> pixels;
  const size_t want = static_cast<size_t>(out.count) * out.sample_size();
  auto err = inflate_idx_pixels(f, images_path, want,
                                [&](const uint8_t* p, size_t n) {
                                  pixels.insert(pixels.end(), p, p + n);
                                  return caf::error{};
                                });
  if (err)
    return err;
  out.features = feature_store::of_bytes(std::move(pixels), out.sample_size());
  return caf::none;
}

/// A gzipped IDX image file inflated once into `cache_dir` (the whole
/// file, checked to its gzip trailer before the copy is kept) and mapped
/// from there, as an uncompressed one is.
caf::error map_inflated_idx_images(dataset& out, const std::string& images_path,
                                   const std::string& cache_dir) {
  auto copy = cached_inflation(
    cache_dir, images_path, "", max_pixels + 16, [&](inflated_sink& sink) {
      gz_file f{images_path};
      unsigned char header[16];
      dataset shape = out; // its channels
      if (auto err = open_gz_idx(f, shape, images_path, header))
        return err;
      if (auto err = sink.append(header, sizeof header))
        return err;
      const size_t want = static_cast<size_t>(shape.count)
                          * shape.sample_size();
      return inflate_idx_pixels(f, images_path, want,
                                [&](const uint8_t* p, size_t n) {
                                  return sink.append(p, n);
                                });
    });
  if (!copy)
    return copy.error();
  return map_idx_images(*copy, out, images_path, true);
}

bool is_gzip(const mapped_file& f) {
  return f.size() >= 2 && f.data()[0] == 0x1f && f.data()[1] == 0x8b;
}

} // namespace

caf::expected<dataset> load_idx(const std::string& images_path,
                                const std::string& labels_path, int classes,
                                bool read_features,
                                const std::string& cache_dir) {
  for (auto* p : {&images_path, &labels_path})
    if (auto err = check_regular(*p))
      return err;
  dataset out;
  out.source = images_path;
  out.classes = classes;
  out.channels = 1;
  {
    auto file = map_file(images_path, max_pixels + (1 << 20));
    if (!file)
      return file.error();
    caf::error err;
    if (!is_gzip(**file)) {
      err = map_idx_images(std::move(*file), out, images_path, read_features);
    } else {
      file->reset(); // read through zlib instead
      if (read_features && !cache_dir.empty())
        err = map_inflated_idx_images(out, images_path, cache_dir);
      else
        err = inflate_idx_images(out, images_path, read_features);
    }
    if (err)
      return err;
  }
  { // labels
    gz_file f{labels_path};
    if (!f.is_open())
      return open_error(labels_path);
    unsigned char header[8];
    if (auto err = read_exact(f, labels_path, header, 8, "the IDX header"))
      return err;
    if (big_endian(header) != 0x801)
      return make_error(errc::bad_format,
                        labels_path
                          + ": not an IDX label file (expected magic "
                            "0x801)");
    int64_t n = big_endian(header + 4);
    if (n != out.count)
      return make_error(errc::bad_format,
                        labels_path + ": has " + std::to_string(n)
                          + " labels but " + images_path + " has "
                          + std::to_string(out.count) + " images");
    std::vector<unsigned char> raw(static_cast<size_t>(n));
    if (auto err = read_exact(f, labels_path, raw.data(), raw.size(),
                              "the labels"))
      return err;
    if (auto err = check_end(f, labels_path, "the labels"))
      return err;
    out.labels.resize(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] >= classes)
        return make_error(errc::bad_format,
                          labels_path + ": label " + std::to_string(raw[i])
                            + " at index " + std::to_string(i)
                            + " is not below " + std::to_string(classes));
      out.labels[i] = raw[i];
    }
  }
  return out;
}

caf::expected<dataset> load_cifar10(const std::vector<std::string>& paths) {
  constexpr int side = 32, planes = 3, plane = side * side;
  constexpr size_t record = 1 + planes * plane;
  dataset out;
  out.source = paths.empty() ? "cifar10" : paths.front();
  out.height = side;
  out.width = side;
  out.channels = planes;
  out.classes = 10;
  if (paths.empty())
    return make_error(errc::invalid_argument, "no CIFAR-10 files given");
  std::vector<unsigned char> rec(record);
  std::vector<uint8_t> pixels; // as stored: scaled when a batch reads them
  for (auto& path : paths) {
    if (auto err = check_regular(path))
      return err;
    gz_file f{path};
    if (!f.is_open())
      return open_error(path);
    for (int64_t i = 0;; ++i) {
      auto got = f.read(rec.data(), record);
      if (got == 0) {
        if (f.ended_early())
          return cut_short(path, i == 0
                                   ? std::string{"before any record"}
                                   : "after record " + std::to_string(i - 1));
        // As an IDX file without images: a dataset of nothing is a
        // mistake, not something to train on.
        if (i == 0)
          return make_error(errc::bad_format,
                            path + ": holds no CIFAR-10 records");
        break;
      }
      if (got < 0)
        return make_error(errc::bad_format,
                          path
                            + ": corrupt compressed data (CRC or length "
                              "mismatch) in record "
                            + std::to_string(i));
      if (pixels.size() + planes * plane > max_pixels)
        return make_error(errc::bad_format, path + ": more than "
                                              + std::to_string(max_pixels)
                                              + " pixels of CIFAR-10 records");
      if (got != static_cast<int64_t>(record))
        return make_error(errc::bad_format,
                          path + ": truncated CIFAR-10 record "
                            + std::to_string(i) + " (" + std::to_string(got)
                            + " of " + std::to_string(record) + " bytes)");
      if (rec[0] >= out.classes)
        return make_error(errc::bad_format,
                          path + ": label " + std::to_string(rec[0])
                            + " of record " + std::to_string(i)
                            + " is not below 10");
      out.labels.push_back(rec[0]);
      // Planes R, G, B of row-major pixels -> NHWC.
      size_t base = pixels.size();
      pixels.resize(base + planes * plane);
      for (int p = 0; p < plane; ++p)
        for (int c = 0; c < planes; ++c)
          pixels[base + static_cast<size_t>(p) * planes + c] =
            rec[1 + c * plane + p];
    }
  }
  out.count = static_cast<int64_t>(out.labels.size());
  out.features = feature_store::of_bytes(std::move(pixels), out.sample_size());
  return out;
}

} // namespace troupe
