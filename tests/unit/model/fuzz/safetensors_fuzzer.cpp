// safetensors_fuzzer.cpp — libFuzzer target for the safetensors header parser and the views it
// hands out (src/model/safetensors.cpp). Complements the deterministic corruption test
// tests/unit/model/test_safetensors_fuzz.cpp (which runs in every CI build); this one is run by
// hand, with clang (Debian package clang), as long as one likes:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
//     tests/unit/model/fuzz/safetensors_fuzzer.cpp src/model/safetensors.cpp src/model/weights.cpp \
//     src/model/config.cpp src/core/*.cpp -o /tmp/safetensors_fuzzer
//   mkdir -p /tmp/st_corpus && cp tests/data/model/tiny_qwen3_tied/model.safetensors /tmp/st_corpus/
//   /tmp/safetensors_fuzzer -max_total_time=300 -max_len=65536 /tmp/st_corpus
// Property: every input either loads (and then every byte of every tensor view lies inside the
// input and the tensors tile the data section) or fails with DataLoss / Unsupported; no crash.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  kascade::Result<kascade::SafetensorsFile> file = kascade::SafetensorsFile::from_bytes(std::move(bytes), "fuzz");
  if (!file.ok()) {
    const kascade::StatusCode code = file.status().code();
    if (code != kascade::StatusCode::kDataLoss && code != kascade::StatusCode::kUnsupported) std::abort();
    return 0;
  }
  const kascade::SafetensorsHeader& header = file->header();
  if (header.data_start > size) std::abort();
  uint64_t covered = 0;
  unsigned checksum = 0;
  for (const kascade::SafetensorsTensorInfo& t : header.tensors) {
    if (t.begin != covered || t.end < t.begin || t.end > size - header.data_start) std::abort();
    covered = t.end;
    const kascade::TensorView view = file->view(t);
    if (view.nbytes() != t.end - t.begin) std::abort();
    const auto* p = static_cast<const uint8_t*>(view.data);
    for (size_t i = 0; i < view.nbytes(); ++i) checksum += p[i];  // ASan checks each read
  }
  if (covered != size - header.data_start) std::abort();
  return static_cast<int>(checksum & 0);
}
