#include "apps/web/http_request.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "runtime/base/hex_text.hpp"

namespace troupe {

namespace {

using outcome = http_read::outcome;

http_read refuse(int status, std::string why) {
  return {outcome::bad, 0, status, std::move(why)};
}

bool is_token_char(char c) {
  // RFC 9110 tchar.
  return std::isalnum(static_cast<unsigned char>(c))
         || std::string_view{"!#$%&'*+-.^_`|~"}.find(c)
              != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// Percent-decodes a path; false on a bad escape or a decoded NUL.
bool decode_path(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size())
      return false;
    int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
      return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

/// Reads the request line "METHOD TARGET HTTP/1.x".
http_read read_request_line(std::string_view line, http_request& out,
                            bool& http10) {
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos
      || line.find(' ', sp2 + 1) != std::string_view::npos)
    return refuse(400, "the request line is not METHOD TARGET VERSION");
  auto method = line.substr(0, sp1);
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  if (method.empty()
      || !std::all_of(method.begin(), method.end(), is_token_char))
    return refuse(400, "a bad method");
  if (version == "HTTP/1.0")
    http10 = true;
  else if (version != "HTTP/1.1")
    return refuse(505, "only HTTP/1.1 and 1.0 are spoken here");
  if (target.empty() || target.front() != '/')
    return refuse(400, "the target must be a path starting with /");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return refuse(400, "a control character in the target");
  auto q = target.find('?');
  auto raw_path = target.substr(0, q);
  if (!decode_path(raw_path, out.path))
    return refuse(400, "a bad %-escape in the path");
  out.query = q == std::string_view::npos ? ""
                                          : std::string{target.substr(q + 1)};
  out.method = std::string{method};
  return {};
}

} // namespace

const std::string* http_request::header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (k == name)
      return &v;
  return nullptr;
}

http_read read_http_request(std::string_view bytes, const http_limits& limits,
                            http_request& out) {
  auto end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() >= limits.max_head_bytes)
      return refuse(431, "the request's head is over "
                           + std::to_string(limits.max_head_bytes) + " bytes");
    // A bare LF or a NUL can never become a valid head: refuse at once
    // rather than wait for the limit.
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] == '\0'
          || (bytes[i] == '\n' && (i == 0 || bytes[i - 1] != '\r')))
        return refuse(400, "a line not ended by CRLF, or a NUL");
    return {};
  }
  if (end + 4 > limits.max_head_bytes)
    return refuse(431, "the request's head is over "
                         + std::to_string(limits.max_head_bytes) + " bytes");
  out = http_request{};
  auto head = bytes.substr(0, end);
  auto eol = head.find("\r\n");
  auto line = head.substr(0, eol);
  for (char c : head)
    if (c == '\0'
        || (c != '\r' && c != '\n' && c != '\t'
            && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)))
      return refuse(400, "a control character in the request's head");
  bool http10 = false;
  if (auto r = read_request_line(line, out, http10); r.what == outcome::bad)
    return r;
  // The headers, one per CRLF-ended line.
  size_t at = eol == std::string_view::npos ? head.size() : eol + 2;
  long long length = 0;
  bool has_length = false;
  while (at < head.size()) {
    auto next = head.find("\r\n", at);
    auto h = head.substr(at, next == std::string_view::npos ? head.size() - at
                                                            : next - at);
    at = next == std::string_view::npos ? head.size() : next + 2;
    if (h.find('\n') != std::string_view::npos
        || h.find('\r') != std::string_view::npos)
      return refuse(400, "a line not ended by CRLF");
    auto colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos)
      return refuse(400, "a header line without a name and a colon");
    auto name = h.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char))
      return refuse(400, "a bad header name (obsolete line folding?)");
    auto key = lower(name);
    auto value = std::string{trim(h.substr(colon + 1))};
    if (key == "transfer-encoding")
      return refuse(501,
                    "no transfer coding is accepted (send Content-Length)");
    if (key == "content-length") {
      if (has_length || value.empty() || value.size() > 18
          || !std::all_of(value.begin(), value.end(),
                          [](char c) { return c >= '0' && c <= '9'; }))
        return refuse(400, "a bad or repeated Content-Length");
      has_length = true;
      length = std::atoll(value.c_str());
    }
    out.headers.emplace_back(std::move(key), std::move(value));
  }
  if (length > static_cast<long long>(limits.max_body_bytes))
    return refuse(413, "a body of " + std::to_string(length)
                         + " bytes (at most "
                         + std::to_string(limits.max_body_bytes) + ")");
  auto body_at = end + 4;
  if (bytes.size() - body_at < static_cast<size_t>(length))
    return {};
  out.body = std::string{bytes.substr(body_at, static_cast<size_t>(length))};
  if (auto* c = out.header("connection")) {
    auto v = lower(*c);
    if (v.find("close") != std::string::npos)
      out.keep_alive = false;
    else if (http10 && v.find("keep-alive") != std::string::npos)
      http10 = false;
  }
  if (http10)
    out.keep_alive = false;
  return {outcome::whole, body_at + static_cast<size_t>(length), 0, {}};
}

const char* http_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

} // namespace troupe
