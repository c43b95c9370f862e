#!/usr/bin/env bash
# Builds ps-lite (github.com/dmlc/ps-lite) beside troupe, as the reference
# for scripts/bench-pslite.sh: its library (libps.a, ZMQ van only) from a
# ps-lite source checkout, with g++ -O2 against Debian's libzmq3-dev and
# protobuf (ps-lite's own Makefile would download and build zmq and
# protobuf; this does not use it), plus bench/pslite_roundtrip.cc and
# bench/pslite_rows.cc linked against it. Nothing is written into the ps-lite checkout or into this
# repository: meta.proto is compiled into OUT_DIR/gen.
# Idempotent: with everything built it costs a make run that finds nothing
# to do.
# Usage: scripts/build-pslite.sh PSLITE_SRC [OUT_DIR, default ../ps-lite-build
#        next to the repository root]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 PSLITE_SRC [OUT_DIR]" >&2
  exit 2
fi
src="$1"
out="${2:-$(dirname "$TROUPE_ROOT")/ps-lite-build}"
if [ ! -d "$src" ]; then
  echo "build-pslite: error: no such directory: $src" >&2
  exit 1
fi
src="$(cd "$src" && pwd)"
for f in include/ps/ps.h include/ps/kv_app.h src/van.cc src/postoffice.cc \
         src/customer.cc src/zmq_van.h src/meta.proto; do
  if [ ! -f "$src/$f" ]; then
    echo "build-pslite: error: $src is not a ps-lite source tree" \
         "(no $f); get one with e.g." \
         "git clone https://github.com/dmlc/ps-lite" >&2
    exit 1
  fi
done
case "$out/" in
  "$TROUPE_ROOT"/*)
    echo "build-pslite: warning: OUT_DIR $out is inside the repository" >&2 ;;
esac

# The packages (setup.sh's installer, with this list instead of troupe's).
troupe_install_missing g++ make libzmq3-dev libprotobuf-dev protobuf-compiler

mkdir -p "$out"
out="$(cd "$out" && pwd)"
# Which ps-lite this is, for the record (absent when not a git checkout).
git -C "$src" rev-parse HEAD >"$out/pslite-commit.tmp" 2>/dev/null \
  || echo unknown >"$out/pslite-commit.tmp"
if cmp -s "$out/pslite-commit.tmp" "$out/pslite-commit"; then
  rm -f "$out/pslite-commit.tmp"
else
  mv "$out/pslite-commit.tmp" "$out/pslite-commit"
fi

# make does the incremental part; -MMD tracks the headers of both trees.
make --no-print-directory -j2 -C "$out" -f - \
  PS="$src" BENCH="$TROUPE_ROOT/bench/pslite_roundtrip.cc" \
  ROWS="$TROUPE_ROOT/bench/pslite_rows.cc" TROUPE="$TROUPE_ROOT" \
  SCRIPT="$TROUPE_ROOT/scripts/build-pslite.sh" <<'MAKE'
CXX      := g++
CXXFLAGS := -std=c++14 -O2 -fPIC -pthread -Wall -Wno-unused-variable \
            -Wno-sign-compare -Wno-class-memaccess \
            -Wno-deprecated-declarations -MMD -MP
CPPFLAGS := -I$(PS)/include -I$(PS)/src -Igen
LDLIBS   := -lzmq -lprotobuf-lite -pthread

all: libps.a pslite_roundtrip pslite_rows

gen/meta.pb.cc gen/meta.pb.h: $(PS)/src/meta.proto
	@mkdir -p gen
	protoc --cpp_out=gen --proto_path=$(PS)/src $<

# Objects depend on this script too: it holds the flags.
obj/%.o: $(PS)/src/%.cc gen/meta.pb.h $(SCRIPT)
	@mkdir -p obj
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

obj/meta.pb.o: gen/meta.pb.cc $(SCRIPT)
	@mkdir -p obj
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

libps.a: obj/customer.o obj/postoffice.o obj/van.o obj/meta.pb.o
	rm -f $@ && ar rcs $@ $^

obj/pslite_roundtrip.o: $(BENCH) $(SCRIPT)
	@mkdir -p obj
	$(CXX) $(CPPFLAGS) -I$(TROUPE) $(CXXFLAGS) -c $< -o $@

pslite_roundtrip: obj/pslite_roundtrip.o libps.a
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

obj/pslite_rows.o: $(ROWS) $(SCRIPT)
	@mkdir -p obj
	$(CXX) $(CPPFLAGS) -I$(TROUPE) $(CXXFLAGS) -c $< -o $@

pslite_rows: obj/pslite_rows.o libps.a
	$(CXX) $(CXXFLAGS) $^ $(LDLIBS) -o $@

-include obj/*.d
MAKE
echo "build-pslite: $out/pslite_roundtrip, $out/pslite_rows (ps-lite $(cat "$out/pslite-commit"))"
