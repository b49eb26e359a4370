#!/usr/bin/env bash
# tests/scripts/test_train_chunk_gpu.sh — scripts/train_chunk_gpu.sh with a stand-in CLI (a script
# that needs its packed lib/ on LD_LIBRARY_PATH) and a stand-in trainer (records its arguments and
# runs the --generate CLI): the wrapper reaches the packed CLI with lib/ on the path, the trainer gets
# --generate / --chunk / --out before the caller's options, the console lands in OUT/CHUNK.log, the
# trainer's exit status comes back, CHUNK_SECONDS stops a long run (124); a real (compiled) CLI whose
# shared library is not packed gets it linked from CLI_LIB_DIRS, and does not start without it; a CLI
# that does not start, a missing tarball and a bad chunk name are refused with a message; a folder unpacked by
# scripts/unpack_cli.sh is run as it is (and kept), a folder that is not one is refused.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/log" 2>/dev/null; exit 1; }
mkdir -p "$work/pack/lib"
touch "$work/pack/lib/libmarker.so.0"
cat >"$work/pack/kascade" <<'SH'
#!/usr/bin/env bash
# stand-in CLI: refuses to start unless its lib/ is on LD_LIBRARY_PATH
dir=$(cd "$(dirname "$0")" && pwd)
[[ ":${LD_LIBRARY_PATH:-}:" == *":$dir/lib:"* ]] || { echo "libmarker.so.0: not found" >&2; exit 127; }
echo "kascade stand-in $*"
SH
chmod +x "$work/pack/kascade"
tar cJf "$work/cli.tar.xz" -C "$work/pack" .
cat >"$work/trainer.py" <<'PY'
import subprocess, sys, time
args = sys.argv[1:]
open(sys.argv[0] + ".args", "w").write("\n".join(args))
cli = args[args.index("--generate") + 1]
print(subprocess.run([cli, "tasks"], capture_output=True, text=True, check=True).stdout.strip())
if "--sleep" in args:
    time.sleep(30)
sys.exit(int(args[args.index("--exit") + 1]) if "--exit" in args else 0)
PY
run() { TRAIN_TINY="$work/trainer.py" bash "$here/scripts/train_chunk_gpu.sh" "$@" >"$work/log" 2>&1; }

run "$work/cli.tar.xz" "$work/out" c99-test --lr 3e-4 --exit 0 || fail "exited non-zero"
args=$(tr '\n' ' ' <"$work/trainer.py.args")
[[ "$args" == "--generate /tmp/kascade-cli."*"/kascade --chunk c99-test --out $work/out/c99-test --lr 3e-4 --exit 0" ]] \
  || fail "trainer arguments: $args"
grep -q "kascade stand-in tasks" "$work/out/c99-test.log" || fail "the CLI did not run through the wrapper"
grep -q "exited with 0" "$work/out/c99-test.log" || fail "no exit line in the console log"
generated=$(sed -n 2p "$work/trainer.py.args")
[[ ! -e "$(dirname "$generated")" ]] || fail "the unpacked CLI $(dirname "$generated") was left behind"

# A folder unpack_cli.sh made already is used as it is (scripts/train_ship_call.sh unpacks once per call) and kept.
bash "$here/scripts/unpack_cli.sh" "$work/cli.tar.xz" "$work/unpacked" >/dev/null || fail "unpack_cli.sh failed"
run "$work/unpacked" "$work/out" c99-test --exit 0 || fail "an unpacked CLI folder was refused"
[[ "$(sed -n 2p "$work/trainer.py.args")" == "$work/unpacked/kascade" ]] || fail "unpacked folder: $(cat "$work/trainer.py.args")"
grep -q "kascade stand-in tasks" "$work/out/c99-test.log" && [[ -x "$work/unpacked/kascade" ]] || fail "the unpacked CLI did not run or was removed"
mkdir -p "$work/notcli"
if run "$work/notcli" "$work/out" c99-test; then fail "a folder without an unpacked CLI was accepted"; fi
grep -q "not an unpacked CLI" "$work/log" || fail "not-a-CLI-folder message"

if run "$work/cli.tar.xz" "$work/out" c99-test --exit 3; then fail "exit 3 not passed on"; fi
grep -q "exited with 3" "$work/log" || fail "exit status 3 not reported"

set +e
CHUNK_SECONDS=2 run "$work/cli.tar.xz" "$work/out" c99-test --sleep
rc=$?
set -e
[[ $rc -eq 124 ]] || fail "timeout gave $rc, expected 124"

rm "$work/pack/lib/libmarker.so.0" && mv "$work/pack/kascade" "$work/pack/other" && tar cJf "$work/nocli.tar.xz" -C "$work/pack" .
if run "$work/nocli.tar.xz" "$work/out" c99-test; then fail "a tarball without kascade was accepted"; fi
grep -q "holds no kascade binary" "$work/log" || fail "missing-binary message"
if run "$work/missing.tar.xz" "$work/out" c99-test; then fail "a missing tarball was accepted"; fi
grep -q "no CLI tarball" "$work/log" || fail "missing-tarball message"
if run "$work/cli.tar.xz" "$work/out" "bad/name"; then fail "a bad chunk name was accepted"; fi
grep -q "chunk name" "$work/log" || fail "bad-name message"
# a CLI whose library dir is not set by the wrapper cannot start: simulate with a broken CLI
cat >"$work/pack/kascade" <<'SH'
#!/usr/bin/env bash
echo "boom: cannot start" >&2; exit 1
SH
chmod +x "$work/pack/kascade" && tar cJf "$work/broken.tar.xz" -C "$work/pack" .
if run "$work/broken.tar.xz" "$work/out" c99-test; then fail "a CLI that does not start was accepted"; fi
grep -q "does not start" "$work/log" && grep -q "boom" "$work/log" || fail "start failure message"
# A compiled CLI that needs a library the pack lacks (as a CUDA build needs cuBLAS): linked from CLI_LIB_DIRS.
mkdir -p "$work/real/lib" "$work/machine"
printf 'int kc_dummy(void) { return 0; }\n' >"$work/dummy.c"
cc -shared -fPIC -Wl,-soname,libkcdummy.so.1 -o "$work/machine/libkcdummy.so.1" "$work/dummy.c"
printf '#include <stdio.h>\nint kc_dummy(void);\nint main(int c, char** v) { if (c > 1) printf("kascade stand-in %%s\\n", v[1]); return kc_dummy(); }\n' >"$work/main.c"
cc -o "$work/real/kascade" "$work/main.c" "$work/machine/libkcdummy.so.1"
tar cJf "$work/real.tar.xz" -C "$work/real" .
CLI_LIB_DIRS="$work/machine" run "$work/real.tar.xz" "$work/out" c98-real || fail "a compiled CLI with its library on CLI_LIB_DIRS"
grep -q "linked $work/machine/libkcdummy.so.1" "$work/out/c98-real.log" || fail "no 'linked' line"
grep -q "kascade stand-in tasks" "$work/out/c98-real.log" || fail "the compiled CLI did not run"
if CLI_LIB_DIRS="$work/nowhere" run "$work/real.tar.xz" "$work/out" c98-real; then fail "a CLI missing its library started"; fi
grep -q "does not start" "$work/log" && grep -q "libkcdummy.so.1" "$work/log" || fail "missing-library message"
echo PASS
