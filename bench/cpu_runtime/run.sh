#!/usr/bin/env bash
# bench/cpu_runtime/run.sh — CPU speed of the kascade runtime (issue 3, part 8): prefill and decode
# throughput of a ~32M-parameter Llama-style model with dummy weights at 1K and 4K context, dense
# and kascade, next to the sgemm throughput this machine reaches (measured in the same run by
# gemm_roof.cpp at the model's own GEMM shapes and at 2048³).
#
#   bash bench/cpu_runtime/run.sh [BUILD_DIR] [OUT_DIR]     # defaults: build, $TMPDIR/kascade_cpu_runtime
#
# Needs a built `kascade` CLI in BUILD_DIR/tools (cmake --build BUILD_DIR --target kascade_cli),
# g++ and OpenBLAS (scripts/setup.sh installs both) and python3 for the table. Writes one JSON
# report per run into OUT_DIR and prints a markdown table for docs/perf.md (CPU section).
# Environment: CONTEXTS (default "1024 4096"), POLICIES (default "dense kascade"), NEW_TOKENS (32),
# CHUNK (512), ANCHORS (0,2,5), REPEATS (3). Each configuration runs REPEATS times; the table shows
# the best prefill and the best decode rate over the repeats (the machine is shared: other work
# only ever slows a run down), and the spread (worst/best) next to them.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-${TMPDIR:-/tmp}/kascade_cpu_runtime}
contexts=${CONTEXTS:-"1024 4096"}
policies=${POLICIES:-"dense kascade"}
new_tokens=${NEW_TOKENS:-32}
chunk=${CHUNK:-512}
anchors=${ANCHORS:-0,2,5}
repeats=${REPEATS:-3}
kascade="$build/tools/kascade"
[ -x "$kascade" ] || { echo "run.sh: $kascade not found; build it with: cmake --build $build --target kascade_cli" >&2; exit 2; }
mkdir -p "$out"

# The model: 8 layers, hidden 512, 8 heads / 2 KV heads of 64, SwiGLU 1536, vocab 16384, tied
# embeddings: 24.1M parameters in the layers + 8.4M embedding = 32.5M.
model="$out/model"
mkdir -p "$model"
cat > "$model/config.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 16384, "hidden_size": 512,
 "intermediate_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 2,
 "head_dim": 64, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
 "tie_word_embeddings": true, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}
EOF

g++ -O2 -std=c++20 bench/cpu_runtime/gemm_roof.cpp -lopenblas -o "$out/gemm_roof"
# Shapes (M tokens, N out, K in): prefill chunk q/o, k/v, gate/up, down; decode q/o, gate/up; a large square.
# Measured before and after the runs; the table uses the better of the two for each shape.
roof_shapes="$chunk,512,512 $chunk,128,512 $chunk,1536,512 $chunk,512,1536 1,512,512 1,1536,512 2048,2048,2048"
"$out/gemm_roof" $roof_shapes > "$out/gemm_roof.jsonl"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "openblas: $(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo unknown)"
} > "$out/machine.txt"

rm -f "$out"/run_*.json
for r in $(seq 1 "$repeats"); do
  for n in $contexts; do
    for policy in $policies; do
      extra=()
      [ "$policy" = dense ] || extra=(--anchors "$anchors")
      echo "run.sh: repeat $r, context $n, $policy" >&2
      "$kascade" generate --model "$model" --dummy-weights --random-prompt "$n" --max-new-tokens "$new_tokens" \
        --ignore-eos --chunk "$chunk" --attention "$policy" "${extra[@]}" --no-progress \
        --report-json "$out/run_${n}_${policy}_${r}.json" > /dev/null
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
"$out/gemm_roof" $roof_shapes >> "$out/gemm_roof.jsonl"

python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
roof = {}
for line in open(os.path.join(out, "gemm_roof.jsonl")):
    r = json.loads(line)
    key = (r["m"], r["n"], r["k"])
    if key not in roof or r["gflops"] > roof[key]["gflops"]:
        roof[key] = r
roof = list(roof.values())
print(open(os.path.join(out, "machine.txt")).read().strip())
print()
print("sgemm (OpenBLAS, its own threads) at the model's shapes, GFLOP/s (best of before / after the runs):")
for r in roof:
    print(f"  M={r['m']:5d} N={r['n']:5d} K={r['k']:5d}: {r['gflops']:7.1f}")
big = max(roof, key=lambda r: r["m"] * r["n"] * r["k"])["gflops"]
print()
print("| context | attention | prefill tok/s (spread) | decode tok/s (spread) | prefill time: matmul / attention / other | "
      "matmul GFLOP/s in prefill (vs sgemm 2048³) | decode time: matmul / attention / other | "
      "keys attended prefill / decode |")
print("|---|---|---|---|---|---|---|---|")
groups = {}
for path in glob.glob(os.path.join(out, "run_*.json")):
    j = json.load(open(path))
    groups.setdefault((j["prompt_tokens"], j["attention"]), []).append(j)
for (n, policy), runs in sorted(groups.items()):
    best_p = max(runs, key=lambda j: j["prefill"]["tokens_per_s"])
    best_d = max(runs, key=lambda j: j["decode"]["tokens_per_s"])
    worst_p = min(j["prefill"]["tokens_per_s"] for j in runs)
    worst_d = min(j["decode"]["tokens_per_s"] for j in runs)
    p, d = best_p["prefill"], best_d["decode"]
    t = p["timings"]
    total = p["seconds"]
    share = " / ".join(f"{100 * t[k] / total:.0f}%" for k in ("matmul_s", "attention_s", "other_s"))
    td = d["timings"]
    dshare = " / ".join(f"{100 * td[k] / d['seconds']:.0f}%" for k in ("matmul_s", "attention_s", "other_s"))
    ap = best_p.get("attended_prefill", {}).get("all", {}).get("fraction", 1.0)
    ad = best_d.get("attended_decode", {}).get("all", {}).get("fraction", 1.0)
    print(f"| {n} | {policy} | {p['tokens_per_s']:.0f} ({worst_p / p['tokens_per_s']:.2f}) | "
          f"{d['tokens_per_s']:.1f} ({worst_d / d['tokens_per_s']:.2f}) | {share} | "
          f"{t['matmul_gflops']:.0f} ({t['matmul_gflops'] / big:.2f}) | {dshare} | {100 * ap:.1f}% / {100 * ad:.1f}% |")
print(f"\n{len(runs)} runs per row; spread = worst / best rate.")
PY
