// What a Prometheus server does to troupe's metrics endpoint, for tests: an
// HTTP GET over a plain socket, and a parser of the text exposition format
// (0.0.4) strict enough to refuse what Prometheus would: a bad metric or
// label name, a bad escape, a value that is not a float, a TYPE after the
// family's samples or twice, a family whose samples are not together, and
// a counter whose name does not end in _total.
#pragma once

#include <arpa/inet.h>
#include <cmath>
#include <map>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace troupe::test {

/// Sends `request` to 127.0.0.1:`port` and returns what comes back until
/// the server closes (HTTP/1.0, or "Connection: close"), or "" on failure.
inline std::string http_exchange(uint16_t port, const std::string& request,
                                 int timeout_ms = 10000) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return "";
  }
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL)
      != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return "";
  }
  std::string resp;
  char buf[4096];
  for (int waited = 0; waited < timeout_ms; waited += 100) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return resp;
}

/// GET `path` from 127.0.0.1:`port` as HTTP/1.0; returns (status, body), or
/// (0, why) when no answer came within `timeout_ms` in all.
inline std::pair<int, std::string>
http_get(uint16_t port, const std::string& path, int timeout_ms = 10000) {
  auto resp = http_exchange(
    port, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", timeout_ms);
  auto head_end = resp.find("\r\n\r\n");
  int status = 0;
  if (resp.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos
      || std::sscanf(resp.c_str() + 9, "%d", &status) != 1)
    return {0, "no HTTP answer: " + resp.substr(0, 200)};
  return {status, resp.substr(head_end + 4)};
}

/// Samples by "name{labels as given}", or the first error in `error`.
struct exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types; ///< family -> type
  std::string error;

  double at(const std::string& key) const {
    auto it = samples.find(key);
    return it == samples.end() ? std::nan("") : it->second;
  }
};

inline bool metric_name_ok(const std::string& n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0])))
    return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'))
      return false;
  return true;
}

inline exposition parse_exposition(const std::string& text) {
  exposition e;
  std::istringstream in{text};
  std::string line, current; // the family whose samples come now
  std::set<std::string> finished, typed;
  int number = 0;
  auto fail = [&](const std::string& why) {
    e.error = "line " + std::to_string(number) + ": " + why + ": " + line;
    return e;
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.empty())
      continue;
    if (line[0] == '#') {
      std::istringstream words{line};
      std::string hash, kind, name, type;
      words >> hash >> kind >> name;
      if (kind == "TYPE") {
        words >> type;
        if (!metric_name_ok(name))
          return fail("bad metric name");
        if (!typed.insert(name).second || finished.count(name) > 0
            || name == current)
          return fail("TYPE twice or after the family's samples");
        static const std::set<std::string> types{
          "counter", "gauge", "histogram", "summary", "untyped"};
        if (types.count(type) == 0)
          return fail("unknown type");
        if (type == "counter"
            && (name.size() < 6 || name.substr(name.size() - 6) != "_total"))
          return fail("a counter's name must end in _total");
        e.types[name] = type;
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ')
      ++i;
    auto name = line.substr(0, i);
    if (!metric_name_ok(name))
      return fail("bad metric name");
    std::string labels;
    if (i < line.size() && line[i] == '{') {
      ++i;
      std::set<std::string> seen;
      while (i < line.size() && line[i] != '}') {
        size_t k = i;
        while (k < line.size() && line[k] != '=')
          ++k;
        auto key = line.substr(i, k - i);
        if (!metric_name_ok(key) || key.find(':') != std::string::npos
            || !seen.insert(key).second)
          return fail("bad or repeated label name");
        if (k + 1 >= line.size() || line[k + 1] != '"')
          return fail("label value not quoted");
        size_t v = k + 2;
        for (; v < line.size() && line[v] != '"'; ++v)
          if (line[v] == '\\') {
            if (v + 1 >= line.size()
                || std::string{"\\\"n"}.find(line[v + 1]) == std::string::npos)
              return fail("bad escape");
            ++v;
          }
        if (v >= line.size())
          return fail("unterminated label value");
        i = v + 1;
        if (i < line.size() && line[i] == ',')
          ++i;
      }
      if (i >= line.size())
        return fail("unterminated labels");
      labels = line.substr(name.size(), i + 1 - name.size());
      ++i;
    }
    if (i >= line.size() || line[i] != ' ')
      return fail("no value");
    std::istringstream rest{line.substr(i + 1)};
    std::string value;
    rest >> value;
    char* end = nullptr;
    double x = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0')
      return fail("value is not a float");
    if (name != current) {
      if (finished.count(name) > 0)
        return fail("the family's samples are not together");
      if (!current.empty())
        finished.insert(current);
      current = name;
    }
    if (!e.samples.emplace(name + labels, x).second)
      return fail("the same sample twice");
  }
  return e;
}

} // namespace troupe::test
