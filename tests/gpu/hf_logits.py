#!/usr/bin/env python3
"""tests/gpu/hf_logits.py — Hugging Face transformers on the GPU as the reference for
gpu_model --hf: for 10 seeded random-id prompts, the logits of the last prompt position and
32 greedy tokens (KV-cached decode) with the top-2 margin at each step, in bf16 (the
reference), in fp32 (to measure how far bf16 itself is from exact) and in bf16 with the eager
attention instead of SDPA (how far two bf16 runs of transformers itself are apart), written as
JSON; the spread between the three is printed.
    python3 tests/gpu/hf_logits.py MODEL_DIR OUT.json"""
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def run(model, ids):
    """Last-position logits and 32 greedy tokens with their top-2 margins."""
    o = model(torch.tensor([ids], device="cuda"), use_cache=True)
    first = o.logits[0, -1].float()
    lg, past, greedy, margins = first, o.past_key_values, [], []
    for _ in range(32):
        top = torch.topk(lg, 2)
        nxt = int(torch.argmax(lg))
        greedy.append(nxt)
        margins.append(float(top.values[0] - top.values[1]))
        o = model(torch.tensor([[nxt]], device="cuda"), past_key_values=past, use_cache=True)
        lg, past = o.logits[0, -1].float(), o.past_key_values
    return [round(v, 5) for v in first.tolist()], greedy, margins


def main():
    src, out = sys.argv[1], sys.argv[2]
    t0 = time.time()
    g = torch.Generator().manual_seed(1234)
    prompts = []
    for dtype, tag, attn in ((torch.bfloat16, "", "sdpa"), (torch.float32, "_f32", "sdpa"),
                             (torch.bfloat16, "_eager", "eager")):
        model = AutoModelForCausalLM.from_pretrained(src, dtype=dtype,
                                                     attn_implementation=attn).cuda().eval()
        print(f"hf: loaded {src} as {dtype} in {time.time() - t0:.1f} s "
              f"(attn {model.config._attn_implementation})", flush=True)
        vocab = model.config.vocab_size
        with torch.no_grad():
            for i in range(10):
                if not tag:
                    n = int(torch.randint(4, 120, (1,), generator=g))
                    prompts.append({"ids": torch.randint(3, vocab, (n,), generator=g).tolist()})
                p = prompts[i]
                p["logits" + tag], p["greedy" + tag], p["margins" + tag] = run(model, p["ids"])
        del model
        torch.cuda.empty_cache()
    for tag in ("_f32", "_eager"):
        errs, same = [], 0
        for p in prompts:
            a, b = torch.tensor(p["logits"]), torch.tensor(p["logits" + tag])
            errs.append(float((a - b).norm() / b.norm()))
            same += p["greedy"] == p["greedy" + tag]
        print(f"hf: bf16 sdpa vs {tag[1:]}: norm-wise relative logit error "
              f"{min(errs):.4f}..{max(errs):.4f}, greedy 32 tokens identical {same}/10", flush=True)
    meta = {"transformers": __import__("transformers").__version__, "torch": torch.__version__,
            "dtype": "bfloat16 (and float32 as *_f32)", "device": torch.cuda.get_device_name(0)}
    with open(out, "w") as f:
        json.dump({"source": meta, "prompts": prompts}, f)
    print(f"hf: wrote {out} in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
