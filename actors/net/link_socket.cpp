#include "actors/net/link_socket.hpp"

#include <algorithm>
#include <cerrno>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "actors/net/sockets.hpp"

namespace troupe {

link_socket::link_socket(int fd, ssl_ptr ssl) : fd_(fd), ssl_(std::move(ssl)) {
  if (!ssl_) {
    // Plain reads block (a proof of the key ran on it non-blocking);
    // writes that must not wait say so per call (MSG_DONTWAIT).
    set_nonblocking(fd_, false);
    return;
  }
  // A TLS record holds at most 16 KB. Unbuffered, OpenSSL makes two read
  // calls per record (header, then body) and one write call per record:
  // 1500 system calls for a 4 MB pull+push, where plain TCP needs 20, and
  // in a profile the kernel took more time than the cipher. Read-ahead
  // fills a 256 KB buffer per call; a buffering BIO collects records for
  // writes of up to 256 KB, sent at the end of each frame.
  constexpr long buffer = tls_context::bulk_buffer;
  SSL_set_read_ahead(ssl_.get(), 1);
  auto* sock = BIO_new_socket(fd_, BIO_NOCLOSE);
  auto* buffered = BIO_new(BIO_f_buffer());
  if (sock != nullptr && buffered != nullptr
      && BIO_set_write_buffer_size(buffered, buffer) == 1) {
    BIO_push(buffered, sock);
    SSL_set0_wbio(ssl_.get(), buffered);
  } else {
    BIO_free(sock);
    BIO_free(buffered);
  }
}

link_socket::~link_socket() {
  ::close(fd_);
}

std::string link_socket::peer() const {
  return peer_of(fd_);
}

void link_socket::shutdown() {
  ::shutdown(fd_, SHUT_RDWR);
}

bool link_socket::wait_for(short events) {
  pollfd p{fd_, events, 0};
  for (;;) {
    auto rc = ::poll(&p, 1, -1);
    if (rc > 0)
      return true; // ready, or hung up: the next call says which
    if (rc < 0 && errno != EINTR)
      return false;
  }
}

bool link_socket::read_exact(void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (!ssl_) {
      auto got = ::recv(fd_, p, n, 0);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        return false;
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    int got, err;
    {
      std::lock_guard<std::mutex> guard{ssl_mtx_};
      ERR_clear_error();
      got = SSL_read(ssl_.get(), p,
                     static_cast<int>(std::min<size_t>(n, 1 << 30)));
      err = got > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_.get(), got);
    }
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
    } else if (err == SSL_ERROR_WANT_READ) {
      if (!wait_for(POLLIN))
        return false;
    } else if (err == SSL_ERROR_WANT_WRITE) {
      if (!wait_for(POLLOUT))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

written link_socket::write(const void* head, size_t head_len, const void* body,
                           size_t body_len, size_t& done, bool wait) {
  return ssl_ ? write_tls(head, head_len, body, body_len, done, wait)
              : write_plain(head, head_len, body, body_len, done, wait);
}

written link_socket::write_plain(const void* head, size_t head_len,
                                 const void* body, size_t body_len,
                                 size_t& done, bool wait) {
  // One system call where the kernel takes header and payload at once.
  auto total = head_len + body_len;
  while (done < total) {
    iovec iov[2];
    int count = 0;
    if (done < head_len)
      iov[count++] = {static_cast<char*>(const_cast<void*>(head)) + done,
                      head_len - done};
    if (body_len > 0) {
      auto from = done > head_len ? done - head_len : 0;
      iov[count++] = {static_cast<char*>(const_cast<void*>(body)) + from,
                      body_len - from};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    auto sent = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent < 0 && !wait && (errno == EAGAIN || errno == EWOULDBLOCK))
      return written::some;
    if (sent <= 0)
      return written::failed;
    done += static_cast<size_t>(sent);
  }
  return written::all;
}

written link_socket::write_tls(const void* head, size_t head_len,
                               const void* body, size_t body_len, size_t& done,
                               bool wait) {
  // The header goes in the first record with as much payload as fits (a
  // record of its own would cost a second record's overhead and, for a
  // small frame, a second segment). The staging copy is at most one
  // record; the payload after it is encrypted straight from its buffer.
  constexpr size_t record = 16 * 1024;
  auto total = head_len + body_len;
  while (done < total) {
    const char* from;
    size_t len;
    char first[record];
    if (done == 0) {
      auto take = std::min(body_len, record - head_len);
      std::copy_n(static_cast<const char*>(head), head_len, first);
      std::copy_n(static_cast<const char*>(body), take, first + head_len);
      from = first;
      len = head_len + take;
    } else if (done < head_len) {
      // Only after a partial first write: OpenSSL wants the same bytes
      // again, which the same computation gives.
      auto take = std::min(body_len, record - head_len);
      std::copy_n(static_cast<const char*>(head), head_len, first);
      std::copy_n(static_cast<const char*>(body), take, first + head_len);
      from = first + done;
      len = head_len + take - done;
    } else {
      from = static_cast<const char*>(body) + (done - head_len);
      len = std::min<size_t>(total - done, 1 << 30);
    }
    int put, err;
    {
      std::lock_guard<std::mutex> guard{ssl_mtx_};
      ERR_clear_error();
      put = SSL_write(ssl_.get(), from, static_cast<int>(len));
      err = put > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_.get(), put);
    }
    if (put > 0) {
      done += static_cast<size_t>(put);
      continue;
    }
    if (err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ)
      return written::failed;
    if (!wait)
      return written::some;
    if (!wait_for(err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN))
      return written::failed;
  }
  // Every record is in the write buffer (or sent): the frame is written
  // once the buffer is out. A frame left with done == total comes back
  // here to finish the flush.
  return flush_tls(wait);
}

written link_socket::flush_tls(bool wait) {
  for (;;) {
    int rc;
    bool retry;
    {
      std::lock_guard<std::mutex> guard{ssl_mtx_};
      auto* wbio = SSL_get_wbio(ssl_.get());
      rc = BIO_flush(wbio);
      retry = rc <= 0 && BIO_should_retry(wbio);
    }
    if (rc > 0)
      return written::all;
    if (!retry)
      return written::failed;
    if (!wait)
      return written::some;
    if (!wait_for(POLLOUT))
      return written::failed;
  }
}

} // namespace troupe
