// serve-clients drives optimize serve with the official OpenAI and Anthropic
// SDKs (from .cache/node, installed by scripts/install-test-tools.sh): plain
// chat, streaming, tool calls and a long tool-using conversation in each
// format (chat completions, the Responses API, Anthropic messages), then
// Anthropic's count_tokens and an agent's compaction request. It prints one
// JSON line per check:
//   {"check": NAME, "ok": bool, "detail": ..., "compressed": N, "saved": N, "guideline": ID, "backend": LINK}
// and exits 1 if any check failed.
// Usage: node scripts/serve-clients.mjs BASE_URL API_KEY STEPS [HELLO_REPLY [COMPACTION [ONLY]]]
// HELLO_REPLY is the embedded model's answer to a plain chat (sim.ChatReply),
// which the hello-world checks expect. COMPACTION says whether serve's
// agent_compaction detector is on (the compaction request is answered from
// the summary) or off (it is forwarded); default on. ONLY runs just the
// checks whose name contains it.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, '.cache', 'node', 'package.json'));
const OpenAI = require('openai').default;
const Anthropic = require('@anthropic-ai/sdk').default;

const [base, apiKey, stepsArg, helloReply, compaction = 'on', only = ''] = process.argv.slice(2);
if (!base || !apiKey) {
  console.error('usage: node scripts/serve-clients.mjs BASE_URL API_KEY [STEPS]');
  process.exit(2);
}
const steps = Number(stepsArg || 8);
const model = 'ctxopt-sim';
// The embedded model plays a role per request; these plain chats ask for
// its compressor role (docs/embedded-model.md). Without a role header and
// tools, a chat gets its fixed reply (the hello-world checks).
const plain = { headers: { 'X-Ctxopt-Role': 'compressor' } };
const task = 'Answer: Q1: What is the river of Ostrela?';
const system = 'You answer questions by searching.';

const observation = (i) => Array.from({ length: 8 }, (_, j) =>
  `[${j + 1}] (doc d${i}) The river of Ostrel${String.fromCharCode(97 + j)} is the Vell${i}. It floods every spring and feeds the valley farms.`).join('\n');

let failed = false;
const report = (check, ok, detail, extra = {}) => {
  if (!ok) failed = true;
  console.log(JSON.stringify({ check, ok, detail, ...extra }));
};
const run = async (check, fn) => {
  if (!check.includes(only)) return;
  try {
    await fn();
  } catch (e) {
    report(check, false, String(e && e.stack || e));
  }
};

const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 30000 });
const anthropic = new Anthropic({ baseURL: base, apiKey, maxRetries: 0, timeout: 30000 });

const oaTools = [
  { type: 'function', function: { name: 'search', description: 'search the corpus', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } } },
  { type: 'function', function: { name: 'finish', description: 'give the answers', parameters: { type: 'object', properties: { answers: { type: 'array', items: { type: 'string' } } }, required: ['answers'] } } },
];
const toolNames = new Set(oaTools.map((t) => t.function.name));
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const anTools = oaTools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));

await run('openai hello world', async () => {
  const { data, response } = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
  const text = data.choices[0].message.content;
  report('openai hello world', response.status === 200 && text === helloReply, text);
});

await run('anthropic hello world', async () => {
  const { data, response } = await anthropic.messages.create({ model, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
  const text = data.content.find((b) => b.type === 'text')?.text;
  report('anthropic hello world', response.status === 200 && text === helloReply, text);
});

await run('openai plain chat', async () => {
  const { data, response } = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Summarize: the sky is blue.' }] }, plain).withResponse();
  const text = data.choices[0].message.content;
  report('openai plain chat', typeof text === 'string' && text.length > 0 && response.headers.get('x-ctxopt-compressed') === 'false', text);
});

await run('openai streaming', async () => {
  const messages = [{ role: 'user', content: 'Summarize: the river floods every spring and feeds the valley farms.' }];
  const whole = await openai.chat.completions.create({ model, messages }, plain);
  const { data: stream, response } = await openai.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } }, plain).withResponse();
  let text = '';
  let chunks = 0;
  let usage = null;
  for await (const chunk of stream) {
    chunks++;
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  const ok = chunks > 2 && text === whole.choices[0].message.content && usage !== null &&
    (response.headers.get('content-type') || '').startsWith('text/event-stream');
  report('openai streaming', ok, { chunks, same: text === whole.choices[0].message.content, usage });
});

await run('openai tool call', async () => {
  const r = await openai.chat.completions.create({ model, tools: oaTools, messages: [{ role: 'system', content: system }, { role: 'user', content: task }] });
  const call = r.choices[0].message.tool_calls?.[0];
  report('openai tool call', r.choices[0].finish_reason === 'tool_calls' && toolNames.has(call?.function?.name) && isObject(JSON.parse(call.function.arguments)), call);
});

