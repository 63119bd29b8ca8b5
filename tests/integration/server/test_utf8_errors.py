"""test_utf8_errors.py — bytes that are not UTF-8 in a request (its URL, an Expect header)
never reach an error body or a log.format=json line raw: both stay valid JSON."""
import json

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)

CASES = [
    ("URL", b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400),
    ("Expect", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: \xff\xfe-continue\r\n"
     b"Content-Length: 2\r\nConnection: close\r\n\r\n{}", 417),
]

with nsd.Daemon(binary, work, model, sets=["log.format=json"], name="utf8_errors") as d:
    for name, req, status in CASES:
        out = nsd.raw(d.port, req)
        check(out.startswith(b"HTTP/1.1 %d" % status), "%s: %r" % (name, out[:200]))
        body = out.split(b"\r\n\r\n", 1)[1]
        try:
            err = json.loads(body.decode("utf-8"))["error"]
        except (ValueError, KeyError) as e:
            nsd.fail("%s: the error body is not JSON (%s): %r" % (name, e, body))
        print("%s: %d %r" % (name, status, err["message"]))
    check("\ufffd\ufffd-continue" in err["message"], "Expect: %r" % err["message"])
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
    lines = open(d.log_path, "rb").read().splitlines()
    for line in lines:
        try:
            json.loads(line.decode("utf-8"))
        except ValueError as e:
            nsd.fail("a log line is not JSON (%s): %r" % (e, line))
    check(len(lines) > 5, "only %d log lines" % len(lines))
print("server_utf8_errors: ok")
