"""tests/python/test_c_api.py — the C interface (include/kascade/c_api.h) through the Python binding
(python/kascade) on the CPU backend, against an independent numpy reference:
  - dense decode and dense chunked prefill over a shuffled paged cache equal numpy's float64 softmax
    attention (o and lse), for f32 and f16 caches, also with block tables / lengths holding spare rows;
  - Kascade on planted needles: layer roles, ~10 % of the keys read by anchors and reuse layers, every
    output within 2 % of dense; a head map is honoured (a reuse layer mapped to the other KV head reads
    that head's needles and misses its own);
  - a calibration file (the bundled model's) gives the schedule of its default anchor set: the same roles and
    outputs as passing that set's anchors and head map, read from the JSON by the test;
  - the runtime through Python: the first greedy token after the kascade-tiny fixture prompt is transformers'
    argmax (tests/data/hf), the tokenizer's ids equal the `tokenizers` library's, Kascade with the shipped
    calibration reads fewer keys;
  - refusals raise kascade.Error naming the problem (unknown policy, missing anchors, a bad head map, a
    call before begin_forward, int64 lengths, and the CUDA backend without CUDA or without a GPU).
Run: KASCADE_LIBRARY=BUILD/src/libkascade_c.so PYTHONPATH=python python3 tests/python/test_c_api.py
"""

import json
import unittest
from pathlib import Path

import numpy as np

import kascade

from attention_fixtures import paged_cache as paged_cache_of, plant_needles, reference_attention, run_layers

H, G, D = 8, 2, 32


def paged_cache(rng, kv_lens, dtype, layers=1):
    return paged_cache_of(rng, kv_lens, dtype, layers, G, D)


class DenseAgainstNumpy(unittest.TestCase):
    def check(self, dtype, mode, q_lens, kv_lens, tolerance):
        rng = np.random.default_rng(7)
        k, v, block_table, lens = paged_cache(rng, kv_lens, dtype)
        q = rng.standard_normal((sum(q_lens), H, D)).astype(dtype)
        policy = kascade.Policy(kascade.Backend.cpu(), "dense", num_layers=1, num_heads=H, num_kv_heads=G, head_dim=D)
        (out,), (lse,) = run_layers(policy, mode, q_lens, kv_lens, [q], k, v, block_table)
        o_ref, lse_ref = reference_attention(q, k[0], v[0], block_table, lens, q_lens)
        np.testing.assert_allclose(out.astype(np.float64), o_ref, atol=tolerance, rtol=tolerance)
        np.testing.assert_allclose(lse, lse_ref, atol=1e-4, rtol=1e-4)
        attended, causal = policy.keys_attended(mode)
        self.assertEqual(attended, causal)  # dense reads every causal key

    def test_decode_f32(self):
        self.check(np.float32, kascade.DECODE, [1, 1, 1], [37, 300, 16], 1e-5)

    def test_decode_f16(self):
        self.check(np.float16, kascade.DECODE, [1, 1], [129, 64], 2e-3)

    def test_preallocated_tables_with_spare_rows(self):
        # Engines keep block tables and lengths for their largest batch; only begin_forward's batch is read.
        rng = np.random.default_rng(9)
        k, v, block_table, lens = paged_cache(rng, [50, 90], np.float32)
        q = rng.standard_normal((2, H, D)).astype(np.float32)
        spare_table = np.vstack([block_table, np.full((3, block_table.shape[1]), -1, np.int32)])
        spare_lens = np.concatenate([lens, np.array([7, 7, 7], np.int32)])
        policy = kascade.Policy(kascade.Backend.cpu(), "dense", num_layers=1, num_heads=H, num_kv_heads=G, head_dim=D)
        policy.begin_forward(kascade.DECODE, [1, 1], [50, 90])
        out = np.zeros_like(q)
        policy.attention(0, q, k[0], v[0], spare_table, spare_lens, np.array([0, 1, 2], np.int32), out)
        o_ref, _ = reference_attention(q, k[0], v[0], block_table, lens, [1, 1])
        np.testing.assert_allclose(out, o_ref, atol=1e-5, rtol=1e-5)

    def test_chunked_prefill_f32(self):
        self.check(np.float32, kascade.PREFILL, [5, 40], [70, 40], 1e-5)


