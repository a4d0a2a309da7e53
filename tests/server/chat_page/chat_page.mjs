// The chat page (GET /) in a real browser: Debian's chromium, headless, driven by
// playwright-core. Run by tests/server/test_chat_page.cpp against `glia serve` started
// with --api-key (and a model file with a chat template), and a second one started with
// --template FILE and no key:
//   node chat_page.mjs BASE_URL API_KEY SCREENSHOT.png MODEL_ID MAX_TOKENS TEMPLATE_URL TEMPLATE_FILE
// $GLIA_CHROMIUM names the browser (default /usr/bin/chromium). Prints one line per
// check and "ALL OK" when every check passed (exit 0), else exits 1. Besides SCREENSHOT.png
// (desktop) it writes SCREENSHOT-phone.png and SCREENSHOT-phone-settings.png (390 x 844).
import { chromium } from 'playwright-core';
import { markdownChecks, phone, streamedFromTheTest, templateFromFile } from './page_checks.mjs';

const [base, apiKey, shot, modelId, maxTokensArg, templateUrl, templateFile] = process.argv.slice(2);
if (!base || !apiKey || !shot || !modelId || !maxTokensArg || !templateUrl || !templateFile) {
  console.error('usage: node chat_page.mjs BASE_URL API_KEY SCREENSHOT.png MODEL_ID MAX_TOKENS TEMPLATE_URL TEMPLATE_FILE');
  process.exit(2);
}
const maxTokens = Number(maxTokensArg);
const exe = process.env.GLIA_CHROMIUM || '/usr/bin/chromium';
const t0 = Date.now();
const watchdog = setTimeout(() => {
  console.error('FAIL: the browser test took over 240 s');
  process.exit(1);
}, 240000);

