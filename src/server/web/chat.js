// The chat page of `glia serve` (GET /). Plain JavaScript, no framework, nothing fetched
// from anywhere but this server (the page's Content-Security-Policy says so too).
//
// - Conversations live in localStorage ("glia.chat.conversations"), newest first; the
//   settings and the API key too ("glia.chat.settings", "glia.chat.apiKey").
// - A reply streams from POST /v1/chat/completions (Server-Sent Events); Stop aborts the
//   fetch, which closes the connection: the server notices and cancels the request.
// - A 401 from any /v1 route opens the API key dialog, then the request is sent again.
// - Model text goes into the page only through GliaMarkdown.render (markdown.js), which
//   escapes it; user text only through textContent.
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);
  const STORE = 'glia.chat.conversations';
  const SETTINGS = 'glia.chat.settings';
  const KEY = 'glia.chat.apiKey';

  function load(name, fallback) {
    try {
      const v = JSON.parse(localStorage.getItem(name));
      return v == null ? fallback : v;
    } catch (e) {
      return fallback;
    }
  }

  let convs = load(STORE, []);
  if (!Array.isArray(convs)) convs = [];
  convs = convs.filter((c) => c && typeof c.id === 'string' && Array.isArray(c.messages));
  for (const c of convs)  // a page closed while a reply streamed
    for (const m of c.messages)
      if (m.pending) {
        delete m.pending;
        m.stopped = true;
      }
  let settings = Object.assign({ system: '', temperature: '', top_p: '', max_tokens: '', extra: '' }, load(SETTINGS, {}));
  let apiKey = '';
  try { apiKey = localStorage.getItem(KEY) || ''; } catch (e) { /* storage disabled */ }
  let current = convs.length ? convs[0].id : null;
  let running = null;  // { controller, conv, msg, node, t0, tFirst, tLast, n }
  let props = null;

  // ---- storage ----
  function save() {
    try {
      localStorage.setItem(STORE, JSON.stringify(convs));
    } catch (e) {
      status('could not save the conversations: ' + e.message, true);
    }
  }
  function saveSettings() {
    try { localStorage.setItem(SETTINGS, JSON.stringify(settings)); } catch (e) { /* shown on next save */ }
  }
  const conv = () => convs.find((c) => c.id === current) || null;
  function newId() {
    const a = new Uint32Array(2);
    crypto.getRandomValues(a);
    return Date.now().toString(36) + '-' + a[0].toString(36) + a[1].toString(36);
  }

  // ---- status line ----
  function status(text, isError) {
    const s = $('status');
    s.textContent = text || '';
    s.classList.toggle('error', !!isError);
  }

  // ---- API key ----
  let keyWaiters = null;
  function askKey(message) {
    $('key-error').textContent = message || '';
    $('key-input').value = '';
    if (!keyWaiters) {
      keyWaiters = [];
      if (!$('key-dialog').open) $('key-dialog').showModal();
    }
    $('key-input').focus();
    return new Promise((resolve, reject) => keyWaiters.push({ resolve, reject }));
  }
  function closeKey(key) {
    const w = keyWaiters || [];
    keyWaiters = null;
    if ($('key-dialog').open) $('key-dialog').close();
    for (const p of w) key ? p.resolve(key) : p.reject(new Error('an API key is needed (the server answered 401)'));
  }
  $('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const k = $('key-input').value.trim();
    if (!k) return;
    apiKey = k;
    try { localStorage.setItem(KEY, k); } catch (err) { /* kept for this page only */ }
    closeKey(k);
  });
  $('key-cancel').addEventListener('click', () => closeKey(null));
  $('key-dialog').addEventListener('cancel', (e) => {
    e.preventDefault();
    closeKey(null);
  });
  $('forget-key').addEventListener('click', () => {
    apiKey = '';
    try { localStorage.removeItem(KEY); } catch (e) { /* nothing kept */ }
    status('API key forgotten');
  });

  function errorText(res, body) {
    const e = body && body.error;
    const msg = e && (typeof e === 'string' ? e : e.message);
    return 'HTTP ' + res.status + (msg ? ': ' + msg : '');
  }

  // fetch() with the API key; a 401 asks for a key and tries again.
  async function api(path, init) {
    for (;;) {
      const headers = Object.assign({}, (init && init.headers) || {});
      if (apiKey) headers.Authorization = 'Bearer ' + apiKey;
      const res = await fetch(path, Object.assign({}, init || {}, { headers }));
      if (res.status !== 401) return res;
      const body = await res.json().catch(() => null);
      await askKey(apiKey ? errorText(res, body) : '');
    }
  }

  // ---- model properties ----
  function showProps(rows) {
    const dl = $('model-props');
    dl.textContent = '';
    for (const [k, v] of rows) {
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = String(v);
      dd.title = String(v);
      if (k === 'last reply') dd.id = 'last-speed';
      dl.append(dt, dd);
    }
  }
  async function loadModel() {
    try {
      const res = await fetch('/props');
      if (res.ok) props = await res.json();
    } catch (e) { /* older servers: /v1/models only */ }
    let id = props && props.model;
    try {
      const res = await api('/v1/models');
      if (res.ok) {
        const j = await res.json();
        if (j.data && j.data[0]) id = j.data[0].id;
        status('');
      } else {
        status(errorText(res, await res.json().catch(() => null)), true);
      }
    } catch (e) {
      status(e.message, true);
    }
    const rows = [['model', id || '?']];
    if (props) {
      rows.push(['architecture', props.architecture], ['layers', props.n_layer], ['embedding', props.n_embd],
        ['vocabulary', props.n_vocab], ['context', props.n_ctx + ' (trained ' + props.n_ctx_train + ')'],
        ['parallel', props.n_parallel], ['template', templateText(props)]);
    }
    rows.push(['last reply', lastSpeed()]);
    showProps(rows);
  }
  // Where the server's chat template came from (/props: chat_template_source, and
  // chat_template_file for `glia serve --template FILE`).
  function templateText(p) {
    if (p.chat_template_source === 'file') return '--template ' + p.chat_template_file;
    if (p.chat_template_source === 'model') return 'from the model file';
    if (p.chat_template_source === 'none' || !p.chat_template) return 'none (plain roles)';
    return 'set';  // a server that does not say where from
  }
  function lastSpeed() {
    for (const c of convs)
      for (let i = c.messages.length - 1; i >= 0; --i) {
        const s = c.messages[i].stats;
        if (s && s.tps) return s.tps.toFixed(1) + ' tok/s';
      }
    return '–';
  }
  function updateLastSpeed() {
    const dd = $('last-speed');
    if (dd) dd.textContent = lastSpeed();
  }

  // ---- rendering ----
  function renderList() {
    const ul = $('conversations');
    ul.textContent = '';
    for (const c of convs) {
      const li = document.createElement('li');
      li.dataset.id = c.id;
      if (c.id === current) li.className = 'active';
      const open = document.createElement('button');
      open.type = 'button';
      open.className = 'conv-open';
      open.textContent = c.title || 'New chat';
      open.title = c.title || '';
      const del = document.createElement('button');
      del.type = 'button';
      del.className = 'conv-delete';
      del.textContent = '×';
      del.title = 'Delete this conversation';
      del.setAttribute('aria-label', 'Delete conversation ' + (c.title || ''));
      li.append(open, del);
      ul.append(li);
    }
  }

  function statsText(m) {
    const s = m.stats;
    if (!s) return '';
    const parts = [];
    if (s.tokens != null) parts.push(s.tokens + ' tokens');
    if (s.tps) parts.push(s.tps.toFixed(1) + ' tok/s');
    if (s.ttft_ms != null) parts.push('first token ' + Math.round(s.ttft_ms) + ' ms');
    if (s.prompt_tokens != null) parts.push(s.prompt_tokens + ' prompt tokens' + (s.cached_tokens ? ' (' + s.cached_tokens + ' cached)' : ''));
    if (m.finish) parts.push('finish: ' + m.finish);
    return parts.join(' · ');
  }

  function fillMessage(node, m) {
    const body = node.querySelector('.body');
    // The model's thought (reasoning_content), as text, collapsed unless opened.
    const thought = node.querySelector('.thought');
    thought.hidden = !m.reasoning;
    thought.querySelector('.thought-text').textContent = m.reasoning || '';
    if (m.role === 'assistant') body.innerHTML = GliaMarkdown.render(m.content);  // escaped by the renderer
    else body.textContent = m.content;
    node.classList.toggle('pending', !!m.pending);
    node.dataset.done = m.pending ? '0' : '1';
    const stats = node.querySelector('.stats');
    stats.textContent = statsText(m);
    if (m.stopped) {
      const s = document.createElement('span');
      s.className = 'stopped';
      s.textContent = (stats.textContent ? ' · ' : '') + 'stopped';
      stats.append(s);
    }
    const err = node.querySelector('.msg-error');
    err.textContent = m.error || '';
    err.hidden = !m.error;
  }

  function messageNode(m) {
    const node = document.createElement('div');
    node.className = 'msg ' + (m.role === 'user' ? 'user' : 'assistant');
    const role = document.createElement('div');
    role.className = 'role';
    role.textContent = m.role;
    const thought = document.createElement('details');
    thought.className = 'thought';
    const summary = document.createElement('summary');
    summary.textContent = 'Thought';
    const thoughtText = document.createElement('div');
    thoughtText.className = 'thought-text';
    thought.append(summary, thoughtText);
    const body = document.createElement('div');
    body.className = 'body';
    const stats = document.createElement('div');
    stats.className = 'stats';
    const err = document.createElement('div');
    err.className = 'msg-error';
    node.append(role, thought, body, stats, err);
    fillMessage(node, m);
    return node;
  }

  function renderConversation() {
    const c = conv();
    const box = $('messages');
    box.textContent = '';
    $('conv-title').textContent = (c && c.title) || 'New chat';
    if (!c || !c.messages.length) {
      const e = document.createElement('div');
      e.id = 'empty';
      e.className = 'empty';
      e.textContent = 'Send a message to start a conversation.';
      box.append(e);
      return;
    }
    for (const m of c.messages) {
      const n = messageNode(m);
      box.append(n);
      if (running && running.msg === m) running.node = n;
    }
    box.scrollTop = box.scrollHeight;
  }

  function render() {
    renderList();
    renderConversation();
    updateLastSpeed();
  }

  // Tokens per second, or null: the tokens after the first over the time from the first
  // to the last (decoding), when that time is long enough to measure; otherwise (the
  // network can deliver a short reply in one read, a few microseconds apart) all the
  // tokens over the time from sending the request to the last token, which is never
  // shorter than the server took.
  const MIN_RATE_MS = 250;
  function tokenRate(tokens, t0, tFirst, tLast) {
    if (!tFirst || tokens < 1) return null;
    if (tokens >= 2 && tLast - tFirst >= MIN_RATE_MS) return (tokens - 1) / ((tLast - tFirst) / 1000);
    return tLast > t0 ? tokens / ((tLast - t0) / 1000) : null;
  }

  // Streaming updates are drawn once per frame.
  let drawQueued = false;
  function scheduleDraw() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => {
      drawQueued = false;
      if (!running || !running.node || !running.node.isConnected) return;
      const box = $('messages');
      const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 60;
      fillMessage(running.node, running.msg);
      const rate = tokenRate(running.n, running.t0, running.tFirst, performance.now());
      status(running.n + ' tokens' + (rate ? ', ' + rate.toFixed(1) + ' tok/s' : '') + '…');
      if (atBottom) box.scrollTop = box.scrollHeight;
    });
  }

  function setBusy(busy) {
    $('send').hidden = busy;
    $('stop').hidden = !busy;
  }

  // ---- settings ----
  const fields = [
    ['set-system', 'system'], ['set-temperature', 'temperature'], ['set-top-p', 'top_p'],
    ['set-max-tokens', 'max_tokens'], ['set-extra', 'extra'],
  ];
  for (const [id, key] of fields) {
    const el = $(id);
    el.value = settings[key] == null ? '' : settings[key];
    el.addEventListener('input', () => {
      settings[key] = el.value;
      saveSettings();
      checkSettings();
    });
  }
  // On a narrow screen (chat.css: under 760 px) the conversation list and the settings are
  // drawers over the conversation, with a scrim behind them that closes them.
  function showScrim() {
    $('scrim').hidden = $('settings').hidden && !$('app').classList.contains('sidebar-open');
  }
  function toggleSettings(show) {
    $('settings').hidden = !show;
    $('settings-toggle').setAttribute('aria-expanded', String(show));
    if (show) toggleSidebar(false);
    showScrim();
  }
  function toggleSidebar(show) {
    $('app').classList.toggle('sidebar-open', show);
    $('sidebar-toggle').setAttribute('aria-expanded', String(show));
    if (show) toggleSettings(false);
    showScrim();
  }
  $('settings-toggle').addEventListener('click', () => toggleSettings($('settings').hidden));
  $('settings-close').addEventListener('click', () => toggleSettings(false));
  $('sidebar-toggle').addEventListener('click', () => toggleSidebar(!$('app').classList.contains('sidebar-open')));
  $('scrim').addEventListener('click', () => {
    toggleSettings(false);
    toggleSidebar(false);
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !$('scrim').hidden) {
      toggleSettings(false);
      toggleSidebar(false);
    }
  });

  // The request's sampling fields from the settings; throws a message naming the field.
  function samplingFields() {
    const out = {};
    const num = (key, name, lo, hi, int) => {
      const raw = String(settings[key] == null ? '' : settings[key]).trim();
      if (raw === '') return;
      const v = Number(raw);
      if (!Number.isFinite(v) || v < lo || v > hi || (int && !Number.isInteger(v)))
        throw new Error(name + ' must be ' + (int ? 'a whole number' : 'a number') + ' from ' + lo + ' to ' + hi);
      out[key] = v;
    };
    num('temperature', 'Temperature', 0, 2, false);
    num('top_p', 'Top-p', 0, 1, false);
    num('max_tokens', 'Max tokens', 1, 1e9, true);
    const extra = String(settings.extra || '').trim();
    if (extra) {
      let j;
      try {
        j = JSON.parse(extra);
      } catch (e) {
        throw new Error('Extra request fields: not JSON (' + e.message + ')');
      }
      if (!j || typeof j !== 'object' || Array.isArray(j)) throw new Error('Extra request fields: must be a JSON object');
      Object.assign(out, j);
    }
    return out;
  }
  function checkSettings() {
    let msg = '';
    try { samplingFields(); } catch (e) { msg = e.message; }
    $('settings-error').textContent = msg;
    $('settings-error').hidden = !msg;
    return msg;
  }

  // ---- conversations ----
  function newConversation() {
    if (running && running.conv.id === current) stop();
    current = null;
    toggleSidebar(false);
    render();
    $('input').focus();
  }
  function deleteConversation(id) {
    if (running && running.conv.id === id) stop();
    convs = convs.filter((c) => c.id !== id);
    if (current === id) current = convs.length ? convs[0].id : null;
    save();
    render();
  }
  $('new-chat').addEventListener('click', newConversation);
  $('conversations').addEventListener('click', (e) => {
    const li = e.target.closest('li');
    if (!li) return;
    if (e.target.closest('.conv-delete')) return deleteConversation(li.dataset.id);
    current = li.dataset.id;
    toggleSidebar(false);
    render();
  });

  // Copy buttons of code blocks.
  $('messages').addEventListener('click', (e) => {
    const b = e.target.closest('.copy');
    if (!b) return;
    const code = b.closest('.code').querySelector('code').textContent;
    const done = (t) => {
      b.textContent = t;
      setTimeout(() => { b.textContent = 'copy'; }, 1200);
    };
    if (navigator.clipboard) navigator.clipboard.writeText(code).then(() => done('copied'), () => done('failed'));
    else done('failed');
  });

  // ---- chatting ----
  function requestMessages(c) {
    const out = [];
    const sys = String(settings.system || '').trim();
    if (sys) out.push({ role: 'system', content: sys });
    for (const m of c.messages) {
      if (m.pending) continue;
      if (m.role === 'assistant' && !m.content) continue;  // a failed or empty reply
      out.push({ role: m.role, content: m.content });
    }
    return out;
  }

  async function send(text) {
    if (running) return;
    let fieldsNow;
    try {
      fieldsNow = samplingFields();
    } catch (e) {
      toggleSettings(true);
      checkSettings();
      status(e.message, true);
      return;
    }
    let c = conv();
    if (!c) {
      c = { id: newId(), title: '', created: Date.now(), messages: [] };
      convs.unshift(c);
      current = c.id;
    } else {
      // The conversation moves to the top of the list.
      convs = [c].concat(convs.filter((x) => x !== c));
    }
    if (!c.title) c.title = text.replace(/\s+/g, ' ').trim().slice(0, 60);
    c.messages.push({ role: 'user', content: text });
    const body = Object.assign({ model: props && props.model ? props.model : undefined, messages: requestMessages(c),
      stream: true, stream_options: { include_usage: true } }, fieldsNow);
    const msg = { role: 'assistant', content: '', pending: true };
    c.messages.push(msg);
    c.updated = Date.now();
    save();
    running = { controller: new AbortController(), conv: c, msg, node: null, t0: performance.now(), tFirst: 0, tLast: 0, n: 0 };
    const run = running;
    render();
    setBusy(true);
    status('waiting for the first token…');
    let usage = null;
    try {
      const res = await api('/v1/chat/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: run.controller.signal,
      });
      if (!res.ok) throw new Error(errorText(res, await res.json().catch(() => null)));
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        // The bytes of a character split between two reads wait in the decoder (stream:
        // true) until the rest arrives; at the end a last line without its newline counts.
        buf += done ? dec.decode() + '\n' : dec.decode(value, { stream: true });
        let at;
        while ((at = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, at).replace(/\r$/, '');
          buf = buf.slice(at + 1);
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') continue;
          let j;
          try { j = JSON.parse(data); } catch (e) { continue; }
          if (j.error) throw new Error(typeof j.error === 'string' ? j.error : j.error.message || 'the server reported an error');
          if (j.usage) usage = j.usage;
          const ch = j.choices && j.choices[0];
          if (!ch) continue;
          const r = ch.delta && ch.delta.reasoning_content;
          if (r) {
            run.tLast = performance.now();
            if (!run.tFirst) run.tFirst = run.tLast;
            msg.reasoning = (msg.reasoning || '') + r;
            ++run.n;
            scheduleDraw();
          }
          const d = ch.delta && ch.delta.content;
          if (d) {
            run.tLast = performance.now();
            if (!run.tFirst) run.tFirst = run.tLast;
            msg.content += d;
            ++run.n;
            scheduleDraw();
          }
          if (ch.finish_reason) msg.finish = ch.finish_reason;
        }
        if (done) break;
      }
    } catch (e) {
      if (e.name === 'AbortError') msg.stopped = true;
      else msg.error = e.message;
    }
    const tokens = usage && usage.completion_tokens != null ? usage.completion_tokens : run.n;
    msg.stats = { tokens };
    if (run.tFirst) {
      msg.stats.ttft_ms = run.tFirst - run.t0;
      const rate = tokenRate(tokens, run.t0, run.tFirst, run.tLast);
      if (rate) msg.stats.tps = rate;
    }
    if (usage) {
      msg.stats.prompt_tokens = usage.prompt_tokens;
      const cached = usage.prompt_tokens_details && usage.prompt_tokens_details.cached_tokens;
      if (cached) msg.stats.cached_tokens = cached;
    }
    delete msg.pending;
    running = null;
    setBusy(false);
    status(msg.error ? 'the request failed' : msg.stopped ? 'stopped' : '', !!msg.error);
    save();
    if (current === c.id) {
      const nodes = $('messages').querySelectorAll('.msg');
      const node = run.node && run.node.isConnected ? run.node : nodes[nodes.length - 1];
      if (node) fillMessage(node, msg);
    }
    updateLastSpeed();
  }

  function stop() {
    if (running) running.controller.abort();
  }
  $('stop').addEventListener('click', stop);

  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('input').value;
    if (!text.trim() || running) return;
    $('input').value = '';
    send(text);
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });

  // For tests and the console: the renderer, and the state as stored.
  window.gliaChat = { render: (t) => GliaMarkdown.render(t), conversations: () => convs, busy: () => !!running };

  checkSettings();
  render();
  loadModel();
  $('input').focus();
})();
