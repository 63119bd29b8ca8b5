#!/usr/bin/env python3
"""make_golden.py — build tiny random Llama-family checkpoints with HF transformers
and record reference logits and greedy continuations for nanoserve's CPU tests.

Run where torch + transformers are installed (the GPU machine); nothing is
downloaded. Writes tests/data/golden/<name>/{config.json, model.safetensors,
generation_config.json?, golden.json}. The reference runs in float32 on the CPU
with eager attention, so it is exact to float32 rounding.

    python3 tests/golden/make_golden.py [--out tests/data/golden] [--seed 1234]

golden.json = {"source": {...versions...}, "prompts": [{"ids": [...],
  "logits": [[vocab floats] per prompt position], "greedy": [32 ids],
  "greedy_min_margin": smallest top-1 minus top-2 logit along the greedy path}]}
"""
import argparse
import json
import os
import shutil

import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)

PROMPT_LENS = [1, 5, 17, 33]
NEW_TOKENS = 32
MIN_MARGIN = 2e-3


def models():
    common = dict(num_hidden_layers=2, max_position_embeddings=512, bos_token_id=1,
                  eos_token_id=2, hidden_act="silu", attention_dropout=0.0)
    return [
        # plain multi-head attention
        ("llama_mha", LlamaForCausalLM,
         LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=160,
                     num_attention_heads=4, num_key_value_heads=4, rms_norm_eps=1e-5,
                     rope_theta=10000.0, tie_word_embeddings=False, **common)),
        # GQA, sizes that are not multiples of 32: 5 heads of 40, one kv head
        ("llama_gqa_odd", LlamaForCausalLM,
         LlamaConfig(vocab_size=301, hidden_size=200, intermediate_size=120,
                     num_attention_heads=5, num_key_value_heads=1, rms_norm_eps=1e-6,
                     rope_theta=10000.0, tie_word_embeddings=False, **common)),
        # tied embeddings with Llama 3.1 rope scaling (small original context so
        # the frequency bands really change)
        ("llama3_tied_scaled", LlamaForCausalLM,
         LlamaConfig(vocab_size=280, hidden_size=96, intermediate_size=200,
                     num_attention_heads=3, num_key_value_heads=1, head_dim=32,
                     rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                     rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 16},
                     **common)),
        # Qwen2: q/k/v bias, tied, GQA
        ("qwen2_bias", Qwen2ForCausalLM,
         Qwen2Config(vocab_size=320, hidden_size=128, intermediate_size=176,
                     num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6,
                     rope_theta=1000000.0, tie_word_embeddings=True,
                     use_sliding_window=False, **common)),
        # Mistral with linear rope scaling and no sliding window
        ("mistral_linear", MistralForCausalLM,
         MistralConfig(vocab_size=290, hidden_size=64, intermediate_size=128,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       rms_norm_eps=1e-5, rope_theta=10000.0, sliding_window=None,
                       rope_scaling={"rope_type": "linear", "factor": 2.0}, **common)),
    ]


def randomize(model, gen):
    """Weights large enough that logits spread (greedy is not decided by
    rounding), norms and biases away from their trivial values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(1.0 * torch.randn(p.shape, generator=gen))
            elif "lm_head" in name:
                # wide logits: greedy choices far from ties
                p.copy_(8.0 * torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def greedy(model, ids):
    seq = list(ids)
    out, margin = [], float("inf")
    for _ in range(NEW_TOKENS):
        with torch.no_grad():
            logits = model(torch.tensor([seq])).logits[0, -1]
        top = torch.topk(logits, 2)
        margin = min(margin, float(top.values[0] - top.values[1]))
        nxt = int(top.indices[0])
        out.append(nxt)
        seq.append(nxt)
    return out, margin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/golden")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(8)
    for name, cls, cfg in models():
        gen = torch.Generator().manual_seed(args.seed + len(name))
        cfg._attn_implementation = "eager"
        model = cls(cfg).float().eval()
        randomize(model, gen)
        out = os.path.join(args.out, name)
        shutil.rmtree(out, ignore_errors=True)
        # stored in bf16 (half the bytes, and the loader's BF16 path is tested);
        # the reference upcasts those exact values and computes in float32
        model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
        # the reference is the model as saved: reload it and use that
        model = cls.from_pretrained(out, attn_implementation="eager",
                                    dtype=torch.float32).eval()
        print(name, "rope:", getattr(model.config, "rope_parameters", None) or
              getattr(model.config, "rope_scaling", None))
        prompts = []
        for n in PROMPT_LENS:
            # re-draw prompts whose greedy path passes a near-tie, which float32
            # rounding differences could flip
            for _ in range(50):
                ids = torch.randint(3, cfg.vocab_size, (n,), generator=gen).tolist()
                g, margin = greedy(model, ids)
                if margin > MIN_MARGIN:
                    break
            logits = model(torch.tensor([ids])).logits[0]
            prompts.append({"ids": ids,
                            "logits": [[float("%.7g" % v) for v in row] for row in logits.tolist()],
                            "greedy": g, "greedy_min_margin": margin})
        rec = {"source": {"torch": torch.__version__, "transformers": transformers.__version__,
                          "dtype": "float32 compute, bf16-stored weights", "device": "cpu", "attn": "eager",
                          "seed": args.seed},
               "prompts": prompts}
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(rec, f, separators=(",", ":"))
        sizes = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out))}
        print(name, "margins", ["%.3g" % p["greedy_min_margin"] for p in prompts], sizes)


if __name__ == "__main__":
    main()
