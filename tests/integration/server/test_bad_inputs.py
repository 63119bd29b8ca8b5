"""test_bad_inputs.py — a table of bad requests, each answered with its documented 4xx and
an OpenAI-shaped JSON error naming the param where there is one; after each, a good request
still gets 200 (the daemon keeps serving)."""
import json
import os
import shutil

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)
keys = os.path.join(work, "bad_inputs_keys.%d" % os.getpid())
with open(keys, "w") as f:
    f.write("# test keys\nsk-good\n")
AUTH = {"Authorization": "Bearer sk-good"}
JSON = {"Content-Type": "application/json"}
C, CHAT = "/v1/completions", "/v1/chat/completions"


def comp(**kw):
    b = {"prompt": "Hello", "max_tokens": 2}
    b.update(kw)
    return b


def chat(**kw):
    b = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    b.update(kw)
    return b


def nokey(b):
    return {"__raw_headers__": {}, "body": b}


# (name, path, body (dict: JSON; bytes/str: sent as is), status, param, extra headers)
CASES = [
    ("malformed JSON", C, '{"prompt": "x",', 400, None, {}),
    ("trailing garbage", C, '{"prompt": "x"} x', 400, None, {}),
    ("array body", C, "[1, 2]", 400, None, {}),
    ("string body", C, '"prompt"', 400, None, {}),
    ("empty body", C, "", 400, None, {}),
    ("NaN literal", C, '{"prompt": "x", "temperature": NaN}', 400, None, {}),
    ("NUL in a string", C, '{"prompt": "a\\u0000b", "max_tokens": 2}', 400, None, {}),
    # RFC 8259 numbers and strings (cJSON alone took these, as 2, 1.0 and a tab)
    ("leading zero", C, '{"prompt": "x", "max_tokens": 02}', 400, None, {}),
    ("number ending in a dot", C, '{"prompt": "x", "temperature": 1.}', 400, None, {}),
    ("raw tab in a string", C, '{"prompt": "a\tb", "max_tokens": 2}', 400, None, {}),
    ("invalid UTF-8", C, b'{"prompt": "\xff\xfe bad"}', 400, None, {}),
    ("overlong UTF-8", C, b'{"prompt": "\xc0\xaf"}', 400, None, {}),
    ("text/plain", C, json.dumps(comp()), 415, None, {"Content-Type": "text/plain"}),
    ("prompt missing", C, {"max_tokens": 2}, 400, "prompt", {}),
    ("prompt number", C, comp(prompt=5), 400, "prompt", {}),
    ("prompt empty list", C, comp(prompt=[]), 400, "prompt", {}),
    ("batched prompts", C, comp(prompt=["a", "b"]), 400, "prompt", {}),
    ("mixed id list", C, comp(prompt=[1, "a"]), 400, "prompt", {}),
    ("id past vocab", C, comp(prompt=[99999]), 400, "prompt", {}),
    ("negative id", C, comp(prompt=[-1]), 400, "prompt", {}),
    ("max_tokens 0", C, comp(max_tokens=0), 400, "max_tokens", {}),
    ("max_tokens -1", C, comp(max_tokens=-1), 400, "max_tokens", {}),
    ("max_tokens 1.5", C, comp(max_tokens=1.5), 400, "max_tokens", {}),
    ("max_tokens string", C, comp(max_tokens="16"), 400, "max_tokens", {}),
    ("max_tokens past context", C, comp(max_tokens=5000), 400, "max_tokens", {}),
    ("max_tokens past int32", C, comp(max_tokens=10 ** 12), 400, "max_tokens", {}),
    ("prompt + max_tokens past context", C, comp(max_tokens=2046), 400, "max_tokens", {}),
    ("prompt alone past context", C, comp(prompt=[5] * 2048, max_tokens=1), 400, "prompt", {}),
    ("messages + max_completion_tokens past context", CHAT, chat(max_tokens=None,
     max_completion_tokens=2045), 400, "max_completion_tokens", {}),
    ("temperature -0.1", C, comp(temperature=-0.1), 400, "temperature", {}),
    ("temperature 2.5", C, comp(temperature=2.5), 400, "temperature", {}),
    ("temperature string", C, comp(temperature="hot"), 400, "temperature", {}),
    ("temperature 1e999", C, '{"prompt": "x", "temperature": 1e999}', 400, "temperature", {}),
    ("top_p 0", C, comp(top_p=0), 400, "top_p", {}),
    ("top_p 1.5", C, comp(top_p=1.5), 400, "top_p", {}),
    ("top_p denormal", C, '{"prompt": "x", "top_p": 1e-320}', 400, "top_p", {}),
    ("top_k -2", C, comp(top_k=-2), 400, "top_k", {}),
    ("top_k 1.5", C, comp(top_k=1.5), 400, "top_k", {}),
    ("min_p 1.5", C, comp(min_p=1.5), 400, "min_p", {}),
    ("repetition_penalty 0", C, comp(repetition_penalty=0), 400, "repetition_penalty", {}),
    ("repetition_penalty denormal", C, '{"prompt": "x", "repetition_penalty": 1e-320}', 400,
     "repetition_penalty", {}),
    ("presence_penalty 3", C, comp(presence_penalty=3), 400, "presence_penalty", {}),
    ("frequency_penalty -2.5", C, comp(frequency_penalty=-2.5), 400, "frequency_penalty", {}),
    ("seed string", C, comp(seed="x"), 400, "seed", {}),
    ("seed 1.5", C, comp(seed=1.5), 400, "seed", {}),
    ("seed 2^64", C, comp(seed=2 ** 64), 400, "seed", {}),
    ("seed -2^63 - 1", C, comp(seed=-2 ** 63 - 1), 400, "seed", {}),
    ("seed 1e17", C, comp(seed=1e17), 400, "seed", {}),
    ("stop number", C, comp(stop=5), 400, "stop", {}),
    ("stop list of 9", C, comp(stop=["s%d" % i for i in range(9)]), 400, "stop", {}),
    ("stop empty string", C, comp(stop=[""]), 400, "stop", {}),
    ("stop 300 bytes", C, comp(stop="x" * 300), 400, "stop", {}),
    ("stop list of numbers", C, comp(stop=[1]), 400, "stop", {}),
    ("stream string", C, comp(stream="yes"), 400, "stream", {}),
    ("stream_options without stream", C, comp(stream_options={"include_usage": True}), 400,
     "stream_options", {}),
    ("include_usage string", C, comp(stream=True, stream_options={"include_usage": 1}), 400,
     "stream_options.include_usage", {}),
    ("logprobs 21", C, comp(logprobs=21), 400, "logprobs", {}),
    ("logprobs -1", C, comp(logprobs=-1), 400, "logprobs", {}),
    ("logprobs with echo", C, comp(logprobs=1, echo=True), 400, "logprobs", {}),
    ("logit_bias list", C, comp(logit_bias=[1]), 400, "logit_bias", {}),
    ("logit_bias key not an id", C, comp(logit_bias={"a": 1}), 400, "logit_bias", {}),
    ("logit_bias key past vocab", C, comp(logit_bias={"99999": 1}), 400, "logit_bias", {}),
    ("logit_bias negative key", C, comp(logit_bias={"-1": 1}), 400, "logit_bias", {}),
    ("logit_bias key 1.0", C, comp(logit_bias={"1.0": 1}), 400, "logit_bias", {}),
    ("logit_bias 101", C, comp(logit_bias={"5": 101}), 400, "logit_bias", {}),
    ("logit_bias string value", C, comp(logit_bias={"5": "1"}), 400, "logit_bias", {}),
    ("logit_bias 1025 entries", C, comp(logit_bias={str(i): 1 for i in range(1025)}), 400,
     "logit_bias", {}),
    ("chat logit_bias -200", CHAT, chat(logit_bias={"5": -200}), 400, "logit_bias", {}),
    ("stop_token_ids number", C, comp(stop_token_ids=5), 400, "stop_token_ids", {}),
    ("stop_token_ids negative", C, comp(stop_token_ids=[-1]), 400, "stop_token_ids", {}),
    ("stop_token_ids past vocab", C, comp(stop_token_ids=[99999]), 400, "stop_token_ids", {}),
    ("stop_token_ids 1.5", C, comp(stop_token_ids=[1.5]), 400, "stop_token_ids", {}),
    ("stop_token_ids string id", C, comp(stop_token_ids=["1"]), 400, "stop_token_ids", {}),
    ("stop_token_ids 65", CHAT, chat(stop_token_ids=list(range(65))), 400, "stop_token_ids", {}),
    ("n 2", C, comp(n=2), 400, "n", {}),
    ("best_of 2", C, comp(best_of=2), 400, "best_of", {}),
    ("echo string", C, comp(echo="yes"), 400, "echo", {}),
    ("ignore_eos 1", C, comp(ignore_eos=1), 400, "ignore_eos", {}),
    ("unknown model", C, comp(model="gpt-4"), 404, "model", {}),
    ("messages missing", CHAT, {"max_tokens": 2}, 400, "messages", {}),
    ("messages empty", CHAT, chat(messages=[]), 400, "messages", {}),
    ("messages string", CHAT, chat(messages="hi"), 400, "messages", {}),
    ("message not an object", CHAT, chat(messages=["hi"]), 400, "messages.[0]", {}),
    ("bad role", CHAT, chat(messages=[{"role": "wizard", "content": "x"}]), 400,
     "messages.[0].role", {}),
    ("role missing", CHAT, chat(messages=[{"content": "x"}]), 400, "messages.[0].role", {}),
    ("content number", CHAT, chat(messages=[{"role": "user", "content": 5}]), 400,
     "messages.[0].content", {}),
    ("image part", CHAT, chat(messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "x"}}]}]), 400, "messages.[0].content", {}),
    ("top_logprobs without logprobs", CHAT, chat(top_logprobs=2), 400, "top_logprobs", {}),
    ("chat logprobs number", CHAT, chat(logprobs=3), 400, "logprobs", {}),
    ("tools", CHAT, chat(tools=[{"type": "function"}]), 400, "tools", {}),
    ("response_format json", CHAT, chat(response_format={"type": "json_object"}), 400,
     "response_format", {}),
    ("chat n 3", CHAT, chat(n=3), 400, "n", {}),
    ("chat max_completion_tokens 0", CHAT, chat(max_completion_tokens=0), 400,
     "max_completion_tokens", {}),
    ("tokenize without input", "/tokenize", {"x": 1}, 400, "prompt", {}),
    ("detokenize string", "/detokenize", {"tokens": "x"}, 400, "tokens", {}),
    ("detokenize past vocab", "/detokenize", {"tokens": [1, 1 << 20]}, 400, "tokens", {}),
]

