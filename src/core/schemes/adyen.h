/*
 * adyen.h - Adyen's per-item HMAC, exposed for its tests and fuzz target.
 */
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace wi {

/* The item fields Adyen signs, in signing order, then the signature. */
inline constexpr size_t kAdyenSignedFields = 8;
inline constexpr size_t kAdyenSignatureField = 8;

/* Adyen's signing string of one notification item from its values
 * (VerifyRequest::fields in item_fields order): pspReference,
 * originalReference, merchantAccountCode, merchantReference, amount.value,
 * amount.currency, eventCode, success, joined with ':', an absent one as the
 * empty string (values are not escaped, as HmacValidator.getDataToSign does
 * not escape a NotificationRequestItem's). */
std::string AdyenSigningString(const std::optional<std::string_view> *fields,
                               size_t n_fields);

}  // namespace wi
