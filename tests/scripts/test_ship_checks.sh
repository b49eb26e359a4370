#!/usr/bin/env bash
# tests/scripts/test_ship_checks.sh — scripts/ship_checks.sh with stand-in binaries (kascade, kascade_cuda_tests) and
# a stand-in fixture script, in a copy of the scripts beside a hand-made model folder (no GPU): calibrate runs on the
# GPU with the dev split at 4K, refined by agreement, and its file replaces the model's; the fixture is regenerated for
# kascade_tiny alone and copied into tests/data/hf; the GPU tests run after both, through the build's source folder
# (linked to the tree when it does not exist), with the pack's lib/ on their library path and the tiny-model filter;
# the dev check is dense and kascade on the dev split; OUT holds the calibration file, its log, the fixture and
# rest.tar.xz; CAL_LENGTHS reaches calibrate. A failing calibration leaves the model's file alone and fails the call;
# a source folder that is another tree, a missing tarball, a tarball without the tests and an unknown step are
# refused with their messages.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/log" 2>/dev/null; exit 1; }
tree=$work/tree
mkdir -p "$tree/scripts" "$tree/models/kascade-tiny" "$work/pack"
cp "$here/scripts/ship_checks.sh" "$here/scripts/unpack_cli.sh" "$here/scripts/step_runner.sh" "$tree/scripts/"
echo '{}' >"$tree/models/kascade-tiny/model.safetensors.index.json"
echo '{"old": true}' >"$tree/models/kascade-tiny/kascade_calibration.json"
source_dir=$work/build-host/main  # the folder the stand-in tests were "built" in: absent, so the script links it
cat >"$work/pack/kascade" <<SH
#!/usr/bin/env bash
[[ "\$1" == --help ]] && exit 0
printf '%s\n' "\$@" >"$work/kascade.\$1.args"
out=\$(awk '/^(-o|--out)\$/ {getline; print}' "$work/kascade.\$1.args")
case "\$1" in
  calibrate) [[ -n "\${CAL_FAIL:-}" ]] && { echo "calibrate: stand-in failure" >&2; exit 4; }
             echo "collected 13 prompts"; echo '{"new": true}' >"\$out" ;;
  eval) mkdir -p "\$out"; echo "| **average** | 4096 | | **80.0** | **70.0** |" >"\$out/results.md"; echo '{}' >"\$out/results.json" ;;
