#!/usr/bin/env python3
"""Trains kascade-tiny (a LlamaForCausalLM of ~18.1M parameters, context 16K+) in wall-clock chunks
that fit one command of the GPU machine (10 minutes, 64 MiB in, 8 files x 16 MiB out).

One invocation = one chunk:
  1. warm start: loads the weights of --init (a Hugging Face folder: config.json + safetensors
     shards; bf16 weights become fp32 master weights) or initialises at random (--init none, or a
     folder without weights). No optimizer state is carried: AdamW's moments are re-estimated
     by a short linear learning-rate re-warm-up (--warmup-steps) at the start of every chunk.
  2. trains on the packed data of scripts/make_train_data.py (--data: a stage folder of task
     samples, --natural: the natural-text folder) — or, with --generate KASCADE, on task samples
     generated while it trains (scripts/stream_train_data.py on the CPU cores, a seed range of the
     chunk's own, the newest --stream-window samples of each length re-read every --stream-refresh
     seconds, so samples are seen about once instead of learned by heart) — until --time-budget minus --reserve seconds
     have passed since the process started. Each optimizer step accumulates --micro-per-step
     micro-batches of ~--micro-tokens tokens; each micro-batch is either natural text (windows of
     --natural-ctx tokens) or task samples of one target length (one sample a row, padded to the
     longest sample of that length, so no sample attends to another), drawn by --mix-natural,
     --length-weights and --task-weights; --extra-tasks NAME@L1:L2:...=SHARE adds tasks at lengths of
     their own, each taking SHARE of the task micro-batches (scripts/train_mix.py; the copy curriculum's
     short copy_strings / hop_drill beside a long main mix). Loss: mean
     next-token cross-entropy over the natural/prompt tokens (task prompts weighted by
     --prompt-weight) + --answer-weight x mean cross-entropy over the answer-span tokens (the
     completion and its <|end_of_text|>). bf16 autocast, fp32 master weights, fused AdamW
     (betas 0.9/0.95, weight decay on the 2-D matrices but the embedding), gradient clipping 1.0,
     SDPA attention (flash / cuDNN; --sdpa-backend), optional per-layer torch.compile
     (--compile layer; falls back to eager on any compile error). Learning rate: linear re-warm-up,
     constant, then a linear decay to --min-lr-frac over the last --decay-frac of the training time
     (the schedule runs on wall-clock time, so every chunk ends annealed).
  3. saves the weights in bf16 to --out as Hugging Face shards of <= --shard-bytes each
     (model-0000i-of-0000N.safetensors + model.safetensors.index.json + config.json; the tied
     lm_head is not stored), also every --save-every seconds during training;
  4. evaluates: perplexity on the held-out natural text, then greedy decoding of held-out task
     samples (the dev split of the task suite) scored as RULER does, while time is left;
  5. writes --out/training_log.csv (one row per --log-every steps) and --out/eval_log.csv (one row per
     task x length): the history read from --log / --eval-log (default: the committed docs/model/*.csv;
     the step and token counters continue from it) followed by this chunk's rows. The history files
     are not modified (scripts/train_logs.py), so the caller copies the two files over docs/model/.

Other modes:
  --eval-only           evaluates --init (perplexity, tasks) within --time-budget; writes only eval_log.csv.
  --write-config DIR    writes config.json and generation_config.json of the chosen --preset.
  --plot PNG            plots --log and --eval-log (loss curve, answer accuracy, eval scores; the same as
                        `scripts/train_logs.py --plot PNG`, which needs no PyTorch).
  --check-hf DIR        loads DIR with transformers' AutoModelForCausalLM and compares its logits
                        with this script's model on random tokens (the Hugging Face load check).

Data format (written by scripts/make_train_data.py, read by scripts/train_data_io.py): every *.npz.xz file of a data folder is an
lzma-compressed .npz with arrays tokens uint16 [T] (all documents back to back), doc_offsets int64
[D+1] (document d is tokens[doc_offsets[d]:doc_offsets[d+1]]), ans_start int32 [D] (offset of the
answer span inside the document; -1 for natural text), length int32 [D] (the task sample's target
length in tokens, 0 for natural text), task int16 [D] (index into meta["tasks"], -1 for natural
text), fmt uint8 [D] (0 natural, 1 plain task prompt, 2 chat-formatted task) and meta (a 0-d
string array holding JSON: format, version, kind, tokenizer_sha256, tasks, ...). Evaluation folders
add answers / scorer / max_new_tokens in meta["samples"].

Tested on the CPU by running it (docs/model.md, "CPU check"): a few steps of --preset test on
real data, the checkpoint written, re-loaded by --init and by transformers (--check-hf).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import signal
import sys
import time
from pathlib import Path

START_TIME = time.time()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_mix  # noqa: E402
from train_data_io import DocSet, StreamedTasks, load_docset  # noqa: E402
from train_logs import plot_logs, read_log_tail, write_log  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# Special token ids of models/kascade-tiny/tokenizer.json (scripts/train_tokenizer_tiny.py).
BOS_ID, EOS_ID, EOT_ID = 4088, 4089, 4095

PRESETS = {
    # The shipped model: 12 layers, 8 query heads x 64, 2 KV heads (group 4), tied embeddings.
    "tiny": dict(vocab_size=4096, hidden_size=384, intermediate_size=768, num_hidden_layers=12,
                 num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                 max_position_embeddings=32768, rope_theta=500000.0),
    # A miniature of the same shape for the CPU check (same vocabulary and tokenizer).
    "test": dict(vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                 max_position_embeddings=32768, rope_theta=500000.0),
}

LOG_FIELDS = ["chunk", "stage", "step", "tokens", "elapsed_s", "lr", "loss", "loss_natural", "loss_prompt",
              "loss_answer", "answer_token_acc", "answer_exact", "tokens_per_s", "tflops", "mix_lengths"]
EVAL_FIELDS = ["chunk", "stage", "step", "tokens", "task", "length", "samples", "score", "kind"]


def log(msg: str) -> None:
    print(f"[{time.time() - START_TIME:7.1f}s] {msg}", flush=True)


# ------------------------------------------------------------------------------------------------
# Model configuration and checkpoints
# ------------------------------------------------------------------------------------------------
def config_dict(preset: str) -> dict:
    p = PRESETS[preset]
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": p["vocab_size"],
        "hidden_size": p["hidden_size"],
        "intermediate_size": p["intermediate_size"],
        "num_hidden_layers": p["num_hidden_layers"],
        "num_attention_heads": p["num_attention_heads"],
        "num_key_value_heads": p["num_key_value_heads"],
        "head_dim": p["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": p["max_position_embeddings"],
        "rope_theta": p["rope_theta"],
        "rope_scaling": None,
        "rms_norm_eps": 1e-5,
        "initializer_range": 0.02,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "tie_word_embeddings": True,
        "bos_token_id": BOS_ID,
        "eos_token_id": [EOS_ID, EOT_ID],
        "torch_dtype": "bfloat16",
        "use_cache": True,
    }


def generation_config_dict() -> dict:
    return {"bos_token_id": BOS_ID, "eos_token_id": [EOS_ID, EOT_ID], "pad_token_id": EOS_ID,
            "do_sample": False, "max_new_tokens": 128}


def write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def build_model(preset: str):
    from transformers import AutoModelForCausalLM, LlamaConfig
    cfg = dict(config_dict(preset))
    for k in ("architectures", "model_type", "torch_dtype"):
        cfg.pop(k)
    config = LlamaConfig(**cfg)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32)
    return model


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights are one Parameter


def matmul_parameters(preset: str) -> int:
    """Parameters that enter a matrix product per token (every layer matrix + the lm_head)."""
    p = PRESETS[preset]
    h, i, hd = p["hidden_size"], p["intermediate_size"], p["head_dim"]
    attn = h * hd * (2 * p["num_attention_heads"] + 2 * p["num_key_value_heads"])
    return p["num_hidden_layers"] * (attn + 3 * h * i) + p["vocab_size"] * h


def train_flops_per_token(preset: str, seq_len: int) -> float:
    """6 x matmul params + causal attention (QK^T and PV, forward + backward = 3 x forward)."""
    p = PRESETS[preset]
    attn = 6.0 * p["num_hidden_layers"] * p["num_attention_heads"] * p["head_dim"] * seq_len
    return 6.0 * matmul_parameters(preset) + attn


def save_checkpoint(model, out: Path, preset: str, shard_bytes: int) -> list[str]:
    """bf16 weights as HF shards (model-0000i-of-0000N.safetensors + index); returns file names."""
    from safetensors.torch import save_file
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in model.state_dict().items()
             if k != "lm_head.weight"}
    shards, current, size = [], {}, 0
    for name in sorted(state):
        nbytes = state[name].numel() * state[name].element_size()
        if nbytes > shard_bytes:
            raise ValueError(f"tensor {name} ({nbytes} bytes) exceeds the shard limit {shard_bytes}")
        if current and size + nbytes > shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name] = state[name]
        size += nbytes
    shards.append(current)
    # every shard is written under a temporary name, then renamed: a kill leaves whole files (at
    # worst a mix of the previous save and this one, shard by shard), never a missing or cut shard
    names, weight_map, total = [], {}, 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(out / (fname + ".tmp")), metadata={"format": "pt"})
        os.chmod(out / (fname + ".tmp"), 0o644)
        names.append(fname)
        for k, v in shard.items():
            weight_map[k] = fname
            total += v.numel() * v.element_size()
    for fname in names:
        os.replace(out / (fname + ".tmp"), out / fname)
    for stale in out.glob("model-*-of-*.safetensors"):
        if stale.name not in names:
            stale.unlink()
    write_json(out / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})
    write_json(out / "config.json", config_dict(preset))
    return names + ["model.safetensors.index.json", "config.json"]


def load_weights(model, folder: Path) -> bool:
    """Loads bf16/fp32 safetensors weights of `folder` into `model`; False if it holds none."""
    from safetensors.torch import load_file
    files = sorted(folder.glob("model-*-of-*.safetensors")) or sorted(folder.glob("model.safetensors"))
    if not files:
        return False
    state = {}
    for f in files:
        state.update(load_file(str(f)))
    own = model.state_dict()
    expected = {k for k in own if k != "lm_head.weight"}
    if set(state) != expected:
        raise ValueError(f"{folder}: weights {sorted(set(state) ^ expected)[:6]} differ from the model's")
    for k, v in state.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise ValueError(f"{folder}: {k} has shape {tuple(v.shape)}, the model {tuple(own[k].shape)}")
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    model.tie_weights()
    return True


# ------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------
def tokenizer_sha256(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Batcher:
    """Builds micro-batches on the device: natural-text windows or task samples of one length."""

    def __init__(self, tasks: DocSet | None, natural: DocSet | None, device, micro_tokens: int,
                 natural_ctx: int, mix_natural: float, length_weights: dict[int, float],
                 task_weights: dict[str, float], seed: int, strict_names: bool = True,
                 extras: list[train_mix.ExtraTask] = ()):
        self.device = device
        self.micro_tokens = micro_tokens
        self.natural_ctx = natural_ctx
        self.mix_natural = mix_natural if tasks is not None else 1.0
        self.rng = np.random.default_rng(seed)  # host choices: natural or tasks, which length
        # device draws (rows, windows): no host-to-device copy, so no synchronisation per batch
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)
        if natural is None and self.mix_natural > 0:
            raise ValueError("natural text is in the mix but no natural data was given")
        self.nat = None
        if natural is not None:
            self.nat = torch.from_numpy(natural.tokens.astype(np.int32)).to(device)
            if self.nat.numel() < natural_ctx + 2:
                raise ValueError(f"natural text has {self.nat.numel()} tokens, fewer than one window")
        self.length_weights, self.task_weights, self.extras = length_weights, task_weights, list(extras)
        # task rows handed out per target length (a streamed sample's reuse = rows / documents)
        self.rows_drawn_by_length: dict[int, int] = {}
        self.set_tasks(tasks, strict_names)

    def set_tasks(self, tasks: DocSet | None, strict_names: bool = True) -> None:
        """(Re)builds the task buckets from `tasks` (streamed data: each refresh): one per length of the
        main mix, one per (length, task) of --extra-tasks (train_mix.task_buckets); strict_names: a
        --task-weights name absent from the data, or an extra task's length without samples, is an error
        (streamed: the producer checked the names, and the first shards need not hold every pair yet)."""
        self.buckets = {}
        if tasks is not None:
            self.task_tokens = torch.from_numpy(tasks.tokens.astype(np.int32)).to(self.device)
            names = tasks.task_names
            unknown = set(self.task_weights) - set(names)
            if unknown and strict_names:
                raise ValueError(f"--task-weights names unknown tasks {sorted(unknown)}; known: {names}")
            task_name = np.array(names, dtype=object)[tasks.task] if len(names) else np.array([], dtype=object)
            plan = train_mix.task_buckets(set(zip(tasks.length.tolist(), task_name.tolist())), self.length_weights,
                                          self.extras)
            missing = [f"{e.task}@{L}" for e in self.extras for L in e.lengths
                       if not any(b.task == e.task and b.length == L for b in plan)]
            if missing and strict_names:
                raise ValueError(f"--extra-tasks: no samples of {', '.join(missing)} in the data")
            extra_names = [e.task for e in self.extras]
            for b in plan:
                in_bucket = np.isin(task_name, extra_names, invert=True) if b.task is None else task_name == b.task
                idx = np.nonzero((tasks.length == b.length) & in_bucket)[0]
                longest = int(np.diff(tasks.offsets)[idx].max())
                tw = np.array([self.task_weights.get(names[t], 1.0) for t in tasks.task[idx]], dtype=np.float64)
                weighted = self.task_weights and b.task is None  # an extra bucket holds one task: once per pass
                self.buckets[b.label] = dict(
                    weight=b.weight, length=b.length, n=len(idx), row=-(-longest // 64) * 64,
                    probs=torch.from_numpy(tw / tw.sum()).to(self.device) if weighted else None,
                    start=torch.from_numpy(tasks.offsets[idx]).to(self.device),
                    size=torch.from_numpy(np.diff(tasks.offsets)[idx]).to(self.device),
                    ans=torch.from_numpy(tasks.ans_start[idx].astype(np.int64)).to(self.device),
                    order=torch.randperm(len(idx), device=self.device, generator=self.gen), pos=0)
            if not self.buckets and self.mix_natural < 1.0:
                raise ValueError(f"no task samples with a length in {sorted(self.length_weights)}")
        self.bucket_keys = list(self.buckets)
        self.bucket_probs = np.array([self.buckets[k]["weight"] for k in self.bucket_keys], dtype=np.float64)

    def describe(self) -> str:
        parts = [f"natural {self.mix_natural:.2f} @ {self.natural_ctx}"] if self.mix_natural > 0 else []
        for key, p in zip(self.bucket_keys, self.bucket_probs):
            parts.append(f"{key} {(1 - self.mix_natural) * p:.2f} ({self.buckets[key]['n']} samples)")
        return ", ".join(parts)

    @property
    def rows_drawn(self) -> int:
        return sum(self.rows_drawn_by_length.values())

    def next(self):
        """(inputs [B, L] int64, targets [B, L] int64, kind [B, L] int8: 0 ignore, 1 natural,
        2 prompt, 3 answer; label; is_task) for one micro-batch."""
        if self.rng.random() < self.mix_natural:
            return self._natural()
        return self._tasks(self.bucket_keys[int(self.rng.choice(len(self.bucket_keys), p=self.bucket_probs))])

    def _natural(self):
        L = self.natural_ctx
        B = max(1, self.micro_tokens // L)
        starts = torch.randint(0, self.nat.numel() - L - 1, (B,), device=self.device, generator=self.gen)
        pos = starts[:, None] + torch.arange(L + 1, device=self.device)[None, :]
        seq = self.nat[pos].long()
        kind = torch.ones(B, L, dtype=torch.int8, device=self.device)
        return seq[:, :-1], seq[:, 1:], kind, f"natural@{L}", False

    def _tasks(self, key: str):
        b = self.buckets[key]
        L, R = b["length"], b["row"]  # row length: the longest sample of this length, rounded up to 64
        B = max(1, self.micro_tokens // R)
        if b["probs"] is not None:  # --task-weights: draw with replacement by task weight
            pick = torch.multinomial(b["probs"], B, replacement=True, generator=self.gen)
        else:  # every sample once per pass, in a fresh random order each pass
            if b["pos"] + B > b["n"]:
                b["order"] = torch.randperm(b["n"], device=self.device, generator=self.gen)
                b["pos"] = 0
            pick = b["order"][b["pos"]:b["pos"] + B]
            b["pos"] += B
        self.rows_drawn_by_length[L] = self.rows_drawn_by_length.get(L, 0) + B
        start, size, ans = b["start"][pick], b["size"][pick], b["ans"][pick]
        ar = torch.arange(R + 1, device=self.device)[None, :]
        valid = ar < size[:, None]
        pos = (start[:, None] + ar).clamp(max=self.task_tokens.numel() - 1)
        seq = torch.where(valid, self.task_tokens[pos].long(), torch.full_like(pos, EOS_ID))
        tgt_pos = ar[:, 1:]  # position of the predicted token inside the document
        kind = torch.where(tgt_pos < ans[:, None], 2, 3)
        kind = torch.where(tgt_pos < size[:, None], kind, 0).to(torch.int8)
        return seq[:, :-1], seq[:, 1:], kind, key, True


# ------------------------------------------------------------------------------------------------
# Loss, schedule
# ------------------------------------------------------------------------------------------------
def micro_loss(model, inputs, targets, kind, is_task: bool, prompt_weight: float, answer_weight: float,
               amp_dtype):
    """Loss of one micro-batch and its statistics (0-d tensors). No host-device synchronisation:
    the masks are applied as weighted sums, and `is_task` (known from the batch) says which terms
    exist, since every task row holds prompt and answer tokens."""
    with torch.autocast(device_type=inputs.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        logits = model(input_ids=inputs, use_cache=False).logits  # [B, L, V]
    ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                         reduction="none").reshape(targets.shape)  # [B, L] fp32

    def masked_mean(mask):
        m = mask.float()
        return (ce * m).sum() / m.sum().clamp(min=1.0)

    if not is_task:
        loss = masked_mean(kind == 1)
        return loss, {"loss_natural": loss.detach()}
    ans = kind == 3
    l_prm, l_ans = masked_mean(kind == 2), masked_mean(ans)
    hit = logits.argmax(-1) == targets
    n_ans = ans.sum(dim=1)
    stats = {"loss_prompt": l_prm.detach(), "loss_answer": l_ans.detach(),
             "answer_token_acc": (hit & ans).sum().float() / n_ans.sum().clamp(min=1),
             "answer_exact": ((hit & ans).sum(dim=1) == n_ans).float().mean()}
    return prompt_weight * l_prm + answer_weight * l_ans, stats


def lr_at(step_in_chunk: int, t_frac: float, args) -> float:
    warm = min(1.0, (step_in_chunk + 1) / max(1, args.warmup_steps))
    if t_frac <= 1.0 - args.decay_frac:
        decay = 1.0
    else:
        x = min(1.0, (t_frac - (1.0 - args.decay_frac)) / max(1e-9, args.decay_frac))
        decay = 1.0 - (1.0 - args.min_lr_frac) * x
    return args.lr * warm * decay


def make_optimizer(model, lr: float, weight_decay: float, device):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim == 2 and "embed_tokens" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = device.type == "cuda"
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=fused)


# ------------------------------------------------------------------------------------------------
# Evaluation
# ------------------------------------------------------------------------------------------------
@torch.no_grad()
def heldout_perplexity(model, heldout: DocSet, ctx: int, device, amp_dtype, deadline: float) -> dict:
    """Per held-out work: exp(mean NLL) over non-overlapping windows of ctx tokens."""
    model.eval()
    out = {}
    names = heldout.metas[0].get("doc_names", [])
    for d in range(len(heldout.offsets) - 1):
        if time.time() > deadline:
            break
        doc = torch.from_numpy(heldout.tokens[heldout.offsets[d]:heldout.offsets[d + 1]].astype(np.int64))
        nll, count = 0.0, 0
        for s in range(0, len(doc) - 1, ctx):
            if time.time() > deadline:
                break
            chunk = doc[s:s + ctx + 1].to(device)
            if len(chunk) < 2:
                break
            with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                logits = model(input_ids=chunk[None, :-1], use_cache=False).logits
            nll += F.cross_entropy(logits[0].float(), chunk[1:], reduction="sum").item()
            count += len(chunk) - 1
        name = names[d] if d < len(names) else f"doc{d}"
        if count:
            out[name] = math.exp(nll / count)
    model.train()
    return out


def score(scorer: str, prediction: str, answers: list[str]) -> float:
    """RULER's string_match_all / string_match_part (case-insensitive containment)."""
    pred = prediction.lower()
    hits = [a.lower() in pred for a in answers]
    return float(sum(hits)) / len(hits) if scorer == "string_match_all" else float(any(hits))


