// NumPy .npz archives (np.savez, np.savez_compressed): a zip file whose
// members are .npy files named after the arrays ("x_train.npy"). Only what
// a zip reader needs for those is read: the end-of-central-directory record
// (and its Zip64 form, which numpy's zipfile writes for large archives),
// the central directory, and one member's local header and data, stored or
// deflated, checked against its CRC-32. Sizes come from the central
// directory and are checked against the file before anything is allocated;
// inflated data grows with what zlib actually produces. The archive is
// mapped: a stored member (np.savez) is read where it lies; a deflated one
// (np.savez_compressed) is inflated once into the cache folder and mapped
// from there (runtime/data/inflated_cache.hpp), or into memory.
#include "runtime/data/dataset.hpp"

#include <algorithm>
#include <string_view>
#include <zlib.h>

#include "runtime/base/errc.hpp"
#include "runtime/data/inflated_cache.hpp"
#include "runtime/data/mapped_file.hpp"
#include "runtime/data/npy_array.hpp"

namespace troupe {

namespace {

constexpr uint32_t eocd_signature = 0x06054b50;
constexpr uint32_t zip64_locator_signature = 0x07064b50;
constexpr uint32_t zip64_eocd_signature = 0x06064b50;
constexpr uint32_t central_signature = 0x02014b50;
constexpr uint32_t local_signature = 0x04034b50;
/// The largest central directory read: far more members than an .npz of a
/// dataset has.
constexpr uint64_t max_directory = 1 << 24;

uint64_t le(std::string_view b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
  return v;
}

/// One member, as the central directory describes it.
struct member {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t packed = 0, size = 0, offset = 0;
};

class zip_reader {
public:
  /// Deflated members are inflated into `cache_dir`, or into memory when
  /// it is "".
  zip_reader(std::string path, std::string cache_dir)
    : path_(std::move(path)), cache_dir_(std::move(cache_dir)) {}

  caf::error open() {
    auto file = map_file(path_, UINT64_MAX);
    if (!file)
      return file.error();
    file_ = std::move(*file);
    size_ = file_->size();
    return read_directory();
  }

  /// The bytes of member `name`.
  caf::expected<npy_bytes> extract(const std::string& name) {
    auto it = std::find_if(members_.begin(), members_.end(),
                           [&](const member& m) { return m.name == name; });
    if (it == members_.end()) {
      std::string names;
      for (auto& m : members_)
        names += (names.empty() ? "" : ", ") + m.name;
      return bad("no member " + name + " (it holds " + names + ")");
    }
    return extract(*it);
  }

private:
  caf::error bad(const std::string& what) const {
    return make_error(errc::bad_format, path_ + ": " + what);
  }

  /// `n` bytes at `at`, checked against the file's size first.
  caf::expected<std::string_view> bytes_at(uint64_t at, uint64_t n,
                                           const char* what) {
    if (at > size_ || n > size_ - at)
      return bad(std::string{"truncated: "} + what + " lies past the end");
    return file_->bytes().substr(static_cast<size_t>(at),
                                 static_cast<size_t>(n));
  }

