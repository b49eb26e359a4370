#!/usr/bin/env bash
# tests/scripts/test_train_ship_call.sh — scripts/train_ship_call.sh with a stand-in CLI, trainer and ship
# test (no GPU): the CLI is unpacked once, for the chunk and the ship test alike; the trainer gets c24's
# arguments, then the caller's (so a repeated option such as --lr comes last and wins), a time budget inside
# TOTAL less SHIP_SECONDS; the ship test gets the unpacked CLI, the saved baseline, the candidate (with the
# tokenizer copied in), and no TASKS / LENGTHS / SAMPLES of the caller's (the baseline's own are used:
# tests/scripts/test_ship_test.sh); the
# shards land in OUT and the rest in OUT/rest.tar.xz; a failed chunk skips the ship test and fails the call;
# a bad seed, missing data, missing baseline results and a TOTAL that leaves no training time are refused.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/log" 2>/dev/null; exit 1; }
mkdir -p "$work/pack" "$work/data/natural" "$work/data/eval" "$work/baseline"
printf '#!/usr/bin/env bash\necho "kascade stand-in $*"\n' >"$work/pack/kascade"
chmod +x "$work/pack/kascade"
tar cJf "$work/cli.tar.xz" -C "$work/pack" .
echo '{}' >"$work/baseline/samples.jsonl"
cat >"$work/trainer.py" <<'PY'
import pathlib, sys
args = sys.argv[1:]
open(sys.argv[0] + ".args", "w").write("\n".join(args))
if "--exit" in args:
    sys.exit(int(args[args.index("--exit") + 1]))
out = pathlib.Path(args[args.index("--out") + 1])
out.mkdir(parents=True)
for name in ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json",
             "training_log.csv", "eval_log.csv"]:
    (out / name).write_text(name)
PY
cat >"$work/ship.sh" <<'SH'
#!/usr/bin/env bash
echo "SAMPLES=${SAMPLES-unset} LENGTHS=${LENGTHS-unset} TASKS=${TASKS-unset}" >"$0.env"
printf '%s\n' "$@" >"$0.args"
"$1" ping >"$0.cli"
[[ -f "$3/tokenizer.json" ]] || { echo "no tokenizer in the candidate" >&2; exit 1; }
mkdir -p "$4" && echo "verdict: stand-in" >"$4/compare.md"
SH
chmod +x "$work/ship.sh"
call() {
  TRAIN_TINY="$work/trainer.py" SHIP_TEST="$work/ship.sh" TRAIN_DATA="$work/data" SHIP_BASELINE="$work/baseline" \
    bash "$here/scripts/train_ship_call.sh" "$@" >"$work/log" 2>&1
}

TASKS=niah_single_1 SAMPLES=2 TOTAL=400 SHIP_SECONDS=100 call "$work/cli.tar.xz" "$work/out" c99-test 36000000 --lr 1e-4 || fail "the call failed"
args=$(tr '\n' ' ' <"$work/trainer.py.args")
[[ "$args" == *"--chunk c99-test --out "*" --generate-seed 36000000 "*"--lr 3e-4 "*"--time-budget "*" --lr 1e-4" ]] \
  || fail "trainer arguments: $args"
[[ "$args" == "--generate /tmp/kascade-call."*"/cli/kascade "* ]] || fail "the chunk did not get the call's unpacked CLI: $args"
budget=$(sed -n 's/.*--time-budget \([0-9]*\) .*/\1/p' <<<"$args")
(( budget > 250 && budget <= 290 )) || fail "time budget $budget not inside TOTAL - SHIP_SECONDS"
grep -q -- "--natural $work/data/natural" <<<"$args" || fail "natural data not passed: $args"
grep -qx "SAMPLES=unset LENGTHS=unset TASKS=unset" "$work/ship.sh.env" || fail "ship env: $(cat "$work/ship.sh.env")"
[[ "$(sed -n 2p "$work/ship.sh.args")" == "$work/baseline" ]] || fail "ship baseline: $(cat "$work/ship.sh.args")"
grep -qx -- "--device" "$work/ship.sh.args" && grep -qx cuda "$work/ship.sh.args" || fail "ship test not on cuda"
grep -q "kascade stand-in ping" "$work/ship.sh.cli" || fail "the ship test's CLI did not run"
for f in model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json rest.tar.xz; do
  [[ -f "$work/out/$f" ]] || fail "no $f in OUT"
done
tar tJf "$work/out/rest.tar.xz" >"$work/list"
grep -q "c99-test.log" "$work/list" && grep -q "training_log.csv" "$work/list" && grep -q "ship/compare.md" "$work/list" && grep -q "call.log" "$work/list" \
  || fail "rest.tar.xz holds: $(cat "$work/list")"
grep -q "training exited with 0, ship test 0" "$work/log" || fail "no summary line"

rm -rf "$work/out" "$work/ship.sh.env"
if call "$work/cli.tar.xz" "$work/out" c99-test 36000000 --exit 3; then fail "a failed chunk passed"; fi
[[ ! -e "$work/ship.sh.env" ]] || fail "the ship test ran after a failed chunk"
grep -q "training exited with 3, ship test skipped" "$work/log" || fail "failed-chunk summary"
[[ -f "$work/out/rest.tar.xz" ]] || fail "no logs packed after a failed chunk"

if call "$work/cli.tar.xz" "$work/out" c99-test 36e6; then fail "a bad seed was accepted"; fi
grep -q "SEED '36e6' is not a number" "$work/log" || fail "bad-seed message"
if TRAIN_DATA="$work/nodata" TRAIN_TINY="$work/trainer.py" SHIP_BASELINE="$work/baseline" \
  bash "$here/scripts/train_ship_call.sh" "$work/cli.tar.xz" "$work/out" c99-test 1000000 >"$work/log" 2>&1; then
  fail "missing data accepted"
fi
grep -q "nodata/natural is missing" "$work/log" || fail "missing-data message"
if SHIP_BASELINE="$work/data" TRAIN_DATA="$work/data" bash "$here/scripts/train_ship_call.sh" "$work/cli.tar.xz" \
  "$work/out" c99-test 1000000 >"$work/log" 2>&1; then fail "missing baseline accepted"; fi
grep -q "no saved ship-test results" "$work/log" || fail "missing-baseline message"
if TOTAL=100 call "$work/cli.tar.xz" "$work/out" c99-test 1000000; then fail "TOTAL=100 accepted"; fi
grep -q "leaves no time to train" "$work/log" || fail "short-TOTAL message"
echo "PASS"
