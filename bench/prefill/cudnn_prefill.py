#!/usr/bin/env python3
"""bench/prefill/cudnn_prefill.py — the dense causal prefill baseline of the prefill benchmark:
PyTorch F.scaled_dot_product_attention(is_causal=True) forced onto the cuDNN backend
(SDPBackend.CUDNN_ATTENTION), B = 1, Llama-3.1-8B shape (H = 32 query heads, G = 8 KV heads,
d = 128), q [1, H, L, d], K/V [1, G, L, d] contiguous — the shapes kascade_bench_prefill times.
GQA goes through enable_gqa=True; if the cuDNN backend refuses it, K/V are expanded to H heads
before timing (recorded as "gqa": "expanded"; the FLOPs are the same, the K/V reads grow by g).
Each call is timed with CUDA events after an L2 flush (a 256 MB write outside the timed region);
the median of --reps runs is reported with TFLOP/s of the causal FLOPs 4·H·d·L(L+1)/2. Also records
the bf16 GEMM rate (8192³ torch.matmul) of the same run as the tensor-core ceiling. Writes JSON.

  python3 bench/prefill/cudnn_prefill.py [--lens 8192,32768,65536,131072] [--dtypes f16,bf16]
                                         [--reps 10] [--json cudnn.json] [--layouts/--page/--variants: ignored]

Each dtype's output is checked once against the math backend (fp32) at L = 1000.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

H, G, D = 32, 8, 128
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def median_ms(fn, reps, flush):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    times = []
    for r in range(reps):
        flush.fill_(r & 0xFF)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2], times[0]


def cudnn_sdpa(q, k, v):
    """Causal SDPA on cuDNN; returns (callable, gqa mode)."""
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        try:
            F.scaled_dot_product_attention(q[:, :, :64], k[:, :, :64], v[:, :, :64], is_causal=True, enable_gqa=True)
            torch.cuda.synchronize()

            def native():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

            return native, "native"
        except RuntimeError as error:
            print(f"cuDNN refused enable_gqa ({str(error).splitlines()[0]}); expanding K/V", file=sys.stderr)
    rep = q.shape[1] // k.shape[1]
    k_full, v_full = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)

    def expanded():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k_full, v_full, is_causal=True)

    return expanded, "expanded"


def check_against_math(dtype):
    torch.manual_seed(0)
    n = 1000
    q = torch.randn(1, H, n, D, device="cuda", dtype=dtype)
    k = torch.randn(1, G, n, D, device="cuda", dtype=dtype)
    v = torch.randn(1, G, n, D, device="cuda", dtype=dtype)
    fn, _ = cudnn_sdpa(q, k, v)
    got = fn().float()
    rep = H // G
    ref = F.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(rep, 1),
                                         v.float().repeat_interleave(rep, 1), is_causal=True)
    return (got - ref).abs().max().item()


def gemm_tflops(reps, flush):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    med, _ = median_ms(lambda: a @ b, reps, flush)
    return 2 * 8192**3 / (med * 1e-3) / 1e12


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lens", default="8192,32768,65536,131072")
    parser.add_argument("--dtypes", default="f16,bf16")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json", default="")
    parser.add_argument("--layouts", default="", help="accepted for symmetry with the C++ bench; K/V contiguous")
    parser.add_argument("--variants", default="", help="accepted for symmetry with the C++ bench; ignored")
    parser.add_argument("--page", default="", help="accepted for symmetry with the C++ bench; K/V contiguous")
    args = parser.parse_args()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    records = []
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "shape": {"H": H, "G": G, "d": D},
              "gemm_bf16_tflops": gemm_tflops(args.reps, flush), "records": records}
    print(f"{result['gpu']}, torch {result['torch']}, cuDNN {result['cudnn']}, "
          f"bf16 GEMM {result['gemm_bf16_tflops']:.0f} TFLOP/s", flush=True)
    for name in args.dtypes.split(","):
        dtype = DTYPES[name]
        err = check_against_math(dtype)
        print(f"{name}: max |cuDNN - fp32 math| at L=1000: {err:.3e}", flush=True)
        for n in [int(x) for x in args.lens.split(",")]:
            q = torch.empty(1, H, n, D, device="cuda", dtype=dtype).uniform_(-1, 1)
            k = torch.empty(1, G, n, D, device="cuda", dtype=dtype).uniform_(-1, 1)
            v = torch.empty(1, G, n, D, device="cuda", dtype=dtype).uniform_(-1, 1)
            fn, gqa = cudnn_sdpa(q, k, v)
            med, low = median_ms(fn, args.reps, flush)
            flops = 4.0 * H * D * n * (n + 1) / 2
            records.append({"kernel": "cudnn_dense", "dtype": name, "layout": "contiguous", "L": n, "ms": med,
                            "ms_min": low, "flops": flops, "gqa": gqa, "check_max_abs_err": err})
            print(f"cudnn    {name:4s} L={n:<7d} {med:9.3f} ms (min {low:9.3f})  "
                  f"{flops / (med * 1e-3) / 1e12:7.1f} TFLOP/s  gqa={gqa}", flush=True)
            del q, k, v, fn
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
