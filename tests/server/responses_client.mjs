// Drives `glia serve` (a model with a Hermes/Qwen chat template) through the Responses API
// with the official `openai` package: responses.create and retrieve, the raw event stream
// and the responses.stream helper (the same text as the whole reply), previous_response_id
// against the same conversation sent whole, store: false and delete, the input items
// (responses.inputItems.list, page by page), a function tool round trip (whole and streamed),
// text.format json_schema, and errors in OpenAI's shape naming the field.
// Usage: node responses_client.mjs BASE_URL MODEL API_KEY. Exits non-zero on the first failure.
import OpenAI from 'openai';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 120000 });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}

const instructions = 'You tell stories.';
const input = 'Tell me about a cat';
const base = { model, instructions, input, max_output_tokens: 16, temperature: 0 };

// Whole.
const whole = await client.responses.create(base);
check(whole.object === 'response' && typeof whole.id === 'string' && whole.id.startsWith('resp_'), 'response id/object', whole);
check(whole.model === model && whole.instructions === instructions && whole.max_output_tokens === 16, 'echoed settings', whole);
check(['completed', 'incomplete'].includes(whole.status), 'status', whole.status);
check(whole.status === 'completed' || whole.incomplete_details?.reason === 'max_output_tokens', 'incomplete_details', whole);
const msg = whole.output.find((o) => o.type === 'message');
check(msg && msg.role === 'assistant' && msg.content[0].type === 'output_text', 'message item', whole.output);
check(typeof whole.output_text === 'string' && whole.output_text.length > 0 && whole.output_text === msg.content[0].text,
      'output_text', whole);
const u = whole.usage;
check(u.input_tokens > 0 && u.output_tokens > 0 && u.output_tokens <= 16 && u.total_tokens === u.input_tokens + u.output_tokens,
      'usage', u);
const got = await client.responses.retrieve(whole.id);
check(got.id === whole.id && JSON.stringify(got.output) === JSON.stringify(whole.output) && got.usage.total_tokens === u.total_tokens,
      'retrieve', got);
console.log('ok responses.create / retrieve');

// The raw event stream: its order, and its text equals the whole reply's (greedy).
const raw = await client.responses.create({ ...base, stream: true });
const types = [];
let deltas = '', last = null, seq = -1;
for await (const ev of raw) {
  types.push(ev.type);
  check(ev.sequence_number === seq + 1, 'sequence_number', ev);
  seq = ev.sequence_number;
  if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  last = ev;
}
const head = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
              'response.output_text.delta'];
check(head.every((t, i) => types[i] === t), 'stream starts', types);
const tail = ['response.output_text.done', 'response.content_part.done', 'response.output_item.done'];
check(tail.every((t, i) => types.at(-4 + i) === t), 'stream ends', types);
check(last.type === (whole.status === 'completed' ? 'response.completed' : 'response.incomplete'), 'terminal event', last.type);
check(deltas === whole.output_text, 'streamed text equals whole', { deltas, whole: whole.output_text });
check(last.response.usage.output_tokens === u.output_tokens && last.response.output[0].content[0].text === deltas,
      'final response in the last event', last.response);
const helper = client.responses.stream(base);
let helperText = '';
helper.on('response.output_text.delta', (e) => { helperText += e.delta; });
const final = await helper.finalResponse();
// (the text of its message item: this package's stream helper sets no output_text)
check(final.output[0].content[0].text === whole.output_text && helperText === whole.output_text, 'responses.stream text',
      { final, helperText });
const keptStream = await client.responses.retrieve(last.response.id);
check(JSON.stringify(keptStream.output) === JSON.stringify(last.response.output), 'a streamed response is kept', keptStream);
console.log('ok responses.stream');

// previous_response_id continues the stored conversation: the same prompt as sending it whole.
const more = { model, instructions, max_output_tokens: 8, temperature: 0 };
const next = await client.responses.create({ ...more, previous_response_id: whole.id, input: 'More' });
check(next.previous_response_id === whole.id && next.usage.input_tokens > u.input_tokens, 'previous_response_id', next);
const sent = await client.responses.create({ ...more, input: [{ role: 'user', content: input }, ...whole.output,
                                                              { role: 'user', content: [{ type: 'input_text', text: 'More' }] }] });
