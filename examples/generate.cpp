// examples/generate.cpp — the runtime API (kascade/runtime.h) from a program of your own: load a
// Hugging Face Llama / Qwen3 checkpoint, tokenize a prompt, generate with Kascade attention (the
// model directory's kascade_calibration.json, made by `kascade calibrate`), print the text, and
// report how many keys the attention read (on stderr; stdout holds the generated text alone).
//   generate MODEL_DIR "prompt" [cpu|cuda] [policy] [max_new_tokens]
// Built and run against an installed kascade by tests/scripts/test_install.sh.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kascade/runtime.h"
#include "kascade/tokenizer.h"

namespace {

int fail(const kascade::Status& status, const char* what) {
  std::fprintf(stderr, "generate: %s: %s\n", what, status.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR \"prompt\" [cpu|cuda] [policy] [max_new_tokens]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path model_dir = argv[1];
  const std::string prompt = argv[2];

  kascade::RuntimeOptions options;
  options.model_path = model_dir;
  if (argc > 3) {
    auto device = kascade::parse_device(argv[3]);
    if (!device.ok()) return fail(device.status(), "device");
    options.device = *device;
  }
  options.attention.policy = argc > 4 ? argv[4] : "kascade";
  const std::filesystem::path calibration = model_dir / "kascade_calibration.json";
  if (options.attention.policy.rfind("kascade", 0) == 0) options.attention.calibration_file = calibration.string();
  options.max_context = 8192;

  auto tokenizer = kascade::Tokenizer::from_file((model_dir / "tokenizer.json").string());
  if (!tokenizer.ok()) return fail(tokenizer.status(), "tokenizer");
  auto ids = tokenizer->encode(prompt, /*add_special_tokens=*/true);
  if (!ids.ok()) return fail(ids.status(), "encode");

  auto runtime = kascade::Runtime::create(options);
  if (!runtime.ok()) return fail(runtime.status(), "runtime");
  std::fprintf(stderr, "%s\n", (*runtime)->describe().c_str());

  kascade::GenerateOptions generate;
  generate.max_new_tokens = argc > 5 ? std::atoi(argv[5]) : 24;
  // (GenerateCallbacks::on_token would stream each token as it is sampled; this example prints the
  // whole text at the end, decoded in one piece so multi-byte characters split over tokens come out whole.)
  auto result = (*runtime)->generate({*ids}, generate);
  if (!result.ok()) return fail(result.status(), "generate");
  auto text = tokenizer->decode(result->sequences[0].tokens, /*skip_special_tokens=*/true);
  if (!text.ok()) return fail(text.status(), "decode");
  std::printf("%s\n", text->c_str());  // stdout holds the generated text alone, as `kascade generate` prints it
  const kascade::GenerateStats& stats = result->stats;
  std::fprintf(stderr, "%lld prompt tokens, %lld generated (%s); keys attended: prefill %.3f, decode %.3f\n",
              static_cast<long long>(stats.prefill_tokens),
              static_cast<long long>(result->sequences[0].tokens.size()),
              kascade::finish_reason_name(result->sequences[0].finish), stats.attended.prefill_total.fraction(),
              stats.attended.decode_total.fraction());
  return 0;
}
