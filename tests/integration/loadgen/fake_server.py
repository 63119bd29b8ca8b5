#!/usr/bin/env python3
"""fake_server.py — an OpenAI-shaped completion server with known delays, the reference that
nanoserve-loadgen's accuracy tests measure against. Python 3 standard library only.

A request's first token leaves --ttft-ms after the request arrived, then one every --itl-ms,
max_tokens tokens in all (each its own SSE event in its own chunk of a chunked reply), then a
finish event, the usage event when stream_options.include_usage asks for it, and
`data: [DONE]`. Deadlines are absolute (arrival + ttft + k*itl), so a late wake-up does not
shift later tokens. One thread per connection, HTTP/1.1 keep-alive. The server measures its
own timing error (send time minus deadline) and reports it on GET /stats, so a test can tell
the server's error from the client's.

--mode picks a misbehaviour for the error tests: ok, garbage (bytes that are not HTTP),
nonsse (a 200 text/plain reply to a stream request), badjson (an SSE event that is not JSON),
badchunk (malformed chunked framing), nodone (the stream stops without [DONE]), hang (reads the
request, never answers), http500, http429, closeafter (closes every connection after one reply
without saying so: clients must not lose requests to stale keep-alive connections).

Prints "listening on http://127.0.0.1:PORT" once it accepts connections; runs until killed."""

import argparse
import json
import queue
import socket
import sys
import threading
import time

lock = threading.Lock()
stats = {"requests": 0, "tokens": 0, "err": [], "first_err": []}


def record(kind, err_s):
    with lock:
        stats[kind].append(err_s)


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    r = p / 100 * (len(v) - 1)
    lo = int(r)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (r - lo) * (v[hi] - v[lo])


def summary_ms(v):
    return {"n": len(v), "mean": 1000 * sum(v) / len(v) if v else 0.0,
            "p50": 1000 * pct(v, 50), "p90": 1000 * pct(v, 90), "p99": 1000 * pct(v, 99),
            "max": 1000 * max(v) if v else 0.0}


class Conn:
    def __init__(self, sock, args):
        self.s = sock
        self.a = args
        self.buf = b""

    def read_request(self):
        """(method, path, headers, body) or None at EOF."""
        while b"\r\n\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                return None
            self.buf += d
        t_head = time.monotonic()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            d = self.s.recv(65536)
            if not d:
                return None
            self.buf += d
        body, self.buf = self.buf[:n], self.buf[n:]
        return method, path, headers, body, t_head

    def send(self, data):
        self.s.sendall(data)

    def reply(self, status, ctype, body, extra=""):
        reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests",
                  500: "Internal Server Error"}.get(status, "X")
        self.send(("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n" %
                   (status, reason, ctype, len(body), extra)).encode() + body)

    @staticmethod
    def chunk_bytes(data):
        return b"%x\r\n%s\r\n" % (len(data), data)

    def chunk(self, data):
        self.send(self.chunk_bytes(data))

    def event_bytes(self, obj):
        return self.chunk_bytes(b"data: " + json.dumps(obj).encode() + b"\n\n")


