// Reasoning items of the Responses API, driven by the official `openai` package against
// `glia serve` on a model whose chat template opens a thought in its generation prompt:
// the thought as a reasoning item (the same as the chat route's reasoning_content), whole
// and streamed (reasoning_text events), kept for previous_response_id, and reasoning.effort
// "none" turning the template's thinking off.
// Usage: node responses_reasoning.mjs BASE_URL MODEL API_KEY. Exits non-zero on the first failure.
import OpenAI from 'openai';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 120000 });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}
const input = 'Tell me about a cat';
const chat = await client.chat.completions.create({ model, messages: [{ role: 'user', content: input }], max_tokens: 24, temperature: 0 });
const want = chat.choices[0].message;
check(typeof want.reasoning_content === 'string' && want.reasoning_content.length > 0, 'the chat route splits a thought', want);

const whole = await client.responses.create({ model, input, max_output_tokens: 24, temperature: 0 });
const rs = whole.output[0];
check(rs.type === 'reasoning' && rs.content[0].type === 'reasoning_text' && rs.content[0].text === want.reasoning_content,
      'reasoning item', whole.output);
check(whole.output_text === (want.content ?? ''), 'the answer after the thought', { whole: whole.output_text, want });
check(whole.usage.output_tokens === chat.usage.completion_tokens, 'usage', whole.usage);
console.log('ok reasoning item');

const stream = client.responses.stream({ model, input, max_output_tokens: 24, temperature: 0 });
let thought = '', done = null, last = null;
stream.on('event', (e) => {
  if (e.type === 'response.reasoning_text.delta') thought += e.delta;
  if (e.type === 'response.reasoning_text.done') done = e.text;
  last = e;
});
await stream.done();
check(thought === want.reasoning_content && done === thought, 'reasoning_text events', { thought, done });
// (the last event's response: this package's stream helper does not gather reasoning_text deltas)
const final = last.response;
check(['response.completed', 'response.incomplete'].includes(last.type) && final.output[0].type === 'reasoning' &&
      final.output[0].content[0].text === thought, 'streamed reasoning item', final.output);
console.log('ok reasoning stream');

// The thought stays in the kept conversation: the same prompt as the items sent whole.
const next = await client.responses.create({ model, previous_response_id: whole.id, input: 'More', max_output_tokens: 4, temperature: 0 });
const sent = await client.responses.create({ model, input: [{ role: 'user', content: input }, ...whole.output, { role: 'user', content: 'More' }],
                                             max_output_tokens: 4, temperature: 0 });
check(next.usage.input_tokens === sent.usage.input_tokens && next.usage.input_tokens > whole.usage.input_tokens,
      'previous_response_id with a thought', { next: next.usage, sent: sent.usage });
console.log('ok reasoning kept');

const off = await client.responses.create({ model, input, max_output_tokens: 24, temperature: 0, reasoning: { effort: 'none' } });
check(off.output.every((o) => o.type !== 'reasoning') && off.output_text.length > 0, 'effort none: no reasoning item', off.output);
check(off.reasoning.effort === 'none' && off.usage.input_tokens > whole.usage.input_tokens, 'the closed thought is in the prompt',
      { off: off.usage, whole: whole.usage });
console.log('ok reasoning effort none');
console.log('ALL OK');
