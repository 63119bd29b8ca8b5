"""test_probe_reserve.py — past server.max_connections the daemon still answers /health,
/ready and /metrics (one request a connection, then closed), answers every other route with a
503 that names the setting, and serves as before once connections close."""
import json
import socket
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)


def ask(port, raw):
    """(status line, headers, body) of one request on a fresh connection, read to the close
    or, on a kept-alive one, to the end of its Content-Length body; the socket too."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(raw)
    out = b""
    while True:
        head, sep, body = out.partition(b"\r\n\r\n")
        if sep:
            hdrs = dict(l.split(b": ", 1) for l in head.split(b"\r\n")[1:] if b": " in l)
            n = int(hdrs.get(b"Content-Length", b"-1"))
            if n >= 0 and len(body) >= n:
                return head.split(b"\r\n")[0], hdrs, body, s
        b = s.recv(65536)
        if not b:
            hdrs = dict(l.split(b": ", 1) for l in head.split(b"\r\n")[1:] if b": " in l)
            return head.split(b"\r\n")[0], hdrs, body, s
        out += b


def closed(s):
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except OSError:
        return True


GET = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n"
body = json.dumps({"prompt": "Hello", "max_tokens": 2}).encode()
POST = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)) + body

with nsd.Daemon(binary, work, model, name="probe_reserve",
                sets=["server.max_connections=2", "server.keepalive_timeout_s=60"]) as d:
    d.wait_ready()
    held = []
    for _ in range(2):  # the two connections the limit allows, kept open
        line, hdrs, _, s = ask(d.port, GET % b"/health")
        check(line == b"HTTP/1.1 200 OK" and hdrs.get(b"Connection") == b"keep-alive",
              "held connection: %r %r" % (line, hdrs))
        held.append(s)
    for path in (b"/health", b"/ready", b"/metrics"):
        line, hdrs, resp, s = ask(d.port, GET % path)
        check(line == b"HTTP/1.1 200 OK", "%s past the limit: %r %r" % (path, line, resp[:200]))
        check(hdrs.get(b"Connection") == b"close", "%s: %r" % (path, hdrs))
        check(closed(s), "%s: the reserve connection stays open" % path)
        s.close()
    for raw in (POST, GET % b"/v1/models"):
        line, hdrs, resp, s = ask(d.port, raw)
        check(line == b"HTTP/1.1 503 Service Unavailable", "%r: %r %r" % (raw[:30], line, resp))
        msg = json.loads(resp)["error"]["message"]
        check("server.max_connections (2)" in msg, "503 message: %r" % msg)
        check(closed(s), "%r: the reserve connection stays open" % raw[:30])
        s.close()
    for s in held:
        s.close()
    for _ in range(100):  # the server sees the closes
        line, hdrs, resp, s = ask(d.port, POST)
        s.close()
        if line == b"HTTP/1.1 200 OK":
            break
        time.sleep(0.05)
    check(line == b"HTTP/1.1 200 OK", "after the closes: %r %r" % (line, resp[:200]))
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_probe_reserve: ok")
