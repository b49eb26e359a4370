#!/usr/bin/env python3
"""make_model_fixtures.py — fixtures for tests/unit/model/, recorded from Hugging Face transformers.

Writes into tests/data/model/:
  hf_configs.json        for each config.json below: the text, the config transformers resolves from
                         it (defaults filled in), the RoPE inv_freq and attention_scaling of the
                         model's rotary embedding (LlamaRotaryEmbedding / Qwen3RotaryEmbedding, i.e.
                         the rope init functions of transformers/modeling_rope_utils.py), and the
                         model's parameter names and shapes (tied parameters counted once).
  tiny_llama_sharded/    a random LlamaForCausalLM (llama3 rope, untied) saved by save_pretrained in
                         bf16 as several safetensors shards + model.safetensors.index.json
  tiny_qwen3_tied/       a random Qwen3ForCausalLM (q/k norm, tied embeddings) saved in f16, one file
  tiny_checkpoints.json  per tensor of each tiny checkpoint: dtype, shape, sum and sum of squares
                         (float64) and the first values, computed by torch from the saved tensors.

Run from the repository root (needs `pip install torch transformers`):
  python3 scripts/make_model_fixtures.py
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "model")

LLAMA31_8B = {  # Llama-3.1-8B's config.json (transformers 4.x spelling), 2 layers
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 2, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": True, "vocab_size": 128256}

QWEN3_06B = {  # Qwen3-0.6B's config.json, 2 layers
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 2, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936}


def small_llama(**kw):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
         "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
         "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2,
         "torch_dtype": "float32"}
    c.update(kw)
    return c


def small_qwen3(**kw):
    c = dict(QWEN3_06B, hidden_size=256, intermediate_size=512, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, vocab_size=1000, max_position_embeddings=131072)
    c.update(kw)
    return c


CASES = {
    "llama_default_minimal": {"model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
                              "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 500},
    "llama_default": small_llama(rope_theta=10000.0, rope_scaling=None),
    "llama31_8b_llama3": LLAMA31_8B,
    "llama32_1b_llama3_tied": dict(LLAMA31_8B, hidden_size=2048, intermediate_size=8192, head_dim=64,
                                   tie_word_embeddings=True,
                                   rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                                 "original_max_position_embeddings": 8192,
                                                 "rope_type": "llama3"}),
    "llama_linear_old_type_key": small_llama(rope_scaling={"type": "linear", "factor": 4.0}),
    "llama_yarn": small_llama(max_position_embeddings=16384, head_dim=128, rope_theta=500000.0,
                              rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                            "original_max_position_embeddings": 4096}),
    "llama_v5_rope_parameters": small_llama(rope_parameters={
        "rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}, dtype="float16",
        max_position_embeddings=8192),
    "llama_llama3_top_level_original": small_llama(
        original_max_position_embeddings=2048, max_position_embeddings=16384, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}),
    "qwen3_06b": QWEN3_06B,
    "qwen3_yarn_128k": dict(QWEN3_06B, max_position_embeddings=131072,
                            rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                          "original_max_position_embeddings": 32768}),
    "qwen3_yarn_attention_factor_betas": small_qwen3(
        rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16384,
                      "attention_factor": 1.25, "beta_fast": 16, "beta_slow": 2, "truncate": False}),
    "qwen3_yarn_mscale": small_qwen3(
        rope_scaling={"type": "yarn", "factor": 16.0, "original_max_position_embeddings": 8192,
                      "mscale": 1.0, "mscale_all_dim": 0.5}),
    "qwen3_yarn_factor_null": small_qwen3(
        rope_scaling={"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 16384}),
    "qwen3_yarn_no_original": small_qwen3(max_position_embeddings=32768,
                                          rope_scaling={"rope_type": "yarn", "factor": 2.0}),
    "qwen3_defaults": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 256, "intermediate_size": 512,
                       "num_hidden_layers": 2, "num_attention_heads": 64, "vocab_size": 300},
}


def rotary_of(config):
    arch = config.architectures[0] if config.architectures else config.model_type
    if "Qwen3" in arch or arch == "qwen3":
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding as R
    else:
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding as R
    return R(config=config)


def load_config(config_json, tmp):
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(config_json, f)
    return AutoConfig.from_pretrained(tmp)


def record_case(name, config_json):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(config_json, tmp)
    rope = rotary_of(cfg)
    rp = cfg.rope_parameters
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    params = [[n, list(p.shape)] for n, p in model.named_parameters()]
    eos = cfg.eos_token_id
    bos = cfg.bos_token_id
    dtype = cfg.dtype
    resolved = {
        "architecture": type(model).__name__,
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers, "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads, "head_dim": cfg.head_dim,
        "max_position_embeddings": cfg.max_position_embeddings, "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": float(rp["rope_theta"]), "rope_type": rp["rope_type"],
        "tie_word_embeddings": bool(cfg.tie_word_embeddings),
        "bos_token_ids": [] if bos is None else ([bos] if isinstance(bos, int) else list(bos)),
        "eos_token_ids": [] if eos is None else ([eos] if isinstance(eos, int) else list(eos)),
        "dtype": None if dtype is None else str(dtype).replace("torch.", ""),
    }
    return {"name": name, "config": config_json, "resolved": resolved,
            "inv_freq": [float(x) for x in rope.inv_freq.float().tolist()],
            "attention_scaling": float(rope.attention_scaling), "parameters": params}


def tiny_checkpoint(name, config_json, dtype, max_shard_size, seed):
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(**{k: v for k, v in config_json.items() if k != "architectures"})
    cfg.architectures = config_json["architectures"]
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))  # norms differ from 1 so tests see real values
    model = model.to(dtype)
    path = os.path.join(OUT, name)
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path, max_shard_size=max_shard_size)
    tensors = {}
    from safetensors import safe_open
    for fname in sorted(os.listdir(path)):
        if not fname.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(path, fname), framework="pt") as f:
            for tname in f.keys():
                t = f.get_tensor(tname)
                d = t.double()
                tensors[tname] = {"file": fname, "dtype": str(t.dtype).replace("torch.", ""),
                                  "shape": list(t.shape), "sum": float(d.sum()), "sum_sq": float((d * d).sum()),
                                  "first": [float(x) for x in d.flatten()[:4].tolist()]}
    return tensors


def main():
    cases = [record_case(n, c) for n, c in CASES.items()]
    with open(os.path.join(OUT, "hf_configs.json"), "w") as f:
        json.dump({"transformers_version": transformers.__version__, "torch_version": torch.__version__,
                   "cases": cases}, f, indent=1)
    tiny_llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
                  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "vocab_size": 64, "max_position_embeddings": 1024,
                  "rope_theta": 500000.0, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
                  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 256}}
    tiny_qwen3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 32,
                  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 64, "max_position_embeddings": 1024,
                  "rope_theta": 1000000.0, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2}
    summary = {
        "tiny_llama_sharded": tiny_checkpoint("tiny_llama_sharded", tiny_llama, torch.bfloat16, "20KB", 1),
        "tiny_qwen3_tied": tiny_checkpoint("tiny_qwen3_tied", tiny_qwen3, torch.float16, "10MB", 2),
    }
    with open(os.path.join(OUT, "tiny_checkpoints.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