# raw requests: (name, bytes, status)
RAW = [
    ("unknown route", b"GET /v2/nothing HTTP/1.1\r\nHost: x\r\n%s\r\n", 404),
    ("wrong method", b"GET /v1/completions HTTP/1.1\r\nHost: x\r\n%s\r\n", 405),
    ("DELETE models", b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n%s\r\n", 405),
    ("no API key", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
     401),
    ("wrong API key", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-bad"
     b"\r\nContent-Length: 2\r\n\r\n{}", 401),
    ("oversized body", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n%s" +
     b"Content-Length: 70000\r\n\r\n" + b"x" * 70000, 413),
    ("oversized headers", b"GET /v1/models HTTP/1.1\r\nHost: x\r\n%s" +
     b"X-Big: " + b"y" * 20000 + b"\r\n\r\n", 431),
    ("oversized URL", b"GET /v1/models?" + b"q" * 5000 + b" HTTP/1.1\r\nHost: x\r\n%s\r\n", 414),
    ("CL+TE smuggling", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n%sContent-Length: 4\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("chunk data without CRLF", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n%s"
     b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"14\r\n{\"prompt\": \"Hello\"} AB0\r\n\r\n", 400),
]


def good(d):
    st, o = d.post(C, comp(max_tokens=1), AUTH)
    check(st == 200, "good request after a bad one: %d %r" % (st, o))


with nsd.Daemon(binary, work, model, name="bad_inputs",
                sets=["server.api_keys_file=" + keys, "server.max_body_bytes=65536"]) as d:
    n = 0
    for name, path, body, status, param, hdrs in CASES:
        h = dict(AUTH)
        if not isinstance(body, dict):
            h.update(JSON)
        h.update(hdrs)
        st, rh, data = d.request("POST", path, body, h)
        try:
            err = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            nsd.fail("%s: not an OpenAI error body: %d %r" % (name, st, data[:200]))
        check(st == status, "%s: status %d, want %d: %r" % (name, st, status, err))
        check(err.get("param") == param, "%s: param %r, want %r (%r)" %
              (name, err.get("param"), param, err["message"]))
        check(set(err) == {"message", "type", "param", "code"} and err["message"], repr(err))
        check(rh.get("content-type") == "application/json", "%s: %r" % (name, rh))
        good(d)
        n += 1
    for name, req, status in RAW:
        if b"%s" in req:
            req = req.replace(b"%s", b"Authorization: Bearer sk-good\r\n", 1)
        out = nsd.raw(d.port, req)
        check(out.startswith(b"HTTP/1.1 %d" % status), "%s: %r" % (name, out[:200]))
        body = out.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in out else b""
        if status != 413 and status != 431 and status != 414:
            check(b'"error"' in body, "%s: no JSON error: %r" % (name, out[:300]))
        good(d)
        n += 1
    # a backslash then "u0000" as text is no NUL: served
    st, o = d.post(C, comp(prompt="a\\u0000b", max_tokens=1), AUTH)
    check(st == 200, "prompt with the text \\u0000: %d %r" % (st, o))
    # an empty prompt is the BOS alone (OpenAI and vLLM take it), as /tokenize counts it
    st, tk = d.post("/tokenize", {"prompt": ""}, AUTH)
    check(st == 200 and tk["count"] == 1, "/tokenize of '': %d %r (the tiny model adds BOS)" %
          (st, tk))
    for p in ("", [""]):
        st, o = d.post(C, comp(prompt=p, max_tokens=2), AUTH)
        check(st == 200 and o["usage"]["prompt_tokens"] == 1, "prompt %r: %d %r" % (p, st, o))
    # of duplicate names the last wins, as in Python's json (cJSON alone kept the first)
    st, o = d.post(C, '{"prompt": "ab", "prompt": "cd", "echo": true, "max_tokens": 1, '
                   '"temperature": 0}', dict(AUTH, **JSON))
    check(st == 200 and o["choices"][0]["text"].startswith("cd"), "duplicate names: %d %r" %
          (st, o))
    # seeds are 64-bit integers read exactly: 2^53 + 1 is not 2^53 (a double would say it is),
    # each gives the same text again, the ends of the range are taken
    def sampled(seed):
        st, o = d.post(C, comp(prompt="Once", max_tokens=24, temperature=1.5, seed=seed), AUTH)
        check(st == 200, "seed %r: %d %r" % (seed, st, o))
        return o["choices"][0]["text"]
    big = [sampled(2 ** 53), sampled(2 ** 53 + 1), sampled(2 ** 53)]
    check(big[0] == big[2] and big[0] != big[1], "seeds 2^53, 2^53 + 1, 2^53: %r" % big)
    check(sampled(2 ** 64 - 1) == sampled(2 ** 64 - 1) and sampled(-2 ** 63) != "",
          "the ends of the seed range")
    # a long number out of range is quoted as written, not as its double (…68)
    st, o = d.post(C, comp(top_k=12345678901234567), AUTH)
    check(st == 400 and "got 12345678901234567" in o["error"]["message"], "top_k: %r" % o)
    st, o = d.post(C, comp(max_tokens=99999999999999999999), AUTH)
    check(st == 400 and "is 99999999999999999999," in o["error"]["message"], "max_tokens: %r" % o)
    # public health with keys in force; metrics too
    st, _, _ = d.request("GET", "/health")
    check(st == 200, "/health needs no key: %d" % st)
    st, _, _ = d.request("GET", "/v1/models")
    check(st == 401, "/v1/models without a key: %d" % st)
    print("%d bad requests answered as documented" % n)
    check(n >= 40, "only %d cases" % n)
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))

