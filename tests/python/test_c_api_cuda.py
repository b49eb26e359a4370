"""tests/python/test_c_api_cuda.py — the C interface's CUDA backend through the Python binding, on torch
CUDA tensors (bf16 and f16, a shuffled paged cache, the backend on torch's current stream), against the
float64 numpy reference of tests/python/attention_fixtures.py computed on the values the device tensors
hold: dense decode and dense chunked prefill (o and lse), and Kascade on planted needles (roles, a tenth of
the keys read, outputs within 3 % of dense); a Kascade decode step captured with torch.cuda.graph through
the graph passes replays bit-equal to eager steps on new queries; the runtime with device="cuda" gives
transformers' first greedy token on kascade-tiny. Skips cleanly without torch, without a GPU, or with a
library built without CUDA (CI has none of them; the GPU machine has all).
Run: KASCADE_LIBRARY=BUILD/src/libkascade_c.so PYTHONPATH=python python3 tests/python/test_c_api_cuda.py
"""

import json
import unittest
from pathlib import Path

import numpy as np

import kascade
from attention_fixtures import PAGE, paged_cache, plant_needles, reference_attention, run_layers

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

H, G, D = 8, 2, 64


def usable():
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not kascade.has_cuda():
        return "libkascade_c was built without CUDA"
    return None


def on_device(array, dtype=None):
    """A numpy array as a contiguous CUDA tensor (of dtype, if given)."""
    tensor = torch.from_numpy(np.ascontiguousarray(array)).cuda()
    return (tensor.to(dtype) if dtype is not None else tensor).contiguous()


def on_host(tensor):
    """The values a device tensor holds (after its rounding to bf16 / f16), as float64 numpy."""
    return tensor.double().cpu().numpy()


def table_columns(max_seq_len):
    """Block-table columns for a backend made for max_seq_len keys (it refuses narrower tables)."""
    return (max_seq_len + PAGE - 1) // PAGE


def device_cache(rng, kv_lens, dtype, max_seq_len, layers=1):
    """paged_cache on the device: K, V per layer as dtype tensors, block table (room for max_seq_len keys) and
    lengths as int32 tensors."""
    k, v, block_table, lens = paged_cache(rng, kv_lens, np.float32, layers, G, D, table_columns(max_seq_len))
    return [on_device(x, dtype) for x in k], [on_device(x, dtype) for x in v], on_device(block_table), on_device(lens)


def run_on_device(policy, mode, q_lens, kv_lens, qs, ks, vs, block_table, stream):
    """run_layers over device tensors; outputs and lse start as NaN, so an unwritten value fails the comparison."""
    cu = on_device(np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32))
    outs, lses = run_layers(policy, mode, q_lens, kv_lens, qs, ks, vs, block_table,
                            lens=on_device(np.array(kv_lens, dtype=np.int32)), cu=cu,
                            new_empty=lambda q: (torch.full_like(q, float("nan")),
                                                 torch.full(q.shape[:2], float("nan"), dtype=torch.float32,
                                                            device="cuda")))
    stream.synchronize()
    return outs, lses


@unittest.skipIf(usable() is not None, usable() or "")
class CudaThroughPython(unittest.TestCase):
    MAX_SEQ_LEN = 4096

    def setUp(self):
        self.rng = np.random.default_rng(5)
        self.stream = torch.cuda.current_stream()
        self.backend = kascade.Backend.cuda(max_batch=4, max_seq_len=self.MAX_SEQ_LEN, stream=self.stream.cuda_stream)

    def check_dense(self, dtype, mode, q_lens, kv_lens):
        k, v, block_table, _ = device_cache(self.rng, kv_lens, dtype, self.MAX_SEQ_LEN)
        q = on_device(self.rng.standard_normal((sum(q_lens), H, D)), dtype)
        policy = kascade.Policy(self.backend, "dense", num_layers=1, num_heads=H, num_kv_heads=G, head_dim=D)
        (out,), (lse,) = run_on_device(policy, mode, q_lens, kv_lens, [q], k, v, block_table, self.stream)
        o_ref, lse_ref = reference_attention(on_host(q), on_host(k[0]), on_host(v[0]), block_table.cpu().numpy(),
                                             kv_lens, q_lens)
        np.testing.assert_allclose(on_host(out), o_ref, atol=2e-2, rtol=2e-2)
        np.testing.assert_allclose(on_host(lse), lse_ref, atol=1e-3, rtol=1e-3)

    def test_dense_decode_bf16(self):
        self.check_dense(torch.bfloat16, kascade.DECODE, [1, 1, 1], [37, 1000, 16])

    def test_dense_decode_f16(self):
        self.check_dense(torch.float16, kascade.DECODE, [1, 1], [129, 64])

    def test_dense_chunked_prefill_bf16(self):
        self.check_dense(torch.bfloat16, kascade.PREFILL, [33, 64], [97, 64])

    def test_block_table_without_room_for_max_seq_len_is_refused(self):
        k, v, block_table, lens = device_cache(self.rng, [100], torch.bfloat16, self.MAX_SEQ_LEN)
        narrow = block_table[:, :table_columns(self.MAX_SEQ_LEN) - 1].contiguous()
        q = on_device(self.rng.standard_normal((1, H, D)), torch.bfloat16)
        policy = kascade.Policy(self.backend, "dense", num_layers=1, num_heads=H, num_kv_heads=G, head_dim=D)
        policy.begin_forward(kascade.DECODE, [1], [100])
        with self.assertRaises(kascade.Error) as caught:
            policy.attention(0, q, k[0], v[0], narrow, lens, on_device(np.array([0, 1], np.int32)), torch.empty_like(q))
        self.assertIn("the cuda backend was created for max_seq_len 4096", str(caught.exception))

    def test_kascade_on_planted_needles(self):
        layers, kv_lens = 4, [700, 1500]
        ks, vs, block_table, _ = paged_cache(self.rng, kv_lens, np.float32, layers, G, D,
                                             table_columns(self.MAX_SEQ_LEN))
        qs, _ = plant_needles(self.rng, ks, block_table, kv_lens, H, needles_per_head=6)
        ks, vs = [on_device(k, torch.bfloat16) for k in ks], [on_device(v, torch.bfloat16) for v in vs]
        qs, block_table = [on_device(q, torch.bfloat16) for q in qs], on_device(block_table)
        outputs = {}
        for name, options in (("dense", {}), ("kascade", {"anchors": [0, 2]})):
            policy = kascade.Policy(self.backend, name, num_layers=layers, num_heads=H, num_kv_heads=G, head_dim=D,
                                    k_min=16, **options)
            outputs[name], _ = run_on_device(policy, kascade.DECODE, [1, 1], kv_lens, qs, ks, vs, block_table,
                                             self.stream)
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
        rng = np.random.default_rng(9)
        stream = torch.cuda.Stream()
        max_seq_len = 2048
        backend = kascade.Backend.cuda(max_batch=2, max_seq_len=max_seq_len, stream=stream.cuda_stream)
        policy = kascade.Policy(backend, "kascade", num_layers=self.LAYERS, num_heads=H, num_kv_heads=G, head_dim=D,
                                k_min=16, anchors=[0, 2])

        def new_queries():
            return on_device(rng.standard_normal((2, H, D)), torch.bfloat16)

        ks, vs, block_table, lens = device_cache(rng, self.KV_LENS, torch.bfloat16, max_seq_len, self.LAYERS)
        cu = on_device(np.array([0, 1, 2], dtype=np.int32))
        qs = [new_queries() for _ in range(self.LAYERS)]                 # the captured inputs ...
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
                q.copy_(new_queries())
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
