"""kascade — Python bindings of kascade through its C interface (ctypes): the whole runtime (Runtime: a model
directory in, tokens or text out) and, for engines, the attention policies.

    runtime = kascade.Runtime("models/kascade-tiny", policy="kascade")   # its kascade_calibration.json
    print(runtime.generate_text("The key for blue-door is 4471902. What is the key?", max_new_tokens=8))

For an engine written in Python that owns its paged KV cache: make a backend and a policy, then per
forward call ``begin_forward`` once and ``attention`` once per layer, passing numpy arrays (CPU backend)
or torch tensors (CUDA backend: device tensors, the backend built on the tensors' stream). Nothing is
copied: the library reads and writes the arrays in place, with the layouts of include/kascade/attention.h
(and include/kascade/c_api.h, which this module wraps one to one):

    q            [total_q, num_heads, head_dim]            f32 / f16 / bf16 (bf16: torch only)
    k, v         [num_pages, page_size, num_kv_heads, head_dim]  same dtype
    block_table  [>= batch, max_pages_per_seq] int32;   kv_lens [>= batch] int32;   cu_q_lens [batch + 1] int32
    out          like q;   lse  [total_q, num_heads] float32 or None

    import kascade
    backend = kascade.Backend.cpu()        # or kascade.Backend.cuda(max_batch=8, max_seq_len=131072, stream=...)
    policy = kascade.Policy(backend, "kascade", num_layers=32, num_heads=32, num_kv_heads=8, head_dim=128,
                            calibration="kascade_calibration.json")   # or anchors=[0, 2, 8, 13, 14], head_map=...
    policy.begin_forward(kascade.DECODE, q_lens=[1, 1], kv_lens=[700, 1500])
    for layer in range(32):
        policy.attention(layer, q, k[layer], v[layer], block_table, kv_lens, cu_q_lens, out)

The library is libkascade_c.so: the path in $KASCADE_LIBRARY, else the one beside an installed package
(<prefix>/lib, this file being <prefix>/share/kascade/python/kascade/__init__.py), else the loader's
search path. Errors raise kascade.Error with the library's message (the argument or value at fault).
Tested by tests/python/test_c_api.py (CPU, numpy) and tests/python/test_c_api_cuda.py (GPU, torch).
"""

import ctypes
import os
from pathlib import Path

__all__ = ["Error", "Backend", "Policy", "Runtime", "PREFILL", "DECODE", "ROLES", "library", "has_cuda"]

PREFILL, DECODE = 0, 1
ROLES = ("dense", "dense-anchor", "anchor", "reuse")
_STATUS = ("ok", "invalid argument", "out of range", "not found", "unsupported", "data loss",
           "resource exhausted", "internal", "io error")


