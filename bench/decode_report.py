#!/usr/bin/env python3
"""bench/decode_report.py — joins kascade_bench_decode's JSON with bench/cudnn_decode.py's JSON
(both from the same device run) into the markdown tables of docs/perf.md: per (shape, dtype, B,
L, layout) each kernel's median time, GB/s and fraction of the read roof (the larger of the two
roofs measured in the run), its time ratio to cuDNN dense decode, and the per-layer Kascade
average of a 32-layer model with 1 layer-0 anchor + 4 anchors + 27 reuse layers
(t = (t_anchor0 + 4 t_anchor + 27 t_reuse) / 32; speedup = t_cudnn / t).

  python3 bench/decode_report.py ours.json cudnn.json > table.md
"""
import json
import sys

TARGETS = {"dense": 1.05, "anchor0": 1.15, "anchor": 0.70, "reuse": 0.11}


def main():
    ours = json.load(open(sys.argv[1]))
    cudnn = json.load(open(sys.argv[2]))
    roof = max(max(ours["read_roof_gbps"]), cudnn["read_roof_gbps"])
    base = {(r["shape"], r["dtype"], r["batch"], r["len"]): r for r in cudnn["results"]}
    rows = {}
    for r in ours["results"]:
        rows.setdefault((r["shape"], r["dtype"], r["batch"], r["len"], r["layout"]), {})[r["op"]] = r
    flushes = (ours.get("flush", "write"), cudnn.get("flush", "write"))
    if flushes[0] != flushes[1]:
        sys.exit(f"decode_report.py: ours ran with --flush {flushes[0]}, cuDNN with --flush {flushes[1]}; "
                 "ratios need the same flush")
    print(f"Device: {ours['device']}; torch {cudnn['torch']}, cuDNN {cudnn['cudnn']}. Read roof: "
          f"{roof:.0f} GB/s (ours {', '.join(f'{x:.0f}' for x in ours['read_roof_gbps'])}; "
          f"torch.sum {cudnn['read_roof_gbps']:.0f}). L2 flush before each timed replay: {flushes[0]}. "
          f"Anchors' pooling and Top-k: {ours.get('pool_fusion', 'separate')}.\n")
    print("Time in µs (median), ratio = time / cuDNN dense time, GB/s and % of the read roof. "
          "Targets (B ≥ 8, L ≥ 32K): dense ≤ 1.05, layer-0 anchor ≤ 1.15, anchor ≤ 0.70, reuse ≤ 0.11, "
          "Kascade per-layer speedup ≥ 4.5× at 128K.\n")
    print("| shape | dtype | B | L | layout | cuDNN µs (GB/s, % roof) | dense µs (ratio; GB/s, % roof) | "
          "anchor0 µs (ratio) | anchor µs (ratio) | reuse µs (ratio; GB/s) | Kascade avg µs | speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    misses = []
    for key in sorted(rows, key=lambda k: (k[0], k[1], k[3], k[2], k[4])):
        shape, dtype, batch, length, layout = key
        ops = rows[key]
        b = base.get((shape, dtype, batch, length))
        if b is None or len(ops) < 4:
            continue
        t0 = b["median_us"]
        def cell(op, gb=False):
            r = ops[op]
            ratio = r["median_us"] / t0
            target = TARGETS[op]
            flag = "" if ratio <= target or batch < 8 or length < 32768 else " ✗"
            if flag:
                misses.append((key, op, ratio, target))
            extra = f"; {r['gbps']:.0f}, {100 * r['gbps'] / roof:.0f} %" if gb else ""
            return f"{r['median_us']:.1f} ({ratio:.3f}{extra}){flag}"
        avg = (ops["anchor0"]["median_us"] + 4 * ops["anchor"]["median_us"] + 27 * ops["reuse"]["median_us"]) / 32
        speedup = t0 / avg
        sflag = " ✗" if length >= 131072 and batch >= 8 and speedup < 4.5 else ""
        if sflag:
            misses.append((key, "per-layer speedup", speedup, 4.5))
        print(f"| {shape} | {dtype} | {batch} | {length // 1024}K | {layout} | {t0:.1f} ({b['gbps']:.0f}, "
              f"{100 * b['gbps'] / roof:.0f} %) | {cell('dense', True)} | {cell('anchor0')} | {cell('anchor')} | "
              f"{cell('reuse', True)} | {avg:.1f} | {speedup:.2f}×{sflag} |")
    print()
    extra = [k for k in rows if "topk" in rows[k]]
    if extra:
        print("Breakdown and split experiments (µs): Top-k alone (first pass included); dense and reuse "
              "with the planned splits S and with S/2 (at least 1), 2S, 4S.\n")
        print("| shape | dtype | B | L | layout | topk | dense S / S/2 / 2S / 4S | reuse S / S/2 / 2S / 4S |")
        print("|---|---|---|---|---|---|---|---|")
        for key in sorted(extra, key=lambda k: (k[0], k[1], k[3], k[2], k[4])):
            ops = rows[key]
            def splits_row(op):
                vals = [ops.get(name) for name in (op, op + "_s0.5x", op + "_s2x", op + "_s4x")]
                return " / ".join(f"{v['median_us']:.1f} (S={v['splits']})" for v in vals if v)
            shape, dtype, batch, length, layout = key
            print(f"| {shape} | {dtype} | {batch} | {length // 1024}K | {layout} | {ops['topk']['median_us']:.1f} | "
                  f"{splits_row('dense')} | {splits_row('reuse')} |")
        print()
    if misses:
        print("Targets missed (✗):")
        for key, op, value, target in misses:
            print(f"- {key}: {op} {value:.3f} vs target {target}")
    else:
        print("Every target row (B ≥ 8, L ≥ 32K) meets its target.")


if __name__ == "__main__":
    main()