@torch.no_grad()
def task_eval(model, evalset: DocSet, tokenizer, device, amp_dtype, per_cell: int, lengths: set[int],
              deadline: float) -> list:
    """Greedy decoding of held-out task samples, scored as RULER; one row per (task, length).
    Samples are taken round-robin over the cells, so a deadline leaves every cell with some."""
    model.eval()
    samples = [s for m in evalset.metas for s in m["samples"]]
    tasks = evalset.task_names
    by_cell: dict[tuple[str, int], list[int]] = {}
    for i in range(len(samples)):
        key = (tasks[int(evalset.task[i])], int(evalset.length[i]))
        if not lengths or key[1] in lengths:
            by_cell.setdefault(key, []).append(i)
    order = [c[r] for r in range(per_cell) for _, c in sorted(by_cell.items(), key=lambda kv: (kv[0][1], kv[0][0]))
             if r < len(c)]
    cells: dict[tuple[str, int], list[float]] = {}
    for i in order:
        if time.time() > deadline:
            break
        s = samples[i]
        key = (tasks[int(evalset.task[i])], int(evalset.length[i]))
        begin, answer, end = (int(evalset.offsets[i]), int(evalset.offsets[i] + evalset.ans_start[i]),
                              int(evalset.offsets[i + 1]))
        prompt = torch.from_numpy(evalset.tokens[begin:answer].astype(np.int64))[None].to(device)
        # a progress probe, not the benchmark: decoding stops 16 tokens after the reference
        # answer's length (or at the task's max_new_tokens), which keeps babbling models cheap
        budget = min(int(s["max_new_tokens"]), end - answer + 16)
        with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                                 max_new_tokens=budget, do_sample=False,
                                 eos_token_id=[EOS_ID, EOT_ID], pad_token_id=EOS_ID)
        text = tokenizer.decode(out[0, prompt.shape[1]:].tolist(), skip_special_tokens=True)
        cells.setdefault(key, []).append(score(s["scorer"], text, s["answers"]))
    model.train()
    return [(t, L, len(v), sum(v) / len(v)) for (t, L), v in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0]))]


