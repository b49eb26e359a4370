#!/usr/bin/env python3
"""bench/cudnn_decode.py — the dense-decode baseline of the decode benchmark: PyTorch
F.scaled_dot_product_attention forced onto the cuDNN backend (SDPBackend.CUDNN_ATTENTION), one
query per sequence over L keys, GQA (H query heads, G KV heads) with K/V as [B, G, L, d]
contiguous — the same shapes kascade_bench_decode times. Every call is captured in a CUDA graph
(B = 1 included) and replayed after an L2 flush outside the timed region (--flush: write = a 256 MB
write, the default, which leaves dirty lines in the L2; read = a 256 MB read, clean lines; none); the
median of --reps replays is reported. Also measures the read-bandwidth roof with a large
read-only reduction (torch.sum over 4 GiB) in the same process. Writes JSON (--json).

  python3 bench/cudnn_decode.py [--shapes llama,d64] [--dtypes f16,bf16] [--batches 1,8,64]
                                [--lens 8192,32768,131072] [--reps 15] [--warmup-ms 50] [--json cudnn.json]

Each shape's output is checked once against the math backend (fp32) on a small batch.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {"llama": (32, 8, 128), "d64": (32, 8, 64)}
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def flush_l2(buffer, mode, r):
    """The L2 flush before a timed replay: a write (dirty lines left), a read (clean lines) or none."""
    if mode == "write":
        buffer.fill_(r & 0xFF)
    elif mode == "read":
        buffer.view(torch.int32).sum()


def warm_up(fn, warmup_ms):
    """At least 2 untimed replays lasting at least warmup_ms in all (as kascade_bench_decode --warmup-ms)."""
    t0 = time.perf_counter()
    for i in range(1000):
        fn()
        torch.cuda.synchronize()
        if i >= 1 and (time.perf_counter() - t0) * 1000.0 >= warmup_ms:
            break


def median_us(fn, reps, flush, mode="write", warmup_ms=50.0):
    warm_up(fn, warmup_ms)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for r in range(reps):
        flush_l2(flush, mode, r)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    times.sort()
    return times[len(times) // 2], times[0]


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def graphed(fn):
    """Captures fn in a CUDA graph after warm-up; returns the replay callable."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def read_roof_gbps(reps):
    x = torch.empty(1 << 30, dtype=torch.float32, device="cuda").uniform_()
    replay = graphed(lambda: x.sum())
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    med, _ = median_us(replay, reps, flush)
    return x.numel() * 4 / (med * 1e-6) / 1e9


def check_against_math(h, g, d, dtype):
    torch.manual_seed(0)
    q = torch.randn(2, h, 1, d, device="cuda", dtype=dtype)
    k = torch.randn(2, g, 1000, d, device="cuda", dtype=dtype)
    v = torch.randn(2, g, 1000, d, device="cuda", dtype=dtype)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        got = sdpa(q, k, v).float()
    rep = h // g
    ref = F.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(rep, 1),
                                         v.float().repeat_interleave(rep, 1))
    return (got - ref).abs().max().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="llama,d64")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--lens", default="8192,32768,131072")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--mem-limit-gb", type=float, default=110.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--warmup-ms", type=float, default=50.0,
                    help="untimed replays before each timed set, at least this long (as kascade_bench_decode)")
    ap.add_argument("--flush", default="write", choices=["write", "read", "none"],
                    help="L2 flush before each timed replay (as kascade_bench_decode --flush)")
    ap.add_argument("--layouts", default="", help="ignored (cuDNN reads contiguous [B, G, L, d] K/V)")
    a = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}", flush=True)
    roof = read_roof_gbps(10)
    print(f"read roof (torch.sum over 4 GiB): {roof:.0f} GB/s", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    results = []
    for shape in a.shapes.split(","):
        h, g, d = SHAPES[shape]
        for dt in a.dtypes.split(","):
            dtype = DTYPES[dt]
            err = check_against_math(h, g, d, dtype)
            print(f"{shape} {dt}: cuDNN vs fp32 math max |err| {err:.2e}", flush=True)
            for length in [int(x) for x in a.lens.split(",")]:
                for batch in [int(x) for x in a.batches.split(",")]:
                    kv_bytes = 2 * batch * length * g * d * 2
                    if kv_bytes / 1e9 > a.mem_limit_gb:
                        print(f"skip {shape} {dt} B={batch} L={length}")
                        continue
                    q = torch.empty(batch, h, 1, d, device="cuda", dtype=dtype).uniform_(-2, 2)
                    k = torch.empty(batch, g, length, d, device="cuda", dtype=dtype).uniform_(-2, 2)
                    v = torch.empty(batch, g, length, d, device="cuda", dtype=dtype).uniform_(-1, 1)
                    try:
                        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                            replay = graphed(lambda: sdpa(q, k, v))
                            med, best = median_us(replay, a.reps, flush, a.flush, a.warmup_ms)
                    except RuntimeError as e:  # report and go on
                        print(f"cuDNN failed for {shape} {dt} B={batch} L={length}: {e}", flush=True)
                        del q, k, v
                        torch.cuda.empty_cache()
                        continue
                    gbps = kv_bytes / (med * 1e-6) / 1e9
                    results.append(dict(shape=shape, dtype=dt, batch=batch, len=length, median_us=med,
                                        min_us=best, bytes=kv_bytes, gbps=gbps, roof_fraction=gbps / roof))
                    print(f"{shape:6s} {dt:5s} B={batch:<3d} L={length:<7d} cudnn {med:10.1f} us "
                          f"{gbps:7.0f} GB/s {100 * gbps / roof:5.1f} % roof", flush=True)
                    del q, k, v, replay
                    torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(device=props.name, torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                           flush=a.flush, read_roof_gbps=roof, results=results), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