class KascadeOnPlantedNeedles(unittest.TestCase):
    LAYERS, NEEDLES, KV_LENS = 4, 6, [700, 1500]

    def setUp(self):
        rng = np.random.default_rng(11)
        self.ks, self.vs, self.block_table, _ = paged_cache(rng, self.KV_LENS, np.float32, self.LAYERS)
        # Each (sequence, KV head) hides its own needles, which its queries point at in every layer.
        self.qs, _ = plant_needles(rng, self.ks, self.block_table, self.KV_LENS, H, self.NEEDLES)

    def decode(self, name, **options):
        policy = kascade.Policy(kascade.Backend.cpu(), name, num_layers=self.LAYERS, num_heads=H, num_kv_heads=G,
                                head_dim=D, k_min=16, **options)
        outs, _ = run_layers(policy, kascade.DECODE, [1] * len(self.KV_LENS), self.KV_LENS, self.qs, self.ks,
                             self.vs, self.block_table)
        return policy, outs

    def test_matches_dense_reading_a_tenth_of_the_keys(self):
        _, dense = self.decode("dense")
        policy, sparse = self.decode("kascade", anchors=[0, 2])
        self.assertEqual([policy.role(layer) for layer in range(self.LAYERS)],
                         ["dense-anchor", "reuse", "anchor", "reuse"])
        for layer in range(self.LAYERS):
            attended, causal = policy.keys_attended(kascade.DECODE, layer)
            expected = 1.0 if layer == 0 else 0.1
            self.assertAlmostEqual(attended / causal, expected, delta=0.01, msg=f"layer {layer}")
            difference = np.abs(sparse[layer] - dense[layer]).max() / np.abs(dense[layer]).max()
            self.assertLess(difference, 0.02, msg=f"layer {layer}")

    def test_head_map_is_honoured(self):
        _, dense = self.decode("dense")
        swapped = [[0, 1], [1, 0], [0, 1], [0, 1]]  # layer 1's KV heads read each other's anchor rows
        _, sparse = self.decode("kascade", anchors=[0, 2], head_map=swapped)
        difference = np.abs(sparse[1] - dense[1]).max() / np.abs(dense[1]).max()
        self.assertGreater(difference, 0.2)  # the rows of the other head hold none of this head's needles
        for layer in (2, 3):  # the anchor at 2 reselects; layer 3 maps identically
            self.assertLess(np.abs(sparse[layer] - dense[layer]).max() / np.abs(dense[layer]).max(), 0.02)


class CalibrationFile(unittest.TestCase):
    PATH = Path(__file__).resolve().parents[2] / "models" / "kascade-tiny" / "kascade_calibration.json"
    LAYERS, HEADS, KV_HEADS, DIM = 12, 8, 2, 64  # kascade-tiny

    def test_default_anchor_set_equals_its_explicit_schedule(self):
        calibration = json.loads(self.PATH.read_text())
        chosen = next(s for s in calibration["anchor_sets"] if s["num_anchors"] == calibration["default_num_anchors"])
        shape = dict(num_layers=self.LAYERS, num_heads=self.HEADS, num_kv_heads=self.KV_HEADS, head_dim=self.DIM)
        from_file = kascade.Policy(kascade.Backend.cpu(), "kascade", calibration=self.PATH, k_min=16, **shape)
        explicit = kascade.Policy(kascade.Backend.cpu(), "kascade", anchors=chosen["anchors"],
                                  head_map=chosen["head_map"]["values"], k_min=16, **shape)
        roles = [from_file.role(layer) for layer in range(self.LAYERS)]
        expected = ["dense-anchor" if layer == 0 else "anchor" if layer in chosen["anchors"] else "reuse"
                    for layer in range(self.LAYERS)]
        self.assertEqual(roles, expected)
        rng = np.random.default_rng(5)
        ks, vs, block_table, _ = paged_cache_of(rng, [300], np.float32, self.LAYERS, self.KV_HEADS, self.DIM)
        qs = [rng.standard_normal((1, self.HEADS, self.DIM)).astype(np.float32) for _ in range(self.LAYERS)]
        a, _ = run_layers(from_file, kascade.DECODE, [1], [300], qs, ks, vs, block_table)
        b, _ = run_layers(explicit, kascade.DECODE, [1], [300], qs, ks, vs, block_table)
        for layer in range(self.LAYERS):
            np.testing.assert_array_equal(a[layer], b[layer])

    def test_another_shape_or_a_missing_set_is_refused(self):
        with self.assertRaises(kascade.Error) as caught:
            kascade.Policy(kascade.Backend.cpu(), "kascade", num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128,
                           calibration=self.PATH)
        self.assertIn("describes a model with 12 layers", str(caught.exception))
        with self.assertRaises(kascade.Error) as caught:
            kascade.Policy(kascade.Backend.cpu(), "kascade", num_layers=12, num_heads=8, num_kv_heads=2, head_dim=64,
                           calibration=self.PATH, calibration_num_anchors=11)
        self.assertIn("no anchor set with 11 anchors", str(caught.exception))


