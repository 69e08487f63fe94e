/*
 * form.cpp - application/x-www-form-urlencoded parsing and its JSON form.
 */
#include "core/form.h"

#include <unordered_map>

#include "core/cpp_only.h"

namespace wi {

namespace {

int HexValue(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The decoded form of one name or value: in itself when it holds no '%' or
 * '+', else appended to *storage. False on a bad escape. */
bool DecodeComponent(std::string_view in, std::string *storage, std::string_view *out) {
  size_t k = 0;
  while (k < in.size() && in[k] != '%' && in[k] != '+') ++k;
  if (k == in.size()) {
    *out = in;
    return true;
  }
  size_t start = storage->size();
  storage->append(in.data(), k);
  for (size_t i = k; i < in.size(); ++i) {
    char c = in[i];
    if (c == '+') {
      storage->push_back(' ');
    } else if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      storage->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      storage->push_back(c);
    }
  }
  *out = std::string_view(storage->data() + start, storage->size() - start);
  return true;
}

/* Appends s as a JSON string literal. */
void AppendJsonString(std::string_view s, std::string *out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (u < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[u >> 4]);
          out->push_back(kHex[u & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace

bool ParseForm(std::string_view body, Form *out) {
  out->fields.clear();
  out->storage.clear();
  /* Decoding only shrinks, so this capacity is never outgrown and the views
   * into storage stay valid. */
  out->storage.reserve(body.size());
  size_t pairs = 1;
  for (char c : body) pairs += c == '&';
  out->fields.reserve(pairs);
  size_t pos = 0;
  while (pos < body.size()) {
    size_t amp = body.find('&', pos);
    if (amp == std::string_view::npos) amp = body.size();
    std::string_view pair = body.substr(pos, amp - pos);
    pos = amp + 1;
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    FormField &field = out->fields.emplace_back();
    bool ok = DecodeComponent(pair.substr(0, eq), &out->storage, &field.name) &&
              (eq == std::string_view::npos ||
               DecodeComponent(pair.substr(eq + 1), &out->storage, &field.value));
    if (!ok) {
      out->fields.clear();
      out->storage.clear();
      return false;
    }
  }
  return true;
}

std::string FormToJson(const std::vector<FormField> &fields) {
  /* Group the values of each name, keeping names in first-seen order. */
  std::vector<std::string_view> names;
  std::vector<std::vector<std::string_view>> values;
  std::unordered_map<std::string_view, size_t> index;
  for (const FormField &f : fields) {
    auto [it, inserted] = index.emplace(f.name, names.size());
    if (inserted) {
      names.push_back(f.name);
      values.emplace_back();
    }
    values[it->second].push_back(f.value);
  }

  std::string out;
  out.push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendJsonString(names[i], &out);
    out.push_back(':');
    if (values[i].size() == 1) {
      AppendJsonString(values[i][0], &out);
      continue;
    }
    out.push_back('[');
    for (size_t j = 0; j < values[i].size(); ++j) {
      if (j > 0) out.push_back(',');
      AppendJsonString(values[i][j], &out);
    }
    out.push_back(']');
  }
  out.push_back('}');
  return out;
}

}  // namespace wi
