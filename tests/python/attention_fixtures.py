"""tests/python/attention_fixtures.py — the inputs and the independent reference shared by the Python tests of
the C interface (test_c_api.py on the CPU backend over numpy, test_c_api_cuda.py on the CUDA backend over torch):
a shuffled paged KV cache, causal softmax attention in float64 numpy, planted needles that a sparse policy must
find, and one forward call of every layer through a kascade.Policy. Arrays are numpy; the CUDA test converts them.
"""

import numpy as np

PAGE = 16


def paged_cache(rng, kv_lens, dtype, layers, kv_heads, dim, table_columns=None):
    """K and V per layer [pages, PAGE, kv_heads, dim] (standard normal), a shuffled block table [batch, columns]
    int32 and the lengths [batch] int32. The table has the pages the longest sequence needs, or table_columns
    (the CUDA backend wants room for its max_seq_len), the unused entries -1."""
    max_pages = max((n + PAGE - 1) // PAGE for n in kv_lens)
    num_pages = len(kv_lens) * max_pages
    block_table = rng.permutation(num_pages).astype(np.int32).reshape(len(kv_lens), max_pages)
    if table_columns is not None:
        block_table = np.hstack([block_table, np.full((len(kv_lens), table_columns - max_pages), -1, np.int32)])
    k = [rng.standard_normal((num_pages, PAGE, kv_heads, dim)).astype(dtype) for _ in range(layers)]
    v = [rng.standard_normal((num_pages, PAGE, kv_heads, dim)).astype(dtype) for _ in range(layers)]
    return k, v, block_table, np.array(kv_lens, dtype=np.int32)


def gather(cache, block_table, b, n):
    """Rows 0..n-1 of sequence b: [n, kv_heads, dim] float64."""
    j = np.arange(n)
    return np.asarray(cache[block_table[b, j // PAGE], j % PAGE], dtype=np.float64)


def reference_attention(q, k, v, block_table, kv_lens, q_lens):
    """Causal softmax attention in float64 over one layer's paged cache; q [total_q, H, D] holds the q_lens[b]
    last positions of each sequence b. Returns o [total_q, H, D] and lse [total_q, H]."""
    heads, dim, kv_heads = q.shape[1], q.shape[2], k.shape[2]
    group = heads // kv_heads
    o, lse, row = np.zeros(q.shape), np.zeros(q.shape[:2]), 0
    for b, (n, m) in enumerate(zip(kv_lens, q_lens)):
        keys, values = gather(k, block_table, b, n), gather(v, block_table, b, n)
        for i in range(m):
            position = n - m + i
            for h in range(heads):
                s = keys[: position + 1, h // group] @ np.asarray(q[row, h], dtype=np.float64) / np.sqrt(dim)
                top = s.max()
                weights = np.exp(s - top)
                o[row, h] = weights @ values[: position + 1, h // group] / weights.sum()
                lse[row, h] = top + np.log(weights.sum())
            row += 1
    return o, lse


def plant_needles(rng, ks, block_table, kv_lens, num_heads, needles_per_head):
    """Hides needles_per_head keys per (sequence, KV head) in every layer's K (written in place: 12 × a unit
    direction of that sequence and head) and returns the decode queries [layers][batch, num_heads, dim] float32
    that point at them (8 × the direction + noise of 0.5), and the needle positions [batch][kv_heads]."""
    kv_heads, dim = ks[0].shape[2], ks[0].shape[3]
    directions = rng.standard_normal((len(kv_lens), kv_heads, dim))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    needles = [[sorted(rng.choice(n - 1, needles_per_head, replace=False)) for _ in range(kv_heads)]
               for n in kv_lens]
    for b in range(len(kv_lens)):
        for g in range(kv_heads):
            for j in needles[b][g]:
                for k in ks:
                    k[block_table[b, j // PAGE], j % PAGE, g] = 12.0 * directions[b, g]
    group = num_heads // kv_heads
    queries = []
    for _ in ks:
        q = 0.5 * rng.standard_normal((len(kv_lens), num_heads, dim))
        q += 8.0 * np.repeat(directions, group, axis=1)
        queries.append(q.astype(np.float32))
    return queries, needles


def run_layers(policy, mode, q_lens, kv_lens, qs, ks, vs, block_table, lens=None, cu=None, new_empty=None):
    """One forward call of every layer: outputs [layers][total_q, H, D] and lse [layers][total_q, H]. Numpy arrays
    by default; a caller with device tensors passes lens and cu (int32 [batch], [batch + 1]) and
    new_empty(q) -> (out like q, lse float32 [total_q, H]), both filled with NaN so unwritten values show."""
    policy.begin_forward(mode, q_lens, kv_lens)
    if cu is None:
        cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    if lens is None:
        lens = np.array(kv_lens, dtype=np.int32)
    if new_empty is None:
        def new_empty(q):
            return np.full_like(q, np.nan), np.full(q.shape[:2], np.nan, dtype=np.float32)
    outs, lses = [], []
    for layer, (q, k, v) in enumerate(zip(qs, ks, vs)):
        out, lse = new_empty(q)
        policy.attention(layer, q, k, v, block_table, lens, cu, out, lse)
        outs.append(out)
        lses.append(lse)
    return outs, lses
