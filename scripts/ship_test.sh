#!/usr/bin/env bash
# scripts/ship_test.sh — the ship test of kascade-tiny (docs/model.md): the same dev samples of the
# retrieval tasks for the shipped checkpoint and a candidate (dense attention), then the paired
# comparison of scripts/compare_checkpoints.py (table + verdict in OUT_DIR/compare.md).
#   scripts/ship_test.sh KASCADE_BINARY SHIPPED_DIR CANDIDATE_DIR OUT_DIR [kascade eval options...]
# Environment: LENGTHS (default 16k), SAMPLES per task and length (default 8), TASKS (default the
# 11 retrieval tasks), MARGIN in points (default 2). Extra options go to both evals, e.g.
# `--device cuda` on the GPU machine (seconds per 16K sample there; ~30 s each on the 2-core CPU).
# SHIPPED_DIR may also be the OUT_DIR/shipped folder of an earlier ship test (a folder holding samples.jsonl): its
# results are reused instead of evaluating the shipped checkpoint again, so a candidate can be compared when the
# shipped checkpoint is not on the machine (compare_checkpoints.py refuses results of other samples); then TASKS,
# LENGTHS and SAMPLES, where unset, are the saved results' own (their results.json), so the candidate is evaluated
# on exactly those samples.
set -euo pipefail
bin=${1:?KASCADE_BINARY}
shipped=${2:?SHIPPED_DIR}
candidate=${3:?CANDIDATE_DIR}
out=${4:?OUT_DIR}
shift 4
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
# evaluate WHICH DIR: the dev samples of the checkpoint in DIR, into OUT_DIR/WHICH.
evaluate() {
  echo "ship_test: $1 = $2"
  "$bin" eval -m "$2" --tasks "$tasks" --lengths "$lengths" --policies dense --samples "$samples" \
    --split dev --no-plot -o "$out/$1" "${eval_options[@]}"
}
eval_options=("$@")
tasks=${TASKS:-niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multikey_2,niah_multikey_3,niah_multivalue,niah_multiquery,kv_retrieval,vt,multihop_qa}
lengths=${LENGTHS:-16k}
samples=${SAMPLES:-8}
if [[ -f "$shipped/samples.jsonl" ]]; then
  echo "ship_test: shipped = the saved results in $shipped"
  shipped_results=$shipped
  if [[ -f "$shipped/results.json" ]]; then
    read -r saved_tasks saved_lengths saved_samples < <(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(",".join(r["tasks"]), ",".join(map(str, r["lengths"])), r["meta"]["samples_per_cell"])' "$shipped/results.json")
    tasks=${TASKS:-$saved_tasks}
    lengths=${LENGTHS:-$saved_lengths}
    samples=${SAMPLES:-$saved_samples}
  fi
else
  evaluate shipped "$shipped"
  shipped_results=$out/shipped
fi
evaluate candidate "$candidate"
python3 "$here/compare_checkpoints.py" "$shipped_results" "$out/candidate" --margin "${MARGIN:-2}" --out "$out/compare.md"
