// Drives `glia serve` with the official `openai` npm package and checks the response
// shapes. Usage: node openai_client.mjs BASE_URL MODEL API_KEY
// Prints one line per check; exits non-zero on the first failure.
import OpenAI from 'openai';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}
function checkUsage(u, what) {
  check(u && Number.isInteger(u.prompt_tokens) && u.prompt_tokens > 0, `${what}: usage.prompt_tokens`, u);
  check(Number.isInteger(u.completion_tokens) && u.completion_tokens > 0, `${what}: usage.completion_tokens`, u);
  check(u.total_tokens === u.prompt_tokens + u.completion_tokens, `${what}: usage.total_tokens`, u);
}

const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat' }];

// Models.
const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model, 'models.list', models.data);
console.log('ok models.list');

// Chat, whole.
const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
check(chat.object === 'chat.completion', 'chat.object', chat.object);
check(typeof chat.id === 'string' && chat.id.startsWith('chatcmpl-'), 'chat.id', chat.id);
check(chat.choices.length === 1 && chat.choices[0].message.role === 'assistant', 'chat.choices', chat.choices);
check(typeof chat.choices[0].message.content === 'string' && chat.choices[0].message.content.length > 0, 'chat content', chat.choices[0]);
check(['stop', 'length'].includes(chat.choices[0].finish_reason), 'chat finish_reason', chat.choices[0]);
checkUsage(chat.usage, 'chat');
console.log('ok chat');

// Chat, streamed with usage: the same text (greedy).
const stream = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, stream: true,
                                                      stream_options: { include_usage: true } });
let text = '', finish = null, usage = null, nchunks = 0;
for await (const chunk of stream) {
  check(chunk.object === 'chat.completion.chunk', 'chunk.object', chunk);
  nchunks++;
  if (chunk.usage) usage = chunk.usage;
  if (chunk.choices.length) {
    text += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
}
check(nchunks >= 3, 'chat stream chunks', nchunks);
check(text === chat.choices[0].message.content, 'chat stream text equals whole', { text, whole: chat.choices[0].message.content });
check(finish === chat.choices[0].finish_reason, 'chat stream finish_reason', finish);
checkUsage(usage, 'chat stream');
check(usage.completion_tokens === chat.usage.completion_tokens, 'chat stream usage equals whole', usage);
console.log('ok chat stream');

// Chat with logprobs.
const lp = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, logprobs: true,
                                                  top_logprobs: 2 });
const content = lp.choices[0].logprobs?.content;
check(Array.isArray(content) && content.length >= 1 && content.length <= 5, 'logprobs.content', lp.choices[0]);
for (const t of content) {
  check(typeof t.token === 'string' && typeof t.logprob === 'number' && Array.isArray(t.bytes), 'logprob entry', t);
  check(t.top_logprobs.length === 2, 'top_logprobs', t);
}
console.log('ok chat logprobs');

// Completions, whole and streamed.
const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
check(comp.object === 'text_completion', 'completion.object', comp.object);
check(typeof comp.choices[0].text === 'string' && comp.choices[0].text.length > 0, 'completion text', comp.choices);
check(comp.choices[0].finish_reason === 'length', 'completion finish_reason', comp.choices[0]);
checkUsage(comp.usage, 'completion');
check(comp.usage.completion_tokens === 20, 'completion tokens', comp.usage);
const cstream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0,
                                                  stream: true });
let ctext = '', cfinish = null;
for await (const chunk of cstream) {
  check(chunk.object === 'text_completion', 'completion chunk.object', chunk);
  ctext += chunk.choices[0]?.text ?? '';
  if (chunk.choices[0]?.finish_reason) cfinish = chunk.choices[0].finish_reason;
}
check(ctext === comp.choices[0].text, 'completion stream text equals whole', { ctext, whole: comp.choices[0].text });
check(cfinish === 'length', 'completion stream finish_reason', cfinish);
console.log('ok completions');

// Stop strings through the client.
const cut = comp.choices[0].text.slice(8, 11);
const stopped = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0, stop: [cut] });
check(stopped.choices[0].text === comp.choices[0].text.slice(0, comp.choices[0].text.indexOf(cut)), 'stop text', stopped.choices[0]);
check(stopped.choices[0].finish_reason === 'stop', 'stop finish_reason', stopped.choices[0]);
console.log('ok stop');

// Errors arrive as the client's typed errors.
async function expectError(fn, status, what) {
  try {
    await fn();
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status, `${what}: status`, { status: e.status, message: e.message });
    check(typeof e.error?.message === 'string' && e.error.message.length > 0, `${what}: error.message`, e.error);
    return;
  }
  check(false, `${what}: no error`);
}
await expectError(() => client.chat.completions.create({ model: 'no-such-model', messages }), 404, 'unknown model');
await expectError(() => client.chat.completions.create({ model, messages, n: 17 }), 400, 'n=17');
await expectError(() => client.chat.completions.create({ model, messages, temperature: 'hot' }), 400, 'bad temperature');
const bad = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
await expectError(() => bad.models.list(), 401, 'wrong key');
console.log('ok errors');
console.log('ALL OK');