# ------------------------------------------------------------------------------------------------
# Modes
# ------------------------------------------------------------------------------------------------
def check_hf(folder: Path, preset: str) -> int:
    """Loads `folder` with transformers and with this script; compares logits on random tokens."""
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    ours = build_model(preset)
    if not load_weights(ours, folder):
        raise SystemExit(f"{folder} holds no weights")
    n = count_parameters(hf)
    ids = torch.randint(0, PRESETS[preset]["vocab_size"], (2, 300), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = hf(input_ids=ids).logits
        b = ours(input_ids=ids, use_cache=False).logits
    diff = (a - b).abs().max().item()
    print(f"transformers loaded {folder}: {type(hf).__name__}, {n} parameters, "
          f"{hf.config.num_hidden_layers} layers, GQA {hf.config.num_attention_heads}/{hf.config.num_key_value_heads}, "
          f"head_dim {hf.config.head_dim}, tied {hf.config.tie_word_embeddings}; max |logit diff| {diff:.3g}")
    return 0 if diff < 1e-4 else 1


def parse_task_weights(spec: str) -> dict[str, float]:
    out = {}
    for part in filter(None, spec.split(",")):
        k, v = part.split("=")
        out[k.strip()] = float(v)
    return out


def parse_weights(spec: str) -> dict[int, float]:
    out = {}
    for part in filter(None, spec.split(",")):
        k, v = part.split("=")
        out[train_mix.parse_length(k)] = float(v)
    return out


def start_stream(args, tok_sha: str, deadline_train: float):
    """--generate: starts scripts/stream_train_data.py (fresh train-split samples on the CPU cores,
    until the training deadline) and waits until every weighted length has a shard. Returns
    (producer process, StreamedTasks, stop file)."""
    import subprocess
    folder = Path(args.stream_dir or f"/tmp/kascade-stream-{os.getpid()}")
    folder.mkdir(parents=True, exist_ok=True)
    stop_file = folder / "STOP"
    stop_file.unlink(missing_ok=True)
    cmd = [sys.executable, str(REPO / "scripts" / "stream_train_data.py"), "--out", str(folder),
           "--kascade", args.generate, "--model", str(Path(args.tokenizer).parent), "--lengths", args.length_weights,
           "--samples", str(args.generate_samples), "--workers", str(args.generate_workers),
           "--seed-base", str(args.generate_seed), "--max-seconds", f"{max(10.0, deadline_train - time.time() + 5):.0f}",
           "--stop-file", str(stop_file), "--stage", args.chunk or "stream"]
    if args.task_weights:
        cmd += ["--tasks", args.task_weights]
    if args.extra_tasks:
        cmd += ["--extra-tasks", args.extra_tasks]
    producer = subprocess.Popen(cmd)
    import atexit
    atexit.register(stop_stream, producer, stop_file)  # also when training fails
    log(f"generating training samples: {' '.join(cmd[1:])}")
    extras = train_mix.parse_extra_tasks(args.extra_tasks)
    streamed = StreamedTasks(folder, args.stream_window, tok_sha, frozenset(e.task for e in extras))
    wanted = set(L for L, w in parse_weights(args.length_weights).items() if w > 0)
    wanted_extra = {(L, e.task) for e in extras for L in e.lengths}
    t0 = time.time()
    while True:
        streamed.poll()
        if wanted <= streamed.lengths() and wanted_extra <= streamed.extra_keys():
            break
        if producer.poll() is not None:
            raise RuntimeError(f"the sample producer exited with {producer.returncode} before every length had data")
        if time.time() - t0 > args.stream_wait:
            producer.terminate()
            missing = [str(L) for L in sorted(wanted - streamed.lengths())]
            missing += [f"{t}@{L}" for L, t in sorted(wanted_extra - streamed.extra_keys())]
            raise RuntimeError(f"no generated samples of {', '.join(missing)} after {args.stream_wait:.0f} s")
        time.sleep(1.0)
    log(f"first generated samples after {time.time() - t0:.0f} s: {streamed.shards} shards, "
        f"{streamed.documents} samples, {streamed.tokens} tokens")
    return producer, streamed, stop_file


def stop_stream(producer, stop_file: Path) -> None:
    """Asks the producer to stop (its workers finish the shard in hand) and waits; idempotent."""
    if producer.poll() is not None:
        return
    stop_file.touch()
    try:
        producer.wait(timeout=20)
    except Exception:
        producer.kill()


def train(args) -> int:
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    amp_dtype = None if args.dtype == "fp32" else torch.bfloat16
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        log(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline_train = START_TIME + args.time_budget - args.reserve
    deadline_all = START_TIME + args.time_budget

    tok_path = Path(args.tokenizer)
    tok_sha = tokenizer_sha256(tok_path)
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(str(tok_path))

    tasks = load_docset(Path(args.data), tok_sha) if args.data else None
    natural = load_docset(Path(args.natural) / "train", tok_sha) if args.natural else None
    heldout = load_docset(Path(args.natural) / "heldout", tok_sha) if args.natural else None
    evalset = load_docset(Path(args.eval_data), tok_sha) if args.eval_data else None
    stage = tasks.metas[0].get("stage", Path(args.data).name) if tasks else "natural"
    producer = streamed = stop_file = None
    if args.generate and not args.eval_only:
        producer, streamed, stop_file = start_stream(args, tok_sha, deadline_train)
        tasks, stage = streamed.docset(), "stream"
    log(f"data: {0 if tasks is None else len(tasks.tokens)} task tokens, "
        f"{0 if natural is None else len(natural.tokens)} natural tokens (stage {stage})")

    model = build_model(args.preset)
    init = None if args.init in (None, "none") else Path(args.init)
    if init is not None and load_weights(model, init):
        log(f"warm start from {init}")
    else:
        log("random initialisation")
    model.to(device)
    model.train()
    n_params = count_parameters(model)
    log(f"model: {n_params} parameters ({n_params * 2 / 1e6:.1f} MB in bf16), preset {args.preset}")

    step0, tokens0 = read_log_tail(Path(args.log))
    # every chunk draws its own batches: the sampling seed moves on with the global step
    if not args.eval_only:
        batcher = Batcher(tasks, natural, device, args.micro_tokens, args.natural_ctx, args.mix_natural,
                          parse_weights(args.length_weights), parse_task_weights(args.task_weights),
                          args.seed + step0, strict_names=streamed is None,
                          extras=train_mix.parse_extra_tasks(args.extra_tasks))
        # (streamed: the first shards need not hold every weighted task yet; the producer checked the names)
        log(f"mix: {batcher.describe()}")
        opt = make_optimizer(model, args.lr, args.weight_decay, device)

    compiled = False
    if args.compile == "layer" and not args.eval_only:
        for layer in model.model.layers:
            layer.compile(dynamic=True)
        compiled = True
        log("compiling each decoder layer (dynamic shapes)")

    from contextlib import nullcontext
    sdpa_ctx = nullcontext
    if device.type == "cuda" and args.sdpa_backend != "auto":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                   "efficient": SDPBackend.EFFICIENT_ATTENTION}[args.sdpa_backend]
        sdpa_ctx = lambda: sdpa_kernel([backend])  # noqa: E731

    log_path = Path(args.log)
    chunk = args.chunk or time.strftime("%Y%m%d-%H%M%S", time.gmtime(START_TIME))
    step, tokens = step0, tokens0
    rows, window = [], []
    t_train0 = time.time()
    t_last_save = t_train0
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("flag", True))

    def save(reason: str) -> None:
        files = save_checkpoint(model, out, args.preset, args.shard_bytes)
        log(f"saved checkpoint ({reason}) to {out}: {', '.join(files)}")

    def flush_window() -> None:
        """One log row (and line) for the steps since the last one."""
        nonlocal window
        if not window:
            return
        if device.type == "cuda":
            torch.cuda.synchronize()
        now = time.time()
        agg = {}
        for st, _, _, _, _ in window:
            for k, v in st.items():
                agg.setdefault(k, []).extend(float(x) for x in v)
        dt = max(1e-9, now - window[0][4])
        wtok = sum(w[1] for w in window)
        wflops = sum(w[2] for w in window)
        row = {"chunk": chunk, "stage": stage, "step": step, "tokens": tokens,
               "elapsed_s": f"{now - START_TIME:.1f}", "lr": f"{lr:.3e}",
               "tokens_per_s": f"{wtok / dt:.0f}", "tflops": f"{wflops / dt / 1e12:.1f}",
               "mix_lengths": " ".join(sorted(set(x for w in window for x in w[3])))}
        for k in LOG_FIELDS:
            if k in agg:
                row[k] = f"{sum(agg[k]) / len(agg[k]):.4f}"
        rows.append(row)
        log(" ".join(f"{k}={row.get(k, '')}" for k in ["step", "tokens", "lr", "loss", "loss_natural",
                                                        "loss_prompt", "loss_answer", "answer_token_acc",
                                                        "answer_exact", "tokens_per_s", "tflops"]))
        window = []

    i = 0
    lr = 0.0
    t_refresh = time.time()
    while (not args.eval_only and not stop["flag"] and time.time() < deadline_train
           and (args.max_steps <= 0 or i < args.max_steps)):
        if streamed is not None and time.time() - t_refresh > args.stream_refresh:
            t_refresh = time.time()
            if streamed.poll():
                batcher.set_tasks(streamed.docset(), strict_names=False)
        t_frac = (time.time() - t_train0) / max(1e-9, deadline_train - t_train0)
        lr = lr_at(i, t_frac, args)
        for g in opt.param_groups:
            g["lr"] = lr
        t_step = time.time()
        step_stats, step_tokens, flops, lengths = {}, 0, 0.0, []
        try:
            with sdpa_ctx():
                for _ in range(args.micro_per_step):
                    inputs, targets, kind, label, is_task = batcher.next()
                    loss, stats = micro_loss(model, inputs, targets, kind, is_task, args.prompt_weight,
                                             args.answer_weight, amp_dtype)
                    (loss / args.micro_per_step).backward()
                    for k, v in stats.items():
                        step_stats.setdefault(k, []).append(v)
                    step_stats.setdefault("loss", []).append(loss.detach())
                    step_tokens += inputs.numel()
                    flops += inputs.numel() * train_flops_per_token(args.preset, inputs.shape[1])
                    lengths.append(label)
        except Exception as e:  # a compile failure falls back to eager once
            if not compiled:
                raise
            log(f"torch.compile failed ({type(e).__name__}: {str(e)[:300]}); continuing in eager mode")
            for layer in model.model.layers:
                layer._compiled_call_impl = None
            torch._dynamo.reset()
            compiled = False
            opt.zero_grad(set_to_none=True)
            continue
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        i += 1
        step += 1
        tokens += step_tokens
        window.append((step_stats, step_tokens, flops, lengths, t_step))
        if i == 1 or i % args.log_every == 0:
            flush_window()
        if time.time() - t_last_save > args.save_every:
            save("periodic")
            t_last_save = time.time()
    flush_window()
    if producer is not None:
        stop_stream(producer, stop_file)
        streamed.poll()
        log(f"generated during training: {streamed.shards} shards, {streamed.documents} samples, "
            f"{streamed.tokens} tokens; task rows drawn {batcher.rows_drawn} "
            f"({batcher.rows_drawn / max(1, streamed.documents):.2f} per generated sample)")
        log("  by length: " + ", ".join(
            f"{L}: {batcher.rows_drawn_by_length.get(L, 0)} rows / {n} samples "
            f"({batcher.rows_drawn_by_length.get(L, 0) / max(1, n):.2f})"
            for L, n in sorted(streamed.documents_by_length.items())))
    if not args.eval_only:
        log(f"training stopped after {i} steps in this chunk ({time.time() - t_train0:.0f} s), step {step}, "
            f"{tokens} tokens in total")
        save("final")
        write_log(log_path, out / "training_log.csv", LOG_FIELDS, rows)

    eval_rows = []
    if compiled:
        torch.compiler.set_stance("force_eager")
    if heldout is not None and time.time() < deadline_all - 5:
        ppl = heldout_perplexity(model, heldout, args.ppl_ctx, device, amp_dtype, deadline_all - 5)
        for name, v in ppl.items():
            log(f"held-out perplexity {name} @ {args.ppl_ctx}: {v:.2f}")
            eval_rows.append({"chunk": chunk, "stage": stage, "step": step, "tokens": tokens, "task": name,
                              "length": args.ppl_ctx, "samples": 1, "score": f"{v:.4f}", "kind": "perplexity"})
    if evalset is not None and time.time() < deadline_all - 5:
        t_eval = time.time()
        results = task_eval(model, evalset, tokenizer, device, amp_dtype, args.eval_per_cell,
                            set(parse_weights(",".join(f"{x}=1" for x in args.eval_lengths.split(",") if x))),
                            deadline_all - 5)
        log(f"task evaluation: {sum(r[2] for r in results)} samples in {time.time() - t_eval:.0f} s")
        for t, L, n, sc in results:
            log(f"eval {t:16s} {L:6d}: {100 * sc:5.1f}% of {n}")
            eval_rows.append({"chunk": chunk, "stage": stage, "step": step, "tokens": tokens, "task": t,
                              "length": L, "samples": n, "score": f"{sc:.4f}", "kind": "accuracy"})
    if eval_rows:
        write_log(Path(args.eval_log), out / "eval_log.csv", EVAL_FIELDS, eval_rows)
    log("done")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--write-config", metavar="DIR", help="write config.json + generation_config.json and exit")
    ap.add_argument("--check-hf", metavar="DIR", help="load DIR with transformers and compare logits, then exit")
    ap.add_argument("--plot", metavar="PNG", help="plot --log and --eval-log to PNG, then exit")
    ap.add_argument("--init", default=str(REPO / "models" / "kascade-tiny"),
                    help="warm-start folder (HF layout) or 'none'; a folder without weights means random init")
    ap.add_argument("--data", help="stage folder of task samples (*.npz.xz)")
    ap.add_argument("--natural", help="natural-text folder with train/ and heldout/ (*.npz.xz)")
    ap.add_argument("--eval-data", help="held-out task samples (*.npz.xz) for the end-of-chunk evaluation")
    ap.add_argument("--generate", metavar="KASCADE", help="train on samples generated while training by this "
                    "`kascade` CLI (scripts/stream_train_data.py; needs --length-weights and --generate-seed)")
    ap.add_argument("--generate-seed", type=int, help="first user seed of the generated samples (>= 10^6; "
                    "a range of its own for every chunk)")
    ap.add_argument("--generate-workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--generate-samples", type=int, default=8, help="samples per generated shard")
    ap.add_argument("--stream-dir", help="folder of the generated shards (default /tmp/kascade-stream-PID)")
    ap.add_argument("--stream-window", type=int, default=1024, help="newest generated samples kept per length")
    ap.add_argument("--stream-refresh", type=float, default=15.0, help="seconds between reads of new shards")
    ap.add_argument("--stream-wait", type=float, default=120.0, help="seconds to wait for the first shards")
    ap.add_argument("--tokenizer", default=str(REPO / "models" / "kascade-tiny" / "tokenizer.json"))
    ap.add_argument("--out", default=os.environ.get("OUT", "train/out"), help="checkpoint and logs folder")
    ap.add_argument("--log", default=str(REPO / "docs" / "model" / "training_log.csv"),
                    help="training-log history, read only (the chunk writes history + its rows to --out)")
    ap.add_argument("--eval-log", default=str(REPO / "docs" / "model" / "eval_log.csv"),
                    help="eval-log history, read only (the chunk writes history + its rows to --out)")
    ap.add_argument("--chunk", help="name of this chunk in the logs (default: UTC start time)")
    ap.add_argument("--time-budget", type=float, default=540.0, help="seconds from start to the end of eval")
    ap.add_argument("--reserve", type=float, default=70.0, help="seconds kept for saving and evaluation")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: time only)")
    ap.add_argument("--eval-only", action="store_true", help="no training and no checkpoint: evaluate --init")
    ap.add_argument("--micro-tokens", type=int, default=65536)
    ap.add_argument("--micro-per-step", type=int, default=2)
    ap.add_argument("--natural-ctx", type=int, default=2048)
    ap.add_argument("--mix-natural", type=float, default=0.2)
    ap.add_argument("--length-weights", default="", help="e.g. 4k=1,8k=1,16k=2 (default: every length alike)")
    ap.add_argument("--task-weights", default="", help="e.g. cwe=2,fwe=2 (default: every task alike)")
    ap.add_argument("--extra-tasks", default="", help="tasks at lengths of their own beside the main mix, "
                    "NAME@L1:L2:...=SHARE of the task micro-batches (and, with --generate, of the generated tokens), "
                    "e.g. copy_strings@512:1k:2k=0.12,hop_drill@512:1k:2k=0.1 (scripts/train_mix.py)")
    ap.add_argument("--prompt-weight", type=float, default=0.5)
    ap.add_argument("--answer-weight", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--decay-frac", type=float, default=0.25)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--compile", choices=["none", "layer"], default="layer")
    ap.add_argument("--sdpa-backend", choices=["auto", "flash", "cudnn", "efficient"], default="auto")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--shard-bytes", type=int, default=14_000_000)
    ap.add_argument("--save-every", type=float, default=180.0)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--ppl-ctx", type=int, default=2048)
    ap.add_argument("--eval-per-cell", type=int, default=2, help="samples per task and length")
    ap.add_argument("--eval-lengths", default="", help="evaluate these lengths only, e.g. 4k,8k (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    if args.write_config:
        d = Path(args.write_config)
        d.mkdir(parents=True, exist_ok=True)
        write_json(d / "config.json", config_dict(args.preset))
        write_json(d / "generation_config.json", generation_config_dict())
        model = build_model(args.preset)
        print(f"wrote {d}/config.json and generation_config.json: {count_parameters(model)} parameters, "
              f"{matmul_parameters(args.preset)} in matrix products")
        return 0
    if args.check_hf:
        return check_hf(Path(args.check_hf), args.preset)
    if args.plot:
        return plot_logs(Path(args.log), Path(args.eval_log), Path(args.plot))
    try:
        extras = train_mix.parse_extra_tasks(args.extra_tasks)
    except ValueError as e:
        ap.error(str(e))
    clash = [e.task for e in extras if parse_task_weights(args.task_weights).get(e.task, 0) > 0]
    if clash:
        ap.error(f"{', '.join(clash)}: in --extra-tasks and with a positive --task-weights weight; give it one place")
    if args.generate:
        if args.data:
            ap.error("--generate replaces --data: give one of them")
        if not args.length_weights:
            ap.error("--generate needs --length-weights (the lengths to generate, e.g. 4k=1,8k=1,16k=2)")
        if args.generate_seed is None:
            ap.error("--generate needs --generate-seed (a seed range of this chunk's own, >= 10^6)")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