class Error(RuntimeError):
    """A call of the C interface failed: .code is the kascade_status value, str() the message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.status = _STATUS[code] if 0 <= code < len(_STATUS) else str(code)


class _PolicyConfig(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("num_layers", ctypes.c_int32), ("num_heads", ctypes.c_int32),
                ("num_kv_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32), ("topk_fraction", ctypes.c_double),
                ("k_min", ctypes.c_int64), ("tile_size", ctypes.c_int32), ("rolling", ctypes.c_int32),
                ("anchors", ctypes.POINTER(ctypes.c_int32)), ("num_anchors", ctypes.c_int32),
                ("head_map", ctypes.POINTER(ctypes.c_int32)), ("calibration_file", ctypes.c_char_p),
                ("calibration_num_anchors", ctypes.c_int32)]


class _Query(ctypes.Structure):
    _fields_ = [("q", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("batch", ctypes.c_int32),
                ("total_q", ctypes.c_int32), ("num_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32),
                ("cu_q_lens", ctypes.c_void_p)]


class _PagedKv(ctypes.Structure):
    _fields_ = [("k", ctypes.c_void_p), ("v", ctypes.c_void_p), ("dtype", ctypes.c_int32),
                ("num_pages", ctypes.c_int32), ("page_size", ctypes.c_int32), ("num_kv_heads", ctypes.c_int32),
                ("head_dim", ctypes.c_int32), ("block_table", ctypes.c_void_p), ("max_pages_per_seq", ctypes.c_int32),
                ("kv_lens", ctypes.c_void_p)]


class _RuntimeOptions(ctypes.Structure):
    _fields_ = [("model_path", ctypes.c_char_p), ("device", ctypes.c_int32), ("cuda_device", ctypes.c_int32),
                ("cuda_dtype", ctypes.c_int32), ("max_batch", ctypes.c_int32), ("max_context", ctypes.c_int64),
                ("policy", ctypes.c_char_p), ("calibration_file", ctypes.c_char_p), ("num_anchors", ctypes.c_int32),
                ("topk_fraction", ctypes.c_double)]


_I32, _P = ctypes.c_int32, ctypes.c_void_p
_SIGNATURES = {
    "kascade_c_api_version": (_I32, []),
    "kascade_has_cuda": (_I32, []),
    "kascade_last_error": (ctypes.c_char_p, []),
    "kascade_backend_cpu": (_I32, [ctypes.POINTER(_P)]),
    "kascade_backend_cuda": (_I32, [_I32, _P, _I32, _I32, ctypes.POINTER(_P)]),
    "kascade_backend_destroy": (None, [_P]),
    "kascade_backend_begin_graph_pass": (_I32, [_P, _I32]),
    "kascade_backend_end_graph_pass": (_I32, [_P, ctypes.POINTER(_I32)]),
    "kascade_backend_abort_graph_pass": (None, [_P]),
    "kascade_backend_upload_graph_inputs": (_I32, [_P]),
    "kascade_policy_config_init": (None, [ctypes.POINTER(_PolicyConfig)]),
    "kascade_policy_create": (_I32, [_P, ctypes.POINTER(_PolicyConfig), ctypes.POINTER(_P)]),
    "kascade_policy_destroy": (None, [_P]),
    "kascade_policy_begin_forward": (_I32, [_P, _I32, _I32, ctypes.POINTER(_I32), ctypes.POINTER(_I32)]),
    "kascade_policy_attention": (_I32, [_P, _I32, ctypes.POINTER(_Query), ctypes.POINTER(_PagedKv), ctypes.c_float,
                                        _P, _P]),
    "kascade_policy_layer_role": (_I32, [_P, _I32, _I32, ctypes.POINTER(_I32)]),
    "kascade_policy_keys_attended": (_I32, [_P, _I32, _I32, ctypes.POINTER(ctypes.c_int64),
                                            ctypes.POINTER(ctypes.c_int64)]),
    "kascade_runtime_options_init": (None, [ctypes.POINTER(_RuntimeOptions)]),
    "kascade_runtime_create": (_I32, [ctypes.POINTER(_RuntimeOptions), ctypes.POINTER(_P)]),
    "kascade_runtime_destroy": (None, [_P]),
    "kascade_runtime_describe": (ctypes.c_char_p, [_P]),
    "kascade_runtime_encode": (_I32, [_P, ctypes.c_char_p, _I32, ctypes.POINTER(_I32), ctypes.c_int64,
                                      ctypes.POINTER(ctypes.c_int64)]),
    "kascade_runtime_decode": (_I32, [_P, ctypes.POINTER(_I32), ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64,
                                      ctypes.POINTER(ctypes.c_int64)]),
    "kascade_runtime_generate": (_I32, [_P, ctypes.POINTER(_I32), ctypes.POINTER(ctypes.c_int64), _I32, _I32,
                                        ctypes.c_float, _I32, ctypes.c_float, ctypes.c_uint64, ctypes.POINTER(_I32),
                                        ctypes.POINTER(_I32)]),
    "kascade_runtime_last_stats": (_I32, [_P] + [ctypes.POINTER(ctypes.c_double)] * 4),
}
_API_VERSION = 1
_lib = None


def library():
    """The loaded libkascade_c (loaded on first use; see the module docstring for where it is looked for)."""
    global _lib
    if _lib is not None:
        return _lib
    candidates = []
    if os.environ.get("KASCADE_LIBRARY"):
        candidates.append(os.environ["KASCADE_LIBRARY"])
    here = Path(__file__).resolve()
    if len(here.parents) > 4:  # <prefix>/share/kascade/python/kascade/__init__.py -> <prefix>/lib
        installed = here.parents[4] / "lib" / "libkascade_c.so"
        if installed.exists():
            candidates.append(str(installed))
    candidates.append("libkascade_c.so")
    errors = []
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    else:
        raise Error(3, "cannot load libkascade_c (set KASCADE_LIBRARY to its path): " + "; ".join(errors))
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    if lib.kascade_c_api_version() != _API_VERSION:
        raise Error(4, f"libkascade_c speaks C API version {lib.kascade_c_api_version()}, this module {_API_VERSION}")
    _lib = lib
    return lib


def has_cuda():
    """Whether the library has the CUDA backend compiled in (a GPU may still be missing)."""
    return library().kascade_has_cuda() == 1


def _check(code):
    if code != 0:
        raise Error(code, library().kascade_last_error().decode("utf-8", "replace"))


def _int32_array(values):
    values = [int(v) for v in values]
    return (ctypes.c_int32 * len(values))(*values)


def _pointer_of(array):
    """The data pointer of a numpy array or a torch tensor (which must be contiguous)."""
    if array is None:
        return None
    if hasattr(array, "data_ptr"):  # torch
        if not array.is_contiguous():
            raise Error(1, "a tensor passed to kascade must be contiguous")
        return array.data_ptr()
    interface = getattr(array, "__array_interface__", None)
    if interface is None:
        raise Error(1, f"expected a numpy array or a torch tensor, got {type(array).__name__}")
    if not array.flags["C_CONTIGUOUS"]:
        raise Error(1, "an array passed to kascade must be C-contiguous")
    return interface["data"][0]


def _dtype_name(array):
    """numpy's and torch's names of an element type, alike: 'float32', 'bfloat16', 'int32', ..."""
    return str(array.dtype).replace("torch.", "")


def _dtype_of(array):
    codes = {"float32": 0, "float16": 1, "bfloat16": 2}
    name = _dtype_name(array)
    if name not in codes:
        raise Error(1, f"dtype {name} is not one of float32, float16, bfloat16")
    return codes[name]


def _check_int32(array, what):
    if _dtype_name(array) != "int32":
        raise Error(1, f"{what} must be int32, got {array.dtype}")


class _Handle:
    """Owns a handle of the C interface, released by the C function named _DESTROY when collected."""

    _DESTROY = None
    _handle = None

    def __del__(self):
        if self._handle and _lib is not None:
            getattr(_lib, self._DESTROY)(self._handle)
            self._handle = None


class Backend(_Handle):
    """An attention backend: host memory (cpu) or one CUDA device (cuda)."""

    _DESTROY = "kascade_backend_destroy"

    def __init__(self, handle, kind):
        self._handle = handle
        self.kind = kind  # "cpu": arrays in host memory; "cuda": CUDA tensors

    @classmethod
    def cpu(cls):
        handle = ctypes.c_void_p()
        _check(library().kascade_backend_cpu(ctypes.byref(handle)))
        return cls(handle, "cpu")

    @classmethod
    def cuda(cls, max_batch, max_seq_len, device=0, stream=None):
        """stream: a cudaStream_t as an int (torch.cuda.current_stream().cuda_stream) or None (default stream).
        Every block table given to this backend needs max_seq_len / page_size columns at least (unused ones are
        never read): plans, and decode steps captured in CUDA graphs, are sized by max_seq_len."""
        handle = ctypes.c_void_p()
        _check(library().kascade_backend_cuda(device, stream, max_batch, max_seq_len, ctypes.byref(handle)))
        return cls(handle, "cuda")

    # CUDA graphs of decode steps (include/kascade/c_api.h says the protocol; tests/python/test_c_api_cuda.py
    # captures a step with torch.cuda.graph and replays it):
    #   capture: policy.begin_forward(...); begin_graph_pass("capture"); with torch.cuda.graph(g, stream=s):
    #            every layer's policy.attention(...); end_graph_pass(); upload_graph_inputs(); g.replay()
    #   replay:  policy.begin_forward(...); begin_graph_pass("check"); every layer's policy.attention(...);
    #            if end_graph_pass(): upload_graph_inputs(); g.replay()   else: capture again
    def begin_graph_pass(self, kind):
        passes = {"capture": 1, "check": 2}
        if kind not in passes:
            raise Error(1, f"graph pass {kind!r}; expected 'capture' or 'check'")
        _check(library().kascade_backend_begin_graph_pass(self._handle, passes[kind]))

    def end_graph_pass(self):
        """Capture: True (kept). Check: whether the step's ops equal the captured ones (replay if so)."""
        result = ctypes.c_int32()
        _check(library().kascade_backend_end_graph_pass(self._handle, ctypes.byref(result)))
        return result.value == 1

    def abort_graph_pass(self):
        library().kascade_backend_abort_graph_pass(self._handle)

    def upload_graph_inputs(self):
        _check(library().kascade_backend_upload_graph_inputs(self._handle))


