/*
 * none.cpp - no verification: an explicit opt-out for trusted internal
 * senders. Every delivery is "valid".
 */
#include "core/scheme.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

Verdict VerifyNone(const VerifyRequest &) { return Verdict::kValid; }

}  // namespace

extern const Scheme kNoneScheme = {
    "none",
    false,
    {"header:X-Webhook-ID", "$.id"},
    VerifyNone,
    nullptr,
    true,
};

}  // namespace wi
