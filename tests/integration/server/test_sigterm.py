"""test_sigterm.py — SIGTERM under load: in-flight streams run to their end, /ready answers
503 while draining, the port closes, exit code 0; with a short server.drain_timeout_s long
streams end with a final SSE error event and [DONE]; a second SIGTERM stops at once."""
import json
import signal
import socket
import threading
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.slow_model(binary, work)


class Stream:
    """A streaming request read on its own thread: events, [DONE], how it ended."""

    def __init__(self, d, max_tokens):
        self.c = d.conn(timeout=120)
        self.c.request("POST", "/v1/completions", body=json.dumps({
            "prompt": "drain", "max_tokens": max_tokens, "ignore_eos": True, "stream": True}),
            headers={"Content-Type": "application/json"})
        self.r = self.c.getresponse()
        check(self.r.status == 200, "stream status %d" % self.r.status)
        self.events, self.done, self.error, self.closed = [], False, None, False
        self.first = threading.Event()
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self):
        try:
            while True:
                line = self.r.readline()
                if not line:
                    self.closed = True
                    break
                line = line.decode().rstrip("\n")
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    self.done = True
                    continue
                o = json.loads(data)
                if "error" in o:
                    self.error = o["error"]
                else:
                    self.events.append(o)
                self.first.set()
        except (OSError, ValueError) as e:  # connection cut
            self.closed = repr(e)
        self.first.set()

    def join(self):
        self.t.join(120)
        check(not self.t.is_alive(), "a stream never ended")
        self.c.close()


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


# ---- 1: drain lets in-flight streams finish ----
with nsd.Daemon(binary, work, model, name="sigterm1", sets=["server.drain_timeout_s=60"]) as d:
    streams = [Stream(d, 40 + 5 * i) for i in range(6)]
    for s in streams:
        check(s.first.wait(30), "no first chunk")
    # a /ready request whose headers are not complete yet: its connection stays open
    rd = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    rd.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n")
    time.sleep(0.05)
    d.signal(signal.SIGTERM)
    time.sleep(0.3)
    rd.sendall(b"\r\n")
    resp = b""
    while b"\r\n\r\n" not in resp or not resp.rstrip().endswith(b"}"):
        b = rd.recv(4096)
        if not b:
            break
        resp += b
    rd.close()
    check(resp.startswith(b"HTTP/1.1 503"), "/ready while draining: %r" % resp[:200])
    check(b"Retry-After:" in resp, "/ready 503 without Retry-After: %r" % resp[:300])
    check(refused(d.port), "the port still accepts connections while draining")
    for i, s in enumerate(streams):
        s.join()
        text, finish, _ = nsd.stream_text(s.events)
        check(s.done and s.error is None and finish == "length",
              "stream %d did not finish normally: done %s error %r finish %r closed %r" %
              (i, s.done, s.error, finish, s.closed))
    rc = d.wait(60)
    check(rc == 0, "exit code %d after drain; log:\n%s" % (rc, d.log_text()))
    check("draining" in d.log_text(), "no drain in the log")

# ---- 2: a short drain timeout ends long streams with a final error event ----
with nsd.Daemon(binary, work, model, name="sigterm2", sets=["server.drain_timeout_s=0.5"]) as d:
    streams = [Stream(d, 1800) for i in range(3)]
    for s in streams:
        check(s.first.wait(30), "no first chunk")
    t0 = time.time()
    d.signal(signal.SIGTERM)
    for i, s in enumerate(streams):
        s.join()
        check(s.error is not None and s.done, "stream %d: error %r, [DONE] %s, closed %r" %
              (i, s.error, s.done, s.closed))
        check(s.error["type"] == "server_error" and "shutting down" in s.error["message"],
              "error event %r" % s.error)
        check(len(s.events) < 1800, "stream %d ran to its end" % i)
    rc = d.wait(60)
    check(rc == 0, "exit code %d after a drain timeout; log:\n%s" % (rc, d.log_text()))
    check(time.time() - t0 < 15, "the drain took %.1f s" % (time.time() - t0))

# ---- 3: a second SIGTERM stops at once ----
with nsd.Daemon(binary, work, model, name="sigterm3", sets=["server.drain_timeout_s=300"]) as d:
    streams = [Stream(d, 1800) for i in range(2)]
    for s in streams:
        check(s.first.wait(30), "no first chunk")
    t0 = time.time()
    d.signal(signal.SIGTERM)
    time.sleep(0.2)
    d.signal(signal.SIGINT)
    rc = d.wait(30)
    check(rc == 0, "exit code %d after two signals; log:\n%s" % (rc, d.log_text()))
    check(time.time() - t0 < 10, "the second signal did not stop at once")
    for s in streams:
        s.join()
        check(s.error is not None or s.closed, "stream neither failed nor closed")
print("server_sigterm: ok")
