# Sourced by scripts/run.sh, scripts/test.sh and the benchmarks: installs
# the Debian packages troupe needs (only those missing, with sudo when not
# root) and builds it. Idempotent: with everything in place it costs a
# dpkg query and an incremental build.
#
#   troupe_setup          everything: every package, every program, the
#                         Python module, the benchmarks and the test suites
#   troupe_setup run      the main job only (scripts/run.sh): the packages
#                         that build and run troupe-node and troupe-shell,
#                         and those two programs; a later troupe_setup
#                         adds the rest to the same build folder

TROUPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TROUPE_BUILD="${TROUPE_BUILD:-$TROUPE_ROOT/build}"
# The scripts' inline Python imports its shared pieces from scripts/benchlib.py.
export PYTHONPATH="$TROUPE_ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}"

# What builds troupe's programs and runs the main job.
troupe_run_packages=(
  cmake g++ make pkg-config
  libcaf-dev nlohmann-json3-dev libopenblas-dev
  libssl-dev openssl zlib1g-dev libcli11-dev libedit-dev
  # config/local.json trains on it; scripts/run.sh plots the run.
  dataset-fashion-mnist gnuplot-nox
)
# What only the tests, the benchmarks and the Python module add.
troupe_test_packages=(
  libboost-test-dev iperf3 iproute2
  # The Python module (python/) and its tests: Debian's Python has these.
  pybind11-dev python3-dev python3-numpy python3-torch
  # Man pages, the Debian package and the tests that install them (CPack
  # finds the programs' shared libraries with file and dpkg-shlibdeps).
  help2man dpkg-dev file man-db
  # The Slurm test (tests/slurm) starts its own one-host Slurm.
  slurm-wlm munge
  # The Kubernetes manifests' test (tests/kubernetes) reads them with PyYAML.
  python3-yaml
  # The Prometheus test (tests/prometheus) scrapes a run with prometheus and
  # checks the endpoint's text with promtool.
  prometheus
  # The page's test (tests/web) drives headless Chromium with Selenium.
  chromium chromium-driver python3-selenium
  # The TensorBoard test (tests/tensorboard) parses the event files' records
  # with Google's protobuf library.
  python3-protobuf
  # .ci/run checks that every C++ file follows .clang-format.
  clang-format
)
# The main job's programs.
troupe_run_targets=(troupe-node troupe-shell)

# troupe_install_missing PACKAGE...: installs those of them not installed.
troupe_install_missing() {
  local missing=()
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null \
         | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "troupe: need root or sudo to install: ${missing[*]}" >&2
      return 1
    fi
    sudo="sudo"
  fi
  local log="${TMPDIR:-/tmp}/troupe-apt.log"
  echo "troupe: installing ${missing[*]} (apt's output: $log)"
  troupe_quietly "$log" $sudo env DEBIAN_FRONTEND=noninteractive \
    apt-get update -qq || return 1
  troupe_quietly "$log" $sudo env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" || return 1
}

# Runs a command with its output appended to a log file; on failure prints
# the log's last lines, so a build or an install says nothing unless it
# fails.
troupe_quietly() {
  local log="$1"
  shift
  if ! "$@" >>"$log" 2>&1; then
    echo "troupe: failed: $*; the last lines of $log:" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
}

# troupe_build [TARGET...]: configures (the tests too, unless only
# targets are asked for) and builds the targets, or everything.
troupe_build() {
  mkdir -p "$TROUPE_BUILD" || return 1
  local log="$TROUPE_BUILD/build.log"
  : >"$log"
  local tests=ON
  [ $# -gt 0 ] && tests=OFF
  if [ ! -f "$TROUPE_BUILD/CMakeCache.txt" ]; then
    echo "troupe: configuring and building $TROUPE_BUILD (log: $log)"
    troupe_quietly "$log" cmake -S "$TROUPE_ROOT" -B "$TROUPE_BUILD" \
      -DCMAKE_BUILD_TYPE=Release -DTROUPE_BUILD_TESTS=$tests || return 1
  elif [ $tests = ON ] \
       && ! grep -q '^TROUPE_BUILD_TESTS:BOOL=ON' "$TROUPE_BUILD/CMakeCache.txt"; then
    # Configured for the main job alone: the tests and what the packages
    # installed since bring (the Python module) are added now.
    echo "troupe: adding the tests to $TROUPE_BUILD (log: $log)"
    troupe_quietly "$log" cmake -S "$TROUPE_ROOT" -B "$TROUPE_BUILD" \
      -DTROUPE_BUILD_TESTS=ON || return 1
  fi
  if [ $# -gt 0 ]; then
    troupe_quietly "$log" cmake --build "$TROUPE_BUILD" -j2 --target "$@"
  else
    troupe_quietly "$log" cmake --build "$TROUPE_BUILD" -j2
  fi
}

troupe_setup() {
  if [ "${1:-}" = run ]; then
    troupe_install_missing "${troupe_run_packages[@]}" \
      && troupe_build "${troupe_run_targets[@]}"
  else
    troupe_install_missing "${troupe_run_packages[@]}" \
                           "${troupe_test_packages[@]}" \
      && troupe_build
  fi
}
