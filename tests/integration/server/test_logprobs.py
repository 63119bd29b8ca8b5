"""test_logprobs.py — logprobs and token accounting against OpenAI's and vLLM's contract, on
the tiny model with the real Llama 2 tokenizer (SentencePiece pieces, <0xNN> byte tokens):
the tokens join to the text (completions `tokens`, chat `token`; chat `bytes` to the
content's bytes), `text_offset` is each token's character offset, a stop string completed
by a byte token ends the request at that token, the EOS that ends one is counted (with a
logprob and no text); echo keeps a prompt's text past a <0x00> byte token. Skips when the tokenizer is absent."""
import sys

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.llama2_model(binary, work)
if model is None:
    sys.exit(77)
C, CHAT = "/v1/completions", "/v1/chat/completions"


def check_completion_lp(body, what):
    ch = body["choices"][0]
    lp, text = ch["logprobs"], ch["text"]
    toks = lp["tokens"]
    check(len(toks) == body["usage"]["completion_tokens"],
          "%s: %d tokens for %d completion_tokens" % (what, len(toks),
                                                     body["usage"]["completion_tokens"]))
    joined = "".join(toks)
    if ch["finish_reason"] == "length":
        check(joined == text, "%s: tokens %r do not join to the text %r" % (what, toks, text))
    else:  # the token that completed a stop string carries it; the text is cut before it
        check(joined.startswith(text), "%s: tokens %r do not start with %r" % (what, toks, text))
    off = 0
    for i, t in enumerate(toks):
        check(lp["text_offset"][i] == off,
              "%s: text_offset %r, want the character offsets of %r" % (what, lp["text_offset"],
                                                                        toks))
        off += len(t)
    return toks