await run('openai streamed tool call', async () => {
  const stream = await openai.chat.completions.create({ model, tools: oaTools, stream: true, messages: [{ role: 'system', content: system }, { role: 'user', content: task }] });
  let name = '';
  let args = '';
  for await (const chunk of stream) {
    const tc = chunk.choices[0]?.delta?.tool_calls?.[0];
    if (tc?.function?.name) name += tc.function.name;
    if (tc?.function?.arguments) args += tc.function.arguments;
  }
  report('openai streamed tool call', toolNames.has(name) && isObject(JSON.parse(args)), { name, args });
});

await run('openai long tool conversation', async () => {
  const messages = [{ role: 'system', content: system }, { role: 'user', content: task }];
  let compressed = 0;
  let saved = 0;
  let guideline = '';
  let backend = '';
  for (let i = 0; i < steps; i++) {
    const { data, response } = await openai.chat.completions.create({ model, tools: oaTools, messages }).withResponse();
    if (response.headers.get('x-ctxopt-compressed') === 'true') {
      compressed++;
      saved += Number(response.headers.get('x-ctxopt-tokens-saved'));
      guideline = response.headers.get('x-ctxopt-guideline');
      backend = response.headers.get('x-ctxopt-backend');
    }
    const m = data.choices[0].message;
    messages.push({ role: 'assistant', content: m.content || 'searching', tool_calls: m.tool_calls });
    for (const c of m.tool_calls || []) messages.push({ role: 'tool', tool_call_id: c.id, content: observation(i) });
  }
  report('openai long tool conversation', compressed > 0 && saved > 0 && guideline !== '' && backend !== '', { steps }, { compressed, saved, guideline, backend });
});

const rsTools = oaTools.map((t) => ({ type: 'function', ...t.function }));

await run('openai responses hello world', async () => {
  const { data, response } = await openai.responses.create({ model, input: 'hi' }).withResponse();
  report('openai responses hello world', response.status === 200 && data.output_text === helloReply, data.output_text);
});

await run('openai responses streaming', async () => {
  const input = 'Summarize: the river floods every spring and feeds the valley farms.';
  const whole = await openai.responses.create({ model, input }, plain);
  const { data: stream, response } = await openai.responses.create({ model, input, stream: true }, plain).withResponse();
  const types = [];
  let text = '';
  let final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') final = ev.response;
  }
  const ok = types[0] === 'response.created' && types.at(-1) === 'response.completed' && text.length > 0 &&
    text === whole.output_text && final?.output?.[0]?.content?.[0]?.text === text &&
    (response.headers.get('content-type') || '').startsWith('text/event-stream');
  report('openai responses streaming', ok, { events: types.length, same: text === whole.output_text });
});

await run('openai responses tool call', async () => {
  const r = await openai.responses.create({ model, instructions: system, tools: rsTools, input: task });
  const call = r.output.find((o) => o.type === 'function_call');
  report('openai responses tool call', toolNames.has(call?.name) && isObject(JSON.parse(call.arguments)) && typeof call.call_id === 'string', call);
});

await run('openai responses streamed tool call', async () => {
  const stream = await openai.responses.create({ model, instructions: system, tools: rsTools, input: task, stream: true });
  let name = '';
  let args = '';
  for await (const ev of stream) {
    if (ev.type === 'response.output_item.added' && ev.item.type === 'function_call') name = ev.item.name;
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
  }
  report('openai responses streamed tool call', toolNames.has(name) && isObject(JSON.parse(args)), { name, args });
});

await run('openai responses long tool conversation', async () => {
  const input = [{ role: 'user', content: task }];
  let compressed = 0;
  let saved = 0;
  let guideline = '';
  let backend = '';
  for (let i = 0; i < steps; i++) {
    const { data, response } = await openai.responses.create({ model, instructions: system, tools: rsTools, input }).withResponse();
    if (response.headers.get('x-ctxopt-compressed') === 'true') {
      compressed++;
      saved += Number(response.headers.get('x-ctxopt-tokens-saved'));
      guideline = response.headers.get('x-ctxopt-guideline');
      backend = response.headers.get('x-ctxopt-backend');
    }
    // The output items go back as input, each call followed by its output.
    for (const item of data.output) {
      input.push(item);
    }
    for (const c of data.output.filter((o) => o.type === 'function_call')) {
      input.push({ type: 'function_call_output', call_id: c.call_id, output: observation(i) });
    }
  }
  report('openai responses long tool conversation', compressed > 0 && saved > 0 && guideline !== '' && backend !== '', { steps }, { compressed, saved, guideline, backend });
});

await run('anthropic plain chat', async () => {
  const { data, response } = await anthropic.messages.create({ model, max_tokens: 256, messages: [{ role: 'user', content: 'Summarize: the sky is blue.' }] }, plain).withResponse();
  const text = data.content.find((b) => b.type === 'text')?.text;
  report('anthropic plain chat', data.type === 'message' && text?.length > 0 && response.headers.get('x-ctxopt-compressed') === 'false', text);
});

