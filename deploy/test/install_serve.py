"""install_serve.py — `scripts/install --prefix TMP`, then the installed daemon, started the
way the unit starts it (installed binary, installed config, nothing from the build tree),
serves a completion. Also: the layout, DESTDIR staging, an existing config kept on
reinstall, and that the routes and metric the Kubernetes manifests and the Dockerfile
name exist on the running daemon.
argv: SOURCE_DIR BUILD_DIR WORK_DIR"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

src, build, work = (os.path.abspath(a) for a in sys.argv[1:4])


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def install(prefix, destdir=None):
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    if destdir:
        env["DESTDIR"] = destdir
    r = subprocess.run([os.path.join(src, "scripts", "install"), "--prefix", prefix, "--build",
                        build], env=env, capture_output=True, text=True)
    check(r.returncode == 0, "scripts/install --prefix %s failed:\n%s%s" % (prefix, r.stdout,
                                                                          r.stderr))
    return r.stdout


def read(p):
    with open(p) as f:
        return f.read()


def layout(root, prefix, etc, var):
    """root: DESTDIR or ''; prefix: the install prefix; etc/var: where config/state go."""
    binary = root + prefix + "/bin/nanoserve"
    unit = root + prefix + "/lib/systemd/system/nanoserve.service"
    config = root + etc + "/nanoserve/config.json"
    for p in (binary, unit, config, root + prefix + "/share/man/man1/nanoserve.1",
              root + prefix + "/share/doc/nanoserve/README.md",
              root + prefix + "/share/doc/nanoserve/deploy.md",
              root + prefix + "/share/doc/nanoserve/config.example.json"):
        check(os.path.isfile(p), "not installed: " + p)
    check(os.access(binary, os.X_OK), "not executable: " + binary)
    check(os.path.isdir(root + var + "/lib/nanoserve/models"), "no state folder for models")
    u = read(unit)
    want = "ExecStart=%s/bin/nanoserve serve --config %s/nanoserve/config.json" % (prefix, etc)
    check(want + "\n" in u, "unit lacks '%s':\n%s" % (want, u))
    check("ExecStartPre=%s/bin/nanoserve config check %s/nanoserve/config.json\n" % (prefix, etc)
          in u, "unit lacks the config check before start")
    check("@" not in re.sub(r"(?m)^#.*$", "", u).replace("@system-service", "")
          .replace("~@privileged", ""), "unsubstituted @VAR@ left in the unit")
    cfg = json.loads(read(config))
    check(cfg["engine"]["model"] == var + "/lib/nanoserve/models/default",
          "config engine.model is %r" % cfg["engine"]["model"])
    return binary, config


# ---- a plain prefix ---------------------------------------------------------------------
prefix = os.path.join(work, "prefix")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
install(prefix)
binary, config = layout("", prefix, prefix + "/etc", prefix + "/var")
ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
check("not found" not in ldd, "installed binary misses libraries:\n" + ldd)
r = subprocess.run([binary, "config", "check", config], capture_output=True, text=True)
check(r.returncode == 0, "config check of the installed config: " + r.stdout + r.stderr)

# an existing config is the operator's: a reinstall keeps it byte for byte
mine = read(config).replace('"level": "info"', '"level": "warn"')
check(mine != read(config), "could not edit the installed config")
with open(config, "w") as f:
    f.write(mine)
out = install(prefix)
check(read(config) == mine, "reinstall replaced an existing config")
check("Keeping" in out, "reinstall did not say it kept the config:\n" + out)

# ---- DESTDIR staging for /usr/local: /etc and /var outside the prefix -------------------
stage = os.path.join(work, "stage")
install("/usr/local", destdir=stage)
layout(stage, "/usr/local", "/etc", "/var")

# ---- the installed daemon serves --------------------------------------------------------
model = prefix + "/var/lib/nanoserve/models/default"
r = subprocess.run([binary, "mkmodel", "--shape", "tiny", "--out", model, "--seed", "1"],
                   capture_output=True, text=True)
check(r.returncode == 0, "mkmodel: " + r.stderr)
log = open(os.path.join(work, "daemon.log"), "w")
p = subprocess.Popen([binary, "serve", "--config", config, "--set", "server.port=0"],
                     stdout=subprocess.PIPE, stderr=log, text=True, cwd="/")
try:
    line = p.stdout.readline()
    m = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
    check(m is not None, "no 'listening on' line: %r (log: %s)" % (line, log.name))
    port = int(m.group(1))

    def req(method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"} if body is not None else {})
        resp = c.getresponse()
        data = resp.read().decode()
        c.close()
        return resp.status, data

    st, data = req("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 8,
                                               "temperature": 0, "ignore_eos": True})
    check(st == 200, "completion: %d %s" % (st, data))
    j = json.loads(data)
    check(j.get("object") == "text_completion", "object: " + data)
    check(isinstance(j["choices"][0]["text"], str) and j["choices"][0]["text"] != "",
          "no text: " + data)
    check(j["usage"]["completion_tokens"] == 8, "usage: " + data)
    check(j["model"] == "default", "model id %r (the folder's name)" % j["model"])

    # what the other artefacts point at exists: probe paths, the HEALTHCHECK, the HPA metric
    dep = read(os.path.join(src, "deploy/k8s/deployment.yaml"))
    paths = set(re.findall(r"httpGet:\s*\n\s*path:\s*(/\w+)", dep))
    check({"/health", "/ready"} <= paths, "deployment probes: %s" % sorted(paths))
    docker = read(os.path.join(src, "deploy/container/Dockerfile"))
    paths |= set(re.findall(r"curl -fsS http://127\.0\.0\.1:8080(/\w+)", docker))
    for path in sorted(paths):
        st, data = req("GET", path)
        check(st == 200, "GET %s: %d %s" % (path, st, data))
    st, metrics = req("GET", "/metrics")
    check(st == 200, "GET /metrics: %d" % st)
    hpa = read(os.path.join(src, "deploy/k8s/hpa.yaml"))
    names = re.findall(r"name:\s*(nanoserve_\w+)", hpa)
    check(names, "hpa.yaml names no nanoserve_ metric")
    for n in names:
        check(re.search(r"(?m)^%s(\{| )" % n, metrics), "/metrics has no %s" % n)

    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    check(rc == 0, "exit code after SIGTERM: %d" % rc)
finally:
    if p.poll() is None:
        p.kill()
        p.wait()
    log.close()
print("install_serve: ok (installed to %s, served a completion on port %d)" % (prefix, port))
