/*
 * report.h - what the client tells: one JSON line per run or scenario (for
 * bench/report.py), latency percentiles, and a progress line while it runs.
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "options.h"

namespace bench {

/* Builds one flat JSON object. */
class JsonLine {
 public:
  void Add(const std::string &key, const std::string &value);
  void Add(const std::string &key, const char *value) { Add(key, std::string(value)); }
  void Add(const std::string &key, double value);
  void Add(const std::string &key, long value);
  void Add(const std::string &key, int value) { Add(key, static_cast<long>(value)); }
  void Add(const std::string &key, const std::map<std::string, long> &counts);
  void AddNull(const std::string &key);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void Key(const std::string &key);
  std::string body_;
};

/* JSON string literal of s. */
std::string JsonQuote(const std::string &s);

/* Percentiles of a latency sample in microseconds (the vector is reordered). */
struct LatencySummary {
  double p50_ms = 0, p99_ms = 0, mean_ms = 0;
};
LatencySummary Summarize(std::vector<uint32_t> *us);

/* Prints line on stdout and appends it to o.json_out when set. */
void Emit(const Options &o, const JsonLine &line);

/* A progress line on stderr: rewritten in place on a terminal, otherwise one
 * line every few seconds. */
class Progress {
 public:
  Progress(const Options &o, std::string prefix);
  ~Progress();

  /* Shows text (throttled unless force). */
  void Show(const std::string &text, bool force = false);

  /* Ends the line. */
  void Done();

 private:
  bool enabled_;
  bool tty_;
  bool open_ = false;
  std::string prefix_;
  std::chrono::steady_clock::time_point last_{};
};

/* Seconds since start, as a double. */
double Since(std::chrono::steady_clock::time_point start);

}  // namespace bench
