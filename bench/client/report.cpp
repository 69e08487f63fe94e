/*
 * report.cpp - JSON lines, percentiles and progress.
 */
#include "report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace bench {

std::string JsonQuote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

void JsonLine::Key(const std::string &key) {
  if (!body_.empty()) body_ += ",";
  body_ += JsonQuote(key) + ":";
}

void JsonLine::Add(const std::string &key, const std::string &value) {
  Key(key);
  body_ += JsonQuote(value);
}

void JsonLine::Add(const std::string &key, double value) {
  Key(key);
  if (!std::isfinite(value)) {
    body_ += "null";
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  body_ += buf;
}

void JsonLine::Add(const std::string &key, long value) {
  Key(key);
  body_ += std::to_string(value);
}

void JsonLine::Add(const std::string &key, const std::map<std::string, long> &counts) {
  Key(key);
  std::string obj;
  for (const auto &[k, v] : counts) {
    if (!obj.empty()) obj += ",";
    obj += JsonQuote(k) + ":" + std::to_string(v);
  }
  body_ += "{" + obj + "}";
}

void JsonLine::AddNull(const std::string &key) {
  Key(key);
  body_ += "null";
}

LatencySummary Summarize(std::vector<uint32_t> *us) {
  LatencySummary s;
  if (us->empty()) return s;
  auto at = [us](double q) {
    size_t k = static_cast<size_t>(q * static_cast<double>(us->size() - 1));
    std::nth_element(us->begin(), us->begin() + static_cast<long>(k), us->end());
    return (*us)[k] / 1000.0;
  };
  s.p50_ms = at(0.50);
  s.p99_ms = at(0.99);
  s.mean_ms = std::accumulate(us->begin(), us->end(), 0.0) / static_cast<double>(us->size()) / 1000.0;
  return s;
}

void Emit(const Options &o, const JsonLine &line) {
  const std::string text = line.str();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  if (o.json_out.empty()) return;
  if (FILE *f = std::fopen(o.json_out.c_str(), "a")) {
    std::fprintf(f, "%s\n", text.c_str());
    std::fclose(f);
  } else {
    std::perror(o.json_out.c_str());
  }
}

Progress::Progress(const Options &o, std::string prefix)
    : enabled_(o.progress), tty_(isatty(STDERR_FILENO) != 0), prefix_(std::move(prefix)) {
  // In a log, the first line comes after the first interval, not at once.
  if (!tty_) last_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { Done(); }

void Progress::Show(const std::string &text, bool force) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  const double every = tty_ ? 0.25 : 5.0;
  if (!force && std::chrono::duration<double>(now - last_).count() < every) return;
  last_ = now;
  if (tty_) {
    std::fprintf(stderr, "\r\033[K  %s %s", prefix_.c_str(), text.c_str());
    open_ = true;
  } else {
    std::fprintf(stderr, "  %s %s\n", prefix_.c_str(), text.c_str());
  }
  std::fflush(stderr);
}

void Progress::Done() {
  if (open_) std::fputc('\n', stderr);
  open_ = false;
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace bench
