// Drives `glia serve` (a model with a Hermes/Qwen chat template) with the official
// `@anthropic-ai/sdk` package: Messages whole and streamed (the event sequence, the same
// text as the whole reply), count_tokens, stop_sequences, a tool-use round trip (whole and
// streamed), the key as x-api-key and as a bearer token, and errors in Anthropic's shape.
// Usage: node anthropic_client.mjs BASE_URL MODEL API_KEY. Exits non-zero on the first failure.
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

const system = 'You tell stories.';
const messages = [{ role: 'user', content: 'Tell me about a cat' }];

// Whole.
const whole = await client.messages.create({ model, system, messages, max_tokens: 16, temperature: 0 });
check(whole.type === 'message' && whole.role === 'assistant', 'message type/role', whole);
check(typeof whole.id === 'string' && whole.id.startsWith('msg_'), 'message id', whole.id);
check(whole.model === model, 'message model', whole.model);
check(whole.content.length === 1 && whole.content[0].type === 'text' && whole.content[0].text.length > 0, 'text block', whole.content);
check(['end_turn', 'max_tokens'].includes(whole.stop_reason) && whole.stop_sequence === null, 'stop_reason', whole);
check(Number.isInteger(whole.usage.input_tokens) && whole.usage.input_tokens > 0, 'usage.input_tokens', whole.usage);
check(whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 16, 'usage.output_tokens', whole.usage);
console.log('ok messages.create');

// count_tokens: the prompt the reply was made from; a system given as text blocks is the same.
const counted = await client.messages.countTokens({ model, system, messages });
check(counted.input_tokens === whole.usage.input_tokens, 'count_tokens equals usage.input_tokens', { counted, usage: whole.usage });
const blocks = await client.messages.countTokens({ model, system: [{ type: 'text', text: system }], messages });
check(blocks.input_tokens === counted.input_tokens, 'system as blocks', { blocks, counted });
const longer = await client.messages.countTokens({ model, system, messages: [...messages, { role: 'assistant', content: 'A cat' },
                                                                              { role: 'user', content: 'More' }] });
check(longer.input_tokens > counted.input_tokens, 'count_tokens grows with the conversation', { longer, counted });
console.log('ok count_tokens');

// Streamed: the raw event sequence, and the helper's final message equals the whole one (greedy).
const raw = await client.messages.create({ model, system, messages, max_tokens: 16, temperature: 0, stream: true });
const types = [];
let startUsage = null, deltaText = '';
for await (const ev of raw) {
  types.push(ev.type);
  if (ev.type === 'message_start') startUsage = ev.message.usage;
  if (ev.type === 'content_block_delta') {
    check(ev.index === 0 && ev.delta.type === 'text_delta', 'text delta', ev);
    deltaText += ev.delta.text;
  }
}
check(types[0] === 'message_start' && types[1] === 'content_block_start', 'stream starts', types);
check(types.at(-1) === 'message_stop' && types.at(-2) === 'message_delta' && types.at(-3) === 'content_block_stop',
      'stream ends', types);
check(types.filter((t) => t === 'content_block_delta').length >= 1, 'text deltas', types);
check(startUsage.input_tokens === whole.usage.input_tokens, 'message_start usage', startUsage);
check(deltaText === textOf(whole), 'streamed text equals whole', { deltaText, whole: textOf(whole) });
const helper = client.messages.stream({ model, system, messages, max_tokens: 16, temperature: 0 });
let helperText = '';
helper.on('text', (t) => { helperText += t; });
const final = await helper.finalMessage();
check(textOf(final) === textOf(whole) && helperText === textOf(whole), 'stream helper text', { final, helperText });
check(final.stop_reason === whole.stop_reason && final.usage.output_tokens === whole.usage.output_tokens,
      'stream helper stop_reason and usage', final);
console.log('ok messages.stream');

// stop_sequences: the reply ends before the sequence, which is named.
const wtext = textOf(whole);
const cut = wtext.slice(6, 9);
const stopped = await client.messages.create({ model, system, messages, max_tokens: 16, temperature: 0, stop_sequences: [cut, 'zzzz'] });
check(stopped.stop_reason === 'stop_sequence' && stopped.stop_sequence === cut, 'stop_sequence', stopped);
check(textOf(stopped) === wtext.slice(0, wtext.indexOf(cut)), 'stopped text', { stopped: textOf(stopped), wtext, cut });
const sstream = client.messages.stream({ model, system, messages, max_tokens: 16, temperature: 0, stop_sequences: [cut] });
const sfinal = await sstream.finalMessage();
check(sfinal.stop_reason === 'stop_sequence' && sfinal.stop_sequence === cut && textOf(sfinal) === textOf(stopped),
      'streamed stop_sequence', sfinal);