class Policy(_Handle):
    """An attention policy (kascade/policy.h) over a backend."""

    _DESTROY = "kascade_policy_destroy"

    def __init__(self, backend, name, num_layers, num_heads, num_kv_heads, head_dim, topk_fraction=0.10,
                 k_min=128, tile_size=32, rolling=True, anchors=None, head_map=None, calibration=None,
                 calibration_num_anchors=0):
        """anchors / head_map, or calibration: a file made by `kascade calibrate` for this shape (its anchor set
        with calibration_num_anchors anchors, 0 = the file's default), for the kascade variants."""
        lib = library()
        config = _PolicyConfig()
        lib.kascade_policy_config_init(ctypes.byref(config))
        config.name = name.encode()
        config.num_layers, config.num_heads, config.num_kv_heads, config.head_dim = (
            num_layers, num_heads, num_kv_heads, head_dim)
        config.topk_fraction, config.k_min, config.tile_size, config.rolling = (
            topk_fraction, k_min, tile_size, 1 if rolling else 0)
        anchor_array = _int32_array(anchors or [])
        config.anchors = ctypes.cast(anchor_array, ctypes.POINTER(ctypes.c_int32)) if anchors else None
        config.num_anchors = len(anchors or [])
        map_array = None
        if head_map is not None:
            flat = [int(x) for row in head_map for x in (row if hasattr(row, "__iter__") else [row])]
            if len(flat) != num_layers * num_kv_heads:
                raise Error(1, f"head_map has {len(flat)} entries; expected num_layers x num_kv_heads = "
                               f"{num_layers * num_kv_heads}")
            map_array = _int32_array(flat)
            config.head_map = ctypes.cast(map_array, ctypes.POINTER(ctypes.c_int32))
        if calibration is not None:
            config.calibration_file = os.fspath(calibration).encode()
            config.calibration_num_anchors = calibration_num_anchors
        handle = ctypes.c_void_p()
        _check(lib.kascade_policy_create(backend._handle, ctypes.byref(config), ctypes.byref(handle)))
        self._handle, self._backend = handle, backend  # the backend outlives the policy's handle
        self.num_layers, self.num_heads, self.num_kv_heads, self.head_dim = (
            num_layers, num_heads, num_kv_heads, head_dim)

    def begin_forward(self, mode, q_lens, kv_lens):
        """Starts a forward call: mode PREFILL or DECODE; q_lens / kv_lens per sequence (host lists)."""
        if len(q_lens) != len(kv_lens):
            raise Error(1, f"q_lens has {len(q_lens)} entries and kv_lens {len(kv_lens)}")
        _check(library().kascade_policy_begin_forward(self._handle, mode, len(q_lens), _int32_array(q_lens),
                                                      _int32_array(kv_lens)))
        self._batch = len(q_lens)

    def attention(self, layer, q, k, v, block_table, kv_lens, cu_q_lens, out, lse=None, scale=None):
        """Attention of one layer of the current call, written into `out` (and `lse` when given)."""
        for array, what in ((block_table, "block_table"), (kv_lens, "kv_lens"), (cu_q_lens, "cu_q_lens")):
            _check_int32(array, what)
        named = (("q", q), ("k", k), ("v", v), ("block_table", block_table), ("kv_lens", kv_lens),
                 ("cu_q_lens", cu_q_lens), ("out", out), ("lse", lse))
        for what, array in named:  # a host pointer given to the GPU, or a device pointer to the CPU, would crash
            if array is not None and bool(getattr(array, "is_cuda", False)) != (self._backend.kind == "cuda"):
                raise Error(1, f"{what} is in {'device' if getattr(array, 'is_cuda', False) else 'host'} memory; "
                               f"the {self._backend.kind} backend needs "
                               f"{'CUDA tensors' if self._backend.kind == 'cuda' else 'host arrays'}")
        if len(q.shape) != 3 or len(k.shape) != 4 or tuple(v.shape) != tuple(k.shape) or len(block_table.shape) != 2:
            raise Error(1, f"shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, block_table "
                           f"{tuple(block_table.shape)}; expected [total_q, H, d], [pages, page_size, G, d] twice, "
                           "[batch, max_pages]")
        if tuple(out.shape) != tuple(q.shape) or _dtype_of(out) != _dtype_of(q):
            raise Error(1, f"out must have q's shape {tuple(q.shape)} and dtype {q.dtype}")
        if lse is not None and (tuple(lse.shape) != tuple(q.shape[:2]) or _dtype_of(lse) != 0):
            raise Error(1, f"lse must be float32 of shape {tuple(q.shape[:2])}")
        # The call's batch is begin_forward's; block_table and kv_lens may have more (unused) rows.
        query = _Query(_pointer_of(q), _dtype_of(q), getattr(self, "_batch", 0), q.shape[0], q.shape[1], q.shape[2],
                       _pointer_of(cu_q_lens))
        cache = _PagedKv(_pointer_of(k), _pointer_of(v), _dtype_of(k), k.shape[0], k.shape[1], k.shape[2], k.shape[3],
                         _pointer_of(block_table), block_table.shape[1], _pointer_of(kv_lens))
        if scale is None:
            scale = 1.0 / float(q.shape[2]) ** 0.5
        _check(library().kascade_policy_attention(self._handle, layer, ctypes.byref(query), ctypes.byref(cache),
                                                  scale, _pointer_of(out), _pointer_of(lse)))

    def role(self, layer, mode=DECODE):
        """The layer's role in `mode`: one of ROLES."""
        value = ctypes.c_int32()
        _check(library().kascade_policy_layer_role(self._handle, layer, mode, ctypes.byref(value)))
        return ROLES[value.value]

    def keys_attended(self, mode=DECODE, layer=-1):
        """(attended, causal) counts of (query, head, key) triples since the policy was made; layer -1: all."""
        attended, causal = ctypes.c_int64(), ctypes.c_int64()
        _check(library().kascade_policy_keys_attended(self._handle, mode, layer, ctypes.byref(attended),
                                                      ctypes.byref(causal)))
        return attended.value, causal.value