esac
SH
cat >"$work/pack/kascade_cuda_tests" <<SH
#!/usr/bin/env bash
printf '%s\n' "\$@" >"$work/tests.args"
dir=\$(cd "\$(dirname "\$0")" && pwd)
[[ ":\${LD_LIBRARY_PATH:-}:" == *":\$dir/lib:"* ]] || { echo "libopenblas.so.0: not found"; exit 127; }
grep -q new "$source_dir/models/kascade-tiny/kascade_calibration.json" || { echo "old calibration"; exit 1; }
[[ -f "$source_dir/tests/data/hf/kascade_tiny.fixture.json" ]] || { echo "no fixture"; exit 1; }
echo "[  PASSED  ] 17 tests."
SH
chmod +x "$work/pack/kascade" "$work/pack/kascade_cuda_tests"
echo "$source_dir" >"$work/pack/source_dir"
tar cJf "$work/bins.tar.xz" -C "$work/pack" .
cat >"$work/fixtures.py" <<'PY'
import pathlib, sys
args = sys.argv[1:]
assert args[args.index("--only") + 1] == "kascade_tiny", args
out = pathlib.Path(args[args.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "kascade_tiny.fixture.json").write_text("{}")
(out / "kascade_tiny.logits.f32").write_bytes(b"\0" * 8)
PY
call() { HF_FIXTURES="$work/fixtures.py" bash "$tree/scripts/ship_checks.sh" "$@" >"$work/log" 2>&1; }

call "$work/bins.tar.xz" "$work/out" || fail "the checks failed"
for f in kascade_calibration.json calibration-log.txt kascade_tiny.fixture.json kascade_tiny.logits.f32 rest.tar.xz; do
  [[ -f "$work/out/$f" ]] || fail "no $f in OUT"
done
grep -q new "$tree/models/kascade-tiny/kascade_calibration.json" || fail "the model's calibration was not replaced"
grep -q "collected 13 prompts" "$work/out/calibration-log.txt" || fail "calibration log: $(cat "$work/out/calibration-log.txt")"
! grep -q "^====" "$work/out/calibration-log.txt" || fail "the step header is in the calibration log"
cal=$(tr '\n' ' ' <"$work/kascade.calibrate.args")
for want in "--device cuda" "--dev-set tasks:all" "--lengths 4k" "--num-prompts 13" "--anchors 2..8" "--refine agreement"; do
  [[ "$cal" == *"$want"* ]] || fail "calibrate arguments lack '$want': $cal"
done
[[ -L "$source_dir" && -f "$source_dir/tests/data/hf/kascade_tiny.logits.f32" ]] || fail "the source folder was not linked"
grep -q -- "--gtest_filter=\*TinyModel\*" "$work/tests.args" || fail "tests filter: $(cat "$work/tests.args")"
ev=$(tr '\n' ' ' <"$work/kascade.eval.args")
[[ "$ev" == *"--split dev"* && "$ev" == *"--policies dense,kascade"* && "$ev" == *"--device cuda"* ]] || fail "dev eval: $ev"
tar tJf "$work/out/rest.tar.xz" >"$work/list"
for f in calibrate.log fixture.log tests.log dev.log dev/results.md summary.txt; do
  grep -q "$f" "$work/list" || fail "rest.tar.xz lacks $f: $(cat "$work/list")"
done
grep -q "average" "$work/log" || fail "the dev check's averages were not printed"
[[ $(grep -c "rc 0 " "$work/log") -eq 4 ]] || fail "summary"

CAL_LENGTHS=4k,8k STEPS=calibrate call "$work/bins.tar.xz" "$work/out1" || fail "calibrate at two lengths failed"
grep -qx "4k,8k" "$work/kascade.calibrate.args" || fail "CAL_LENGTHS not passed: $(tr '\n' ' ' <"$work/kascade.calibrate.args")"

echo '{"old": true}' >"$tree/models/kascade-tiny/kascade_calibration.json"
if CAL_FAIL=1 STEPS="calibrate" call "$work/bins.tar.xz" "$work/out2"; then fail "a failed calibration passed"; fi
grep -q old "$tree/models/kascade-tiny/kascade_calibration.json" || fail "a failed calibration replaced the file"
grep -Eq "calibrate +rc 4 " "$work/log" || fail "failed-step summary"
[[ -f "$work/out2/rest.tar.xz" ]] || fail "no logs packed after a failed step"

rm "$source_dir" && mkdir -p "$source_dir"
if call "$work/bins.tar.xz" "$work/out3"; then fail "another tree as the source folder was accepted"; fi
grep -q "exists and is not this tree" "$work/log" || fail "other-tree message"
if call "$work/none.tar.xz" "$work/out3"; then fail "a missing tarball was accepted"; fi
grep -q "no binary tarball" "$work/log" || fail "missing-tarball message"
rm "$work/pack/kascade_cuda_tests" "$work/pack/source_dir" && tar cJf "$work/cli.tar.xz" -C "$work/pack" .
if call "$work/cli.tar.xz" "$work/out3"; then fail "a tarball without the tests was accepted"; fi
grep -q "holds no kascade_cuda_tests" "$work/log" || fail "no-tests message"
if STEPS="calibrate bench" call "$work/bins.tar.xz" "$work/out3"; then fail "an unknown step was accepted"; fi
grep -q "unknown step 'bench'" "$work/log" || fail "unknown-step message"
echo "PASS"
