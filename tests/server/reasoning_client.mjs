// Reasoning output, driven by the official `openai` and `@anthropic-ai/sdk` packages against
// `glia serve` on a model whose chat template opens a thought in its generation prompt
// (<think>, unless enable_thinking is false): reasoning_content whole and streamed,
// reasoning_format none / raw, chat_template_kwargs, and Anthropic thinking blocks.
// Usage: node reasoning_client.mjs BASE_URL MODEL API_KEY. Exits non-zero on the first failure.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, model, apiKey] = process.argv.slice(2);
const openai = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 120000 });
const anthropic = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}

const messages = [{ role: 'user', content: 'Tell me about a cat' }];
const base = { model, messages, max_tokens: 24, temperature: 0 };

// The reply as generated (no split): the thought, then maybe '</think>' and an answer.
const none = await openai.chat.completions.create({ ...base, reasoning_format: 'none' });
const rawText = none.choices[0].message.content;
check(typeof rawText === 'string' && rawText.length > 0 && none.choices[0].message.reasoning_content === undefined,
      'reasoning_format none: all in content', none.choices[0].message);
const closeAt = rawText.indexOf('</think>');
const wantThought = (closeAt < 0 ? rawText : rawText.slice(0, closeAt)).trim();
const wantContent = closeAt < 0 ? '' : rawText.slice(closeAt + 8).trimStart();

// auto (the default): the thought apart.
const auto = await openai.chat.completions.create(base);
const msg = auto.choices[0].message;
check(msg.reasoning_content === wantThought && wantThought.length > 0, 'reasoning_content', { msg, rawText });
check(msg.content === wantContent, 'content without the thought', { msg, rawText });
check(auto.usage.completion_tokens === none.usage.completion_tokens, 'same tokens', { auto: auto.usage, none: none.usage });
console.log('ok reasoning_content');

// Streamed: the thought in reasoning_content deltas of its own, equal to the whole one.
const stream = await openai.chat.completions.create({ ...base, stream: true });
let thought = '', content = '', thoughtChunks = 0;
for await (const chunk of stream) {
  const d = chunk.choices[0]?.delta;
  if (!d) continue;
  if (typeof d.reasoning_content === 'string') {
    thought += d.reasoning_content;
    thoughtChunks++;
  }
  content += d.content ?? '';
}
check(thought === wantThought && content === wantContent, 'streamed reasoning equals whole', { thought, content, wantThought });
check(thoughtChunks >= 1, 'reasoning deltas', thoughtChunks);
console.log('ok reasoning stream');

// raw: the thought in reasoning_content, and the reply whole (with the prompt's <think>) in content.
const raw = await openai.chat.completions.create({ ...base, reasoning_format: 'raw' });
check(raw.choices[0].message.content === '<think>' + rawText && raw.choices[0].message.reasoning_content === wantThought,
      'reasoning_format raw', raw.choices[0].message);
console.log('ok reasoning_format raw');

// enable_thinking false through chat_template_kwargs: the template closes the thought, all is content.
const off = await openai.chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: false } });
check(off.choices[0].message.reasoning_content === undefined && off.choices[0].message.content.length > 0,
      'enable_thinking false: no reasoning', off.choices[0].message);
check(off.usage.prompt_tokens > auto.usage.prompt_tokens, 'the closed thought is in the prompt', { off: off.usage, auto: auto.usage });
console.log('ok chat_template_kwargs');

// Errors name the field.
for (const [bad, field] of [[{ reasoning_format: 'loud' }, 'reasoning_format'], [{ chat_template_kwargs: 'x' }, 'chat_template_kwargs'],
                            [{ chat_template_kwargs: { messages: [] } }, 'chat_template_kwargs.messages']]) {
  let err = null;
  try { await openai.chat.completions.create({ ...base, ...bad }); } catch (e) { err = e; }
  check(err && err.status === 400 && err.error?.param === field && err.error.message.includes(field), `400 naming ${field}`,
        err && { status: err.status, error: err.error });
}
console.log('ok reasoning errors');

// Anthropic: thinking blocks, whole and streamed.
const am = await anthropic.messages.create({ model, messages, max_tokens: 24, temperature: 0, thinking: { type: 'enabled', budget_tokens: 1024 } });
check(am.content[0]?.type === 'thinking' && am.content[0].thinking === wantThought, 'thinking block', am.content);
check(am.content.filter((b) => b.type === 'text').map((b) => b.text).join('') === wantContent, 'text after thinking', am.content);
const as = anthropic.messages.stream({ model, messages, max_tokens: 24, temperature: 0 });
let thinkingDeltas = '';
as.on('thinking', (d) => { thinkingDeltas += d; });
const af = await as.finalMessage();
check(af.content[0]?.type === 'thinking' && af.content[0].thinking === wantThought && thinkingDeltas === wantThought,
      'streamed thinking', { content: af.content, thinkingDeltas });
const aoff = await anthropic.messages.create({ model, messages, max_tokens: 24, temperature: 0, thinking: { type: 'disabled' } });
check(aoff.content.every((b) => b.type !== 'thinking') && aoff.content[0]?.type === 'text', 'thinking disabled', aoff.content);
console.log('ok anthropic thinking');
console.log('ALL OK');