def completion(c, path, body, t0):
    a = c.a
    req = json.loads(body)
    n = int(req.get("max_tokens", 16))
    chat = path.endswith("/chat/completions")
    stream = bool(req.get("stream", False))
    usage_asked = bool((req.get("stream_options") or {}).get("include_usage"))
    p = req.get("messages") if chat else req.get("prompt")
    if isinstance(p, list) and p and isinstance(p[0], dict):
        pt = sum(len(str(m.get("content", "")).split()) for m in p)
    elif isinstance(p, list):
        pt = len(p)
    else:
        pt = len(str(p).split())
    usage = {"prompt_tokens": pt, "completion_tokens": n, "total_tokens": pt + n}
    obj = "chat.completion.chunk" if chat else "text_completion"
    with lock:
        stats["requests"] += 1
    if a.mode in ("http500", "http429"):
        st = 500 if a.mode == "http500" else 429
        c.reply(st, "application/json",
                json.dumps({"error": {"message": "fake %d" % st, "type": "x"}}).encode(),
                "Retry-After: 1\r\n" if st == 429 else "")
        return True
    if a.mode == "hang":
        time.sleep(3600)
        return False
    if a.mode == "garbage":
        c.send(b"this is not HTTP at all\r\n\r\n")
        return False
    if not stream:
        # made before its due time, like the streamed tokens below
        msg = {"content": "tok " * n, "role": "assistant"}
        ch = {"index": 0, "finish_reason": "length", "logprobs": None}
        ch.update({"message": msg} if chat else {"text": "tok " * n})
        body = json.dumps({"id": "cmpl-fake", "object": obj.replace(".chunk", ""),
                           "model": "fake", "choices": [ch], "usage": usage}).encode()
        due = t0 + a.ttft + (n - 1) * a.itl
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        c.reply(200, "application/json", body)
        return True
    if a.mode == "nonsse":
        c.reply(200, "text/plain", b"hello, not an event stream\n")
        return True
    c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n")
    if a.mode == "badjson":
        c.chunk(b"data: this is not json\n\n")
        c.chunk(b"data: [DONE]\n\n")
        c.send(b"0\r\n\r\n")
        return True
    if a.mode == "badchunk":
        c.send(b"zz\r\ndata: {}\n\n\r\n")
        return False
    # the end of the stream (finish chunk, usage, [DONE], last chunk) goes out with the last
    # token in one send, and each token's bytes are made before its due time: on a loaded
    # machine every extra send is a GIL hand-off among 64 threads, ms late at times
    ch = {"index": 0, "logprobs": None, "finish_reason": "length"}
    ch.update({"delta": {}} if chat else {"text": ""})
    tail = c.event_bytes({"id": "cmpl-fake", "object": obj, "model": "fake", "choices": [ch]})
    if usage_asked:
        tail += c.event_bytes({"id": "cmpl-fake", "object": obj, "model": "fake", "choices": [],
                               "usage": usage})
    tail += c.chunk_bytes(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    for k in range(n):
        due = t0 + a.ttft + k * a.itl
        ch = {"index": 0, "logprobs": None, "finish_reason": None}
        # --held-every K: only every K-th token's chunk carries text (the ones before it come
        # with empty text, released together), as a server holding back bytes does
        h = a.held_every
        txt = "tok " * (h if h and (k % h == h - 1 or k == n - 1) else 1)
        if h and k % h != h - 1 and k != n - 1:
            txt = ""
        elif h:
            txt = "tok " * (k % h + 1)
        ch.update({"delta": {"content": txt}} if chat else {"text": txt})
        data = c.event_bytes({"id": "cmpl-fake", "object": obj, "model": "fake", "choices": [ch],
                              **({"usage": None} if usage_asked else {})})
        if k == n - 1 and not (a.mode == "nodone" and k == n // 2):
            data += tail
        d = due - time.monotonic()
        if d > 0:
            time.sleep(d)
        c.send(data)
        err = time.monotonic() - due
        record("first_err" if k == 0 else "err", err)
        with lock:
            stats["tokens"] += 1
        if a.mode == "nodone" and k == n // 2:
            c.send(b"0\r\n\r\n")
            return True
    return True


def serve_conn(sock, args):
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c = Conn(sock, args)
    try:
        while True:
            r = c.read_request()
            if r is None:
                return
            method, path, headers, body, t0 = r
            if method == "GET" and path.endswith("/v1/models"):
                c.reply(200, "application/json", json.dumps(
                    {"object": "list", "data": [{"id": "fake", "object": "model",
                                                 "max_model_len": 4096}]}).encode())
            elif method == "GET" and path.startswith("/stats"):
                with lock:
                    out = {"requests": stats["requests"], "tokens": stats["tokens"],
                           "ttft_err_ms": summary_ms(stats["first_err"]),
                           "itl_err_ms": summary_ms(stats["err"])}
                    if "reset" in path:
                        stats.update(requests=0, tokens=0, err=[], first_err=[])
                c.reply(200, "application/json", json.dumps(out).encode())
            elif method == "POST" and path.endswith("completions"):
                if not completion(c, path, body, t0):
                    return
            else:
                c.reply(404, "application/json", b'{"error":{"message":"no route"}}')
            if headers.get("connection", "").lower() == "close" or args.mode == "closeafter":
                return
    except (ConnectionError, OSError):
        return
    finally:
        sock.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ttft-ms", type=float, default=50)
    ap.add_argument("--itl-ms", type=float, default=10)
    ap.add_argument("--mode", default="ok")
    ap.add_argument("--held-every", type=int, default=0,
                    help="only every K-th token chunk carries text, the others empty text")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--threads", type=int, default=160, help="connections served at once")
    args = ap.parse_args()
    args.ttft = args.ttft_ms / 1000
    args.itl = args.itl_ms / 1000
    # wake sleepers soon: the default 5 ms GIL switch interval would show as timing error
    sys.setswitchinterval(0.0002)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.port))
    ls.listen(1024)
    # threads started ahead: starting one per accepted connection takes ~1 ms of GIL
    # hand-offs each, which would delay the first requests of a 64-connection burst
    conns = queue.SimpleQueue()

    def worker():
        while True:
            serve_conn(conns.get(), args)

    for _ in range(args.threads):
        threading.Thread(target=worker, daemon=True).start()
    print("listening on http://127.0.0.1:%d" % ls.getsockname()[1], flush=True)
    while True:
        s, _ = ls.accept()
        conns.put(s)


if __name__ == "__main__":
    main()
