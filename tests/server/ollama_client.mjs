// Drives `glia serve` (a model with a Qwen 2.5 chat template) with ollama's own npm package:
// version, tags, show, ps; chat whole and streamed (the same greedy text); generate
// streamed, raw and seeded; stop strings; format as a JSON schema; embed and the older
// embeddings; a conversation with a tool call and its result; errors (a bad option, an
// unknown model, no API key).
// Usage: node ollama_client.mjs HOST MODEL API_KEY. Exits non-zero on the first failure.
import { Ollama } from 'ollama';

const [host, model, apiKey] = process.argv.slice(2);
const ollama = new Ollama({ host, headers: { Authorization: `Bearer ${apiKey}` } });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}
async function collect(stream) {
  const parts = [];
  for await (const p of stream) parts.push(p);
  return parts;
}
const greedy = { temperature: 0, num_predict: 8 };
const user = [{ role: 'user', content: 'Once upon a time' }];

// The model routes.
const v = await ollama.version();
check(typeof v.version === 'string' && /^\d+\.\d+/.test(v.version), 'version', v);
const tags = await ollama.list();
check(tags.models.length === 1 && tags.models[0].name === `${model}:latest`, 'tags name', tags);
const entry = tags.models[0];
check(entry.size > 0 && /^[0-9a-f]{64}$/.test(entry.digest) && entry.details.format === 'gguf' &&
      entry.details.family === 'llama' && entry.details.parameter_size.length > 0, 'tags entry', entry);
const show = await ollama.show({ model: `${model}:latest` });
check(show.model_info['general.architecture'] === 'llama' && show.template.includes('<|im_start|>') &&
      show.capabilities.includes('completion') && show.capabilities.includes('tools'), 'show', show);
const ps = await ollama.ps();
check(ps.models.length === 1 && ps.models[0].name === `${model}:latest` && ps.models[0].expires_at, 'ps', ps);
console.log('ok model routes');

// Chat, whole and streamed: the same greedy text, the counts in the last object.
const whole = await ollama.chat({ model, messages: user, options: greedy });
check(whole.done === true && whole.done_reason === 'length' && whole.eval_count === 8 && whole.prompt_eval_count > 4 &&
      whole.message.role === 'assistant' && whole.message.content.length > 0 && whole.total_duration > 0, 'chat', whole);
const parts = await collect(await ollama.chat({ model, messages: user, options: greedy, stream: true }));
const last = parts[parts.length - 1];
// (how the tokens are grouped into objects depends on timing: at least one, then the last)
check(parts.length >= 2 && parts.slice(0, -1).every((p) => p.done === false), 'chat stream parts', parts);
check(parts.map((p) => p.message.content).join('') === whole.message.content, 'chat stream text', { parts, whole });
check(last.done && last.done_reason === 'length' && last.eval_count === 8 && last.prompt_eval_count === whole.prompt_eval_count &&
      last.eval_duration >= 0 && last.total_duration >= last.eval_duration, 'chat stream end', last);
console.log('ok chat');

// Generate: streamed (the prompt through the template), raw, seeded, stop strings.
const gen = await collect(await ollama.generate({ model, prompt: 'Once upon a time', stream: true, options: greedy }));
const genText = gen.map((p) => p.response).join('');
check(gen.length >= 2 && gen[gen.length - 1].done && gen[gen.length - 1].eval_count === 8, 'generate stream', gen);
check(genText === whole.message.content, 'generate renders the prompt as a user message', { genText, chat: whole.message.content });
const raw = await ollama.generate({ model, prompt: 'Once upon a time', raw: true, options: greedy });
check(raw.done && raw.eval_count === 8 && raw.prompt_eval_count < whole.prompt_eval_count, 'raw generate', raw);
const seeded = { temperature: 1, seed: 42, num_predict: 12 };
const s1 = await ollama.generate({ model, prompt: 'Tom had a', raw: true, options: seeded });
const s2 = await ollama.generate({ model, prompt: 'Tom had a', raw: true, options: seeded });
check(s1.response === s2.response && s1.response.length > 0, 'seeded generate repeats', { s1, s2 });
const long = await ollama.generate({ model, prompt: 'Once upon a time', raw: true, options: { temperature: 0, num_predict: 30 } });
const word = long.response.trim().split(/\s+/)[2];
check(word && word.length > 0, 'a word to stop at', long);
const stopped = await ollama.generate({ model, prompt: 'Once upon a time', raw: true,
                                        options: { temperature: 0, num_predict: 30, stop: [word] } });
