// tools/status_line.h — a progress line on stderr for long CLI runs: rewritten in place on a
// terminal, one line every `interval_s` seconds (and the final one) otherwise; and a compact
// duration format for ETAs. Used by `kascade calibrate` and `kascade eval`.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace kascade::tools {

// "45s", "3m07s", "2h05m".
inline std::string format_duration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  const long s = static_cast<long>(seconds + 0.5);
  char buffer[32];
  if (s < 60) {
    std::snprintf(buffer, sizeof(buffer), "%lds", s);
  } else if (s < 3600) {
    std::snprintf(buffer, sizeof(buffer), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  }
  return buffer;
}

class StatusLine {
 public:
  StatusLine(bool enabled, double interval_s = 5.0)
      : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0), interval_s_(interval_s) {}
  // elapsed_s: seconds since the run began; last: the final update (ends the line on a terminal).
  void update(const std::string& text, double elapsed_s, bool last) {
    if (!enabled_) return;
    if (tty_) {
      std::fprintf(stderr, "\r%-100s", text.c_str());
      if (last) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    } else if (last || first_ || elapsed_s - printed_at_ >= interval_s_) {
      std::fprintf(stderr, "%s\n", text.c_str());
      printed_at_ = elapsed_s;
      first_ = false;
    }
  }

 private:
  bool enabled_;
  bool tty_;
  double interval_s_;
  bool first_ = true;
  double printed_at_ = 0.0;
};

}  // namespace kascade::tools
