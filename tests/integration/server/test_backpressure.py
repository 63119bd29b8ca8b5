"""test_backpressure.py — a client that pipelines thousands of cheap requests (/metrics,
404s) and reads none of the answers holds only a bounded amount of the daemon's memory:
parsing stops while its unsent output is backed up. Other clients are served meanwhile, and
once it reads, every answer arrives, in order."""
import re
import socket
import threading
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)

N = 20000  # half /metrics (~10 KB each): ~100 MB of answers if all were queued
PAD = b"X-Pad: " + b"p" * 2000 + b"\r\n"  # 40 MB of requests: more than socket buffers hold
NOREAD_S = 3.0


def request(i):
    # odd: /metrics; even: a 404 whose message names the path, so order can be checked
    path = b"/metrics" if i % 2 else b"/nope/%d" % i
    return b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + PAD + b"\r\n"


def read_responses(s, n, out):
    """Parse n Content-Length responses from s into out: (status, body) in arrival order."""
    buf = b""
    while len(out) < n:
        while b"\r\n\r\n" not in buf:
            b = s.recv(1 << 20)
            if not b:
                return
            buf += b
        head, rest = buf.split(b"\r\n\r\n", 1)
        clen = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        while len(rest) < clen:
            b = s.recv(1 << 20)
            if not b:
                return
            rest += b
        out.append((int(head[9:12]), rest[:clen]))
        buf = rest[clen:]


with nsd.Daemon(binary, work, model, name="backpressure") as d:
    d.metrics()
    rss0 = d.rss_kib()
    blob = b"".join(request(i) for i in range(N))
    s = socket.create_connection(("127.0.0.1", d.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    s.setblocking(False)

    # ---- send without reading: the daemon stops taking requests, its RSS stays flat ----
    sent, peak, t0 = 0, rss0, time.time()
    health_ms = []
    while time.time() - t0 < NOREAD_S:
        try:
            sent += s.send(blob[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(0.01)
        peak = max(peak, d.rss_kib())
        if len(health_ms) < int((time.time() - t0) / 0.5):
            h0 = time.time()
            st, _, _ = d.request("GET", "/health", timeout=5)
            check(st == 200, "/health during the flood answered %d" % st)
            health_ms.append((time.time() - h0) * 1e3)
    grew_mb = (peak - rss0) / 1024.0
    print("sent %d of %d bytes unread; RSS %d -> %d KiB (+%.1f MB); /health %s ms" %
          (sent, len(blob), rss0, peak, grew_mb, ["%.0f" % h for h in health_ms]))
    check(grew_mb < 50, "RSS grew by %.1f MB while the client did not read" % grew_mb)
    check(max(health_ms) < 500, "/health took %.0f ms during the flood" % max(health_ms))

    # ---- now read: every answer arrives, in order ----
    s.setblocking(True)
    s.settimeout(30)
    got = []
    reader = threading.Thread(target=read_responses, args=(s, N, got))
    reader.start()
    s.sendall(blob[sent:])
    reader.join(120)
    check(len(got) == N, "%d of %d answers arrived" % (len(got), N))
    for i, (st, body) in enumerate(got):
        if i % 2:
            check(st == 200 and body.startswith(b"# "), "answer %d: %d %r" % (i, st, body[:80]))
        else:
            check(st == 404 and b"/nope/%d)" % i in body, "answer %d: %d %r" % (i, st, body))
    s.close()
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_backpressure: ok")
