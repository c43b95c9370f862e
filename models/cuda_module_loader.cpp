#include "models/cuda_module_loader.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>
#include <vector>

namespace troupe {

namespace {

/// The file of the program or shared object this code is linked into: a
/// program run from its build tree loads the build tree's module.
std::string own_file() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&own_file), &info,
              reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP)
        == 0
      || map == nullptr)
    return "";
  std::string name = map->l_name != nullptr ? map->l_name : "";
  if (name.empty()) { // the main program
    char exe[PATH_MAX];
    auto n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
      return "";
    name.assign(exe, static_cast<size_t>(n));
  }
  char resolved[PATH_MAX];
  return realpath(name.c_str(), resolved) != nullptr ? resolved : name;
}

bool under(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0
         && path[dir.size()] == '/';
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

/// Where the module is looked for, in order; the first that exists is
/// opened.
std::vector<std::string> module_paths() {
  if (const char* chosen = std::getenv("TROUPE_CUDA_MODULE");
      chosen != nullptr && *chosen != '\0')
    return {chosen};
  auto own = own_file();
  if (under(own, TROUPE_BUILD_TREE))
    return {TROUPE_CUDA_MODULE_BUILT};
  // Installed: beside an installed program (bin/) or Python module, under
  // whatever prefix the installation has; else the configured prefix.
  std::vector<std::string> paths;
  auto dir = own.substr(0, own.rfind('/') + 1);
  const std::string file = TROUPE_CUDA_MODULE_FILE;
  if (!dir.empty()) {
    paths.push_back(dir + TROUPE_CUDA_MODULE_FROM_BIN + "/" + file);
    paths.push_back(dir + TROUPE_CUDA_MODULE_FROM_PYTHON + "/" + file);
  }
  paths.push_back(std::string{TROUPE_CUDA_MODULE_INSTALLED} + "/" + file);
  return paths;
}

cuda_module_load open_module() {
  cuda_module_load out;
  auto paths = module_paths();
  for (auto& path : paths)
    if (exists(path)) {
      out.path = path;
      break;
    }
  if (out.path.empty()) {
    out.error = "troupe's GPU module is not at " + paths.front();
    for (size_t i = 1; i < paths.size(); ++i)
      out.error += (i + 1 == paths.size() ? " or " : ", ") + paths[i];
    out.error += " (set TROUPE_CUDA_MODULE to its path)";
    return out;
  }
  // RTLD_LOCAL: the module's symbols (CUDA's too) stay out of the
  // process's global scope. A module that is there but fails to load
  // most often misses CUDA's runtime or cuBLAS, which dlerror names.
  void* handle = dlopen(out.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    out.error = "troupe's GPU module cannot be loaded: "
                + std::string{why != nullptr ? why : out.path};
    return out;
  }
  auto entry = reinterpret_cast<gpu::cuda_module_entry_fn>(
    dlsym(handle, gpu::cuda_module_entry));
  if (entry == nullptr) {
    out.error = out.path + " is not troupe's GPU module (it has no "
                + std::string{gpu::cuda_module_entry} + ")";
    return out;
  }
  const gpu::cuda_module* module = entry();
  if (std::strcmp(module->build_token, TROUPE_BUILD_TOKEN) != 0) {
    out.error = out.path + " is the GPU module of another build (troupe "
                + module->version + "); this is troupe " + TROUPE_VERSION
                + ": use the module built with this program";
    return out;
  }
  out.module = module;
  return out;
}

} // namespace

const cuda_module_load& load_cuda_module() {
  static const cuda_module_load loaded = open_module();
  return loaded;
}

} // namespace troupe