  caf::error read_directory() {
    // The end record is 22 bytes plus a comment of at most 65535.
    uint64_t tail_size = std::min<uint64_t>(size_, 22 + 65535);
    auto tail = bytes_at(size_ - tail_size, tail_size, "the end record");
    if (!tail)
      return tail.error();
    size_t end = std::string::npos;
    for (size_t i = tail->size() >= 22 ? tail->size() - 22 + 1 : 0; i-- > 0;)
      if (le(*tail, i, 4) == eocd_signature) {
        end = i;
        break;
      }
    if (end == std::string::npos)
      return bad("not a NumPy .npz (zip) file: no end of central directory");
    uint64_t entries = le(*tail, end + 10, 2);
    uint64_t dir_size = le(*tail, end + 12, 4);
    uint64_t dir_offset = le(*tail, end + 16, 4);
    uint64_t end_at = size_ - tail_size + end;
    if (end_at >= 20) {
      auto loc = bytes_at(end_at - 20, 20, "the Zip64 locator");
      if (loc && le(*loc, 0, 4) == zip64_locator_signature) {
        auto rec = bytes_at(le(*loc, 8, 8), 56, "the Zip64 end record");
        if (!rec)
          return rec.error();
        if (le(*rec, 0, 4) != zip64_eocd_signature)
          return bad("a Zip64 locator that points at no Zip64 end record");
        entries = le(*rec, 32, 8);
        dir_size = le(*rec, 40, 8);
        dir_offset = le(*rec, 48, 8);
      }
    }
    if (dir_size > max_directory)
      return bad("a central directory of " + std::to_string(dir_size)
                 + " bytes (at most " + std::to_string(max_directory) + ")");
    auto dir = bytes_at(dir_offset, dir_size, "the central directory");
    if (!dir)
      return dir.error();
    size_t at = 0;
    for (uint64_t i = 0; i < entries; ++i) {
      if (dir->size() - at < 46 || le(*dir, at, 4) != central_signature)
        return bad("central directory entry " + std::to_string(i)
                   + " is cut or has a bad signature");
      member m;
      m.flags = static_cast<uint16_t>(le(*dir, at + 8, 2));
      m.method = static_cast<uint16_t>(le(*dir, at + 10, 2));
      m.crc = static_cast<uint32_t>(le(*dir, at + 16, 4));
      m.packed = le(*dir, at + 20, 4);
      m.size = le(*dir, at + 24, 4);
      auto name_len = le(*dir, at + 28, 2);
      auto extra_len = le(*dir, at + 30, 2);
      auto comment_len = le(*dir, at + 32, 2);
      m.offset = le(*dir, at + 42, 4);
      if (dir->size() - at - 46 < name_len + extra_len + comment_len)
        return bad("central directory entry " + std::to_string(i) + " is cut");
      m.name = std::string{dir->substr(at + 46, name_len)};
      if (auto err = apply_zip64(*dir, at + 46 + name_len, extra_len, m))
        return err;
      members_.push_back(std::move(m));
      at += 46 + name_len + extra_len + comment_len;
    }
    return caf::none;
  }

  /// Sizes and offset of 0xFFFFFFFF are in the Zip64 extra field (id 1),
  /// in this order, each present only where its field says so.
  caf::error apply_zip64(std::string_view dir, size_t at, uint64_t len,
                         member& m) {
    constexpr uint64_t escape = 0xFFFFFFFF;
    if (m.size != escape && m.packed != escape && m.offset != escape)
      return caf::none;
    for (size_t i = at; i + 4 <= at + len;) {
      auto id = le(dir, i, 2);
      auto n = le(dir, i + 2, 2);
      if (i + 4 + n > at + len)
        break;
      if (id == 1) {
        size_t p = i + 4, stop = i + 4 + n;
        for (auto* field : {&m.size, &m.packed, &m.offset}) {
          if (*field != escape)
            continue;
          if (p + 8 > stop)
            return bad(m.name + ": a Zip64 field is cut");
          *field = le(dir, p, 8);
          p += 8;
        }
        return caf::none;
      }
      i += 4 + n;
    }
    return bad(m.name + ": sizes of 0xFFFFFFFF without a Zip64 field");
  }