class Runtime(_Handle):
    """A whole model (kascade/runtime.h): a model directory in, tokens or text out.

        runtime = kascade.Runtime("models/kascade-tiny", policy="kascade")   # its kascade_calibration.json
        text = runtime.generate_text("The key for blue-door is 4471902. What is the key?", max_new_tokens=8)
    """

    _DESTROY = "kascade_runtime_destroy"

    def __init__(self, model_path, device="cpu", policy="dense", calibration=None, num_anchors=0, topk_fraction=0.10,
                 max_context=0, max_batch=8, cuda_device=0, cuda_dtype="bfloat16"):
        lib = library()
        options = _RuntimeOptions()
        lib.kascade_runtime_options_init(ctypes.byref(options))
        if device not in ("cpu", "cuda"):
            raise Error(1, f"device {device!r}; expected 'cpu' or 'cuda'")
        if cuda_dtype not in ("bfloat16", "float16"):
            raise Error(1, f"cuda_dtype {cuda_dtype!r}; expected 'bfloat16' or 'float16'")
        options.model_path = os.fspath(model_path).encode()
        options.device = 1 if device == "cuda" else 0
        options.cuda_device, options.max_batch, options.max_context = cuda_device, max_batch, max_context
        options.cuda_dtype = 2 if cuda_dtype == "bfloat16" else 1
        options.policy = policy.encode()
        options.calibration_file = os.fspath(calibration).encode() if calibration is not None else None
        options.num_anchors, options.topk_fraction = num_anchors, topk_fraction
        handle = ctypes.c_void_p()
        _check(lib.kascade_runtime_create(ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle
        self.last_stats = None

    def describe(self):
        return library().kascade_runtime_describe(self._handle).decode()

    def encode(self, text, add_special_tokens=True):
        """Token ids of `text` with the model's tokenizer."""
        data, count, capacity = text.encode(), ctypes.c_int64(), max(16, len(text) + 8)
        while True:
            ids = (ctypes.c_int32 * capacity)()
            code = library().kascade_runtime_encode(self._handle, data, 1 if add_special_tokens else 0, ids, capacity,
                                                    ctypes.byref(count))
            if code == 2 and count.value > capacity:  # out of range: a larger buffer
                capacity = count.value
                continue
            _check(code)
            return list(ids[: count.value])

    def decode(self, ids):
        """Text of token ids (special tokens skipped)."""
        array, length, capacity = _int32_array(ids), ctypes.c_int64(), 16 * len(ids) + 16
        while True:
            text = ctypes.create_string_buffer(capacity)
            code = library().kascade_runtime_decode(self._handle, array, len(ids), text, capacity, ctypes.byref(length))
            if code == 2 and length.value + 1 > capacity:
                capacity = length.value + 1
                continue
            _check(code)
            return text.raw[: length.value].decode("utf-8", "replace")

    def generate(self, prompts, max_new_tokens=32, temperature=0.0, top_k=0, top_p=1.0, seed=0):
        """Generated token lists for a batch of prompts (lists of ids); greedy at temperature 0."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise Error(1, "generate needs at least one prompt, each of at least one token")
        flat = _int32_array([t for p in prompts for t in p])
        offsets = [0]
        for p in prompts:
            offsets.append(offsets[-1] + len(p))
        offset_array = (ctypes.c_int64 * len(offsets))(*offsets)
        tokens = (ctypes.c_int32 * (len(prompts) * max_new_tokens))()
        counts = (ctypes.c_int32 * len(prompts))()
        _check(library().kascade_runtime_generate(self._handle, flat, offset_array, len(prompts), max_new_tokens,
                                                  temperature, top_k, top_p, seed, tokens, counts))
        stats = [ctypes.c_double() for _ in range(4)]
        _check(library().kascade_runtime_last_stats(self._handle, *[ctypes.byref(x) for x in stats]))
        self.last_stats = dict(zip(("prefill_keys", "decode_keys", "prefill_seconds", "decode_seconds"),
                                   (x.value for x in stats)))
        return [list(tokens[b * max_new_tokens: b * max_new_tokens + counts[b]]) for b in range(len(prompts))]

    def generate_text(self, prompt, max_new_tokens=32, **sampling):
        """The generated text for one text prompt."""
        return self.decode(self.generate([self.encode(prompt)], max_new_tokens, **sampling)[0])

