// src/runtime/report.cpp — progress line and closing report of a generation (src/runtime/report.h).
// Tested by tests/unit/runtime/test_report.cpp.
#include "runtime/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kascade::runtime {
namespace {

constexpr LayerRole kRoles[] = {LayerRole::kDense, LayerRole::kDenseAnchor, LayerRole::kAnchor, LayerRole::kReuse};

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string percent(const AttendedCount& c) {
  const double f = c.fraction();
  return std::isnan(f) ? std::string("n/a") : fixed(100.0 * f, 1) + "%";
}

void summarize_mode(const AttendedStatistics& s, ForwardMode mode, int32_t num_layers, std::vector<RoleAttended>* out,
                    AttendedCount* total) {
  const auto& roles = s.roles[static_cast<int>(mode)];
  for (LayerRole role : kRoles) {
    RoleAttended r;
    r.role = role;
    for (int32_t l = 0; l < num_layers && static_cast<size_t>(l) < roles.size(); ++l) {
      if (roles[l] == role) ++r.num_layers;
    }
    if (r.num_layers == 0) continue;
    r.count = s.by_role(mode, role);
    out->push_back(r);
  }
  *total = s.total(mode);
}

std::string attended_line(const char* mode, const std::vector<RoleAttended>& roles, const AttendedCount& total) {
  std::ostringstream os;
  os << "keys attended, " << mode << ": all layers " << percent(total);
  for (const RoleAttended& r : roles)
    os << " | " << layer_role_name(r.role) << " " << r.num_layers << (r.num_layers == 1 ? " layer " : " layers ")
       << percent(r.count);
  return os.str();
}

// " (25%)": s as a share of total_s, empty when total_s is 0.
std::string share_of(double s, double total_s) {
  return total_s > 0 ? " (" + fixed(100.0 * s / total_s, 0) + "%)" : std::string();
}

std::string timings_line(const char* mode, const PhaseTimings& t, double total_s) {
  std::ostringstream os;
  const auto share = [total_s](double s) { return share_of(s, total_s); };
  os << "time, " << mode << ": matmul " << fixed(t.matmul_s, 3) << " s" << share(t.matmul_s) << " at "
     << fixed(t.matmul_gflops(), 1) << " GFLOP/s | attention " << fixed(t.attention_s, 3) << " s"
     << share(t.attention_s) << " | other " << fixed(t.other_s, 3) << " s" << share(t.other_s);
  return os.str();
}

// The GPU runtime's split of a phase's wall time: the device's share (CUDA events around each call)
// and the rest (host preparation, graph checks, synchronisation, the caller's loop).
std::string device_line(const char* mode, const PhaseTimings& t, double total_s) {
  std::ostringstream os;
  const double host_s = std::max(0.0, total_s - t.device_s);
  os << "time, " << mode << ": device " << fixed(t.device_s, 3) << " s" << share_of(t.device_s, total_s) << " | host "
     << fixed(host_s, 3) << " s";
  return os.str();
}

}  // namespace

AttendedSummary summarize_attended(const AttendedStatistics& statistics, int32_t num_layers) {
  AttendedSummary out;
  summarize_mode(statistics, ForwardMode::kPrefill, num_layers, &out.prefill, &out.prefill_total);
  summarize_mode(statistics, ForwardMode::kDecode, num_layers, &out.decode, &out.decode_total);
  return out;
}

std::string format_progress(const PrefillProgress& p) {
  std::ostringstream os;
  os << "prefill " << p.done_tokens << "/" << p.total_tokens << " tokens  " << fixed(p.tokens_per_s(), 0) << " tok/s";
  if (p.done_tokens < p.total_tokens && p.tokens_per_s() > 0) os << "  ETA " << fixed(p.eta_s(), 1) << " s";
  return os.str();
}

std::string format_report(const GenerateStats& s) {
  std::ostringstream os;
  if (s.prefill_tokens > 0)
    os << "prefill: " << s.prefill_tokens << " tokens in " << fixed(s.prefill_s, 3) << " s ("
       << fixed(s.prefill_tokens_per_s(), 1) << " tok/s)\n";
  if (s.decode_steps > 0)
    os << "decode:  " << s.decode_tokens << " tokens in " << fixed(s.decode_s, 3) << " s ("
       << fixed(s.decode_tokens_per_s(), 1) << " tok/s), " << s.decode_steps << " steps\n";
  if (s.prefill_timings.matmul_s > 0) os << timings_line("prefill", s.prefill_timings, s.prefill_s) << "\n";
  if (s.decode_timings.matmul_s > 0) os << timings_line("decode", s.decode_timings, s.decode_s) << "\n";
  if (s.prefill_timings.device_s > 0) os << device_line("prefill", s.prefill_timings, s.prefill_s) << "\n";
  if (s.decode_timings.device_s > 0) os << device_line("decode", s.decode_timings, s.decode_s) << "\n";
  if (s.attended.prefill_total.causal > 0)
    os << attended_line("prefill", s.attended.prefill, s.attended.prefill_total) << "\n";
  if (s.attended.decode_total.causal > 0)
    os << attended_line("decode", s.attended.decode, s.attended.decode_total) << "\n";
  return os.str();
}

}  // namespace kascade::runtime
