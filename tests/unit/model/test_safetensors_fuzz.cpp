// test_safetensors_fuzz.cpp — randomized corruption of safetensors files (src/model/safetensors.cpp).
// Thousands of mutations of valid files (bit flips, byte overwrites, truncations, appended bytes,
// header-length edits, JSON edits: numbers replaced by huge / negative / fractional values,
// tensors moved within the data section, structural characters inserted or removed, ranges
// duplicated or deleted, dtype names swapped).
// Each mutated file must either load or fail with a DataLoss / Unsupported status that names the
// file; never crash. Loaded files are checked against an independent brute-force reference (every
// tensor inside the data section, byte length = numel × element size, no two tensors overlapping,
// the section covered exactly) and every byte of every view is read, so an out-of-bounds view is
// caught by AddressSanitizer in the sanitizer build (the buffers live on the heap).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "testing/harness.h"

namespace kascade {
namespace {

std::vector<uint8_t> base_file(std::mt19937_64& rng, bool long_names) {
  struct Spec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::string prefix = long_names ? "model.layers.12.self_attn.very_long_projection_name." : "";
  const std::vector<Spec> specs = {{prefix + "w0", DType::kF32, {3, 4}},  {prefix + "w1", DType::kF16, {5}},
                                   {prefix + "w2", DType::kBF16, {2, 2, 2}}, {prefix + "empty", DType::kF16, {0}},
                                   {prefix + "s", DType::kF32, {}},        {prefix + "w3", DType::kF32, {7, 1}}};
  std::vector<std::vector<uint8_t>> storage;
  std::vector<NamedTensor> tensors;
  storage.reserve(specs.size());
  for (const Spec& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    storage.push_back(testing::pack_as(testing::random_floats(rng, static_cast<size_t>(n), -1, 1, s.dtype), s.dtype));
    tensors.push_back({s.name, TensorView{storage.back().data(), s.dtype, s.shape}});
  }
  Result<std::vector<uint8_t>> bytes = serialize_safetensors(tensors, {{"format", "pt"}});
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

uint64_t header_length(const std::vector<uint8_t>& f) {
  uint64_t n = 0;
  for (int i = 7; i >= 0 && f.size() >= 8; --i) n = (n << 8) | f[static_cast<size_t>(i)];
  return n;
}

void set_header_length(std::vector<uint8_t>& f, uint64_t n) {
  if (f.size() < 8) return;
  for (int i = 0; i < 8; ++i) f[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
}

// The header region [8, 8 + N) clipped to the file, or empty.
std::pair<size_t, size_t> header_range(const std::vector<uint8_t>& f) {
  if (f.size() <= 8) return {f.size(), f.size()};
  const uint64_t n = header_length(f);
  return {8, static_cast<size_t>(std::min<uint64_t>(f.size(), 8 + std::min<uint64_t>(n, f.size())))};
}

class Mutator {
 public:
  explicit Mutator(std::mt19937_64& rng) : rng_(rng) {}

  size_t pick(size_t lo, size_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<size_t>(lo, hi)(rng_);
  }

  void mutate(std::vector<uint8_t>& f) {
    const size_t kind = pick(0, 10);
    switch (kind) {
      case 0: flip_bits(f, false); break;
      case 1: flip_bits(f, true); break;
      case 2: truncate(f); break;
      case 3: edit_header_length(f); break;
      case 4: replace_number(f); break;
      case 5: insert_char(f); break;
      case 6: delete_range(f); break;
      case 7: duplicate_range(f); break;
      case 8: swap_dtype(f); break;
      case 9: append(f); break;
      case 10: shift_offsets(f); break;
    }
  }

 private:
  void flip_bits(std::vector<uint8_t>& f, bool header_only) {
    if (f.empty()) return;
    auto [lo, hi] = header_only ? header_range(f) : std::pair<size_t, size_t>{0, f.size()};
    if (lo >= hi) return;
    for (size_t k = pick(1, 8); k > 0; --k) f[pick(lo, hi - 1)] ^= static_cast<uint8_t>(1u << pick(0, 7));
  }
  void truncate(std::vector<uint8_t>& f) { f.resize(pick(0, f.size())); }
  void append(std::vector<uint8_t>& f) {
    for (size_t k = pick(1, 16); k > 0; --k) f.push_back(static_cast<uint8_t>(pick(0, 255)));
  }
  void edit_header_length(std::vector<uint8_t>& f) {
    const uint64_t n = header_length(f);
    const uint64_t choices[] = {0,
                                1,
                                n + 1,
                                n - 1,
                                n + pick(0, 64),
                                n - pick(0, 64),
                                f.size(),
                                f.size() - 8,
                                f.size() - 7,
                                kSafetensorsMaxHeaderBytes,
                                kSafetensorsMaxHeaderBytes + 1,
                                uint64_t{1} << 63,
                                ~uint64_t{0},
                                std::uniform_int_distribution<uint64_t>()(rng_)};
    set_header_length(f, choices[pick(0, std::size(choices) - 1)]);
  }
  // JSON edits keep the header length consistent (most of the time) so that they reach the
  // validation of the parsed header.
  void splice_header(std::vector<uint8_t>& f, size_t at, size_t erase, const std::string& insert) {
    auto [lo, hi] = header_range(f);
    if (at < lo || at > hi || hi > f.size()) return;
    erase = std::min(erase, hi - at);
    f.erase(f.begin() + static_cast<std::ptrdiff_t>(at), f.begin() + static_cast<std::ptrdiff_t>(at + erase));
    f.insert(f.begin() + static_cast<std::ptrdiff_t>(at), insert.begin(), insert.end());
    if (pick(0, 9) < 8) set_header_length(f, header_length(f) + insert.size() - erase);
  }
  void replace_number(std::vector<uint8_t>& f) {
    auto [lo, hi] = header_range(f);
    std::vector<size_t> starts;
    for (size_t i = lo; i < hi; ++i)
      if (f[i] >= '0' && f[i] <= '9' && (i == lo || f[i - 1] < '0' || f[i - 1] > '9')) starts.push_back(i);
    if (starts.empty()) return;
    const size_t at = starts[pick(0, starts.size() - 1)];
    size_t len = 0;
    while (at + len < hi && f[at + len] >= '0' && f[at + len] <= '9') ++len;
    static const char* const kNumbers[] = {"0", "1", "7", "-1", "-0", "2.5", "1e3", "1e400", "4294967296",
                                           "9223372036854775807", "9223372036854775808", "18446744073709551615",
                                           "18446744073709551616", "99999999999999999999999", "00", "-"};
    std::string number = kNumbers[pick(0, std::size(kNumbers) - 1)];
    if (pick(0, 3) == 0) number = std::to_string(pick(0, 200));
    splice_header(f, at, len, number);
  }
  void insert_char(std::vector<uint8_t>& f) {
    static const char kChars[] = "{}[],:\"\\ -0123456789eE.tfn\x01\xff";
    auto [lo, hi] = header_range(f);
    if (lo > hi) return;
    splice_header(f, pick(lo, hi), 0, std::string(1, kChars[pick(0, sizeof(kChars) - 2)]));
  }
  void delete_range(std::vector<uint8_t>& f) {
    auto [lo, hi] = header_range(f);
    if (lo >= hi) return;
    const size_t at = pick(lo, hi - 1);
    splice_header(f, at, pick(1, 12), "");
  }
  void duplicate_range(std::vector<uint8_t>& f) {
    auto [lo, hi] = header_range(f);
    if (lo >= hi) return;
    const size_t at = pick(lo, hi - 1);
    const size_t len = std::min(pick(1, 80), hi - at);
    std::string copy(f.begin() + static_cast<std::ptrdiff_t>(at), f.begin() + static_cast<std::ptrdiff_t>(at + len));
    splice_header(f, pick(lo, hi), 0, copy);
  }
  // Moves one tensor's [begin, end] by the same amount: size kept, so overlaps, holes and
  // out-of-range spans are what the parser sees.
  void shift_offsets(std::vector<uint8_t>& f) {
    auto [lo, hi] = header_range(f);
    std::string text(f.begin() + static_cast<std::ptrdiff_t>(lo), f.begin() + static_cast<std::ptrdiff_t>(hi));
    std::vector<size_t> hits;
    const std::string key = "\"data_offsets\":[";
    for (size_t p = text.find(key); p != std::string::npos; p = text.find(key, p + 1)) hits.push_back(p + key.size());
    if (hits.empty()) return;
    const size_t at = hits[pick(0, hits.size() - 1)];
    const size_t close = text.find(']', at);
    const size_t comma = text.find(',', at);
    if (close == std::string::npos || comma == std::string::npos || comma > close) return;
    const std::string a = text.substr(at, comma - at), b = text.substr(comma + 1, close - comma - 1);
    if (a.empty() || b.empty() || a.size() > 12 || b.size() > 12 ||
        a.find_first_not_of("0123456789") != std::string::npos || b.find_first_not_of("0123456789") != std::string::npos)
      return;
    const long long delta = static_cast<long long>(pick(0, 16)) - 8;
    const long long begin = std::stoll(a) + delta, end = std::stoll(b) + delta;
    splice_header(f, lo + at, close - at, std::to_string(begin) + "," + std::to_string(end));
  }
  void swap_dtype(std::vector<uint8_t>& f) {
    static const char* const kNames[] = {"F32", "F16", "BF16", "I64", "F64", "U8", "BOOL", "F8_E4M3", "X", ""};
    auto [lo, hi] = header_range(f);
    std::string text(f.begin() + static_cast<std::ptrdiff_t>(lo), f.begin() + static_cast<std::ptrdiff_t>(hi));
    std::vector<size_t> hits;
    for (size_t p = text.find("\"dtype\":\""); p != std::string::npos; p = text.find("\"dtype\":\"", p + 1))
      hits.push_back(p + 9);
    if (hits.empty()) return;
    const size_t at = hits[pick(0, hits.size() - 1)];
    const size_t end = text.find('"', at);
    if (end == std::string::npos) return;
    splice_header(f, lo + at, end - at, kNames[pick(0, std::size(kNames) - 1)]);
  }

  std::mt19937_64& rng_;
};

// Independent check of a header the parser accepted, and a read of every byte it points to.
void check_accepted(const SafetensorsFile& file, size_t file_size, uint64_t& checksum) {
  const SafetensorsHeader& h = file.header();
  ASSERT_LE(h.data_start, file_size);
  const uint64_t data_size = file_size - h.data_start;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  uint64_t covered = 0;
  for (const SafetensorsTensorInfo& t : h.tensors) {
    ASSERT_LE(t.begin, t.end);
    ASSERT_LE(t.end, data_size);
    unsigned __int128 need = dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      ASSERT_GE(d, 0);
      need *= static_cast<unsigned __int128>(d);
    }
    ASSERT_TRUE(need == static_cast<unsigned __int128>(t.end - t.begin)) << t.name;
    for (const auto& [b, e] : spans) ASSERT_TRUE(t.end <= b || e <= t.begin || t.begin == t.end) << "overlap " << t.name;
    if (t.end > t.begin) spans.emplace_back(t.begin, t.end);
    covered += t.end - t.begin;
    const TensorView v = file.view(t);
    const auto* bytes = static_cast<const uint8_t*>(v.data);
    for (size_t i = 0; i < v.nbytes(); ++i) checksum = checksum * 31 + bytes[i];
  }
  ASSERT_EQ(covered, data_size);
}

// The message with quoted names and numbers blanked out: one key per kind of error.
std::string error_kind(const std::string& message) {
  std::string kind;
  bool quoted = false;
  for (char c : message) {
    if (c == '\'') {
      quoted = !quoted;
      kind += c;
    } else if (!quoted) {
      const bool digit = c >= '0' && c <= '9';
      if (!digit) {
        kind += c;
      } else if (kind.empty() || kind.back() != '#') {
        kind += '#';
      }
    }
    if (kind.size() >= 48) break;
  }
  return kind;
}

TEST(SafetensorsFuzz, CorruptionsLoadOrFailCleanly) {
  auto rng = testing::rng_for_test();
  const std::vector<std::vector<uint8_t>> bases = {base_file(rng, false), base_file(rng, true)};
  Mutator mutator(rng);
  constexpr int kIterations = 12000;
  int accepted = 0;
  std::map<std::string, int> errors;  // by the first words of the message
  uint64_t checksum = 0;
  for (int iter = 0; iter < kIterations; ++iter) {
    std::vector<uint8_t> f = bases[static_cast<size_t>(iter) % bases.size()];
    for (size_t m = mutator.pick(1, 3); m > 0; --m) mutator.mutate(f);
    const size_t size = f.size();
    Result<SafetensorsFile> file = SafetensorsFile::from_bytes(std::move(f), "fuzz.safetensors");
    if (file.ok()) {
      ++accepted;
      check_accepted(*file, size, checksum);
      if (::testing::Test::HasFatalFailure()) FAIL() << "iteration " << iter;
      continue;
    }
    const Status& s = file.status();
    ASSERT_TRUE(s.code() == StatusCode::kDataLoss || s.code() == StatusCode::kUnsupported)
        << "iteration " << iter << ": " << s.to_string();
    ASSERT_EQ(s.message().rfind("fuzz.safetensors: ", 0), 0u) << s.to_string();
    ASSERT_GT(s.message().size(), std::string("fuzz.safetensors: ").size() + 10);
    errors[error_kind(s.message().substr(18))]++;
  }
  // The mutations reach many different checks, and some leave a valid file.
  EXPECT_GT(accepted, 50);
  EXPECT_GT(kIterations - accepted, kIterations / 2);
  EXPECT_GE(errors.size(), 12u);
  std::string summary;
  for (const auto& [prefix, count] : errors) summary += "  " + std::to_string(count) + " × " + prefix + "\n";
  std::cout << accepted << " of " << kIterations << " mutated files accepted (checksum " << checksum
            << "); errors by kind:\n" << summary;
}

}  // namespace
}  // namespace kascade