# a tokenizer that adds no BOS (the tiny model's without its post-processor): "" is nothing to
# continue, a 400 naming the prompt
nobos = os.path.join(work, "tiny_nobos.%d" % os.getpid())
shutil.rmtree(nobos, ignore_errors=True)
shutil.copytree(model, nobos)
with open(os.path.join(nobos, "tokenizer.json")) as f:
    tj = json.load(f)
tj["post_processor"] = None
with open(os.path.join(nobos, "tokenizer.json"), "w") as f:
    json.dump(tj, f)
with nsd.Daemon(binary, work, nobos, name="bad_inputs_nobos") as d:
    st, tk = d.post("/tokenize", {"prompt": ""})
    check(st == 200 and tk["count"] == 0, "/tokenize of '' without BOS: %d %r" % (st, tk))
    st, o = d.post(C, comp(prompt=""))
    check(st == 400 and o["error"]["param"] == "prompt", "'' without BOS: %d %r" % (st, o))
    good_nokey = d.post(C, comp(max_tokens=1))
    check(good_nokey[0] == 200, "a good request after it: %r" % (good_nokey,))
    check(d.stop() == 0, "exit code; log:\n%s" % d.log_text())
shutil.rmtree(nobos, ignore_errors=True)
print("server_bad_inputs: ok")
