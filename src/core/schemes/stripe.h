/*
 * stripe.h - the Stripe-Signature header, parsed as stripe-node parses it.
 */
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace wi {

/* A parsed Stripe-Signature header: "t=<unix>,v1=<hex>[,v1=<hex>...]". */
struct StripeHeader {
  bool has_timestamp = false;
  int64_t timestamp = 0;
  std::vector<std::string_view> v1; /* borrow from the header text */
};

/* Parses header; items other than t= and v1= are skipped. Never throws
 * except for std::bad_alloc. */
StripeHeader ParseStripeHeader(std::string_view header);

}  // namespace wi
