"""test_slow_reader.py — a large response (8 MB from /tokenize) to a client that reads it
slowly, over many times server.keepalive_timeout_s, arrives whole, on a keep-alive
connection and with Connection: close; a client that stops reading altogether is closed
after server.send_timeout_s without progress."""
import json
import random
import re
import socket
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)
SETS = ["server.keepalive_timeout_s=1", "server.send_timeout_s=2"]

random.seed(1)
PROMPT = "".join(random.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(3000000))
BODY = json.dumps({"prompt": PROMPT}).encode()


def tokenize_request(close):
    return (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
            (b"Connection: close\r\n" if close else b"") +
            b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)


def slow_read(port, close, rate):
    """Read one response at about rate bytes/s; (head, body, content-length)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(tokenize_request(close))
    got, t0 = b"", time.time()
    clen = None
    while True:
        b = s.recv(16384)
        if not b:
            break
        got += b
        if clen is None and b"\r\n\r\n" in got:
            head = got.split(b"\r\n\r\n", 1)[0]
            clen = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        if clen is not None and len(got.split(b"\r\n\r\n", 1)[1]) >= clen:
            break
        time.sleep(max(0.0, t0 + len(got) / rate - time.time()))
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    return head, body, clen, time.time() - t0


with nsd.Daemon(binary, work, model, sets=SETS, name="slow_reader") as d:
    st, o = d.post("/tokenize", {"prompt": PROMPT})
    check(st == 200, "/tokenize answered %d" % st)
    for close in (False, True):
        # ~4 MB sit in socket buffers: the rest takes the daemon over 4 s to hand over,
        # past keepalive_timeout_s and past the 3 s it used to allow a closing answer
        head, body, clen, secs = slow_read(d.port, close, 0.8e6 if close else 1.5e6)
        what = "Connection: close" if close else "keep-alive"
        print("%s: %d of %s bytes in %.1f s" % (what, len(body), clen, secs))
        check(head.startswith(b"HTTP/1.1 200"), "%s: %r" % (what, head[:100]))
        check(secs > 3, "%s: read in %.1f s: not slow enough to test anything" % (what, secs))
        check(len(body) == clen, "%s: the response was cut at %d of %d bytes" %
              (what, len(body), clen))
        check(json.loads(body)["count"] == o["count"], "%s: another answer" % what)

    # a client that takes nothing more: closed once send_timeout_s passes without progress
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(tokenize_request(False))
    time.sleep(1.0)
    open0 = d.metrics()["nanoserve_http_open_connections"]
    check(open0 == 2, "open connections %r" % open0)
    t0 = time.time()
    while d.metrics()["nanoserve_http_open_connections"] > 1:
        check(time.time() - t0 < 10, "a client that reads nothing is never closed")
        time.sleep(0.1)
    waited = time.time() - t0 + 1.0
    print("a stalled client was closed after %.1f s" % waited)
    check(waited > 1.8, "closed after %.1f s, before server.send_timeout_s" % waited)
    check("server.send_timeout_s" in d.log_text(), "no log line names the send timeout")
    s.close()
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_slow_reader: ok")
