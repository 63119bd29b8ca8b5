"""test_logit_bias.py — OpenAI's logit_bias on both endpoints: a +100 bias makes every token
the biased one (greedy and sampled), -100 bans a token that +99.5 elsewhere would not beat,
an id named twice (a repeated key, or "05" after "5") keeps its later value, an empty object changes nothing, and the answers'
logprobs follow the biased distribution; stop_token_ids end a request at the biased id."""
import json

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)
C, CHAT = "/v1/completions", "/v1/chat/completions"
N = 5


def one_id(d, text):
    st, t = d.post("/tokenize", {"prompt": text, "add_special_tokens": False})
    check(st == 200 and len(t["tokens"]) == 1, "tokenize %r: %r" % (text, t))
    return t["tokens"][0]


def text_of(d, ids):
    st, t = d.post("/detokenize", {"tokens": ids})
    check(st == 200, "detokenize %r: %r" % (ids, t))
    return t["prompt"]


def complete(d, bias, raw=None, **kw):
    body = {"prompt": "The quick brown fox", "max_tokens": N, "temperature": 0,
            "ignore_eos": True, "logit_bias": bias}
    body.update(kw)
    if raw is not None:
        st, _, data = d.request("POST", C, raw.encode(), {"Content-Type": "application/json"})
        o = json.loads(data)
    else:
        st, o = d.post(C, body)
    check(st == 200, "completions with logit_bias %r answered %d: %r" % (bias, st, o))
    return o


with nsd.Daemon(binary, work, model, name="logit_bias") as d:
    x, y = one_id(d, "q"), one_id(d, "z")
    xs, ys = text_of(d, [x] * N), text_of(d, [y] * N)
    plain = complete(d, None)["choices"][0]["text"]
    check(plain != xs and plain != ys, "pick other letters: the plain answer is %r" % plain)
    check(complete(d, {})["choices"][0]["text"] == plain, "an empty logit_bias changed the text")

    # +100 wins greedy and sampled draws; a ban at -100 loses to +99.5 on another token
    o = complete(d, {str(x): 100})
    check(o["choices"][0]["text"] == xs, "greedy, +100 on %d: %r, want %r" %
          (x, o["choices"][0]["text"], xs))
    for seed in range(3):
        o = complete(d, {str(x): 100}, temperature=1.0, seed=seed)
        check(o["choices"][0]["text"] == xs, "sampled (seed %d), +100: %r" %
              (seed, o["choices"][0]["text"]))
    o = complete(d, {str(x): -100, str(y): 99.5})
    check(o["choices"][0]["text"] == ys, "-100 on %d, +99.5 on %d: %r" %
          (x, y, o["choices"][0]["text"]))
    o = complete(d, {str(x): 100, str(y): 99.5})
    check(o["choices"][0]["text"] == xs, "+100 on %d, +99.5 on %d: %r" %
          (x, y, o["choices"][0]["text"]))

    # an id named twice, as the same key or with a leading zero: the later value counts (JSON
    # text, since a dict cannot hold a key twice)
    for later in ('"%d": -100' % x, '"0%d": -100' % x):
        raw = ('{"prompt": "The quick brown fox", "max_tokens": %d, "temperature": 0, '
               '"ignore_eos": true, "logit_bias": {"%d": 100, "%d": 50, %s}}' % (N, x, y, later))
        o = complete(d, None, raw=raw)
        check(o["choices"][0]["text"] == ys, "%s after +100: %r, want %r" %
              (later, o["choices"][0]["text"], ys))

    # logprobs are of the biased distribution: +100 leaves the token a logprob near 0
    o = complete(d, {str(x): 100}, logprobs=2)
    lp = o["choices"][0]["logprobs"]["token_logprobs"]
    check(len(lp) == N and all(-1e-3 < v <= 0 for v in lp), "logprobs under +100: %r" % lp)

    # chat takes it too
    st, o = d.post(CHAT, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": N,
                          "temperature": 0, "logit_bias": {str(y): 100}})
    check(st == 200, "chat with logit_bias: %d %r" % (st, o))
    check(o["choices"][0]["message"]["content"] == ys, "chat, +100 on %d: %r" %
          (y, o["choices"][0]["message"]["content"]))
    # stop_token_ids (vLLM's): the forced id ends the request at once, ignore_eos or not; the id
    # is counted, has no text and is the stop_reason; an id never sampled changes nothing
    o = complete(d, {str(x): 100}, stop_token_ids=[y, x])
    ch = o["choices"][0]
    check(ch["text"] == "" and ch["finish_reason"] == "stop" and ch["stop_reason"] == x and
          o["usage"]["completion_tokens"] == 1, "stop_token_ids [%d, %d]: %r" % (y, x, o))
    st, ev, done = d.stream(C, {"prompt": "The quick brown fox", "max_tokens": N,
                                "temperature": 0, "logit_bias": {str(x): 100},
                                "stop_token_ids": [x], "stream": True})
    fin = [e["choices"][0] for e in ev if e["choices"] and e["choices"][0]["finish_reason"]]
    check(st == 200 and done and len(fin) == 1 and fin[0]["stop_reason"] == x,
          "streamed stop_token_ids: %r" % ev)
    o = complete(d, {str(x): 100}, stop_token_ids=[y])
    ch = o["choices"][0]
    check(ch["text"] == xs and ch["finish_reason"] == "length" and ch["stop_reason"] is None,
          "stop_token_ids never sampled: %r" % o)
    # and a request without a bias after all this is unchanged
    check(complete(d, None)["choices"][0]["text"] == plain, "the plain answer changed")
print("ok")