class RuntimeThroughPython(unittest.TestCase):
    ROOT = Path(__file__).resolve().parents[2]
    MODEL = ROOT / "models" / "kascade-tiny"
    FIXTURE = ROOT / "tests" / "data" / "hf" / "kascade_tiny.fixture.json"

    @classmethod
    def setUpClass(cls):
        cls.fixture = json.loads(cls.FIXTURE.read_text())
        logits = np.fromfile(cls.FIXTURE.with_name("kascade_tiny.logits.f32"), dtype=np.float32)
        cls.logits = logits.reshape(cls.fixture["rows"], cls.fixture["vocab_size"])

    def test_first_greedy_token_is_transformers_argmax(self):
        prompt = self.fixture["prompt"]
        row = len(prompt) - 1 - self.fixture["first_logit_position"]  # the row predicting the token after the prompt
        top2 = np.sort(self.logits[row])[-2:]
        self.assertGreater(top2[1] - top2[0], 0.1)  # a clear argmax, so float32 vs float64 cannot flip it
        runtime = kascade.Runtime(self.MODEL, policy="dense")
        self.assertEqual(runtime.generate([prompt], max_new_tokens=1), [[int(self.logits[row].argmax())]])
        self.assertEqual(runtime.last_stats["prefill_keys"], 1.0)

    def test_tokenizer_matches_the_tokenizers_library(self):
        tokenizers = __import__("tokenizers")
        reference = tokenizers.Tokenizer.from_file(str(self.MODEL / "tokenizer.json"))
        runtime = kascade.Runtime(self.MODEL, policy="dense")
        for text in ("The key for blue-door is 4471902.", "Ünïcödé — and  spaces\n\ttabs"):
            self.assertEqual(runtime.encode(text), reference.encode(text).ids)
            self.assertEqual(runtime.decode(reference.encode(text).ids), reference.decode(reference.encode(text).ids))

    def test_kascade_with_the_shipped_calibration_reads_fewer_keys(self):
        runtime = kascade.Runtime(self.MODEL, policy="kascade")  # the model directory's kascade_calibration.json
        self.assertIn("kascade_calibration.json", runtime.describe())
        tokens = runtime.generate([self.fixture["prompt"][:1500], self.fixture["prompt"][:900]], max_new_tokens=4)
        self.assertEqual([len(t) for t in tokens], [4, 4])
        self.assertLess(runtime.last_stats["prefill_keys"], 0.6)
        self.assertLess(runtime.last_stats["decode_keys"], 0.6)

    def test_refusals(self):
        with self.assertRaises(kascade.Error) as caught:
            kascade.Runtime(self.ROOT / "no-such-model")
        self.assertIn("no-such-model", str(caught.exception))
        with self.assertRaises(kascade.Error) as caught:
            kascade.Runtime(self.MODEL, policy="kascade", calibration=self.ROOT / "missing.json")
        self.assertIn("missing.json", str(caught.exception))
        runtime = kascade.Runtime(self.MODEL)
        with self.assertRaises(kascade.Error) as caught:
            runtime.generate([[]])
        self.assertIn("at least one token", str(caught.exception))