  caf::expected<npy_bytes> extract(const member& m) {
    auto where = m.name + ": ";
    if (m.flags & 1)
      return bad(where + "encrypted members are not read");
    if (m.method != 0 && m.method != 8)
      return bad(where + "compression method " + std::to_string(m.method)
                 + " (stored and deflate are read)");
    if (m.size > max_npy_bytes)
      return bad(where + "a member of " + std::to_string(m.size)
                 + " bytes (at most " + std::to_string(max_npy_bytes) + ")");
    auto local = bytes_at(m.offset, 30, "a member's local header");
    if (!local)
      return local.error();
    if (le(*local, 0, 4) != local_signature)
      return bad(where + "bad local header signature");
    uint64_t data_at = m.offset + 30 + le(*local, 26, 2) + le(*local, 28, 2);
    auto packed = bytes_at(data_at, m.packed, "a member's data");
    if (!packed)
      return packed.error();
    npy_bytes out;
    if (m.method == 0) {
      if (m.packed != m.size)
        return bad(where + "a stored member whose sizes differ");
      out.bytes = *packed;
      out.owner = file_;
      out.mapped = file_.get();
    } else if (!cache_dir_.empty()) {
      // Checked as it is written: a copy in the cache matched its CRC-32.
      auto copy = cached_inflation(
        cache_dir_, path_, m.name, m.size, [&](inflated_sink& sink) {
          auto crc = crc32(0L, Z_NULL, 0);
          auto err = inflate_member(*packed, m, [&](const char* p, size_t n) {
            crc = crc32(crc, reinterpret_cast<const Bytef*>(p),
                        static_cast<uInt>(n));
            return sink.append(p, n);
          });
          if (!err && crc != m.crc)
            err = bad(where + "CRC-32 mismatch (the archive is corrupt)");
          return err;
        });
      if (!copy)
        return copy.error();
      out.bytes = (*copy)->bytes();
      out.mapped = copy->get();
      out.owner = std::move(*copy);
      return out;
    } else {
      auto inflated = std::make_shared<std::string>();
      auto err = inflate_member(*packed, m, [&](const char* p, size_t n) {
        inflated->append(p, n);
        return caf::error{};
      });
      if (err)
        return err;
      out.bytes = *inflated;
      out.owner = std::move(inflated);
    }
    // Checked in slices, which a mapped member lets go of behind the
    // check: it is read again where a batch needs it.
    auto crc = crc32(0L, Z_NULL, 0);
    constexpr size_t slice = size_t{1} << 24;
    for (size_t i = 0; i < out.bytes.size(); i += slice) {
      auto n = std::min(out.bytes.size() - i, slice);
      auto* p = reinterpret_cast<const Bytef*>(out.bytes.data() + i);
      crc = crc32(crc, p, static_cast<uInt>(n));
      if (out.mapped)
        out.mapped->done_with(p, n);
    }
    if (crc != m.crc)
      return bad(where + "CRC-32 mismatch (the archive is corrupt)");
    return out;
  }

  /// Raw deflate, handed to `take` a chunk at a time: what zlib produces,
  /// which may not pass the size the directory gives.
  template <class Take>
  caf::error inflate_member(std::string_view packed, const member& m,
                            Take&& take) {
    uint64_t size = 0;
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
      return make_error(errc::io_error, path_ + ": zlib failed to start");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
    size_t in_left = packed.size();
    int rc = Z_OK;
    char chunk[1 << 16];
    while (rc != Z_STREAM_END) {
      if (z.avail_in == 0 && in_left > 0) {
        z.avail_in = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
        in_left -= z.avail_in;
      }
      z.next_out = reinterpret_cast<Bytef*>(chunk);
      z.avail_out = sizeof chunk;
      rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END) {
        inflateEnd(&z);
        return bad(m.name + ": corrupt deflate data");
      }
      auto got = sizeof chunk - z.avail_out;
      if (size + got > m.size) {
        inflateEnd(&z);
        return bad(m.name + ": inflates past its size of "
                   + std::to_string(m.size) + " bytes");
      }
      if (auto err = take(chunk, got)) {
        inflateEnd(&z);
        return err;
      }
      size += got;
      if (rc == Z_OK && got == 0 && z.avail_in == 0 && in_left == 0) {
        inflateEnd(&z);
        return bad(m.name + ": the deflate data ends early");
      }
    }
    inflateEnd(&z);
    if (size != m.size)
      return bad(m.name + ": inflates to " + std::to_string(size)
                 + " bytes, the directory says " + std::to_string(m.size));
    return caf::none;
  }

  std::string path_;
  std::string cache_dir_;
  std::shared_ptr<const mapped_file> file_;
  uint64_t size_ = 0;
  std::vector<member> members_;
};

} // namespace

caf::expected<dataset> load_npz(const std::string& path,
                                const std::string& features,
                                const std::string& labels, target_kind targets,
                                bool read_features,
                                const std::string& cache_dir) {
  zip_reader zip{path, cache_dir};
  if (auto err = zip.open())
    return err;
  auto x = zip.extract(features + ".npy");
  if (!x)
    return x.error();
  auto y = zip.extract(labels + ".npy");
  if (!y)
    return y.error();
  return dataset_from_npy(*x, path + ":" + features, *y, path + ":" + labels,
                          targets, read_features);
}

} // namespace troupe
