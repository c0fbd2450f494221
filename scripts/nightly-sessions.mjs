// nightly-sessions drives optimize serve with the official OpenAI SDK (from
// .cache/node, installed by scripts/install-test-tools.sh) through long
// tool-using conversations, as production traffic for optimize nightly's
// tests. Conversation i asks 1 + i%3 questions about entities of its own;
// a search finds an entity's fact only when it queries the entity's bare
// name (the agent's third attempt), so each question takes three searches
// and the conversations are 4, 7 or 10 turns long. Each ends when the
// agent calls finish; with "outcome" its session's outcome is then
// reported (POST /v1/sessions/{id}/outcome), which writes its session log
// record at once. One JSON line per conversation:
//   {"conversation": i, "session": ID, "turns": N, "compressed": N, "guideline": ID}
// Usage: node scripts/nightly-sessions.mjs BASE_URL API_KEY COUNT FIRST [outcome]
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, '.cache', 'node', 'package.json'));
const OpenAI = require('openai').default;

const [base, apiKey, countArg, firstArg, mode] = process.argv.slice(2);
if (!base || !apiKey || !countArg) {
  console.error('usage: node scripts/nightly-sessions.mjs BASE_URL API_KEY COUNT FIRST [outcome]');
  process.exit(2);
}
const count = Number(countArg);
const first = Number(firstArg || 0);
const model = 'ctxopt-sim';
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 30000 });
const tools = [
  { type: 'function', function: { name: 'search', description: 'search the corpus', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } } },
  { type: 'function', function: { name: 'finish', description: 'give the answers', parameters: { type: 'object', properties: { answers: { type: 'array', items: { type: 'string' } } }, required: ['answers'] } } },
];
const relations = ['river', 'capital', 'chief export'];
const entity = (i, q) => `Ostrel${String.fromCharCode(97 + q)}${i}`;
const answer = (i, q) => `Vell${i}x${q}`;

// Passages about other entities, so the history is long and a summary
// has something to leave out.
const noise = (i, k) => Array.from({ length: 4 }, (_, j) =>
  `[${j + 1}] (doc n${i}-${k}-${j}) Marrow${j}\nThe harbour of Marrow${j} is the Quay${k}. It trades salt and wool with the northern towns every season.`).join('\n\n');

const observe = (i, questions, query) => {
  const q = questions.findIndex((_, n) => query.trim().toLowerCase() === entity(i, n).toLowerCase());
  const text = noise(i, query.length);
  if (q < 0) return text;
  return `[0] (doc f${i}-${q}) ${entity(i, q)}\nThe ${relations[q]} of ${entity(i, q)} is ${answer(i, q)}.\n\n${text}`;
};

let failed = false;
for (let i = first; i < first + count; i++) {
  const questions = relations.slice(0, 1 + (i % 3));
  const task = questions.map((r, n) => `Q${n + 1}: What is the ${r} of ${entity(i, n)}?`).join('\n');
  const messages = [{ role: 'system', content: 'You answer questions by searching.' }, { role: 'user', content: `Answer every question.\n${task}` }];
  let compressed = 0;
  let guideline = '';
  let session = '';
  let turns = 0;
  for (; turns < 16; turns++) {
    const { data, response } = await openai.chat.completions.create({ model, tools, messages }).withResponse();
    session = response.headers.get('x-ctxopt-session') || session;
    if (response.headers.get('x-ctxopt-compressed') === 'true') {
      compressed++;
      guideline = response.headers.get('x-ctxopt-guideline');
    }
    const m = data.choices[0].message;
    messages.push({ role: 'assistant', content: m.content || '', tool_calls: m.tool_calls });
    const call = m.tool_calls?.[0];
    if (!call || call.function.name === 'finish') break;
    const { query } = JSON.parse(call.function.arguments);
    for (const c of m.tool_calls) messages.push({ role: 'tool', tool_call_id: c.id, content: c === call ? observe(i, questions, query) : 'ignored' });
  }
  if (mode === 'outcome') {
    const r = await fetch(`${base}/v1/sessions/${encodeURIComponent(session)}/outcome`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` }, body: JSON.stringify({ success: true }) });
    if (!r.ok) {
      failed = true;
      console.error(`outcome of ${session}: ${r.status} ${await r.text()}`);
    }
  }
  console.log(JSON.stringify({ conversation: i, session, turns, compressed, guideline }));
}
process.exit(failed ? 1 : 0);