check(sent.usage.input_tokens === next.usage.input_tokens && sent.output_text === next.output_text, 'the conversation sent whole',
      { sent: sent.usage, next: next.usage });
console.log('ok previous_response_id');

// Errors: the client's typed errors, in OpenAI's shape, naming the field.
async function expectError(fn, status, param, mention, what) {
  try {
    await fn();
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status, `${what}: status`, { status: e.status, message: e.message });
    if (param !== undefined) check(e.param === param, `${what}: param`, { param: e.param, error: e.error });
    check(e.message.includes(mention), `${what}: names ${mention}`, e.message);
    return;
  }
  check(false, `${what}: no error`);
}

// store: false is not kept.
const unkept = await client.responses.create({ ...base, store: false });
check(unkept.store === false && unkept.output_text === whole.output_text, 'store: false reply', unkept);
await expectError(() => client.responses.retrieve(unkept.id), 404, undefined, unkept.id, 'retrieve an unkept response');
await expectError(() => client.responses.create({ ...more, previous_response_id: unkept.id, input: 'More' }), 404,
                  'previous_response_id', 'previous_response_id', 'previous_response_id of an unkept response');
await client.responses.del(keptStream.id);
await expectError(() => client.responses.retrieve(keptStream.id), 404, undefined, keptStream.id, 'retrieve a deleted response');
console.log('ok store: false, delete');

// The input items: a response's own input (not its previous response's), newest first unless
// asked; the client's pages follow has_more and after.
const items = await client.responses.inputItems.list(whole.id);
check(items.data.length === 1 && items.has_more === false, 'input items of a string input', items.data);
const item0 = items.data[0];
check(item0.type === 'message' && item0.role === 'user' && typeof item0.id === 'string' && item0.content[0].type === 'input_text' &&
      item0.content[0].text === input, 'the input as a message item', item0);
const nextItems = await client.responses.inputItems.list(next.id);
check(nextItems.data.length === 1 && nextItems.data[0].content[0].text === 'More', 'only its own input items', nextItems.data);
const paged = [];
for await (const it of client.responses.inputItems.list(sent.id, { limit: 1, order: 'asc' })) paged.push(it);
check(paged.length === whole.output.length + 2 && paged[0].content[0].text === input && paged.at(-1).content[0].text === 'More' &&
      new Set(paged.map((i) => i.id)).size === paged.length, 'input items page by page', paged);
check(JSON.stringify(paged.slice(1, -1).map((i) => i.id)) === JSON.stringify(whole.output.map((o) => o.id)), 'given ids kept', paged);
const desc = await client.responses.inputItems.list(sent.id);
check(JSON.stringify(desc.data.map((i) => i.id)) === JSON.stringify(paged.map((i) => i.id).reverse()), 'newest first', desc.data);
await expectError(() => client.responses.inputItems.list(sent.id, { limit: 0 }), 400, 'limit', 'limit', 'input items limit 0');
await expectError(() => client.responses.inputItems.list(sent.id, { after: 'msg_none' }), 400, 'after', 'msg_none', 'input items after');
await expectError(() => client.responses.inputItems.list(keptStream.id), 404, undefined, keptStream.id, 'input items of a deleted response');
console.log('ok input items');

// A function tool: a forced call, then its output sent back (by previous_response_id and whole).
const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city.', strict: true,
                 parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'],
                               additionalProperties: false } }];
const ask = [{ role: 'user', content: 'What is the weather in Oslo?' }];
const call = await client.responses.create({ model, input: ask, tools, tool_choice: { type: 'function', name: 'get_weather' },
                                             max_output_tokens: 300, temperature: 0.7, seed: 5 });
const fc = call.output.find((o) => o.type === 'function_call');
check(call.status === 'completed' && fc && fc.name === 'get_weather' && typeof fc.call_id === 'string' && fc.call_id.length > 0,
      'function_call item', call.output);