with nsd.Daemon(binary, work, model, name="logprobs",
                sets=["engine.chat_template=llama2"]) as d:
    # ---- tokens keep their leading space; text_offset counts characters ----
    st, b = d.post(C, {"prompt": "Hello", "max_tokens": 6, "temperature": 1, "seed": 0,
                       "logprobs": 0})
    check(st == 200, "completion answered %d: %r" % (st, b))
    toks = check_completion_lp(b, "seed 0")
    check(any(t.startswith(" ") for t in toks), "no token kept its leading space: %r" % toks)

    # many tokens, greedy and seeded, streamed and not: byte tokens and multi-byte characters
    # show up; the invariants hold for every one
    for seed in range(6):
        req = {"prompt": "Hello", "max_tokens": 48, "temperature": 1, "seed": seed,
               "logprobs": 2}
        st, b = d.post(C, req)
        check(st == 200, "seed %d answered %d" % (seed, st))
        toks = check_completion_lp(b, "seed %d" % seed)
        for i, top in enumerate(b["choices"][0]["logprobs"]["top_logprobs"]):
            for k in top:
                check(isinstance(k, str), "top_logprobs key %r" % k)
        req["stream"] = True
        st, events, done = d.stream(C, req)
        check(st == 200 and done, "stream seed %d: %d" % (seed, st))
        stoks, stext, offs = [], "", []
        for e in events:
            for ch in e["choices"]:
                stext += ch["text"]
                if ch.get("logprobs"):
                    stoks += ch["logprobs"]["tokens"]
                    offs += ch["logprobs"]["text_offset"]
        check(stoks == toks, "seed %d: streamed tokens %r != %r" % (seed, stoks, toks))
        check("".join(stoks) == stext, "seed %d: streamed tokens do not join" % seed)
        check(offs == b["choices"][0]["logprobs"]["text_offset"], "seed %d: offsets" % seed)

    # greedy: the sampled token is the best, so top_logprobs holds it under tokens[i]
    st, b = d.post(C, {"prompt": "Hello", "max_tokens": 12, "temperature": 0, "logprobs": 1})
    check(st == 200, "greedy answered %d: %r" % (st, b))
    lp = b["choices"][0]["logprobs"]
    for i, t in enumerate(lp["tokens"]):
        check(t in lp["top_logprobs"][i], "greedy token %r is not a key of %r" %
              (t, lp["top_logprobs"][i]))

    # ---- chat: token joins to the content, bytes to its bytes ----
    for seed in range(4):
        st, b = d.post(CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 32,
                              "seed": seed, "logprobs": True, "top_logprobs": 2})
        check(st == 200, "chat answered %d: %r" % (st, b))
        ch = b["choices"][0]
        content = ch["message"]["content"]
        ents = ch["logprobs"]["content"]
        if ch["finish_reason"] == "length":
            check("".join(e["token"] for e in ents) == content,
                  "chat seed %d: tokens %r do not join to %r" % (seed, [e["token"] for e in ents],
                                                                content))
            # bytes are the tokens' own: a byte token that forms no character is its byte
            # there, U+FFFD in the content
            raw = bytes(x for e in ents for x in e["bytes"])
            check(raw.decode("utf-8", "replace") == content, "chat seed %d: bytes %r for %r" %
                  (seed, raw, content.encode()))

    # ---- a stop string completed by a byte token (<0x21> "!") stops at that token ----
    st, b = d.post(C, {"prompt": "Hello", "max_tokens": 10, "temperature": 0, "logprobs": 0})
    toks = b["choices"][0]["logprobs"]["tokens"]
    check("!" in toks, "the greedy output no longer has the byte token '!': %r" % toks)
    at = toks.index("!")
    st, b = d.post(C, {"prompt": "Hello", "max_tokens": 10, "temperature": 0, "stop": "!",
                       "logprobs": 0})
    ch = b["choices"][0]
    check(ch["finish_reason"] == "stop" and ch["text"] == "".join(toks[:at]),
          "stop '!': %r" % ch)
    check(b["usage"]["completion_tokens"] == at + 1 and len(ch["logprobs"]["tokens"]) == at + 1,
          "stop '!' counted %d tokens with %d logprobs; it is token %d" %
          (b["usage"]["completion_tokens"], len(ch["logprobs"]["tokens"]), at + 1))
    # streamed, the byte token's chunk carries its text
    st, events, done = d.stream(C, {"prompt": "Hello", "max_tokens": 10, "temperature": 0,
                                    "logprobs": 0, "stream": True})
    for e in events:
        for c in e["choices"]:
            if c.get("logprobs") and c["logprobs"]["tokens"] == ["!"]:
                check(c["text"] == "!", "the chunk of token '!' has text %r" % c["text"])
    # ---- the EOS that ends a request is counted and has a logprob, with no text ----
    # (~900 tokens: the sanitizer build takes ~25 ms a token)
    req = {"prompt": [1], "max_tokens": 899, "temperature": 1, "seed": 14, "logprobs": 0}
    st, b = d.post(C, req, timeout=300)
    ch = b["choices"][0]
    toks = ch["logprobs"]["tokens"]
    check(ch["finish_reason"] == "stop" and toks[-1] == "",
          "seed 14: finish %r, last token %r; want the EOS, with text ''" %
          (ch["finish_reason"], toks[-1:]))
    check(b["usage"]["completion_tokens"] == len(toks),
          "EOS: completion_tokens %d for %d tokens" % (b["usage"]["completion_tokens"], len(toks)))
    req.update(stream=True, stream_options={"include_usage": True})
    st, events, done = d.stream(C, req, timeout=300)
    _, finish, usage = nsd.stream_text(events)
    check(finish == "stop" and usage["completion_tokens"] == len(toks),
          "streamed EOS: %r %r" % (finish, usage))
    # ---- echo of a prompt holding the byte token <0x00> (id 3) keeps what follows it ----
    st, tk = d.post("/tokenize", {"prompt": "Hello world"})
    ids = tk["tokens"]  # [BOS, ▁Hello, ▁world]
    req = {"prompt": ids[:1] + [3] + ids[1:], "max_tokens": 2, "temperature": 0, "echo": True}
    st, b = d.post(C, req)
    text = b["choices"][0]["text"] if st == 200 else ""
    check(text.startswith("<s>\x00 Hello world"), "echo with <0x00>: %d %r" % (st, text))
    req["stream"] = True
    st, events, done = d.stream(C, req)
    text, _, _ = nsd.stream_text(events)
    check(text.startswith("<s>\x00 Hello world"), "streamed echo with <0x00>: %r" % text)
print("ok")
