/*
 * payload.h - the events the benchmark sends: Stripe-style bodies of about
 * 1 KiB, deterministic per event index (so a redelivery is byte-identical),
 * Stripe signatures, and the receiver-side checks the seeds do in code.
 */
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

namespace bench {

/* One delivery as the sender makes it: the raw body and its headers. */
struct Delivery {
  uint64_t index = 0;        // the event's number in this run
  std::string event_id;
  std::string body;
  std::string signature;     // the Stripe-Signature header's value
  std::string headers_json;  // all headers as a JSON object
};

/* Makes the events of one run (tag) and signs their deliveries. */
class EventFactory {
 public:
  EventFactory(std::string tag, int accounts, std::string secret);

  /* The Stripe-like id of event idx ("evt_" + 24 base-62 characters). */
  std::string EventId(uint64_t idx) const;

  /* The account event idx credits (1..accounts). */
  int Account(uint64_t idx) const;

  /* The amount event idx credits, in cents. */
  long Amount(uint64_t idx) const;

  /* The body of event idx: the same bytes on every call. */
  std::string Body(uint64_t idx) const;

  /* A delivery of event idx, signed now (as Stripe re-signs each attempt). */
  Delivery Make(uint64_t idx) const;

  const std::string &secret() const { return secret_; }

 private:
  std::string tag_;
  uint64_t tag_hash_;
  int accounts_;
  std::string secret_;
};

/* The Stripe-Signature value "t=<at>,v1=<hex HMAC-SHA256(secret, at.body)>". */
std::string StripeSignature(const std::string &secret, std::time_t at, const std::string &body);

/* Verifies a Stripe-Signature as Stripe's SDK does (any v1 matches, constant
 * time, age within tolerance); false with *why set when it does not. */
bool VerifyStripe(const std::string &secret, const std::string &header, const std::string &body,
                  long tolerance_s, std::string *why);

/* The first value of "key" in a flat scan of a JSON body we generated: the
 * string's contents or the number's digits; empty when absent. */
std::string JsonField(const std::string &body, const char *key);

/* A 64-bit mix (splitmix64 finaliser); bijective. */
uint64_t Mix64(uint64_t x);

}  // namespace bench
