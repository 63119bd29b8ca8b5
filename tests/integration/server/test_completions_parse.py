"""test_completions_parse.py — /v1/completions and /v1/chat/completions read their bodies off
the event loop: while four ~3 MB bodies (JSON lists of 1.5 million token ids, or 100,000
messages, each failing a field check only at its end) are parsed and checked, /health still
answers at once, and each body still gets its 400 naming the param at fault. A client that
leaves while its body is parsed is counted as gone (status 0), not answered."""
import json
import socket
import threading
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)
C, CHAT = "/v1/completions", "/v1/chat/completions"
N_IDS = 1500000  # "5," each: a 3 MB body of 1.5 million JSON values
N_MSGS = 100000  # {"role":"user","content":"hi"}, each: a 3 MB body


def ids_body(last, **fields):
    """A completions body: N_IDS ids of 5 ending in last, then fields (after the prompt, so
    that their checks come after the prompt's)."""
    tail = "".join(",%s:%s" % (json.dumps(k), json.dumps(v)) for k, v in fields.items())
    return ('{"prompt":[' + "5," * (N_IDS - 1) + str(last) + "]" + tail + "}").encode()


def chat_body(last_role):
    m = '{"role":"user","content":"hi"},'
    return ('{"messages":[' + m * (N_MSGS - 1) + '{"role":"%s","content":"hi"}],"max_tokens":1}'
            % last_role).encode()


# (path, body, param, message part): each is a 400
BIG = [
    (C, ids_body(99999, max_tokens=1), "prompt", "prompt token %d must be an id" % (N_IDS - 1)),
    (C, ids_body(5, max_tokens=1, temperature=5), "temperature", "'temperature' must be in"),
    (C, ids_body(5, max_tokens=1), "prompt", "maximum context length is 2048 tokens"),
    (CHAT, chat_body("robot"), "messages.[%d].role" % (N_MSGS - 1), "role 'robot'"),
]
for _, b, _, _ in BIG:
    check(2500000 < len(b) < 4000000, "a body of %d bytes" % len(b))


def health_during_big_calls(d):
    answers = [None] * len(BIG)

    def big(i):
        path, body, _, _ = BIG[i]
        answers[i] = d.request("POST", path, body, {"Content-Type": "application/json"},
                               timeout=120)

    threads = [threading.Thread(target=big, args=(i,)) for i in range(len(BIG))]
    for t in threads:
        t.start()
    # from the first byte on: on the loop thread, the parses come as soon as the bodies are in
    worst, polls = 0.0, 0
    while any(t.is_alive() for t in threads):
        t0 = time.time()
        st, _, _ = d.request("GET", "/health", timeout=30)
        check(st == 200, "/health answered %d" % st)
        worst = max(worst, time.time() - t0)
        polls += 1
        time.sleep(0.01)
    for t in threads:
        t.join()
    print("worst /health latency during %d large generation bodies: %.0f ms (%d polls)" %
          (len(BIG), worst * 1e3, polls))
    # on the loop thread the four parses stalled it for 0.4-0.85 s (RelWithDebInfo) and 1.4-3.8 s
    # (ASan) on two cores; off it, the worst was 70 ms and 140 ms (the loop reads the 12 MB)
    limit = 0.75 if nsd.is_asan(binary) else 0.25
    check(worst < limit, "/health took %.0f ms while the bodies were parsed" % (worst * 1e3))
    return answers


def hang_up_during_parse(d):
    """Send a large body and close at once: the request is cancelled while the pool parses
    it, and counted with status 0."""
    key = 'nanoserve_requests_total{endpoint="completions",status="0"}'
    before = d.metrics().get(key, 0)
    body = BIG[0][1]
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    s.close()  # a FIN after the body (an RST could drop its end): read while the pool parses
    deadline = time.time() + 60
    while d.metrics().get(key, 0) == before:
        check(time.time() < deadline, "the hung-up request was not counted as gone")
        time.sleep(0.05)
    m = d.metrics()
    check(m.get(key, 0) == before + 1, "gone requests: %r -> %r" % (before, m.get(key, 0)))


with nsd.Daemon(binary, work, model, name="completions_parse") as d:
    for i, (st, _, raw) in enumerate(health_during_big_calls(d)):
        path, _, param, part = BIG[i]
        o = json.loads(raw)
        check(st == 400 and o["error"]["param"] == param and part in o["error"]["message"],
              "large body %d on %s: %d %r (want 400, %s, %r)" % (i, path, st, o, param, part))
        check(o["error"]["type"] == "invalid_request_error", "large body %d: %r" % (i, o))
    st, o = d.post(C, {"prompt": "Hello", "max_tokens": 2, "temperature": 0})
    check(st == 200 and o["choices"][0]["finish_reason"] in ("length", "stop"),
          "a small completion after them: %d %r" % (st, o))
    st, o = d.post(CHAT, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    check(st == 200, "a small chat after them: %d %r" % (st, o))
    # the body's own errors (not JSON, not an object) and the Content-Type come as before
    st, o = d.post(C, '{"prompt": "x",')
    check(st == 400 and o["error"]["param"] is None and "not valid JSON" in o["error"]["message"],
          "malformed JSON: %d %r" % (st, o))
    st, _, raw = d.request("POST", CHAT, json.dumps({"messages": []}),
                           {"Content-Type": "text/plain"})
    check(st == 415 and json.loads(raw)["error"]["code"] == "unsupported_media_type",
          "text/plain: %d %r" % (st, raw))
    hang_up_during_parse(d)
    m = d.metrics()
    check(m.get('nanoserve_requests_total{endpoint="completions",status="400"}', 0) >= 4 and
          m.get('nanoserve_requests_total{endpoint="chat",status="400"}', 0) >= 1 and
          m.get('nanoserve_requests_total{endpoint="chat",status="415"}', 0) == 1,
          "requests not counted: %r" % {k: v for k, v in m.items() if "requests_total" in k})
    st, _, _ = d.request("GET", "/health")
    check(st == 200, "/health after the hang-up: %d" % st)
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_completions_parse: ok")
