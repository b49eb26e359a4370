#!/usr/bin/env python3
"""make_hf_fixtures.py — model-level parity fixtures for the CPU runtime, recorded from Hugging Face
transformers (DESIGN.md §4: teacher-forced logits, compared by tests/unit/model/test_forward_hf_parity.cpp
and tests/unit/runtime/test_runtime_hf_parity.cpp).

Writes into tests/data/hf/ (about 2.6 MB in all):
  llama_tiny/            a random LlamaForCausalLM: llama3 RoPE scaling (original context 64, so the
                         scaling changes most frequencies), untied lm_head, GQA 4:2, stored in bf16 as
                         two safetensors shards + model.safetensors.index.json
  qwen3_tiny/            a random Qwen3ForCausalLM: q_norm / k_norm, tied embeddings, YaRN RoPE
                         (attention_scaling != 1; max_position_embeddings = factor × original, so
                         every transformers version derives the same scaling), GQA 4:2, stored in
                         f16 as one model.safetensors
  llama_gqa4_d64/        the GPU kernels' shapes (the two above have head dim 32, which the CUDA
  qwen3_gqa4_d128/       kernels do not build): GQA 8:2 (group 4), head dim 64 (llama3 RoPE, bf16, untied)
                         and head dim 128 (Qwen3 q/k norm, YaRN, f16, tied); for the GPU runtime's
                         parity test (tests/cuda/test_gpu_runtime_parity.cpp) and the CPU runtime's
  kascade_tiny           no checkpoint: the reference of the bundled model ../../../models/kascade-tiny
                         on a 2,048-token prompt (random ids) + 20 continuation tokens (regenerate it
                         whenever the shipped weights change: `--only kascade_tiny`)
  <name>.fixture.json    prompt (300 ids) and continuation (20 ids), the positions whose logits are
                         kept, the rotary embedding's inv_freq and attention_scaling, versions
  <name>.logits.f32      little-endian float32 [rows, vocab]: logits of positions
                         first_logit_position .. 319 (the last 20 prompt positions and the 20
                         continuation positions), teacher-forced over prompt + continuation

Weights are drawn at random (normal, std 0.08; norm weights 1 + 0.1·N(0,1)) and rounded to the
storage dtype before the reference runs, so the checkpoint holds exactly the weights that produced
the logits. The reference forward runs in float64 with eager attention on the checkpoint as
transformers reloads it (from_pretrained), so the sharding, index and tensor names are checked too.
Token ids are integers drawn at random (no tokenizer).

Run from the repository root on a machine with torch and transformers (any 4.4x or 5.x):
  python3 scripts/make_hf_fixtures.py            # writes tests/data/hf/
  python3 scripts/make_hf_fixtures.py --out DIR  # elsewhere
  python3 scripts/make_hf_fixtures.py --only llama_gqa4_d64,qwen3_gqa4_d128   # some of them
"""
import argparse
import json
import os
import shutil

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

PROMPT_LEN = 300
CONTINUATION_LEN = 20
KEPT_PROMPT_POSITIONS = 20  # logits kept for the last 20 prompt positions and every continuation one

LLAMA_TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
    "attention_dropout": 0.0, "hidden_act": "silu", "mlp_bias": False, "pretraining_tp": 1,
    "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 64},
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.02,
    "torch_dtype": "bfloat16", "use_cache": True}

QWEN3_TINY = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False,
    "attention_dropout": 0.0, "hidden_act": "silu", "vocab_size": 512, "hidden_size": 128,
    "intermediate_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128},
    "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": None,
    "max_window_layers": 3, "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.02,
    "torch_dtype": "float16", "use_cache": True}

LLAMA_GQA4_D64 = dict(LLAMA_TINY, hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                      num_attention_heads=8, num_key_value_heads=2, head_dim=64)
QWEN3_GQA4_D128 = dict(QWEN3_TINY, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                       num_attention_heads=8, num_key_value_heads=2, head_dim=128, max_window_layers=2)

MODELS = [
    # name, config, storage dtype, shards, seed
    ("llama_tiny", LLAMA_TINY, torch.bfloat16, 2, 1234),
    ("qwen3_tiny", QWEN3_TINY, torch.float16, 1, 5678),
    ("llama_gqa4_d64", LLAMA_GQA4_D64, torch.bfloat16, 1, 2468),
    ("qwen3_gqa4_d128", QWEN3_GQA4_D128, torch.float16, 1, 1357),
]
REPO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
KASCADE_TINY_DIR = os.path.join("..", "..", "..", "models", "kascade-tiny")  # relative to tests/data/hf
KASCADE_TINY_PROMPT = 2048


def randomize(model, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("norm.weight"):
                value = 1.0 + 0.1 * noise
            else:
                value = 0.08 * noise
            p.copy_(value.to(dtype).to(p.dtype))  # exactly representable in the storage dtype


def write_config(config_dict, directory):
    os.makedirs(directory)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config_dict, f, indent=2)
        f.write("\n")


