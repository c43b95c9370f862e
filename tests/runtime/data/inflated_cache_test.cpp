// Compressed dataset files inflated once into a cache folder and mapped
// (runtime/data/inflated_cache.hpp): the copy is made once and reused, a
// source that changes gets a new copy, a failed inflation leaves nothing
// behind, and the readers give from a copy what they give from memory.
#include "runtime/data/inflated_cache.hpp"

#include <boost/test/unit_test.hpp>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/base/errc.hpp"
#include "runtime/data/dataset.hpp"
#include "idx_files.hpp"
#include "test_util.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

/// An inflation that writes `text` and counts its calls.
inflate_fn writes(const std::string& text, int& calls) {
  return [&calls, text](inflated_sink& sink) {
    ++calls;
    return sink.append(text.data(), text.size());
  };
}

} // namespace

BOOST_AUTO_TEST_SUITE(inflated_cache)

BOOST_AUTO_TEST_CASE(a_copy_is_made_once_and_remade_when_its_source_changes) {
  temp_dir tmp;
  auto source = tmp.file("train-images-idx3-ubyte.gz");
  auto cache = tmp.file("cache/troupe"); // made on first use
  test::write_file(source, "version one");
  int calls = 0;
  auto first = cached_inflation(cache, source, "", 100, writes("AAAA", calls));
  BOOST_REQUIRE_MESSAGE(first, test::why(first));
  BOOST_TEST((*first)->bytes() == "AAAA");
  auto again = cached_inflation(cache, source, "", 100, writes("BBBB", calls));
  BOOST_REQUIRE_MESSAGE(again, test::why(again));
  BOOST_TEST((*again)->bytes() == "AAAA"); // the copy, not a new inflation
  BOOST_TEST(calls == 1);
  auto names = test::files_in(cache);
  BOOST_REQUIRE(names.size() == 1u);
  BOOST_TEST(names[0].rfind("train-images-idx3-ubyte.", 0) == 0u, names[0]);
  BOOST_TEST(names[0].find(".gz") == std::string::npos, names[0]);
  struct stat st {};
  BOOST_TEST(::stat(cache.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
  // Another member of the same file is another copy.
  auto member = cached_inflation(cache, source, "x_train.npy", 100,
                                 writes("CC", calls));
  BOOST_REQUIRE_MESSAGE(member, test::why(member));
  BOOST_TEST((*member)->bytes() == "CC");
  BOOST_TEST(test::files_in(cache).size() == 2u);
  // The source changes: a new copy replaces the old one, which a mapping
  // still open keeps reading.
  test::write_file(source, "version two, longer");
  auto changed = cached_inflation(cache, source, "", 100,
                                  writes("DDDDDD", calls));
  BOOST_REQUIRE_MESSAGE(changed, test::why(changed));
  BOOST_TEST((*changed)->bytes() == "DDDDDD");
  BOOST_TEST(test::files_in(cache).size() == 2u);
  BOOST_TEST((*first)->bytes() == "AAAA");
}

BOOST_AUTO_TEST_CASE(a_failed_inflation_leaves_no_copy_and_says_why) {
  temp_dir tmp;
  auto source = tmp.file("data.gz");
  auto cache = tmp.file("cache");
  test::write_file(source, "x");
  auto failed = cached_inflation(cache, source, "", 100, [](inflated_sink& s) {
    if (auto err = s.append("half", 4))
      return err;
    return make_error(errc::bad_format, "data.gz: corrupt compressed data");
  });
  BOOST_REQUIRE(!failed);
  BOOST_TEST(describe(failed.error()).find("data.gz: corrupt compressed data")
               != std::string::npos,
             describe(failed.error()));
  BOOST_TEST(test::files_in(cache).empty());
  // More than the copy may hold.
  int calls = 0;
  auto big = cached_inflation(cache, source, "", 3, writes("four", calls));
  BOOST_REQUIRE(!big);
  auto too_big = source + ": inflates to more than 3 bytes";
  BOOST_TEST(describe(big.error()).find(too_big) != std::string::npos,
             describe(big.error()));
  BOOST_TEST(test::files_in(cache).empty());
  // A cache folder that cannot be made names itself and the setting.
  test::write_file(tmp.file("a-file"), "");
  auto nowhere = cached_inflation(tmp.file("a-file/cache"), source, "", 100,
                                  writes("AAAA", calls));
  BOOST_REQUIRE(!nowhere);
  BOOST_TEST(describe(nowhere.error())
                 .find("data.cache_dir: " + tmp.file("a-file/cache"))
               != std::string::npos,
             describe(nowhere.error()));
  // A source that is not there.
  auto missing = cached_inflation(cache, tmp.file("none.gz"), "", 100,
                                  writes("AAAA", calls));
  BOOST_REQUIRE(!missing);
  BOOST_TEST(describe(missing.error()).find(tmp.file("none.gz"))
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(readers_give_from_a_copy_what_they_give_from_memory) {
  temp_dir tmp;
  test::write_gz(tmp.file("img.gz"), test::idx_images(5));
  test::write_gz(tmp.file("lbl.gz"), test::idx_labels(5));
  auto cache = tmp.file("cache");
  auto memory = load_idx(tmp.file("img.gz"), tmp.file("lbl.gz"));
  auto mapped = load_idx(tmp.file("img.gz"), tmp.file("lbl.gz"), 10, true,
                         cache);
  BOOST_REQUIRE_MESSAGE(memory, test::why(memory));
  BOOST_REQUIRE_MESSAGE(mapped, test::why(mapped));
  BOOST_TEST(mapped->features.to_floats() == memory->features.to_floats());
  BOOST_TEST(mapped->labels == memory->labels);
  BOOST_TEST((mapped->features.stored() == feature_store::type::u8));
  // The images; the labels are small and read into memory.
  BOOST_TEST(test::files_in(cache).size() == 1u);
  // Without its features, nothing is inflated.
  temp_dir other;
  auto shape = load_idx(tmp.file("img.gz"), tmp.file("lbl.gz"), 10, false,
                        other.file("cache"));
  BOOST_REQUIRE_MESSAGE(shape, test::why(shape));
  BOOST_TEST(test::files_in(other.file("cache")).empty());
  // A stream cut before its trailer: the error of the read into memory,
  // and no copy kept.
  std::string gz;
  {
    std::ifstream in{tmp.file("img.gz"), std::ios::binary};
    gz.assign(std::istreambuf_iterator<char>{in}, {});
  }
  test::write_file(tmp.file("cut.gz"), gz.substr(0, gz.size() - 4));
  auto cut_memory = load_idx(tmp.file("cut.gz"), tmp.file("lbl.gz"));
  auto cut_mapped = load_idx(tmp.file("cut.gz"), tmp.file("lbl.gz"), 10, true,
                             cache);
  BOOST_REQUIRE(!cut_memory);
  BOOST_REQUIRE(!cut_mapped);
  BOOST_TEST(describe(cut_mapped.error()) == describe(cut_memory.error()));
  BOOST_TEST(test::files_in(cache).size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
