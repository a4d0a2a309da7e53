// Drives `glia serve` (a model with a Hermes/Qwen chat template) with the official `openai`
// npm package: a tool-call round trip, response_format json_schema at temperature 1 (50
// runs, each output parsed and validated here), streamed tool calls with usage, n: 3,
// embeddings.
// Usage: node openai_tools.mjs BASE_URL MODEL API_KEY. Exits non-zero on the first failure.
import OpenAI from 'openai';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' } },
                  required: ['city'], additionalProperties: false },
  },
}];
const messages = [{ role: 'user', content: 'What is the weather in Oslo?' }];

// A forced call, then the result sent back.
const first = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 300,
                                                     temperature: 0.7, seed: 11 });
const choice = first.choices[0];
check(choice.finish_reason === 'tool_calls', 'tool call finish_reason', choice);
const call = choice.message.tool_calls?.[0];
check(call && call.type === 'function' && call.function.name === 'get_weather', 'tool call', choice.message);
const args = JSON.parse(call.function.arguments);
check(typeof args.city === 'string' && args.city.length <= 12, 'tool call arguments', args);
const second = await client.chat.completions.create({
  model, tools, max_tokens: 16, temperature: 0,
  messages: [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 18}' }],
});
check(second.usage.prompt_tokens > first.usage.prompt_tokens, 'the tool result is in the prompt', second.usage);
console.log('ok tool call round trip');

// Streamed tool call with usage.
const stream = await client.chat.completions.create({ model, messages, tools, max_tokens: 300, temperature: 0.7, seed: 5,
                                                      tool_choice: { type: 'function', function: { name: 'get_weather' } },
                                                      stream: true, stream_options: { include_usage: true } });
let finish = null, usage = null, streamed = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  const d = chunk.choices[0]?.delta;
  if (d?.tool_calls) streamed = d.tool_calls;
  if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
}
check(finish === 'tool_calls' && streamed?.[0]?.function?.name === 'get_weather', 'streamed tool call', { finish, streamed });
check(typeof JSON.parse(streamed[0].function.arguments).city === 'string', 'streamed arguments', streamed);
check(usage && usage.completion_tokens > 0, 'streamed usage', usage);
console.log('ok tool call stream');

// json_schema, 50 runs at temperature 1: always parses and validates.
const schema = { type: 'object', additionalProperties: false, required: ['name', 'age', 'tags'],
                 properties: { name: { type: 'string', minLength: 1, maxLength: 10 }, age: { type: 'integer' },
                               tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 } } };
function valid(v) {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  for (const k of Object.keys(v)) if (!['name', 'age', 'tags'].includes(k)) return false;
  const n = [...(v.name ?? '')].length;
  return typeof v.name === 'string' && n >= 1 && n <= 10 && Number.isInteger(v.age) && Array.isArray(v.tags) &&
         v.tags.length <= 3 && v.tags.every((t) => ['a', 'b', 'c'].includes(t));
}
const runs = await Promise.all(Array.from({ length: 50 }, (_, i) => client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'A person, as JSON.' }], max_tokens: 600, temperature: 1, seed: 100 + i,
  response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
})));
for (const r of runs) {
  const text = r.choices[0].message.content;
  let v;
  try { v = JSON.parse(text); } catch (e) { check(false, 'json_schema output parses', text); }
  check(valid(v), 'json_schema output validates', text);
}
console.log('ok json_schema x50');

// n: 3 choices in one response.
const three = await client.chat.completions.create({ model, messages, n: 3, max_tokens: 8, temperature: 1, seed: 4 });
check(three.choices.length === 3 && three.choices.every((c, i) => c.index === i &&
      typeof c.message.content === 'string'), 'n: 3 choices', three.choices);
console.log('ok n=3');

// Embeddings.
const emb = await client.embeddings.create({ model, input: ['Once upon a time', 'The little dog'] });
check(emb.data.length === 2 && emb.data[1].index === 1, 'embeddings data', emb.data.map((d) => d.index));
for (const d of emb.data) {
  const n = d.embedding.reduce((a, x) => a + x * x, 0);
  check(d.embedding.length === 64 && Math.abs(n - 1) < 1e-4, 'embedding normalised', { len: d.embedding.length, n });
}
check(emb.usage.prompt_tokens > 0, 'embeddings usage', emb.usage);
console.log('ok embeddings');
console.log('ALL OK');
