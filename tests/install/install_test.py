"""troupe as a library and a package, the way a user gets it:

- FindPackage: `cmake --install` into a new prefix; every program there
  answers --version; the man pages read with man; the Python module
  imports from lib/python3/dist-packages there; the CMake package
  builds examples/cpp_library out of tree with find_package(troupe), and
  the program trains its own model on troupe's shards; it builds
  examples/custom_layer, whose layer type of its own passes the gradient
  check and trains in a layer list on the embedded cluster; a project that
  asks for a version troupe is not is refused by CMake.
- DebPackage: `cpack -G DEB` makes a .deb whose Depends name the shared
  libraries the programs load (and OpenBLAS, opened at run time); dpkg
  installs it (into a root folder of the test's own), its troupe-node
  answers --version, `man troupe-node` shows its page, and dpkg removes
  every file again.

Run by ctest (install.find_package, install.deb_package) with
TROUPE_BUILD_DIR, CMAKE_COMMAND and CPACK_COMMAND set."""

import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.environ["TROUPE_BUILD_DIR"]
CMAKE = os.environ.get("CMAKE_COMMAND", "cmake")
CPACK = os.environ.get("CPACK_COMMAND", "cpack")
PYTHON = os.environ.get("TROUPE_PYTHON", "/usr/bin/python3")
PROGRAMS = ["troupe-node", "troupe-train", "troupe-shell", "troupe-predict",
            "troupe-clicks"]


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(troupe VERSION ([0-9.]+)",
                         f.read()).group(1)


def run(test, args, **kw):
    out = subprocess.run(args, capture_output=True, text=True, **kw)
    test.assertEqual(out.returncode, 0, "%s:\n%s%s" % (
        " ".join(args), out.stdout[-3000:], out.stderr[-3000:]))
    return out.stdout


def need_man_pages(test):
    """help2man makes the pages at build time; CI installs it."""
    if shutil.which("help2man") and shutil.which("man"):
        return True
    if os.environ.get("CI"):
        test.fail("help2man or man is not installed (scripts/setup.sh)")
    return False


