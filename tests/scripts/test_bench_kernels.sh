#!/usr/bin/env bash
# tests/scripts/test_bench_kernels.sh — `kascade bench prefill` / `kascade bench decode` with stand-in
# benchmark binaries and scripts (no GPU, no PyTorch): the binary beside the CLI gets exactly the
# options given plus --json OUT/ours.json; the cuDNN baseline gets only the options it takes; the
# report joins both into OUT/table.md, which is printed; --no-cudnn skips baseline and report; a
# failing step, a failing baseline and a missing binary stop the command with an error naming them.
#   tests/scripts/test_bench_kernels.sh KASCADE_BINARY
set -euo pipefail
kascade=${1:?KASCADE_BINARY}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/log" 2>/dev/null; exit 1; }
mkdir -p "$work/bin" "$work/repo/bench/prefill"
cp "$kascade" "$work/bin/kascade"   # a copy: the CLI looks for the benchmarks beside its own file
stand_in() {  # stand_in PATH NAME: records its arguments in $work/NAME.args, writes --json's file
  cat >"$1" <<SH
#!/usr/bin/env bash
echo "\$*" > "$work/$2.args"
[[ -e "$work/$2.fail" ]] && exit 1
while [[ \$# -gt 0 ]]; do [[ \$1 == --json ]] && echo '{}' > "\$2"; shift; done
exit 0
SH
  chmod +x "$1"
}
stand_in "$work/bin/kascade_bench_prefill" bench_prefill
stand_in "$work/bin/kascade_bench_decode" bench_decode
for s in prefill/cudnn_prefill cudnn_decode; do
  name=$(basename "$s")
  cat >"$work/repo/bench/$s.py" <<PY
import sys
open("$work/$name.args", "w").write(" ".join(sys.argv[1:]) + "\n")
import os
if os.path.exists("$work/$name.fail"):
    sys.exit(1)
json_path = sys.argv[sys.argv.index("--json") + 1]
open(json_path, "w").write("{}")
PY
done
for s in prefill/prefill_report decode_report; do
  echo "import sys; print('| table of ' + sys.argv[1] + ' and ' + sys.argv[2] + ' |')" >"$work/repo/bench/$s.py"
done
export KASCADE_REPO_DIR="$work/repo"
run() { "$work/bin/kascade" bench "$@" >"$work/log" 2>&1; }

run prefill --lens 8192 --kernels reuse --out "$work/p" || fail "bench prefill exited non-zero"
[[ $(cat "$work/bench_prefill.args") == "--kernels reuse --lens 8192 --json $work/p/ours.json" ]] ||
  fail "the prefill binary's arguments: $(cat "$work/bench_prefill.args")"
[[ $(cat "$work/cudnn_prefill.args") == "--lens 8192 --json $work/p/cudnn.json" ]] ||
  fail "the prefill baseline's arguments (no --kernels): $(cat "$work/cudnn_prefill.args")"
grep -qx "| table of $work/p/ours.json and $work/p/cudnn.json |" "$work/p/table.md" || fail "table.md"
grep -q "| table of $work/p/ours.json" "$work/log" || fail "the table is not printed"

run decode --batches 8 --layouts paged --lens 131072 --topk rows --flush read --warmup-ms 25 --out "$work/d" ||
  fail "bench decode exited non-zero"
[[ $(cat "$work/bench_decode.args") == "--batches 8 --flush read --layouts paged --lens 131072 --topk rows --warmup-ms 25 --json $work/d/ours.json" ]] ||
  fail "the decode binary's arguments: $(cat "$work/bench_decode.args")"
[[ $(cat "$work/cudnn_decode.args") == "--batches 8 --flush read --lens 131072 --warmup-ms 25 --json $work/d/cudnn.json" ]] ||
  fail "the decode baseline's arguments (no --layouts, no --topk; the same --flush and --warmup-ms): $(cat "$work/cudnn_decode.args")"

rm -f "$work/cudnn_prefill.args"
run prefill --no-cudnn --out "$work/n" || fail "--no-cudnn exited non-zero"
[[ ! -e "$work/cudnn_prefill.args" ]] || fail "--no-cudnn ran the baseline"
[[ ! -e "$work/n/table.md" ]] || fail "--no-cudnn wrote a table"
grep -q "no baseline, no ratios" "$work/log" || fail "--no-cudnn says what it did"

touch "$work/cudnn_prefill.fail"
if run prefill --out "$work/f"; then fail "a failing baseline was not an error"; fi
grep -q "needs PyTorch with cuDNN" "$work/log" || fail "the baseline's failure names the need and --no-cudnn"
rm "$work/cudnn_prefill.fail"
touch "$work/bench_prefill.fail"
if run prefill --out "$work/f"; then fail "a failing benchmark was not an error"; fi
grep -q "kascade_bench_prefill exited with status 1" "$work/log" || fail "the failing step is named"
rm "$work/bin/kascade_bench_decode"
if run decode --out "$work/m"; then fail "a missing binary was not an error"; fi
grep -q "cannot find kascade_bench_decode" "$work/log" || fail "the missing binary is named"
echo "kascade bench prefill / decode: arguments, steps and errors as expected"