let failures = 0;
function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) ++failures;
}
const step = (name) => console.log(`== ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
// What the checks in page_checks.mjs need.
const env = { base, apiKey, shot, modelId, templateUrl, templateFile, exe, check, step };

async function metric(name) {
  const text = await (await fetch(base + '/metrics')).text();
  const m = text.match(new RegExp('^' + name + ' (\\S+)$', 'm'));
  return m ? Number(m[1]) : NaN;
}
async function until(what, fn, ms) {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return true;
    if (Date.now() > end) {
      console.log('     (gave up waiting for ' + what + ')');
      return false;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const browser = await chromium.launch({ executablePath: exe, headless: true });
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  page.setDefaultTimeout(20000);
  const pageErrors = [];
  const consoleErrors = [];
  const foreign = [];
  const chatRequests = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base + '/') && !u.startsWith('data:')) foreign.push(u);
    if (u.endsWith('/v1/chat/completions')) chatRequests.push({ body: r.postDataJSON(), headers: r.headers() });
  });

  step('the page and the API key');
  const res = await page.goto(base + '/');
  check(res.status() === 200, 'GET / answers 200');
  const csp = res.headers()['content-security-policy'] || '';
  check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'") && csp.includes("connect-src 'self'"),
    'the page comes with a Content-Security-Policy: ' + csp);
  await page.waitForSelector('#key-dialog[open]');
  check(true, 'the 401 from /v1/models opens the API key dialog');
  await page.fill('#key-input', 'not-the-key');
  await page.click('#key-ok');
  check(await page.waitForFunction(() => document.querySelector('#key-dialog').open &&
    /invalid API key/.test(document.querySelector('#key-error').textContent)).then(() => true, () => false),
  'a wrong key is refused with the server\'s message');
  await page.fill('#key-input', apiKey);
  await page.click('#key-ok');
  check(await page.waitForFunction((id) => document.querySelector('#model-props').textContent.includes(id) &&
    !document.querySelector('#key-dialog').open, modelId).then(() => true, () => false),
  'with the key, the model\'s properties show: ' + (await page.textContent('#model-props')).replace(/\s+/g, ' '));
  const propsText = await page.textContent('#model-props');
  check(/architecture\s*llama/.test(propsText) && /context/.test(propsText), 'the properties come from /props');
  check(/template\s*from the model file/.test(propsText), 'the template is the model file\'s own: ' + propsText.replace(/\s+/g, ' '));

  step('a streamed reply');
  await page.click('#settings-toggle');
  await page.fill('#set-max-tokens', '40');
  await page.fill('#set-temperature', '0');
  await page.fill('#set-system', 'You tell short stories.');
  await page.click('#settings-close');
  await page.fill('#input', 'Once upon a time');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.msg.assistant[data-done="1"]');
  const reply = await page.textContent('.msg.assistant .body');
  check(reply.trim().length > 0, 'a reply appeared: ' + JSON.stringify(reply.slice(0, 80)));
  const stats = await page.textContent('.msg.assistant .stats');
  check(/\d+ tokens/.test(stats) && /tok\/s/.test(stats), 'the reply shows its token count and speed: ' + stats);
  check((await page.textContent('.msg.user .body')) === 'Once upon a time', 'the user\'s message is shown');
  const req = chatRequests[0] || { body: {}, headers: {} };
  check(req.body.stream === true && req.body.max_tokens === 40 && req.body.temperature === 0,
    'the request streams with the settings: ' + JSON.stringify(req.body));
  check(req.body.messages && req.body.messages[0].role === 'system' && req.body.messages[0].content === 'You tell short stories.',
    'the system prompt is the first message');
  check(req.headers.authorization === 'Bearer ' + apiKey, 'the request carries the API key');
  check((await page.textContent('#model-props')).includes('tok/s'), 'the sidebar shows the last reply\'s speed');

  step('Markdown: a stored conversation');
  const code = '#include <cstdio>\n\nint main() {\n    std::puts("<b>not bold</b>");\n    return 0;\n}';
  const md = 'Here is a **complete** program; it prints a line with `std::puts`:\n\n```cpp\n' + code +
    '\n```\n\n### How it works\n\n1. `#include <cstdio>` declares `std::puts`.\n2. `main` returns *zero*: success.\n\n' +
    '| flag | meaning |\n|---|---|\n| `-O2` | optimise |\n\n' +
    'See [cppreference](https://en.cppreference.com/w/cpp/io/c/puts). ' +
    '<img src=x onerror="window.__xss=1"> [bad](javascript:window.__xss=2)';
  await page.evaluate(({ md }) => {
    const convs = JSON.parse(localStorage.getItem('glia.chat.conversations'));
    convs.unshift({
      id: 'injected', title: 'Hello world in C++', created: Date.now(), messages: [
        { role: 'user', content: 'Write hello world in C++. <script>window.__xss=3</script>' },
        { role: 'assistant', content: md, stats: { tokens: 87, tps: 412.5, ttft_ms: 9 }, finish: 'stop' },
      ],
    });
    localStorage.setItem('glia.chat.conversations', JSON.stringify(convs));
  }, { md });
  await page.reload();
  await page.waitForSelector('.msg.assistant .code');
  check(!(await page.evaluate(() => document.querySelector('#key-dialog').open)), 'after a reload the key is remembered');
  check((await page.locator('#conversations li').count()) === 2, 'both conversations are kept in localStorage');
  check((await page.textContent('.msg.assistant pre code')) === code, 'the fenced code block shows the code as is');
  check((await page.getAttribute('.msg.assistant pre code', 'class')) === 'language-cpp' &&
    (await page.textContent('.msg.assistant .code .lang')) === 'cpp', 'the code block names its language');
  check((await page.textContent('.msg.assistant strong')) === 'complete', 'bold text is rendered');
  check((await page.locator('.msg.assistant h3').count()) === 1 && (await page.locator('.msg.assistant ol > li').count()) === 2,
    'the heading and the numbered list are rendered');
  check((await page.locator('.msg.assistant table td').count()) === 2, 'the table is rendered');
  check((await page.getAttribute('.msg.assistant a', 'href')) === 'https://en.cppreference.com/w/cpp/io/c/puts' &&
    (await page.locator('.msg.assistant a').count()) === 1, 'the http link is a link; the javascript: one is not');
  check((await page.locator('#messages img, #messages script').count()) === 0 &&
    (await page.evaluate(() => window.__xss)) === undefined, 'HTML in the messages stays text (no element, no script ran)');
  check((await page.textContent('.msg.user .body')).includes('<script>'), 'the user\'s HTML is shown as text');
  const unit = await page.evaluate(() => [
    window.gliaChat.render('```js\nlet a = 1 < 2;'),
    window.gliaChat.render('a <b>b</b> & "c"'),
    window.gliaChat.render('- x\n  - y'),
  ]);
  check(unit[0].includes('class="code open"') && unit[0].includes('let a = 1 &lt; 2;'), 'an unclosed fence (mid-stream) renders as code');
  check(unit[1] === '<p>a &lt;b&gt;b&lt;/b&gt; &amp; &quot;c&quot;</p>', 'the renderer escapes HTML: ' + unit[1]);
  check(/<ul[^>]*><li><p>x<\/p><ul[^>]*><li><p>y<\/p><\/li><\/ul><\/li><\/ul>/.test(unit[2]), 'nested lists: ' + unit[2]);
  await markdownChecks(env, page);

  step('a long follow-up in that conversation: screenshot mid-stream, then Stop');
  await page.click('#settings-toggle');
  await page.fill('#set-max-tokens', String(maxTokens));
  await page.fill('#set-temperature', '1');
  await page.fill('#set-extra', '{"ignore_eos": true}');
  await page.click('#settings-close');
  const disconnects0 = await metric('glia_client_disconnects_total');
  const cancelled0 = await metric('glia_requests_cancelled_total');
  const generated0 = await metric('glia_generated_tokens_total');
  await page.fill('#input', 'Thanks! Now tell me a long story about a cat.');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => {
    const a = document.querySelectorAll('.msg.assistant');
    return a.length === 2 && (a[1].querySelector('.body').textContent.length > 60 || a[1].dataset.done === '1');
  });
  const early = await page.locator('.msg.assistant >> nth=1').getAttribute('data-done');
  check(early === '0', 'the long reply streams' + (early === '0' ? '' : ' (it ended: ' +
    (await page.locator('.msg.assistant >> nth=1').textContent()) + ')'));
  // The screenshot first (the reply grows fast), from the top: the code block and the reply's start.
  await page.evaluate(() => { document.querySelector('#messages').scrollTop = 0; });
  await page.screenshot({ path: shot });
  console.log('     screenshot: ' + shot);
  check(await page.isVisible('#stop') && !(await page.isVisible('#send')), 'while a reply streams, Stop replaces Send');
  check(/tokens, [\d.]+ tok\/s/.test(await page.textContent('#status')), 'the status line shows the live speed: ' +
    (await page.textContent('#status')));
  await page.click('#stop');
  const last = '.msg.assistant >> nth=1';
  await page.waitForSelector('.msg.assistant[data-done="1"] >> nth=1');
  check(chatRequests.length === 2 && chatRequests[1].body.messages.length === 4 && chatRequests[1].body.ignore_eos === true,
    'the follow-up sends the conversation so far (system, user, assistant, user) and the extra fields');
  const stopStats = await page.locator(last).locator('.stats').textContent();
  check(/stopped/.test(stopStats), 'the reply is marked stopped: ' + stopStats);
  const len1 = (await page.locator(last).locator('.body').textContent()).length;
  await page.waitForTimeout(400);
  const len2 = (await page.locator(last).locator('.body').textContent()).length;
  check(len1 === len2 && len1 > 0, 'the reply stops growing (' + len1 + ' characters)');
  const gone = await until('the server to count the cancellation', async () =>
    (await metric('glia_client_disconnects_total')) >= disconnects0 + 1 &&
    (await metric('glia_requests_cancelled_total')) >= cancelled0 + 1 &&
    (await metric('glia_requests_running')) === 0, 10000);
  const generated = (await metric('glia_generated_tokens_total')) - generated0;
  check(gone, 'the server cancelled the request (glia_client_disconnects_total, glia_requests_cancelled_total)');
  check(generated < maxTokens, 'the server generated ' + generated + ' of the ' + maxTokens + ' tokens asked for');
  check(await page.isVisible('#send'), 'Send is back');

  step('delete a conversation, start a new one');
  await page.click('#conversations li[data-id="injected"] .conv-delete');
  check((await page.locator('#conversations li').count()) === 1 &&
    !(await page.evaluate(() => localStorage.getItem('glia.chat.conversations').includes('"injected"'))),
  'the conversation is gone from the list and from localStorage');
  await page.click('#new-chat');
  check((await page.locator('.msg').count()) === 0 && (await page.textContent('#conv-title')) === 'New chat',
    'New chat starts an empty conversation');

  await templateFromFile(env, browser);
  await streamedFromTheTest(env, browser);
  await phone(env, browser);

  step('the page itself');
  check(foreign.length === 0, 'nothing was fetched from outside the server' + (foreign.length ? ': ' + foreign.join(' ') : ''));
  check(pageErrors.length === 0, 'no script errors' + (pageErrors.length ? ': ' + pageErrors.join(' | ') : ''));
  // The browser logs each 401 as a failed load; anything else (a CSP refusal, say) is a failure.
  const unexpected = consoleErrors.filter((t) => !/status of 401/.test(t));
  check(unexpected.length === 0, 'no console errors but the expected 401s' + (unexpected.length ? ': ' + unexpected.join(' | ') : ''));
} catch (e) {
  check(false, 'the test stopped: ' + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
  clearTimeout(watchdog);
}
console.log(`${failures ? failures + ' FAILED' : 'ALL OK'} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
process.exit(failures ? 1 : 0);
