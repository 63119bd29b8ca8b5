"""test_queue_full.py — with one sequence at a time (engine.max_batch 1) and a queue of two
(scheduler.max_queue 2), a request beyond them is answered 429 with Retry-After before any
SSE byte, streamed or not; the queued ones then run to their end. With a short
scheduler.queue_timeout_s, a request that times out in the queue is a 503, streamed too (its
stream starts only with its first token)."""
import json
import socket
import threading
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.slow_model(binary, work)


def hold_slot(d):
    """A: a long stream that holds the only batch slot, once it runs (its socket)."""
    body = json.dumps({"prompt": "A", "max_tokens": 1500, "ignore_eos": True, "stream": True})
    a = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    a.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
    got = b""
    while b"data: " not in got:
        got += a.recv(65536)
    return a


with nsd.Daemon(binary, work, model, name="queue",
                sets=["engine.max_batch=1", "scheduler.max_queue=2"]) as d:
    a = hold_slot(d)
    # B and C wait in the queue
    res = {}

    def queued(name):
        res[name] = d.post("/v1/completions", {"prompt": name, "max_tokens": 3,
                                               "ignore_eos": True})

    th = [threading.Thread(target=queued, args=(n,)) for n in ("B", "C")]
    for t in th:
        t.start()
    t0 = time.time()
    while d.metrics()["nanoserve_num_requests_waiting"] < 2:
        check(time.time() - t0 < 10, "B and C did not queue")
        time.sleep(0.01)
    # D: no room
    st, hdrs, data = d.request("POST", "/v1/completions", {"prompt": "D", "max_tokens": 3})
    check(st == 429, "D answered %d: %r" % (st, data))
    check(hdrs.get("retry-after") == "1", "Retry-After: %r" % hdrs.get("retry-after"))
    err = json.loads(data)["error"]
    check(err["type"] == "rate_limit_error" and "queue" in err["message"], repr(err))
    # streamed D: the 429 comes as JSON, not as an event stream
    st, hdrs, data = d.request("POST", "/v1/completions", {"prompt": "D", "max_tokens": 3,
                                                          "stream": True})
    check(st == 429 and hdrs.get("content-type", "").startswith("application/json"),
          "streamed D: %d %r" % (st, hdrs))
    st, hdrs, data = d.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "D"}], "max_tokens": 3, "stream": True})
    check(st == 429 and "retry-after" in hdrs, "chat D: %d" % st)
    m = d.metrics()
    check(m['nanoserve_requests_total{endpoint="completions",status="429"}'] == 2,
          "429 counter %r" % m.get('nanoserve_requests_total{endpoint="completions",status="429"}'))
    # A leaves; B and C run
    a.close()
    for t in th:
        t.join(60)
    for n in ("B", "C"):
        st, o = res[n]
        check(st == 200 and o["usage"]["completion_tokens"] == 3, "%s: %d %r" % (n, st, o))
    st, o = d.post("/v1/completions", {"prompt": "E", "max_tokens": 2, "ignore_eos": True})
    check(st == 200, "E after the queue drained: %d %r" % (st, o))
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))

with nsd.Daemon(binary, work, model, name="queue_timeout",
                sets=["engine.max_batch=1", "scheduler.queue_timeout_s=0.3"]) as d:
    a = hold_slot(d)
    for path, req in (("/v1/completions", {"prompt": "B", "max_tokens": 3}),
                      ("/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "B"}], "max_tokens": 3})):
        for stream in (False, True):
            st, hdrs, data = d.request("POST", path, dict(req, stream=stream))
            check(st == 503 and hdrs.get("content-type", "").startswith("application/json"),
                  "%s stream=%s past the queue timeout: %d %r %r" % (path, stream, st, hdrs,
                                                                    data[:200]))
            check("queue" in json.loads(data)["error"]["message"], repr(data[:200]))
    a.close()
    st, o = d.post("/v1/completions", {"prompt": "E", "max_tokens": 2, "ignore_eos": True})
    check(st == 200, "E after the timeouts: %d %r" % (st, o))
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_queue_full: ok")