console.log('ok stop_sequences');

// Tool use: a forced call, then its result sent back.
const tools = [{ name: 'get_weather', description: 'The weather in a city.',
                 input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'],
                                 additionalProperties: false } }];
const ask = [{ role: 'user', content: 'What is the weather in Oslo?' }];
const call = await client.messages.create({ model, messages: ask, tools, tool_choice: { type: 'tool', name: 'get_weather' },
                                            max_tokens: 300, temperature: 0.7 });
check(call.stop_reason === 'tool_use', 'tool_use stop_reason', call);
const use = call.content.find((b) => b.type === 'tool_use');
check(use && use.name === 'get_weather' && typeof use.id === 'string' && use.id.length > 0, 'tool_use block', call.content);
check(typeof use.input.city === 'string' && use.input.city.length <= 12, 'tool_use input', use.input);
const answer = await client.messages.create({
  model, tools, max_tokens: 16, temperature: 0,
  messages: [...ask, { role: 'assistant', content: call.content },
             { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18 degrees' }] }],
});
check(answer.type === 'message' && answer.usage.input_tokens > call.usage.input_tokens, 'tool result in the prompt',
      { answer: answer.usage, call: call.usage });
const resultCount = await client.messages.countTokens({
  model, tools, messages: [...ask, { role: 'assistant', content: call.content },
                           { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: [{ type: 'text', text: '18 degrees' }] }] }],
});
check(resultCount.input_tokens === answer.usage.input_tokens, 'tool_result content as blocks', { resultCount, answer: answer.usage });
console.log('ok tool use round trip');

const tstream = client.messages.stream({ model, messages: ask, tools, tool_choice: { type: 'any' }, max_tokens: 300, temperature: 0.7 });
const tevents = [];
tstream.on('streamEvent', (e) => tevents.push(e));
const tfinal = await tstream.finalMessage();
const tuse = tfinal.content.find((b) => b.type === 'tool_use');
check(tfinal.stop_reason === 'tool_use' && tuse && tuse.name === 'get_weather' && typeof tuse.input.city === 'string',
      'streamed tool_use', tfinal);
check(tevents.some((e) => e.type === 'content_block_delta' && e.delta.type === 'input_json_delta'), 'input_json_delta', tevents);
console.log('ok tool use stream');

// The key: x-api-key (the client's default) above; a bearer token works too; a wrong key is refused.
const bearer = new Anthropic({ baseURL, authToken: apiKey, maxRetries: 0 });
const viaBearer = await bearer.messages.countTokens({ model, messages });
check(viaBearer.input_tokens > 0, 'bearer token', viaBearer);

// Errors: the client's typed errors, in Anthropic's shape, naming the field.
async function expectError(fn, status, type, mention, what) {
  try {
    await fn();
  } catch (e) {
    check(e instanceof Anthropic.APIError && e.status === status, `${what}: status`, { status: e.status, message: e.message });
    check(e.error?.type === 'error' && e.error?.error?.type === type, `${what}: error type`, e.error);
    check(e.error.error.message.includes(mention), `${what}: names ${mention}`, e.error.error.message);
    return;
  }
  check(false, `${what}: no error`);
}
await expectError(() => client.messages.create({ model, messages }), 400, 'invalid_request_error', 'max_tokens', 'no max_tokens');
await expectError(() => client.messages.create({ model, messages: [{ role: 'robot', content: 'hi' }], max_tokens: 8 }), 400,
                  'invalid_request_error', 'messages[0].role', 'bad role');
await expectError(() => client.messages.create({ model, messages, max_tokens: 8, temperature: 1.5 }), 400,
                  'invalid_request_error', 'temperature', 'temperature out of range');
await expectError(() => client.messages.create({ model, max_tokens: 8,
                                                 messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }),
                  400, 'invalid_request_error', 'messages[0].content[0].type', 'image block');
await expectError(() => client.messages.create({ model: 'no-such-model', messages, max_tokens: 8 }), 404, 'not_found_error',
                  'no-such-model', 'unknown model');
await expectError(() => client.messages.create({ model, messages, max_tokens: 100000 }), 400, 'invalid_request_error',
                  'max_tokens', 'max_tokens over the limit');
const wrong = new Anthropic({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
await expectError(() => wrong.messages.create({ model, messages, max_tokens: 8 }), 401, 'authentication_error', 'API key', 'wrong key');
console.log('ok errors');
console.log('ALL OK');