await run('anthropic streaming', async () => {
  const params = { model, max_tokens: 256, messages: [{ role: 'user', content: 'Summarize: the river floods every spring and feeds the valley farms.' }] };
  const whole = await anthropic.messages.create(params, plain);
  const stream = anthropic.messages.stream(params, plain);
  let events = 0;
  stream.on('streamEvent', () => events++);
  const final = await stream.finalMessage();
  const text = final.content.find((b) => b.type === 'text')?.text;
  const want = whole.content.find((b) => b.type === 'text')?.text;
  report('anthropic streaming', events > 4 && text === want && final.stop_reason === whole.stop_reason, { events, same: text === want });
});

await run('anthropic tool call', async () => {
  const r = await anthropic.messages.create({ model, max_tokens: 256, system, tools: anTools, messages: [{ role: 'user', content: task }] });
  const use = r.content.find((b) => b.type === 'tool_use');
  report('anthropic tool call', r.stop_reason === 'tool_use' && toolNames.has(use?.name) && isObject(use.input), use);
});

await run('anthropic streamed tool call', async () => {
  const final = await anthropic.messages.stream({ model, max_tokens: 256, system, tools: anTools, messages: [{ role: 'user', content: task }] }).finalMessage();
  const use = final.content.find((b) => b.type === 'tool_use');
  report('anthropic streamed tool call', toolNames.has(use?.name) && isObject(use.input), use);
});

// anthropicLong runs the long Anthropic tool conversation once and returns
// its messages and what the proxy said about each request.
let longRun = null;
const anthropicLong = async () => {
  if (longRun) return longRun;
  const messages = [{ role: 'user', content: task }];
  const res = { messages, compressed: 0, saved: 0, guideline: '', backend: '' };
  for (let i = 0; i < steps; i++) {
    const { data, response } = await anthropic.messages.create({ model, max_tokens: 256, system, tools: anTools, messages }).withResponse();
    if (response.headers.get('x-ctxopt-compressed') === 'true') {
      res.compressed++;
      res.saved += Number(response.headers.get('x-ctxopt-tokens-saved'));
      res.guideline = response.headers.get('x-ctxopt-guideline');
      res.backend = response.headers.get('x-ctxopt-backend');
    }
    messages.push({ role: 'assistant', content: data.content });
    const results = data.content.filter((b) => b.type === 'tool_use').map((b) => ({ type: 'tool_result', tool_use_id: b.id, content: observation(i) }));
    messages.push({ role: 'user', content: results.length ? results : 'call a tool' });
  }
  longRun = res;
  return res;
};

await run('anthropic long tool conversation', async () => {
  const { compressed, saved, guideline, backend } = await anthropicLong();
  report('anthropic long tool conversation', compressed > 0 && saved > 0 && guideline !== '' && backend !== '', { steps }, { compressed, saved, guideline, backend });
});

await run('anthropic count_tokens', async () => {
  const { messages } = await anthropicLong();
  const { data, response } = await anthropic.messages.countTokens({ model, system, tools: anTools, messages }).withResponse();
  const original = Number(response.headers.get('x-ctxopt-tokens-original'));
  const ok = Number.isInteger(data.input_tokens) && data.input_tokens > 0 && data.input_tokens < original &&
    response.headers.get('x-ctxopt-compressed') === 'true';
  report('anthropic count_tokens', ok, { input_tokens: data.input_tokens, uncompressed: original });
});

// Claude Code's compaction request: the conversation and a last user
// message asking for a summary of it, streamed.
await run('anthropic compaction request', async () => {
  const { messages } = await anthropicLong();
  const ask = 'Your task is to create a detailed summary of the conversation so far, paying close attention to the user\'s explicit requests and your previous actions.';
  // The last turn's tool results and the request in one user message, as Claude Code sends it.
  const last = messages.at(-1);
  const content = [...(Array.isArray(last.content) ? last.content : [{ type: 'text', text: last.content }]), { type: 'text', text: ask }];
  const { data: stream, response } = await anthropic.messages.create({ model, max_tokens: 256, system, tools: anTools, stream: true,
    messages: [...messages.slice(0, -1), { role: 'user', content }] }).withResponse();
  let text = '';
  let stop = '';
  for await (const ev of stream) {
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    if (ev.type === 'message_delta') stop = ev.delta.stop_reason;
  }
  const answered = response.headers.get('x-ctxopt-compaction') === 'summary';
  const ok = compaction === 'on'
    ? answered && text.startsWith('Summary of this conversation so far') && stop === 'end_turn'
    : !answered && stop !== '' && !text.startsWith('Summary of this conversation so far');
  report('anthropic compaction request', ok, { compaction, answered, stop, text: text.slice(0, 120) });
});

await run('missing key', async () => {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  try {
    await bad.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }, plain);
    report('missing key', false, 'accepted a wrong key');
  } catch (e) {
    report('missing key', e.status === 401, e.status);
  }
});

process.exit(failed ? 1 : 0);
