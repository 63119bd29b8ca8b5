"""test_chat_template.py — the chat template as the daemon applies it: engine.chat_template
overrides detection (zephyr, llama2 on the tiny model's tokenizer), and a model whose
template is not recognised logs a warning at startup and answers chat requests 400 naming
engine.chat_template, while completions keep working."""
import json
import os
import shutil

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)
MSGS = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Bye"}]
EOS, BOS = "<|end_of_text|>", "<|begin_of_text|>"
WANT = {
    "zephyr": "<|system|>\nS%s\n<|user|>\nHi%s\n<|assistant|>\nYo%s\n<|user|>\nBye%s\n"
              "<|assistant|>\n" % (EOS, EOS, EOS, EOS),
    "llama2": "%s[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST] Yo %s%s[INST] Bye [/INST]" %
              (BOS, EOS, BOS),
    "llama3": "%s<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>"
              "user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
              "\n\nYo<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n" % BOS,
}

for family, want in WANT.items():
    with nsd.Daemon(binary, work, model, name="tmpl_" + family,
                    sets=["engine.chat_template=" + family]) as d:
        st, t = d.post("/tokenize", {"messages": MSGS})
        check(st == 200, "%s: tokenize %d %r" % (family, st, t))
        st, o = d.post("/detokenize", {"tokens": t["tokens"]})
        check(o["prompt"] == want, "%s: %r != %r" % (family, o["prompt"], want))
        st, o = d.post("/v1/chat/completions", {"messages": MSGS, "max_tokens": 3})
        check(st == 200 and o["usage"]["prompt_tokens"] == t["count"], "%s chat: %r" % (family, o))
        check(d.stop() == 0, "exit code")

# llama2 refuses two user messages in a row, as its template raises
with nsd.Daemon(binary, work, model, name="tmpl_llama2_alt",
                sets=["engine.chat_template=llama2"]) as d:
    st, o = d.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"},
                                                         {"role": "user", "content": "b"}]})
    check(st == 400 and "alternate" in o["error"]["message"], "%d %r" % (st, o))
    check(d.stop() == 0, "exit code")

# an unrecognised template: warning, 400 on chat, completions fine
odd = os.path.join(work, "tiny_odd_template")
if not os.path.exists(odd):
    shutil.copytree(model, odd + ".tmp")
    p = os.path.join(odd + ".tmp", "tokenizer_config.json")
    tc = json.load(open(p))
    tc["chat_template"] = ("{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\n"
                           "{% endfor %}")
    json.dump(tc, open(p, "w"))
    os.rename(odd + ".tmp", odd)
with nsd.Daemon(binary, work, odd, name="tmpl_odd") as d:
    st, o = d.post("/v1/chat/completions", {"messages": MSGS[1:2], "max_tokens": 3})
    check(st == 400 and "engine.chat_template" in o["error"]["message"], "%d %r" % (st, o))
    check(o["error"]["param"] == "messages", repr(o))
    st, o = d.post("/v1/completions", {"prompt": "x", "max_tokens": 3})
    check(st == 200, "completions with an odd chat template: %d" % st)
    check(d.stop() == 0, "exit code")
    log = d.log_text()
    check("warn" in log and "engine.chat_template" in log, "no startup warning:\n" + log)
print("server_chat_template: ok")
