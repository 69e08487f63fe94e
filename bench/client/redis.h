/*
 * redis.h - a thin owner of a hiredis connection; errors become RedisError.
 */
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace bench {

/* A failed Redis call. */
struct RedisError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/* Owns one reply. */
using RedisReply = std::unique_ptr<redisReply, void (*)(void *)>;

/* Owns one connection. */
class Redis {
 public:
  Redis(const std::string &host, int port);
  Redis(const Redis &) = delete;
  Redis &operator=(const Redis &) = delete;
  ~Redis();

  /* Runs a command (hiredis format, %s and %b) and returns its reply; an
   * error reply or a broken connection throws. */
  RedisReply Command(const char *fmt, ...);

 private:
  redisContext *c_;
};

}  // namespace bench