def save_weights(model, config_dict, directory, dtype, shards):
    state = {k: v for k, v in model.state_dict().items() if "rotary_emb" not in k}
    if config_dict["tie_word_embeddings"]:
        state.pop("lm_head.weight", None)  # shares model.embed_tokens.weight, as save_pretrained does
    names = sorted(state)
    if shards == 1:
        save_file({k: state[k].to(dtype).contiguous() for k in names},
                  os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
        return
    weight_map, total = {}, 0
    per_shard = (len(names) + shards - 1) // shards
    for i in range(shards):
        part = names[i * per_shard:(i + 1) * per_shard]
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {k: state[k].to(dtype).contiguous() for k in part}
        save_file(tensors, os.path.join(directory, file), metadata={"format": "pt"})
        for k, t in tensors.items():
            weight_map[k] = file
            total += t.numel() * t.element_size()
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")


def rotary_of(model):
    rotary = model.model.rotary_emb
    return rotary.inv_freq.detach().to(torch.float32).tolist(), float(rotary.attention_scaling)


def make(name, config_dict, dtype, shards, seed, out):
    directory = os.path.join(out, name)
    if os.path.exists(directory):
        shutil.rmtree(directory)
    write_config(config_dict, directory)
    config = AutoConfig.from_pretrained(directory)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").float()
    randomize(model, dtype, seed)
    save_weights(model, config_dict, directory, dtype, shards)

    reloaded = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").double().eval()
    inv_freq, attention_scaling = rotary_of(reloaded)
    rope_type = config_dict["rope_scaling"]["rope_type"]
    default_inv = [1.0 / config_dict["rope_theta"] ** (2 * i / config_dict["head_dim"])
                   for i in range(config_dict["head_dim"] // 2)]
    assert max(abs(a - b) for a, b in zip(inv_freq, default_inv)) > 1e-6, f"{rope_type} scaling not applied"
    if rope_type == "yarn":
        assert abs(attention_scaling - 1.0) > 1e-3, "yarn attention scaling not applied"

    with torch.no_grad():
        tied = reloaded.lm_head.weight.data_ptr() == reloaded.model.embed_tokens.weight.data_ptr()
    assert tied == config_dict["tie_word_embeddings"], "tie_word_embeddings not honoured"
    write_reference(name, name, reloaded, config_dict["vocab_size"], PROMPT_LEN, seed + 1, str(dtype), out)


def write_reference(name, model_dir, reloaded, vocab_size, prompt_len, seed, storage_dtype, out):
    """Teacher-forced float64 logits of `reloaded` over random ids: <name>.logits.f32 + .fixture.json."""
    inv_freq, attention_scaling = rotary_of(reloaded)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (prompt_len + CONTINUATION_LEN,), generator=gen)
    with torch.no_grad():
        logits = reloaded(ids.unsqueeze(0)).logits[0]  # [prompt + continuation, vocab] float64
    first = prompt_len - KEPT_PROMPT_POSITIONS
    kept = logits[first:].to(torch.float32).contiguous()
    kept.numpy().astype("<f4").tofile(os.path.join(out, f"{name}.logits.f32"))
    fixture = {
        "model_dir": model_dir,
        "prompt": ids[:prompt_len].tolist(),
        "continuation": ids[prompt_len:].tolist(),
        "first_logit_position": first,
        "rows": int(kept.shape[0]),
        "vocab_size": int(kept.shape[1]),
        "reference": "transformers float64 eager attention, teacher-forced over prompt + continuation",
        "inv_freq": inv_freq,
        "attention_scaling": attention_scaling,
        "storage_dtype": storage_dtype.replace("torch.", ""),
        "max_abs_logit": float(kept.abs().max()),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    with open(os.path.join(out, f"{name}.fixture.json"), "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    top2 = kept.topk(2, dim=-1).values
    print(f"{name}: max |logit| {fixture['max_abs_logit']:.3f}, median top-2 margin "
          f"{(top2[:, 0] - top2[:, 1]).median().item():.4f}, attention_scaling {attention_scaling:.6f}")


def make_kascade_tiny(out):
    """The bundled model's reference: its shipped weights as transformers loads them, no new checkpoint."""
    # The checkpoint is found from the repository (this script's folder), not from --out: the fixture records the
    # path relative to tests/data/hf, where the tests read it, whatever folder it is written to.
    model_dir = os.path.normpath(os.path.join(REPO_ROOT, "tests", "data", "hf", KASCADE_TINY_DIR))
    config = json.load(open(os.path.join(model_dir, "config.json")))
    reloaded = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager").double().eval()
    write_reference("kascade_tiny", KASCADE_TINY_DIR, reloaded, config["vocab_size"], KASCADE_TINY_PROMPT, 97531,
                    config.get("torch_dtype", "bfloat16"), out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                      "tests", "data", "hf"))
    names = [m[0] for m in MODELS] + ["kascade_tiny"]
    parser.add_argument("--only", help="comma-separated fixtures to write (default: all of " + ", ".join(names) + ")")
    args = parser.parse_args()
    only = args.only.split(",") if args.only else names
    unknown = [n for n in only if n not in names]
    if unknown:
        parser.error(f"unknown fixture(s) {unknown}; known: {names}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(4)
    for name, config_dict, dtype, shards, seed in MODELS:
        if name in only:
            make(name, config_dict, dtype, shards, seed, args.out)
    if "kascade_tiny" in only:
        make_kascade_tiny(args.out)


if __name__ == "__main__":
    main()
