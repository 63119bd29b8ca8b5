"""run.py — the OpenAI Node client (client.mjs) against `nanoserve serve`. Skips (77) when
node or the npm packages are missing (.ci/run installs them: npm ci --prefix
tests/integration/openai)."""
import os
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "server"))
import nsd  # noqa: E402
from nsd import check  # noqa: E402

if not shutil.which("node"):
    print("SKIP: node is not installed")
    sys.exit(77)
if not os.path.isdir(os.path.join(here, "node_modules", "openai")):
    print("SKIP: tests/integration/openai/node_modules is missing: run "
          "`npm ci --prefix tests/integration/openai`")
    sys.exit(77)
binary, work = nsd.args()
model = nsd.tiny_model(binary, work)
with nsd.Daemon(binary, work, model, name="openai") as d:
    r = subprocess.run(["node", os.path.join(here, "client.mjs"),
                        "http://127.0.0.1:%d/v1" % d.port], capture_output=True, text=True,
                       timeout=120)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, "the OpenAI client failed; daemon log:\n" + d.log_text())
    check(d.stop() == 0, "exit code")
print("openai_client: ok")
