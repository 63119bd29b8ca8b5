"""nsd.py — shared by the daemon tests: start `nanoserve serve` on port 0 and parse its
port, plain HTTP and SSE clients over http.client and raw sockets, /metrics parsing, and the
test models (the tiny mkmodel checkpoint; a slow zero-weight one for queue and drain tests).
Python 3 standard library only."""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

TIMEOUT = 30.0


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def args(usage="PATH/TO/nanoserve WORK_DIR"):
    """argv: BINARY WORK_DIR [...]: (absolute binary path, work dir made if missing)"""
    if len(sys.argv) < 3:
        print("usage: %s %s" % (sys.argv[0], usage))
        sys.exit(2)
    work = os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    return os.path.abspath(sys.argv[1]), work


def is_asan(binary):
    """1 when the binary was built with AddressSanitizer (its quarantine holds freed memory,
    so RSS checks need room)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def tiny_model(binary, work, name="tiny", seed=1):
    """The tiny random checkpoint (byte-level tokenizer, ChatML template), made once."""
    out = os.path.join(work, name)
    if not os.path.exists(os.path.join(out, "model.safetensors")):
        tmp = out + ".tmp%d" % os.getpid()
        shutil.rmtree(tmp, ignore_errors=True)
        r = subprocess.run([binary, "mkmodel", "--shape", "tiny", "--out", tmp, "--seed",
                            str(seed)], capture_output=True, text=True)
        check(r.returncode == 0, "mkmodel failed: " + r.stderr)
        shutil.rmtree(out, ignore_errors=True)
        os.rename(tmp, out)
    return out


LLAMA2_TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "..", "shared", "tokenizers", "llama2", "tokenizer.json")


def llama2_model(binary, work):
    """The tiny random checkpoint (seed 0) with the real Llama 2 tokenizer (SentencePiece
    style, <0xNN> byte fallback), made once; None (after printing SKIP) when the tokenizer is
    not there."""
    tok = os.path.normpath(LLAMA2_TOKENIZER)
    if not os.path.exists(tok):
        print("SKIP: %s not found" % tok, flush=True)
        return None
    out = os.path.join(work, "tiny_llama2")
    if not os.path.exists(os.path.join(out, "model.safetensors")):
        tmp = out + ".tmp%d" % os.getpid()
        shutil.rmtree(tmp, ignore_errors=True)
        r = subprocess.run([binary, "mkmodel", "--shape", "tiny", "--out", tmp, "--seed", "0",
                            "--tokenizer", tok], capture_output=True, text=True)
        check(r.returncode == 0, "mkmodel failed: " + r.stderr)
        shutil.rmtree(out, ignore_errors=True)
        os.rename(tmp, out)
    return out


def slow_model(binary, work, hidden=None, inter=None, layers=None, heads=None, kv_heads=None):
    """A checkpoint in Llama's layout with all-zero BF16 weights, big enough that a step
    takes ~15 ms on the CPU: for tests that need requests to stay in flight. It always
    samples id 0 (all logits tie), so the tests pass ignore_eos. Under ASan (-O0, checked
    loads) a much smaller one takes as long."""
    dims = (256, 704, 2, 4, 2) if is_asan(binary) else (768, 2048, 6, 12, 4)
    hidden, inter, layers, heads, kv_heads = [
        v if v is not None else dv for v, dv in zip((hidden, inter, layers, heads, kv_heads), dims)]
    out = os.path.join(work, "slow_%d_%d" % (hidden, layers))
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out
    src = tiny_model(binary, work)
    tmp = out + ".tmp%d" % os.getpid()
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), tmp)
    cfg = json.load(open(os.path.join(src, "config.json")))
    vocab = cfg["vocab_size"]
    hd = hidden // heads
    cfg.update(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
               num_attention_heads=heads, num_key_value_heads=kv_heads, torch_dtype="bfloat16")
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"), indent=2)
    shapes = {"lm_head.weight": [vocab, hidden], "model.embed_tokens.weight": [vocab, hidden],
              "model.norm.weight": [hidden]}
    for i in range(layers):
        p = "model.layers.%d." % i
        shapes.update({p + "input_layernorm.weight": [hidden],
                       p + "post_attention_layernorm.weight": [hidden],
                       p + "mlp.down_proj.weight": [hidden, inter],
                       p + "mlp.gate_proj.weight": [inter, hidden],
                       p + "mlp.up_proj.weight": [inter, hidden],
                       p + "self_attn.q_proj.weight": [heads * hd, hidden],
                       p + "self_attn.k_proj.weight": [kv_heads * hd, hidden],
                       p + "self_attn.v_proj.weight": [kv_heads * hd, hidden],
                       p + "self_attn.o_proj.weight": [hidden, heads * hd]})
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(shapes):
        n = 2
        for d in shapes[name]:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shapes[name], "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(tmp, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + off)  # zeros, as a sparse file
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return out


class Daemon:
    """`nanoserve serve` on 127.0.0.1, port 0, CPU backend; stderr goes to a log file."""

    def __init__(self, binary, work, model, sets=(), env=None, name="daemon", wait=True):
        self.log_path = os.path.join(work, "%s.%d.log" % (name, os.getpid()))
        self.log = open(self.log_path, "wb")
        cmd = [binary, "serve", "--set", "engine.model=" + model, "--set", "server.port=0",
               "--set", "engine.backend=cpu", "--set", "server.host=127.0.0.1"]
        for s in sets:
            cmd += ["--set", s]
        e = dict(os.environ)
        e.pop("NOTIFY_SOCKET", None)
        e.pop("WATCHDOG_USEC", None)
        if env:
            e.update(env)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, env=e)
        self.port = None
        if wait:
            self.wait_listening()

    def wait_listening(self, timeout=60):
        deadline = time.time() + timeout
        line = b""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(rb"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                return
        self.proc.kill()
        fail("the daemon did not start (%r); log:\n%s" % (line, self.log_text()))

    def wait_ready(self, timeout=600):
        """GET /ready until it answers 200 (the daemon listens before the model is loaded)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                c.request("GET", "/ready")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        fail("the daemon was not ready in %d s; log:\n%s" % (timeout, self.log_text()))

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-6000:]

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def stop(self, timeout=60):
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("the daemon did not exit within %s s after SIGTERM; log:\n%s" %
                 (timeout, self.log_text()))

    def wait(self, timeout=60):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("the daemon did not exit within %s s; log:\n%s" % (timeout, self.log_text()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    # ---- clients ----------------------------------------------------------------------

    def conn(self, timeout=TIMEOUT):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=TIMEOUT):
        """(status, headers dict lower-cased, body bytes)"""
        h = {}
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def post(self, path, obj, headers=None, timeout=TIMEOUT):
        """(status, parsed JSON)"""
        st, _, data = self.request("POST", path, obj, headers, timeout)
        try:
            return st, json.loads(data)
        except ValueError:
            fail("%s answered %d with a body that is not JSON: %r" % (path, st, data[:300]))

    def stream(self, path, obj, headers=None, timeout=TIMEOUT):
        """POST a streaming request; (status, [parsed events], saw_done). Every event before
        [DONE] is JSON."""
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c = self.conn(timeout)
        try:
            c.request("POST", path, body=json.dumps(obj), headers=h)
            r = c.getresponse()
            if r.status != 200:
                return r.status, [json.loads(r.read())], False
            check(r.getheader("Content-Type", "").startswith("text/event-stream"),
                  "stream Content-Type is %r" % r.getheader("Content-Type"))
            events, done = parse_sse(r.read().decode("utf-8"))
            return r.status, events, done
        finally:
            c.close()

    def metrics(self):
        st, _, data = self.request("GET", "/metrics")
        check(st == 200, "/metrics answered %d" % st)
        return parse_metrics(data.decode())

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def rss_kib(self):
        for line in open("/proc/%d/status" % self.proc.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


def parse_sse(text):
    events, done = [], False
    for block in text.split("\n\n"):
        block = block.strip("\n")
        if not block:
            continue
        data = "\n".join(l[6:] if l.startswith("data: ") else l[5:]
                         for l in block.split("\n") if l.startswith("data:"))
        check(not done, "an event after [DONE]: %r" % block)
        if data == "[DONE]":
            done = True
            continue
        events.append(json.loads(data))
    return events, done


def parse_metrics(text):
    """{'name{labels}': value} plus '#TYPE name' -> type entries."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            out["#TYPE " + name] = typ
        elif line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def stream_text(events, chat=False):
    """Concatenated text of completion chunks; the last finish_reason; the usage chunk."""
    text, finish, usage = "", None, None
    for e in events:
        if e.get("usage"):
            usage = e["usage"]
        for ch in e.get("choices", []):
            if chat:
                text += ch["delta"].get("content") or ""
            else:
                text += ch["text"]
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    return text, finish, usage


def raw(port, data, timeout=10.0, read_all=True):
    """Send raw bytes on a fresh connection; return what comes back until close/timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            out += b
            if b"\r\n\r\n" in out:
                if not read_all:
                    break
                head, body = out.split(b"\r\n\r\n", 1)
                m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                if m and len(body) >= int(m.group(1)):
                    break  # one whole response: do not wait for keep-alive to end
        return out
    finally:
        s.close()
