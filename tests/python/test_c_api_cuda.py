"""tests/python/test_c_api_cuda.py — the C interface's CUDA backend through the Python binding, on torch
CUDA tensors (bf16 and f16, a shuffled paged cache, the backend on torch's current stream), against a
float64 torch reference: dense decode and dense chunked prefill (o and lse), and Kascade on planted
needles (roles, a tenth of the keys read, outputs within 3 % of dense); a Kascade decode step captured with
torch.cuda.graph through the graph passes replays bit-equal to eager steps on new queries; the runtime with
device="cuda" gives transformers' first greedy token on kascade-tiny. Skips cleanly without torch,
without a GPU, or with a library built without CUDA (CI has none of them; the GPU machine has all).
Run: KASCADE_LIBRARY=BUILD/src/libkascade_c.so PYTHONPATH=python python3 tests/python/test_c_api_cuda.py
"""

import itertools
import json
import unittest
from pathlib import Path

import numpy as np

import kascade

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

H, G, D, PAGE = 8, 2, 64, 16


def usable():
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not kascade.has_cuda():
        return "libkascade_c was built without CUDA"
    return None


@unittest.skipIf(usable() is not None, usable() or "")
class CudaThroughPython(unittest.TestCase):
    def setUp(self):
        self.generator = torch.Generator(device="cuda").manual_seed(5)
        self.stream = torch.cuda.current_stream()
        self.backend = kascade.Backend.cuda(max_batch=4, max_seq_len=4096, stream=self.stream.cuda_stream)

    def randn(self, *shape, dtype):
        return torch.randn(*shape, generator=self.generator, device="cuda", dtype=torch.float32).to(dtype)

    def cache(self, kv_lens, dtype, layers=1):
        max_pages = max((n + PAGE - 1) // PAGE for n in kv_lens)
        pages = len(kv_lens) * max_pages
        order = torch.randperm(pages, generator=self.generator, device="cuda").to(torch.int32)
        block_table = order.reshape(len(kv_lens), max_pages).contiguous()
        k = [self.randn(pages, PAGE, G, D, dtype=dtype) for _ in range(layers)]
        v = [self.randn(pages, PAGE, G, D, dtype=dtype) for _ in range(layers)]
        return k, v, block_table

    @staticmethod
    def gather(cache, block_table, b, n):
        j = torch.arange(n, device="cuda")
        return cache[block_table[b, j // PAGE].long(), j % PAGE].double()

    def reference(self, q, k, v, block_table, kv_lens, q_lens):
        o = torch.zeros(q.shape, dtype=torch.float64, device="cuda")
        lse = torch.zeros(q.shape[:2], dtype=torch.float64, device="cuda")
        row = 0
        for b, (n, m) in enumerate(zip(kv_lens, q_lens)):
            keys, values = self.gather(k, block_table, b, n), self.gather(v, block_table, b, n)
            for i in range(m):
                position = n - m + i
                for h in range(H):
                    s = keys[: position + 1, h // (H // G)] @ q[row, h].double() / D ** 0.5
                    lse[row, h] = torch.logsumexp(s, 0)
                    o[row, h] = torch.softmax(s, 0) @ values[: position + 1, h // (H // G)]
                row += 1
        return o, lse

    def run_layers(self, policy, mode, q_lens, kv_lens, qs, ks, vs, block_table):
        policy.begin_forward(mode, q_lens, kv_lens)
        cu = torch.tensor(list(itertools.accumulate(q_lens, initial=0)), dtype=torch.int32, device="cuda")
        lens = torch.tensor(kv_lens, dtype=torch.int32, device="cuda")
        outs, lses = [], []
        for layer, (q, k, v) in enumerate(zip(qs, ks, vs)):
            out = torch.full_like(q, float("nan"))
            lse = torch.full(q.shape[:2], float("nan"), dtype=torch.float32, device="cuda")
            policy.attention(layer, q, k, v, block_table, lens, cu, out, lse)
            outs.append(out)
            lses.append(lse)
        self.stream.synchronize()
        return outs, lses

    def check_dense(self, dtype, mode, q_lens, kv_lens):
        k, v, block_table = self.cache(kv_lens, dtype)
        q = self.randn(sum(q_lens), H, D, dtype=dtype)
        policy = kascade.Policy(self.backend, "dense", num_layers=1, num_heads=H, num_kv_heads=G, head_dim=D)
        (out,), (lse,) = self.run_layers(policy, mode, q_lens, kv_lens, [q], k, v, block_table)
        o_ref, lse_ref = self.reference(q, k[0], v[0], block_table, kv_lens, q_lens)
        torch.testing.assert_close(out.double(), o_ref, atol=2e-2, rtol=2e-2)
        torch.testing.assert_close(lse.double(), lse_ref, atol=1e-3, rtol=1e-3)

    def test_dense_decode_bf16(self):
        self.check_dense(torch.bfloat16, kascade.DECODE, [1, 1, 1], [37, 1000, 16])

    def test_dense_decode_f16(self):
        self.check_dense(torch.float16, kascade.DECODE, [1, 1], [129, 64])

    def test_dense_chunked_prefill_bf16(self):
        self.check_dense(torch.bfloat16, kascade.PREFILL, [33, 64], [97, 64])

    def test_kascade_on_planted_needles(self):
        layers, kv_lens, needles = 4, [700, 1500], 6
        ks, vs, block_table = self.cache(kv_lens, torch.bfloat16, layers)
        directions = torch.nn.functional.normalize(self.randn(len(kv_lens), G, D, dtype=torch.float32), dim=-1)
        for b, n in enumerate(kv_lens):
            for g in range(G):
                for j in torch.randperm(n - 1, generator=self.generator, device="cuda")[:needles].tolist():
                    for k in ks:
                        k[block_table[b, j // PAGE].long(), j % PAGE, g] = (12.0 * directions[b, g]).to(k.dtype)
        qs = []
        for _ in range(layers):
            q = 0.5 * self.randn(len(kv_lens), H, D, dtype=torch.float32)
            q += 8.0 * directions.repeat_interleave(H // G, dim=1)
            qs.append(q.to(torch.bfloat16).contiguous())
        outputs = {}
        for name, options in (("dense", {}), ("kascade", {"anchors": [0, 2]})):
            policy = kascade.Policy(self.backend, name, num_layers=layers, num_heads=H, num_kv_heads=G, head_dim=D,
                                    k_min=16, **options)
            outputs[name], _ = self.run_layers(policy, kascade.DECODE, [1, 1], kv_lens, qs, ks, vs, block_table)
        self.assertEqual([policy.role(layer) for layer in range(layers)], ["dense-anchor", "reuse", "anchor", "reuse"])
        for layer in range(layers):
            attended, causal = policy.keys_attended(kascade.DECODE, layer)
            self.assertAlmostEqual(attended / causal, 1.0 if layer == 0 else 0.1, delta=0.01, msg=f"layer {layer}")
            dense, sparse = outputs["dense"][layer].float(), outputs["kascade"][layer].float()
            self.assertLess(((sparse - dense).abs().max() / dense.abs().max()).item(), 0.03, msg=f"layer {layer}")


@unittest.skipIf(usable() is not None, usable() or "")
class CudaGraphThroughPython(unittest.TestCase):
    """A Kascade decode step captured with torch.cuda.graph through the graph passes, replayed with new
    queries written into the captured tensors: each replay equals an eager step on the same inputs."""

    LAYERS, KV_LENS = 4, [700, 1500]

    def test_captured_step_replays_like_eager_steps(self):
        generator = torch.Generator(device="cuda").manual_seed(9)
        stream = torch.cuda.Stream()
        backend = kascade.Backend.cuda(max_batch=2, max_seq_len=2048, stream=stream.cuda_stream)
        policy = kascade.Policy(backend, "kascade", num_layers=self.LAYERS, num_heads=H, num_kv_heads=G, head_dim=D,
                                k_min=16, anchors=[0, 2])
        max_pages = max((n + PAGE - 1) // PAGE for n in self.KV_LENS)
        pages = len(self.KV_LENS) * max_pages

        def randn(*shape):
            return torch.randn(*shape, generator=generator, device="cuda").to(torch.bfloat16)

        ks = [randn(pages, PAGE, G, D) for _ in range(self.LAYERS)]
        vs = [randn(pages, PAGE, G, D) for _ in range(self.LAYERS)]
        block_table = torch.randperm(pages, generator=generator, device="cuda").to(torch.int32).reshape(2, max_pages)
        lens = torch.tensor(self.KV_LENS, dtype=torch.int32, device="cuda")
        cu = torch.tensor([0, 1, 2], dtype=torch.int32, device="cuda")
        qs = [randn(2, H, D) for _ in range(self.LAYERS)]                 # the captured inputs ...
        outs = [torch.zeros(2, H, D, dtype=torch.bfloat16, device="cuda") for _ in range(self.LAYERS)]  # ... and outputs

        def layers():
            for layer in range(self.LAYERS):
                policy.attention(layer, qs[layer], ks[layer], vs[layer], block_table, lens, cu, outs[layer])

        def eager_step():
            torch.cuda.synchronize()  # inputs written on the default stream are complete before `stream` reads them
            with torch.cuda.stream(stream):
                policy.begin_forward(kascade.DECODE, [1, 1], self.KV_LENS)
                layers()
            stream.synchronize()
            return [o.clone() for o in outs]

        expected = eager_step()  # also makes the plans, which a capture must not allocate
        for o in outs:
            o.zero_()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        policy.begin_forward(kascade.DECODE, [1, 1], self.KV_LENS)
        backend.begin_graph_pass("capture")
        with torch.cuda.graph(graph, stream=stream):
            layers()
        self.assertTrue(backend.end_graph_pass())
        with torch.cuda.stream(stream):
            backend.upload_graph_inputs()
            graph.replay()
        stream.synchronize()
        for layer in range(self.LAYERS):
            torch.testing.assert_close(outs[layer], expected[layer], atol=0, rtol=0)

        for step in range(3):  # new queries in the captured tensors: check pass, replay, compare with eager
            for q in qs:
                q.copy_(randn(2, H, D))
            expected = eager_step()
            for o in outs:
                o.zero_()
            torch.cuda.synchronize()
            policy.begin_forward(kascade.DECODE, [1, 1], self.KV_LENS)
            backend.begin_graph_pass("check")
            layers()  # host only: launches nothing
            self.assertTrue(backend.end_graph_pass(), f"step {step}: the trace differs from the captured one")
            with torch.cuda.stream(stream):
                backend.upload_graph_inputs()
                graph.replay()
            stream.synchronize()
            for layer in range(self.LAYERS):
                torch.testing.assert_close(outs[layer], expected[layer], atol=0, rtol=0, msg=f"step {step}, layer {layer}")


@unittest.skipIf(usable() is not None, usable() or "")
class RuntimeOnTheGpu(unittest.TestCase):
    """The runtime through Python with device="cuda": kascade-tiny's first greedy token after the fixture prompt is
    transformers' float64 argmax (margin 0.78 in logits, far above bf16 error), and Kascade reads fewer keys."""

    ROOT = Path(__file__).resolve().parents[2]
    MODEL = ROOT / "models" / "kascade-tiny"
    FIXTURE = ROOT / "tests" / "data" / "hf" / "kascade_tiny.fixture.json"

    def test_first_greedy_token_and_kascade(self):
        fixture = json.loads(self.FIXTURE.read_text())
        logits = np.fromfile(self.FIXTURE.with_name("kascade_tiny.logits.f32"), dtype=np.float32)
        logits = logits.reshape(fixture["rows"], fixture["vocab_size"])
        prompt = fixture["prompt"]
        row = len(prompt) - 1 - fixture["first_logit_position"]
        dense = kascade.Runtime(self.MODEL, device="cuda", policy="dense")
        self.assertEqual(dense.generate([prompt], max_new_tokens=1), [[int(logits[row].argmax())]])
        sparse = kascade.Runtime(self.MODEL, device="cuda", policy="kascade")
        tokens = sparse.generate([prompt[:1500], prompt[:900]], max_new_tokens=4)
        self.assertEqual([len(t) for t in tokens], [4, 4])
        self.assertLess(sparse.last_stats["prefill_keys"], 0.6)


if __name__ == "__main__":
    unittest.main(verbosity=2)
