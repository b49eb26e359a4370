#!/usr/bin/env bash
# scripts/run.sh — the main job: sets everything up, builds kascade (CPU backend) and runs
# `kascade generate` on the bundled model, models/kascade-tiny, with Kascade attention.
#
# Honest state (2026-12-02): kascade-tiny's architecture, config and trained tokenizer ship in the
# repository, but its weights are not trained yet (docs/model.md holds the recipe). Until they are,
# this job runs the model with --dummy-weights (seeded random weights of the right shapes), so the
# generated text is meaningless: what it shows is the whole pipeline working on the CPU — tokenizer,
# chat template, chunked prefill over a ~6K-token prompt, Kascade attention (anchors 0,2,6 with
# identity head maps, 10 % Top-k) and decode — and the closing report (prefill and decode tokens/s,
# fraction of keys attended by anchor and reuse layers).
#   Extra arguments are passed to `kascade generate` (e.g. --attention dense).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir=${BUILD_DIR:-build-run}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKASCADE_CUDA=OFF -DKASCADE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target kascade_cli
model=models/kascade-tiny
weights=()
ls "$model"/*.safetensors >/dev/null 2>&1 || weights=(--dummy-weights --dummy-seed 7)
prompt_file=$(mktemp)
trap 'rm -f "$prompt_file"' EXIT
{
  for i in $(seq 1 120); do
    echo "Line $i of the log: the reactor in sector $((i % 7)) reported a nominal temperature of $((300 + i)) kelvin."
  done
  echo "The secret code word is PERIWINKLE."
  echo "Question: what is the secret code word?"
} >"$prompt_file"
"$build_dir"/tools/kascade generate --model "$model" "${weights[@]}" --prompt-file "$prompt_file" --chat \
  --attention kascade --anchors 0,2,6 --topk-fraction 0.1 --max-new-tokens 24 "$@"