class FindPackage(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="troupe-install-")
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.prefix = os.path.join(self.tmp, "prefix")
        run(self, [CMAKE, "--install", BUILD, "--prefix", self.prefix])

    def build_example(self, example):
        """examples/EXAMPLE built out of tree against the installed troupe
        (find_package), in a folder of the test's own; returns it."""
        build = os.path.join(self.tmp, example + "-build")
        run(self, [CMAKE, "-S", os.path.join(ROOT, "examples", example),
                   "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                   "-DCMAKE_PREFIX_PATH=" + self.prefix])
        run(self, [CMAKE, "--build", build, "-j2"])
        return build

    def test_programs_headers_and_package_files_are_installed(self):
        version = project_version()
        for program in PROGRAMS:
            out = run(self, [os.path.join(self.prefix, "bin", program),
                             "--version"])
            self.assertEqual(out.splitlines()[0],
                             "%s (troupe) %s" % (program, version))
        for path in ["lib/cmake/troupe/troupeConfig.cmake",
                     "lib/cmake/troupe/troupeConfigVersion.cmake",
                     "lib/cmake/troupe/FindCAF.cmake",
                     "lib/libtroupe_chief.a", "lib/libtroupe_base.a",
                     "include/troupe/actors/chief/chief.hpp",
                     "include/troupe/models/external_step.hpp",
                     "include/troupe/runtime/base/build_config.hpp"]:
            self.assertTrue(os.path.isfile(os.path.join(self.prefix, path)),
                            path)
        # Only the public headers: a folder's own (the chief's state, the
        # config reader's helpers) and the programs' stay in the tree.
        for path in ["include/troupe/actors/chief/chief_state.hpp",
                     "include/troupe/runtime/config/config_reader.hpp",
                     "include/troupe/apps/launch/node_process.hpp",
                     "lib/libtroupe_launch.a"]:
            self.assertFalse(os.path.exists(os.path.join(self.prefix, path)),
                             path)
        # The Python module, where Debian's Python looks under /usr.
        if os.path.isdir(os.path.join(BUILD, "python", "troupe")):
            packages = os.path.join(self.prefix, "lib", "python3",
                                    "dist-packages")
            out = run(self, [PYTHON, "-c",
                             "import troupe, sys; print(troupe.__file__); "
                             "troupe.write_parameters(sys.argv[1], "
                             "{'w': __import__('numpy').zeros(3, 'float32')})",
                             os.path.join(self.tmp, "w.safetensors")],
                      env=dict(os.environ, PYTHONPATH=packages))
            self.assertTrue(out.strip().startswith(packages), out)
        # Nothing installed points back into the source or build folder.
        for path in glob.glob(os.path.join(self.prefix, "lib", "cmake",
                                           "troupe", "*")):
            with open(path) as f:
                text = f.read()
            self.assertNotIn(ROOT, text, path)
            self.assertNotIn(BUILD, text, path)
        if need_man_pages(self):
            page = os.path.join(self.prefix, "share", "man", "man1",
                                "troupe-node.1.gz")
            text = run(self, ["man", "-P", "cat", "-l", page],
                       env=dict(os.environ, MANWIDTH="80"))
            self.assertIn("troupe-node - run a node of a troupe training "
                          "cluster", text)
            self.assertIn("--config", text)
            self.assertEqual(len(glob.glob(os.path.join(
                self.prefix, "share", "man", "man1", "*.1.gz"))),
                len(PROGRAMS))

    def test_a_program_of_ones_own_builds_against_it_and_trains(self):
        build = self.build_example("cpp_library")
        work = os.path.join(self.tmp, "run")
        os.mkdir(work)
        out = subprocess.run([os.path.join(build, "planted_logistic"), work],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("samples trained per epoch: 8000 8000 8000 8000",
                      out.stdout)
        accuracy = float(re.search(r"test accuracy ([\d.]+), cos",
                                   out.stdout).group(1))
        self.assertGreater(accuracy, 0.9)
        # Its parameters file, written with write_declared_params.
        self.assertTrue(os.path.isfile(os.path.join(
            work, "planted_logistic.safetensors")))

    def test_a_layer_of_ones_own_builds_against_it_and_trains(self):
        build = self.build_example("custom_layer")
        out = subprocess.run([os.path.join(build, "residual_mlp")],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        # Its backward pass agrees with finite differences...
        checked = re.search(r"gradient check: (\d+) derivatives, 0 wrong",
                            out.stdout)
        self.assertIsNotNone(checked, out.stdout)
        self.assertGreater(int(checked.group(1)), 40)
        # ...the model has its two blocks, and the workers trained it...
        self.assertIn("model: layers 12: dense 12->32 relu, residual 32 "
                      "relu, residual 32 tanh, dense 32->4 identity",
                      out.stdout)
        self.assertIn("samples trained per epoch: 4000 4000 4000",
                      out.stdout)
        # ...and it learnt.
        accuracy = float(re.search(r"test accuracy ([\d.]+), \d+ steps",
                                   out.stdout).group(1))
        self.assertGreater(accuracy, 0.9)

    def test_a_version_it_is_not_is_refused(self):
        project = os.path.join(self.tmp, "wants-9")
        os.mkdir(project)
        with open(os.path.join(project, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.18)\n"
                    "project(wants LANGUAGES CXX)\n"
                    "find_package(troupe 9.0 REQUIRED)\n")
        out = subprocess.run(
            [CMAKE, "-S", project, "-B", os.path.join(project, "build"),
             "-DCMAKE_PREFIX_PATH=" + self.prefix],
            capture_output=True, text=True)
        self.assertNotEqual(out.returncode, 0)
        said = out.stdout + out.stderr
        self.assertIn('compatible\n  with requested version "9.0"', said)
        self.assertIn("troupeConfig.cmake, version: " + project_version(),
                      said)


class DebPackage(unittest.TestCase):
    def test_the_package_installs_runs_and_removes(self):
        tmp = tempfile.TemporaryDirectory(prefix="troupe-deb-")
        self.addCleanup(tmp.cleanup)
        run(self, [CPACK, "-G", "DEB", "--config",
                   os.path.join(BUILD, "CPackConfig.cmake"), "-B", tmp.name])
        debs = glob.glob(os.path.join(tmp.name, "troupe_*.deb"))
        self.assertEqual(len(debs), 1, os.listdir(tmp.name))
        deb = debs[0]
        depends = run(self, ["dpkg-deb", "-f", deb, "Depends"])
        for library in ["libcaf-core0.17", "libcaf-io0.17", "libssl3",
                        "libopenblas0"]:
            self.assertIn(library, depends)
        # dpkg with a root folder of its own: the package's files land
        # under it, and its database lives there too.
        root = os.path.join(tmp.name, "root")
        for folder in ["var/lib/dpkg/info", "var/lib/dpkg/updates"]:
            os.makedirs(os.path.join(root, folder))
        open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
        dpkg = ["dpkg", "--root=" + root, "--force-not-root",
                "--force-depends", "--log=/dev/null"]
        run(self, dpkg + ["-i", deb])
        node = os.path.join(root, "usr", "bin", "troupe-node")
        out = run(self, [node, "--version"])
        self.assertEqual(out.splitlines()[0],
                         "troupe-node (troupe) " + project_version())
        files = run(self, dpkg + ["-L", "troupe"])
        self.assertIn("/usr/lib/cmake/troupe/troupeConfig.cmake", files)
        self.assertIn("/usr/include/troupe/models/external_step.hpp", files)
        if os.path.isdir(os.path.join(BUILD, "python", "troupe")):
            self.assertIn("/usr/lib/python3/dist-packages/troupe/__init__.py",
                          files)
        if os.path.exists(os.path.join(BUILD, "gpu", "libtroupe_cuda.so")):
            self.assert_gpu_module_found(root, files)
        if need_man_pages(self):
            page = run(self, ["man", "-P", "cat", "troupe-node"],
                       env=dict(os.environ, MANWIDTH="80",
                                MANPATH=os.path.join(root, "usr", "share",
                                                     "man")))
            self.assertIn("run a node of a troupe training cluster", page)
            self.assertIn("/usr/share/man/man1/troupe-node.1.gz", files)
        run(self, dpkg + ["-r", "troupe"])
        self.assertFalse(os.path.exists(node))

    def assert_gpu_module_found(self, root, files):
        """A build with CUDA packs its GPU module, and the installed
        troupe-train finds it from its own folder: one step on a GPU, or,
        without one, CUDA's own reason (never a module that is missing)."""
        module = [f for f in files.splitlines()
                  if f.endswith("/troupe/modules/libtroupe_cuda.so")]
        self.assertEqual(len(module), 1, files)
        train = os.path.join(root, "usr", "bin", "troupe-train")
        work = tempfile.TemporaryDirectory(prefix="troupe-deb-gpu-")
        self.addCleanup(work.cleanup)
        config = os.path.join(ROOT, "config", "mlp.json")
        out = subprocess.run([train, "-c", config, "--device", "gpu:0",
                              "--epochs", "1", "--max-steps", "1",
                              "--checkpoint-dir", work.name],
                             cwd=work.name, capture_output=True, text=True,
                             timeout=300)
        said = out.stdout + out.stderr
        self.assertNotIn("GPU module", said)
        if out.returncode != 0:
            self.assertIn("gpu:0 was asked for, but no CUDA device is usable",
                          said)


if __name__ == "__main__":
    unittest.main()
