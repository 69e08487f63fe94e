/*
 * paddle.h - the Paddle-Signature header, parsed as the Paddle SDKs parse it.
 */
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace wi {

/* A parsed Paddle-Signature header: "ts=<unix>;h1=<hex>[;h1=<hex>...]". */
struct PaddleSignature {
  bool has_timestamp = false;
  int64_t timestamp = 0;
  std::vector<std::string_view> h1; /* borrow from the header text */
};

/* Parses header: ';'-separated "key=value" items; the value runs to the next
 * '=' (paddle-node-sdk's split), items with an empty value or another key are
 * skipped, the last ts= decides, every h1= is kept. Throws only
 * std::bad_alloc. */
PaddleSignature ParsePaddleSignature(std::string_view header);

}  // namespace wi
