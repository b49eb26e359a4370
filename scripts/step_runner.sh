# scripts/step_runner.sh — the step runner of the device-call scripts (scripts/gpu_checks.sh, scripts/ship_checks.sh),
# sourced by them:
#   step_log_dir=DIR; run_step NAME SECONDS CMD...
# runs CMD under `timeout -k 5 SECONDS` with its output appended to DIR/NAME.log after a "==== NAME: CMD" line (also
# printed), adds the row "NAME rc RC Ts" to the array step_summary, sets step_failed=1 when CMD failed, and returns
# CMD's status. Tested through tests/scripts/test_ship_checks.sh.
step_summary=()
step_failed=0
run_step() {
  local name=$1 secs=$2 t0=$SECONDS
  shift 2
  echo "==== $name: $*" | tee -a "$step_log_dir/$name.log"
  timeout -k 5 "$secs" "$@" >>"$step_log_dir/$name.log" 2>&1
  local rc=$?
  step_summary+=("$(printf '%-22s rc %-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  ((rc == 0)) || step_failed=1
  return $rc
}
