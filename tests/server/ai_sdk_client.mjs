// Drives `glia serve` (a model with a Hermes/Qwen chat template) with the AI SDK (`ai` and
// `@ai-sdk/openai`, whose OpenAI provider talks the Responses API): generateText and
// streamText (the same text), a two-step tool run (the second step sends the first one's
// items back by item_reference, with the tool's output), and generateObject (text.format
// json_schema).
// Usage: node ai_sdk_client.mjs BASE_URL MODEL API_KEY. Exits non-zero on the first failure.
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';

const [baseURL, model, apiKey] = process.argv.slice(2);
const bodies = [];  // what the provider sent to /v1/responses
const provider = createOpenAI({ baseURL: baseURL + '/v1', apiKey, fetch: async (url, init) => {
  if (String(url).endsWith('/responses') && typeof init?.body === 'string') bodies.push(JSON.parse(init.body));
  return fetch(url, init);
} });
const llm = provider.responses(model);

function check(cond, what, detail) {
  if (!cond) {
    console.error(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
    process.exit(1);
  }
}
const base = { model: llm, system: 'You tell stories.', prompt: 'Tell me about a cat', maxOutputTokens: 16, temperature: 0, maxRetries: 0 };

const whole = await generateText(base);
check(whole.text.length > 0 && whole.response.id.startsWith('resp_'), 'generateText', { text: whole.text, id: whole.response.id });
check(['stop', 'length'].includes(whole.finishReason), 'finishReason', whole.finishReason);
check(whole.usage.inputTokens > 0 && whole.usage.outputTokens > 0 && whole.usage.outputTokens <= 16, 'usage', whole.usage);
console.log('ok generateText');

const streamed = streamText(base);
let text = '';
for await (const t of streamed.textStream) text += t;
check(text === whole.text, 'streamText equals generateText', { text, whole: whole.text });
check((await streamed.usage).outputTokens === whole.usage.outputTokens, 'streamed usage', await streamed.usage);
console.log('ok streamText');

let executed = null;
const weather = tool({
  description: 'The weather in a city.',
  inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'],
                            additionalProperties: false }),
  execute: async ({ city }) => { executed = city; return { city, degrees: 18 }; },
});
const run = await generateText({
  model: llm, prompt: 'What is the weather in Oslo?', tools: { get_weather: weather }, maxOutputTokens: 300, temperature: 0.7,
  maxRetries: 0, stopWhen: stepCountIs(2),
  prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? { type: 'tool', toolName: 'get_weather' } : 'none' }),
});
check(run.steps.length === 2, 'two steps', run.steps.map((s) => s.finishReason));
const call = run.steps[0].toolCalls[0];
check(call && call.toolName === 'get_weather' && typeof call.input.city === 'string' && executed === call.input.city, 'tool call',
      run.steps[0].toolCalls);
const second = bodies.at(-1).input;
const output = second.find((i) => i.type === 'function_call_output');
check(output && output.call_id === call.toolCallId && JSON.parse(output.output).degrees === 18, 'the tool output sent back', second);
check(second.some((i) => i.type === 'item_reference' || i.type === 'function_call'), 'the call sent back', second);
check(run.steps[1].finishReason !== 'error' && run.steps[1].usage.inputTokens > 0, 'the second step ran', run.steps[1]);
console.log(`ok tool steps (the second sent ${second.map((i) => i.type ?? i.role).join(', ')})`);

const pet = await generateObject({
  model: llm, prompt: 'Describe a pet.', maxOutputTokens: 200, temperature: 1, maxRetries: 0, schemaName: 'pet',
  schema: jsonSchema({ type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0 } },
                       required: ['name', 'age'], additionalProperties: false }),
});
check(typeof pet.object.name === 'string' && pet.object.name.length <= 10 && Number.isInteger(pet.object.age), 'generateObject',
      pet.object);
console.log('ok generateObject');
console.log('ALL OK');
