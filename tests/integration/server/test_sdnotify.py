"""test_sdnotify.py — systemd's notify protocol: with NOTIFY_SOCKET (a path, then an
abstract '@' name) and WATCHDOG_USEC=200000 the daemon sends READY=1 once it listens,
WATCHDOG=1 about every 100 ms while the engine is alive, and STOPPING=1 at SIGTERM."""
import os
import socket
import time

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)


def messages(sock, until, timeout):
    got, t0 = [], time.time()
    while time.time() - t0 < timeout:
        sock.settimeout(max(0.01, timeout - (time.time() - t0)))
        try:
            got.append((time.time(), sock.recv(4096).decode()))
        except socket.timeout:
            break
        if until(got):
            break
    return got


for kind in ("path", "abstract"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if kind == "path":
        addr = os.path.join(work, "notify.%d.sock" % os.getpid())
        if os.path.exists(addr):
            os.unlink(addr)
        s.bind(addr)
        env_addr = addr
    else:
        name = "nanoserve-test-%d" % os.getpid()
        s.bind("\0" + name)
        env_addr = "@" + name
    with nsd.Daemon(binary, work, model, name="sdnotify_" + kind,
                    env={"NOTIFY_SOCKET": env_addr, "WATCHDOG_USEC": "200000"}) as d:
        got = messages(s, lambda g: sum(m == "WATCHDOG=1" for _, m in g) >= 5, 10)
        states = [m for _, m in got]
        check(states and states[0] == "READY=1", "%s: first message %r" % (kind, states[:3]))
        wd = [t for t, m in got if m == "WATCHDOG=1"]
        check(len(wd) >= 5, "%s: %d WATCHDOG=1 in 10 s: %r" % (kind, len(wd), states))
        gaps = [b - a for a, b in zip(wd, wd[1:])]
        check(max(gaps) < 0.2, "%s: watchdog gaps %r (WATCHDOG_USEC/2 = 0.1 s)" % (kind, gaps))
        st, o = d.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
        check(st == 200, "a request with notifications on: %d" % st)
        d.signal()
        got = messages(s, lambda g: any(m == "STOPPING=1" for _, m in g), 10)
        check(any(m == "STOPPING=1" for _, m in got), "%s: no STOPPING=1: %r" % (kind, got))
        rc = d.wait(30)
        check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
    s.close()
    if kind == "path":
        os.unlink(addr)
print("server_sdnotify: ok")