const args = JSON.parse(fc.arguments);
check(typeof args.city === 'string' && args.city.length <= 12, 'function_call arguments', args);
check(call.tools[0].name === 'get_weather' && call.tool_choice.name === 'get_weather', 'tools echoed', call);
const result = { type: 'function_call_output', call_id: fc.call_id, output: '18 degrees' };
const answer = await client.responses.create({ model, tools, previous_response_id: call.id, input: [result],
                                               max_output_tokens: 16, temperature: 0 });
check(answer.output_text.length > 0 && answer.usage.input_tokens > call.usage.input_tokens, 'the output in the prompt',
      { answer: answer.usage, call: call.usage });
const answerWhole = await client.responses.create({ model, tools, input: [...ask, ...call.output, result], max_output_tokens: 16,
                                                    temperature: 0 });
check(answerWhole.usage.input_tokens === answer.usage.input_tokens && answerWhole.output_text === answer.output_text,
      'the tool round trip sent whole', { answerWhole: answerWhole.usage, answer: answer.usage });
console.log('ok function tool round trip');

const tstream = client.responses.stream({ model, input: ask, tools, tool_choice: 'required', max_output_tokens: 300,
                                          temperature: 0.7, seed: 5 });
const argDeltas = [];
let argsDone = null;
tstream.on('response.function_call_arguments.delta', (e) => argDeltas.push(e.delta));
tstream.on('response.function_call_arguments.done', (e) => { argsDone = e.arguments; });
const tfinal = await tstream.finalResponse();
const tfc = tfinal.output.find((o) => o.type === 'function_call');
check(tfc && tfc.name === 'get_weather' && typeof JSON.parse(tfc.arguments).city === 'string', 'streamed function_call', tfinal.output);
check(argDeltas.join('') === tfc.arguments && argsDone === tfc.arguments, 'function_call_arguments events', { argDeltas, argsDone });
console.log('ok function tool stream');

// text.format json_schema: every reply parses and fits the schema.
const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0 } },
                 required: ['name', 'age'], additionalProperties: false };
for (let i = 0; i < 5; ++i) {
  const r = await client.responses.create({ model, input: 'Describe a pet.', max_output_tokens: 200, temperature: 1, seed: i,
                                            text: { format: { type: 'json_schema', name: 'pet', schema, strict: true } } });
  check(r.status === 'completed' && r.text.format.type === 'json_schema', 'json_schema reply status', r);
  const v = JSON.parse(r.output_text);
  check(Object.keys(v).sort().join() === 'age,name' && typeof v.name === 'string' && v.name.length <= 10 &&
        Number.isInteger(v.age) && v.age >= 0, 'json_schema reply fits', v);
}
console.log('ok text.format');

await expectError(() => client.responses.create({ model, input: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' },
                                                                 { role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }),
                  400, 'input[2].content[0].type', 'input[2].content[0].type', 'an image part');
await expectError(() => client.responses.create({ model, input, tools: [{ type: 'web_search_preview' }] }), 400, 'tools[0].type',
                  'tools[0].type', 'a hosted tool');
await expectError(() => client.responses.create({ model, input, temperature: 3 }), 400, 'temperature', 'temperature', 'temperature');
await expectError(() => client.responses.create({ model, input, max_output_tokens: 100000 }), 400, 'max_output_tokens',
                  'max_output_tokens', 'max_output_tokens over the limit');
await expectError(() => client.responses.create({ model: 'no-such-model', input }), 404, undefined, 'no-such-model', 'unknown model');
await expectError(() => client.responses.create({ model, input, previous_response_id: 'resp_none' }), 404, 'previous_response_id',
                  'resp_none', 'unknown previous_response_id');
const wrong = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'wrong-key', maxRetries: 0 });
await expectError(() => wrong.responses.create({ model, input }), 401, undefined, 'API key', 'wrong key');
console.log('ok errors');
console.log('ALL OK');
