// client.mjs — the official OpenAI Node client against a running `nanoserve serve`:
// completions and chat completions, whole and streamed, with the shapes checked.
// Usage: node client.mjs BASE_URL (e.g. http://127.0.0.1:8080/v1); exit 0 when all pass.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "sk-test", maxRetries: 0 });
const models = await client.models.list();
const model = models.data[0].id;
assert.equal(models.data[0].object, "model");

// completions, whole
const c = await client.completions.create({ model, prompt: "The quick brown fox",
  max_tokens: 12, temperature: 0 });
assert.equal(c.object, "text_completion");
assert.match(c.id, /^cmpl-/);
assert.equal(c.choices.length, 1);
assert.equal(typeof c.choices[0].text, "string");
assert.ok(["stop", "length"].includes(c.choices[0].finish_reason));
assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);

// completions, streamed: the same text
let text = "", finish = null, usage = null;
const cs = await client.completions.create({ model, prompt: "The quick brown fox",
  max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } });
for await (const chunk of cs) {
  assert.equal(chunk.object, "text_completion");
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    text += ch.text;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
assert.equal(text, c.choices[0].text);
assert.equal(finish, c.choices[0].finish_reason);
assert.deepEqual(usage, c.usage);

// chat, whole
const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi!" }];
const r = await client.chat.completions.create({ model, messages, max_tokens: 10,
  temperature: 0 });
assert.equal(r.object, "chat.completion");
assert.match(r.id, /^chatcmpl-/);
assert.equal(r.choices[0].message.role, "assistant");
assert.equal(typeof r.choices[0].message.content, "string");
assert.ok(r.usage.prompt_tokens > 0);

// chat, streamed
let content = "", role = null, cfinish = null;
const rs = await client.chat.completions.create({ model, messages, max_tokens: 10,
  temperature: 0, stream: true });
for await (const chunk of rs) {
  assert.equal(chunk.object, "chat.completion.chunk");
  const d = chunk.choices[0].delta;
  if (d.role) role = d.role;
  content += d.content ?? "";
  if (chunk.choices[0].finish_reason) cfinish = chunk.choices[0].finish_reason;
}
assert.equal(role, "assistant");
assert.equal(content, r.choices[0].message.content);
assert.equal(cfinish, r.choices[0].finish_reason);

// errors surface as the client's typed errors, with the param
await assert.rejects(
  client.completions.create({ model, prompt: "x", max_tokens: 2, temperature: 5 }),
  (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature");
console.log("openai client: 5 checks passed");