class Refusals(unittest.TestCase):
    def assert_refused(self, code, fragment, call):
        with self.assertRaises(kascade.Error) as caught:
            call()
        self.assertEqual(caught.exception.code, code, str(caught.exception))
        self.assertIn(fragment, str(caught.exception))

    def policy(self, name="dense", **options):
        return kascade.Policy(kascade.Backend.cpu(), name, num_layers=2, num_heads=H, num_kv_heads=G, head_dim=D,
                              **options)

    def test_bad_configurations(self):
        self.assert_refused(1, "nonsense", lambda: self.policy("nonsense"))
        self.assert_refused(1, "needs anchor layers", lambda: self.policy("kascade"))
        self.assert_refused(1, "not both", lambda: self.policy("kascade", anchors=[0], calibration="x.json"))
        self.assert_refused(3, "x.json", lambda: self.policy("kascade", calibration="x.json"))
        self.assert_refused(1, "uses no anchors", lambda: self.policy("dense", anchors=[0]))
        self.assert_refused(1, "head map [layer 1][kv head 0] is 5",
                            lambda: self.policy("kascade", anchors=[0], head_map=[[0, 1], [5, 0]]))
        self.assert_refused(1, "head_map has 3 entries", lambda: self.policy("kascade", anchors=[0], head_map=[0, 1, 0]))

    def test_bad_calls(self):
        rng = np.random.default_rng(3)
        k, v, block_table, lens = paged_cache(rng, [20], np.float32)
        q = rng.standard_normal((1, H, D)).astype(np.float32)
        out = np.zeros_like(q)
        cu = np.array([0, 1], dtype=np.int32)
        policy = self.policy()
        self.assert_refused(1, "begin_forward", lambda: policy.attention(0, q, k[0], v[0], block_table, lens, cu, out))
        policy.begin_forward(kascade.DECODE, [1], [20])
        self.assert_refused(1, "kv_lens must be int32",
                            lambda: policy.attention(0, q, k[0], v[0], block_table, lens.astype(np.int64), cu, out))
        self.assert_refused(1, "layer", lambda: policy.attention(7, q, k[0], v[0], block_table, lens, cu, out))

        class DeviceTensor:  # what a torch CUDA tensor looks like to the binding
            is_cuda, shape, dtype = True, q.shape, "torch.float32"

            def data_ptr(self):
                return 1

            def is_contiguous(self):
                return True
        self.assert_refused(1, "q is in device memory; the cpu backend needs host arrays",
                            lambda: policy.attention(0, DeviceTensor(), k[0], v[0], block_table, lens, cu, out))
        self.assert_refused(1, "mode", lambda: policy.begin_forward(5, [1], [20]))

    def test_graph_passes_need_the_cuda_backend(self):
        backend = kascade.Backend.cpu()
        self.assert_refused(4, "need the CUDA backend", lambda: backend.begin_graph_pass("capture"))
        self.assert_refused(4, "need the CUDA backend", backend.end_graph_pass)
        self.assert_refused(4, "need the CUDA backend", backend.upload_graph_inputs)
        self.assert_refused(1, "expected 'capture' or 'check'", lambda: backend.begin_graph_pass("replay"))
        backend.abort_graph_pass()  # no pass: nothing to do, no error

    def test_cuda_backend_without_cuda_or_gpu(self):
        try:
            backend = kascade.Backend.cuda(max_batch=1, max_seq_len=64)
        except kascade.Error as e:
            self.assertEqual(e.code, 4, str(e))  # unsupported: no CUDA build, or no device
            self.assertRegex(str(e), "no CUDA (backend|device)")
            return
        self.assertTrue(kascade.has_cuda())  # a GPU is present: the backend was made
        del backend


if __name__ == "__main__":
    unittest.main(verbosity=2)
