/*
 * form.h - application/x-www-form-urlencoded bodies (Twilio posts them):
 * parsed into ordered (name, value) pairs. (PostgreSQL turns them into the
 * JSON object that becomes the event's payload.)
 */
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wi {

/* One decoded "name=value" pair of a form body. The views borrow from the
 * body, or from the Form's storage where decoding changed the bytes. */
struct FormField {
  std::string_view name;
  std::string_view value;
};

/* A parsed form body. Not copyable or movable: its fields may point into
 * its own storage. */
struct Form {
  Form() = default;
  Form(const Form &) = delete;
  Form &operator=(const Form &) = delete;

  std::vector<FormField> fields; /* in body order */
  std::string storage;           /* decoded bytes; never reallocated */
};

/* Parses "a=1&b=2&b=3" into pairs in body order: '&' separates pairs (empty
 * ones are skipped), the first '=' separates name from value (no '=' means an
 * empty value), '+' is a space and "%XX" a byte. Returns false, leaving no
 * fields, if a '%' is not followed by two hex digits. Decoded bytes are not
 * checked for UTF-8. The fields also borrow from body, which must outlive
 * them. Throws only std::bad_alloc. */
bool ParseForm(std::string_view body, Form *out);

/* The length of the UTF-8 byte order mark body starts with: 3, or 0. */
size_t Utf8BomLength(std::string_view body) noexcept;

/* True if body starts as a JSON object or array does (after a UTF-8 BOM and
 * JSON white space): then it is read as JSON, never as a form, whatever a
 * header says and whether it is signed as one or the other. A form cannot
 * start so: its encoding escapes both brackets. */
bool LooksLikeJson(std::string_view body) noexcept;

}  // namespace wi
