#!/usr/bin/env python3
"""bench/prefill/prefill_report.py — joins kascade_bench_prefill's JSON (ours) and
cudnn_prefill.py's JSON (the cuDNN SDPA causal baseline of the same device session) into the
markdown table of docs/perf.md, with the issue-6 targets:
  dense   >= 0.85x cuDNN TFLOP/s (at L >= 16K)      reuse   <= 0.14x cuDNN dense time
  anchor  <= 1.3x cuDNN dense time                  anchor0 <= 1.75x cuDNN dense time
  Kascade per-layer average (1 anchor0 + 4 anchor + 27 reuse) / 32 >= 2.5x faster than cuDNN at 128K
  selection memory (scratch + index rows) at 128K <= 1.5 GB
Ratios compare each of our layouts (contiguous, paged) and variants (mma: Q·Kᵀ on mma.sync, wgmma:
on sm_90a warpgroup MMAs, ws: dense and LSE pass on the warp-specialised sm_90a mainloop) against
cuDNN on contiguous K/V.

  python3 bench/prefill/prefill_report.py ours.json cudnn.json > table.md
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def mark(ok):
    return "yes" if ok else "**no**"


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ours, cudnn = load(sys.argv[1]), load(sys.argv[2])
    base = {(r["dtype"], r["L"]): r for r in cudnn["records"]}
    by_key = {}
    for r in ours["records"]:
        by_key.setdefault((r["dtype"], r["layout"], r["L"], r.get("variant", "mma")), {})[r["kernel"]] = r
    print(f"GPU: {ours.get('gpu', '?')}; cuDNN {cudnn.get('cudnn', '?')} via torch {cudnn.get('torch', '?')}; "
          f"bf16 GEMM ceiling {cudnn.get('gemm_bf16_tflops', 0):.0f} TFLOP/s (same session)\n")
    print("| dtype | layout | variant | L | cuDNN ms (TFLOP/s) | dense ms (TFLOP/s, x cuDNN) | reuse / cuDNN | "
          "anchor / cuDNN | anchor0 / cuDNN | Kascade avg speedup | selection memory GB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    misses = []
    for (dtype, layout, n, variant), k in sorted(by_key.items(), key=lambda x: (x[0][0], x[0][1], x[0][3], x[0][2])):
        if (dtype, n) not in base or not {"dense", "reuse", "anchor", "anchor0"} <= k.keys():
            continue
        c = base[(dtype, n)]
        c_tf = c["flops"] / (c["ms"] * 1e-3) / 1e12
        d = k["dense"]
        d_tf = d["flops"] / (d["ms"] * 1e-3) / 1e12
        dense_ratio = d_tf / c_tf
        reuse, anchor, anchor0 = k["reuse"]["ms"] / c["ms"], k["anchor"]["ms"] / c["ms"], k["anchor0"]["ms"] / c["ms"]
        avg = (k["anchor0"]["ms"] + 4 * k["anchor"]["ms"] + 27 * k["reuse"]["ms"]) / 32
        speedup = c["ms"] / avg
        mem = (k["anchor"]["selection_scratch_bytes"] + k["anchor"]["index_bytes"]) / 1e9
        print(f"| {dtype} | {layout} | {variant} | {n} | {c['ms']:.2f} ({c_tf:.0f}) | {d['ms']:.2f} ({d_tf:.0f}, {dense_ratio:.2f}) | "
              f"{reuse:.3f} | {anchor:.2f} | {anchor0:.2f} | {speedup:.2f} | {mem:.2f} |")
        checks = [("dense >= 0.85x cuDNN", n < 16384 or dense_ratio >= 0.85, f"{dense_ratio:.2f}x"),
                  ("reuse <= 0.14x", reuse <= 0.14, f"{reuse:.3f}x"),
                  ("anchor <= 1.3x", anchor <= 1.3, f"{anchor:.2f}x"),
                  ("anchor0 <= 1.75x", anchor0 <= 1.75, f"{anchor0:.2f}x")]
        if n >= 131072:
            checks += [("Kascade avg >= 2.5x at 128K", speedup >= 2.5, f"{speedup:.2f}x"),
                       ("selection memory <= 1.5 GB at 128K", mem <= 1.5, f"{mem:.2f} GB")]
        for name, ok, value in checks:
            if not ok:
                misses.append(f"{dtype} {layout} {variant} L={n}: {name} missed ({value})")
    print()
    print("Targets missed:" if misses else "All targets met.")
    for m in misses:
        print(f"- {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
