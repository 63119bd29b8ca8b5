"""test_recv_rate.py — server.min_recv_rate_bps cuts large request bodies sent too slowly
(Content-Length or chunked) long before server.body_timeout_s, while a small request that
pauses past the rate's one-second grace is judged by its timeouts alone and served."""
import json
import socket
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)
HEAD = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")


def answer_after(port, parts, pause):
    """Send parts with pause seconds between them; (first line, body, seconds) of the
    answer, timed from the first byte."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    t0 = time.time()
    for i, p in enumerate(parts):
        if i:
            time.sleep(pause)
        try:
            s.sendall(p)
        except OSError:
            break  # answered and closed already
    out = b""
    while b"\r\n\r\n" not in out or len(out.split(b"\r\n\r\n", 1)[1]) < 20:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body, time.time() - t0


with nsd.Daemon(binary, work, model, name="recv_rate") as d:
    # a small completion whose body comes 1.3 s after its headers (defaults: 1024 B/s,
    # header and body timeouts 10 / 30 s)
    body = json.dumps({"prompt": "Hello", "max_tokens": 2}).encode()
    line, resp, _ = answer_after(d.port, [HEAD + b"Content-Length: %d\r\n\r\n" % len(body), body],
                                 1.3)
    check(line == b"HTTP/1.1 200 OK", "a small request with a pause: %r %r" % (line, resp[:200]))

    # a 200 KB body that stops after 2 KB: 408 at the rate, not after 30 s
    for name, first in (
            ("Content-Length", HEAD + b"Content-Length: 200000\r\n\r\n" + b"x" * 2000),
            ("chunked", HEAD + b"Transfer-Encoding: chunked\r\n\r\n30000\r\n" + b"x" * 2000)):
        line, resp, secs = answer_after(d.port, [first], 0)
        print("%s: %r after %.1f s" % (name, line, secs))
        check(line == b"HTTP/1.1 408 Request Timeout" and b"too slowly" in resp,
              "%s: %r %r" % (name, line, resp[:200]))
        check(secs < 5, "%s: 408 after %.1f s" % (name, secs))
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_recv_rate: ok")
