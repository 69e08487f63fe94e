/*
 * redis.cpp - hiredis connection owner.
 */
#include "redis.h"

#include <cstdarg>
#include <sys/time.h>

namespace bench {

Redis::Redis(const std::string &host, int port) {
  struct timeval tv = {5, 0};
  c_ = redisConnectWithTimeout(host.c_str(), port, tv);
  if (!c_ || c_->err) {
    std::string msg = c_ ? c_->errstr : "out of memory";
    if (c_) redisFree(c_);
    c_ = nullptr;
    throw RedisError("redis connect: " + msg);
  }
}

Redis::~Redis() {
  if (c_) redisFree(c_);
}

RedisReply Redis::Command(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  void *r = redisvCommand(c_, fmt, ap);
  va_end(ap);
  if (!r) throw RedisError(std::string("redis: ") + c_->errstr);
  RedisReply reply(static_cast<redisReply *>(r), freeReplyObject);
  if (reply->type == REDIS_REPLY_ERROR) throw RedisError(std::string("redis: ") + reply->str);
  return reply;
}

}  // namespace bench
