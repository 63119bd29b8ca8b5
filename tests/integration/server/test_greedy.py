"""test_greedy.py — greedy /v1/completions equals `nanoserve generate --temperature 0` for
the same prompt (an independent path: generate runs the model without the engine thread),
streamed and not; chat streams equal chat answers; response shapes, usage, echo, stop
strings, /v1/models, /tokenize, /detokenize, /health, /ready, /metrics names."""
import json
import subprocess

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)

PROMPTS = ["The quick brown fox", "Hello", "int main(void) {\n  return", "Ünïcödé ✓ text"]


def generate(prompt, n):
    r = subprocess.run([binary, "generate", "--model", model, "--prompt", prompt, "--max-tokens",
                        str(n), "--temperature", "0", "--json"], capture_output=True)
    check(r.returncode == 0, "generate failed: %r" % r.stderr)
    return json.loads(r.stdout)


with nsd.Daemon(binary, work, model, name="greedy") as d:
    # ---- completions: equal to generate, streamed and not ----
    for i, prompt in enumerate(PROMPTS):
        n = 12 + 7 * i
        ref = generate(prompt, n)
        st, o = d.post("/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0})
        check(st == 200, "completions answered %d: %r" % (st, o))
        check(o["object"] == "text_completion" and o["id"].startswith("cmpl-"), repr(o))
        check(isinstance(o["created"], int) and o["model"] == "tiny", repr(o))
        ch = o["choices"][0]
        check(ch["index"] == 0 and ch["logprobs"] is None, repr(ch))
        check(ch["text"] == ref["text"], "prompt %r: server %r != generate %r" %
              (prompt, ch["text"], ref["text"]))
        check(ch["finish_reason"] == ref["finish_reason"], "finish %r != %r" %
              (ch["finish_reason"], ref["finish_reason"]))
        u = o["usage"]
        check(u["prompt_tokens"] == len(ref["prompt_ids"]), "prompt_tokens %r" % u)
        check(u["completion_tokens"] == len(ref["ids"]), "completion_tokens %r vs %d" %
              (u, len(ref["ids"])))
        check(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], repr(u))
        # streamed: the deltas concatenate to the same text; usage chunk then [DONE]
        st, ev, done = d.stream("/v1/completions", {
            "prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}})
        check(st == 200 and done, "stream: status %d, [DONE] %s" % (st, done))
        text, finish, usage = nsd.stream_text(ev)
        check(text == ref["text"], "stream %r != %r" % (text, ref["text"]))
        check(finish == ref["finish_reason"], "stream finish %r" % finish)
        check(usage == u, "stream usage %r != %r" % (usage, u))
        check(ev[-1]["choices"] == [] and all(e["object"] == "text_completion" for e in ev),
              "last chunk %r" % ev[-1])
        check(all("usage" in e for e in ev), "include_usage: every chunk carries usage")
        check(len(ev) >= 3, "only %d chunks" % len(ev))
        # a chunk for every generated token, also one whose text is still held back
        per_token = sum(1 for e in ev if e["choices"])
        check(per_token >= u["completion_tokens"], "%d chunks with choices for %d tokens" %
              (per_token, u["completion_tokens"]))
        # the same by token ids
        st, o2 = d.post("/v1/completions", {"prompt": ref["prompt_ids"], "max_tokens": n,
                                            "temperature": 0})
        check(st == 200 and o2["choices"][0]["text"] == ref["text"], "ids prompt: %r" % o2)

    # ---- echo, stop strings, logprobs ----
    ref = generate(PROMPTS[0], 16)
    st, o = d.post("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 16,
                                       "temperature": 0, "echo": True})
    check(o["choices"][0]["text"] == PROMPTS[0] + ref["text"], "echo: %r" % o)
    full = ref["text"]
    if len(full) >= 6:
        stop = full[len(full) // 2:len(full) // 2 + 2]
        st, o = d.post("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 16,
                                           "temperature": 0, "stop": ["\u2603never", stop]})
        check(o["choices"][0]["text"] == full[:full.index(stop)], "stop: %r" % o)
        check(o["choices"][0]["finish_reason"] == "stop", "stop finish: %r" % o)
        # vLLM's stop_reason names the stop string that matched (null for EOS and length)
        check(o["choices"][0]["stop_reason"] == stop, "stop_reason: %r" % o)
        st, ev, done = d.stream("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 16,
                                                    "temperature": 0, "stream": True,
                                                    "stop": ["\u2603never", stop]})
        fin = [e["choices"][0] for e in ev if e["choices"] and e["choices"][0]["finish_reason"]]
        check(len(fin) == 1 and fin[0]["stop_reason"] == stop, "streamed stop_reason: %r" % fin)
        check(all(e["choices"][0]["stop_reason"] is None for e in ev
                  if e["choices"] and not e["choices"][0]["finish_reason"]),
              "stop_reason before the end: %r" % ev)
        st, o = d.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                "max_tokens": 16, "temperature": 0,
                                                "stop": [stop]})
        ch = o["choices"][0] if st == 200 else {}
        check(ch.get("stop_reason", 0) in (stop, None) and
              (ch["finish_reason"] == "stop" or ch["stop_reason"] is None),
              "chat stop_reason: %r" % o)
    check(o2["choices"][0]["stop_reason"] is None, "stop_reason without a stop: %r" % o2)
    st, o = d.post("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 5, "temperature": 0,
                                       "logprobs": 3})
    lp = o["choices"][0]["logprobs"]
    check(len(lp["tokens"]) == 5 and len(lp["token_logprobs"]) == 5, "logprobs: %r" % lp)
    check(all(len(t) == 3 for t in lp["top_logprobs"]), "top_logprobs: %r" % lp)
    check(all(x <= 0 for x in lp["token_logprobs"]), "logprobs must be <= 0: %r" % lp)
    # greedy: the chosen token is the most likely one
    check(all(abs(max(t.values()) - x) < 1e-4 for t, x in zip(lp["top_logprobs"],
                                                              lp["token_logprobs"])),
          "greedy token is not the top one: %r" % lp)

    # ---- chat: stream == non-stream; the role chunk first ----
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
    st, o = d.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 20,
                                            "temperature": 0})
    check(st == 200 and o["object"] == "chat.completion", "chat: %d %r" % (st, o))
    check(o["id"].startswith("chatcmpl-"), repr(o))
    m = o["choices"][0]["message"]
    check(m["role"] == "assistant" and isinstance(m["content"], str), repr(m))
    st, ev, done = d.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 20,
                                                     "temperature": 0, "stream": True})
    check(st == 200 and done, "chat stream %d" % st)
    check(ev[0]["choices"][0]["delta"].get("role") == "assistant", "first chunk %r" % ev[0])
    check(all(e["object"] == "chat.completion.chunk" for e in ev), "chunk objects")
    text, finish, _ = nsd.stream_text(ev, chat=True)
    check(text == m["content"], "chat stream %r != %r" % (text, m["content"]))
    check(finish == o["choices"][0]["finish_reason"], "chat finish %r" % finish)
    # the prompt the template made (ChatML, no BOS from the tokenizer) as the model sees it
    st, t = d.post("/tokenize", {"messages": msgs})
    check(st == 200 and t["count"] == o["usage"]["prompt_tokens"], "tokenize messages %r" % t)
    st, dt = d.post("/detokenize", {"tokens": t["tokens"]})
    want = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n")
    check(dt["prompt"] == want, "chat prompt %r != %r" % (dt["prompt"], want))

    # ---- /tokenize equals the tokenizer CLI; /detokenize inverts it ----
    r = subprocess.run([binary, "tokenize", "--model", model], input=PROMPTS[3].encode(),
                       capture_output=True)
    ids = json.loads(r.stdout)
    st, t = d.post("/tokenize", {"prompt": PROMPTS[3]})
    check(t["tokens"] == ids and t["count"] == len(ids) and t["max_model_len"] == 2048, repr(t))
    st, t2 = d.post("/detokenize", {"tokens": ids})
    check(PROMPTS[3] in t2["prompt"], "detokenize %r" % t2)

    # ---- models, health, ready, metrics ----
    st, _, body = d.request("GET", "/v1/models")
    mo = json.loads(body)
    check(mo["object"] == "list" and mo["data"][0]["id"] == "tiny", repr(mo))
    check(mo["data"][0]["owned_by"] == "nanoserve" and mo["data"][0]["max_model_len"] == 2048,
          repr(mo))
    st, _, body = d.request("GET", "/health")
    check(st == 200 and json.loads(body) == {"status": "ok"}, "health %d %r" % (st, body))
    st, _, body = d.request("GET", "/ready")
    check(st == 200, "ready %d" % st)
    mt = d.metrics()
    for name, typ in [("time_to_first_token_seconds", "histogram"),
                      ("inter_token_latency_seconds", "histogram"),
                      ("e2e_request_latency_seconds", "histogram"),
                      ("request_queue_time_seconds", "histogram"),
                      ("requests_total", "counter"), ("request_finish_total", "counter"),
                      ("prompt_tokens_total", "counter"), ("generation_tokens_total", "counter"),
                      ("num_requests_running", "gauge"), ("num_requests_waiting", "gauge"),
                      ("kv_cache_pages_used", "gauge"), ("kv_cache_pages_total", "gauge"),
                      ("memory_pool_bytes_in_use", "gauge"), ("memory_pool_bytes_total", "gauge"),
                      ("memory_pool_fragmentation_ratio", "gauge"), ("batch_size", "gauge"),
                      ("http_open_connections", "gauge")]:
        check(mt.get("#TYPE nanoserve_" + name) == typ, "metric %s (%s) missing" % (name, typ))
    check(mt['nanoserve_requests_total{endpoint="completions",status="200"}'] >= 12,
          "completion counter")
    check(mt["nanoserve_time_to_first_token_seconds_count"] >= 12, "ttft count")
    check(mt['nanoserve_time_to_first_token_seconds_bucket{le="+Inf"}'] ==
          mt["nanoserve_time_to_first_token_seconds_count"], "+Inf bucket == count")
    check(mt["nanoserve_kv_cache_pages_used"] == 0, "KV pages held while idle")
    check(mt["nanoserve_kv_cache_pages_total"] > 0, "no KV pages")
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_greedy: ok")