check(stopped.done_reason === 'stop' && !stopped.response.includes(word) && long.response.startsWith(stopped.response),
      'stop string', { stopped, long, word });
console.log('ok generate');

// format: a JSON schema, enforced by the grammar.
const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer' } },
                 required: ['name', 'age'], additionalProperties: false };
for (const seed of [1, 2, 3]) {
  const r = await ollama.chat({ model, messages: [{ role: 'user', content: 'A person as JSON.' }], format: schema,
                                options: { temperature: 1, seed, num_predict: 300 } });
  let o;
  try { o = JSON.parse(r.message.content); } catch (e) { check(false, 'format output parses', r.message.content); }
  check(typeof o.name === 'string' && [...o.name].length <= 8 && Number.isInteger(o.age) && Object.keys(o).length === 2,
        'format output follows the schema', o);
}
console.log('ok format');

// Embeddings: unit vectors, one per input; the older route.
const emb = await ollama.embed({ model, input: ['Once upon a time', 'a big red ball'] });
check(emb.embeddings.length === 2 && emb.embeddings[0].length > 0 && emb.prompt_eval_count > 0, 'embed', emb);
for (const e of emb.embeddings) {
  const n = Math.sqrt(e.reduce((s, x) => s + x * x, 0));
  check(Math.abs(n - 1) < 1e-4, 'embed unit length', n);
}
check(emb.embeddings[0].some((x, i) => x !== emb.embeddings[1][i]), 'embed differs by input');
const old = await ollama.embeddings({ model, prompt: 'Once upon a time' });
check(old.embedding.length === emb.embeddings[0].length, 'embeddings (older route)', old.embedding.length);
console.log('ok embed');

// A tool call and its result in the conversation reach the prompt (ollama's shapes:
// arguments as an object, the result's tool_name).
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const ask = [{ role: 'user', content: 'What is the weather in Oslo?' }];
const first = await ollama.chat({ model, messages: ask, tools, options: greedy });
const round = await ollama.chat({ model, tools, options: greedy, messages: [...ask,
  { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
  { role: 'tool', tool_name: 'get_weather', content: '{"temperature": 18}' }] });
check(round.done && round.prompt_eval_count > first.prompt_eval_count + 10, 'tool call round trip in the prompt', { first, round });
const noTools = await ollama.chat({ model, messages: ask, options: greedy });
check(first.prompt_eval_count > noTools.prompt_eval_count, 'tools reach the template', { first, noTools });
console.log('ok tools');

// Errors: a bad option (400 naming it), an unknown model (404), no API key (401).
async function error(p) {
  try { await p; } catch (e) { return e; }
  return null;
}
const bad = await error(ollama.chat({ model, messages: user, options: { temperature: 'hot' } }));
check(bad && bad.status_code === 400 && bad.error.includes('options.temperature'), 'bad option', bad && { s: bad.status_code, e: bad.error });
const range = await error(ollama.chat({ model, messages: user, options: { top_p: 7 } }));
check(range && range.status_code === 400 && range.error.includes('options.top_p'), 'option out of range', range && range.error);
const unknown = await error(ollama.generate({ model: 'no-such-model', prompt: 'hi' }));
check(unknown && unknown.status_code === 404, 'unknown model', unknown && { s: unknown.status_code, e: unknown.error });
const streamBad = await error(ollama.chat({ model, messages: [{ role: 'wizard', content: 'x' }], stream: true }));
check(streamBad && streamBad.status_code === 400 && streamBad.error.includes('messages[0].role'), 'streamed request refused', streamBad && streamBad.error);
const nokey = await error(new Ollama({ host }).list());
check(nokey && nokey.status_code === 401, 'no API key', nokey && nokey.status_code);
console.log('ok errors');

console.log('ALL OK');
