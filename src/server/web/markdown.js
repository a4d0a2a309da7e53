// A small Markdown renderer for the chat page's replies: paragraphs, headings, lists,
// block quotes, rules, pipe tables, fenced code blocks (a fence left open, as while a reply
// streams, runs to the end); within a line (markdown_inline.js) code spans, emphasis,
// strike-through and links. Each block test scans its line once (no regular expression
// that can backtrack for more than linear time), and nesting is limited to 8 levels.
//
// Safety: the model's text is untrusted. Every piece of it is HTML-escaped before any
// markup is added, markup is added only by the patterns below, links only keep http(s)
// and mailto URLs, and attribute values are built from escaped text, so the result can
// be assigned to innerHTML. Nothing else in the page puts model or user text into HTML.
'use strict';

(function (root) {
  const { inline, escapeHtml } = root.GliaMarkdownInline;  // markdown_inline.js, loaded first

  // Block patterns: each test scans its line once.
  function indentOf(line) {
    let i = 0;
    while (line[i] === ' ') ++i;
    return i;
  }
  function trimTabs(s) {
    let a = 0;
    let b = s.length;
    while (a < b && (s[a] === ' ' || s[a] === '\t')) ++a;
    while (b > a && (s[b - 1] === ' ' || s[b - 1] === '\t')) --b;
    return s.slice(a, b);
  }
  // An opening fence: {fence, lang} or null. The rest of a fence line holds no backtick.
  function fenceOf(line) {
    const i = indentOf(line);
    const c = line[i];
    if (i > 3 || (c !== '`' && c !== '~')) return null;
    let j = i;
    while (line[j] === c) ++j;
    if (j - i < 3 || line.indexOf('`', j) >= 0) return null;
    const info = trimTabs(line.slice(j));
    const k = info.search(/\s/);
    return { fence: line.slice(i, j), lang: k < 0 ? info : info.slice(0, k) };
  }
  const CLOSE_FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
  const QUOTE = /^ {0,3}>[ ]?(.*)$/;
  const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*$)/;
  // A heading: {level, text} or null; a closing run of '#' is dropped.
  function headingOf(line) {
    const i = indentOf(line);
    let j = i;
    while (line[j] === '#') ++j;
    if (i > 3 || j === i || j - i > 6 || (j < line.length && line[j] !== ' ' && line[j] !== '\t')) return null;
    let text = trimTabs(line.slice(j));
    let k = text.length;
    while (k > 0 && text[k - 1] === '#') --k;
    if (k === 0) text = '';
    else if (k < text.length && (text[k - 1] === ' ' || text[k - 1] === '\t')) text = trimTabs(text.slice(0, k));
    return { level: j - i, text };
  }
  // A thematic break: three or more of one of - * _, spaces and tabs between.
  function isRule(line) {
    const i = indentOf(line);
    const c = line[i];
    if (i > 3 || (c !== '-' && c !== '*' && c !== '_')) return false;
    let n = 0;
    for (let j = i; j < line.length; ++j) {
      if (line[j] === c) ++n;
      else if (line[j] !== ' ' && line[j] !== '\t') return false;
    }
    return n >= 3;
  }
  // A table's delimiter row: | :--- | ---: | with the outer pipes optional.
  function isTableRule(line) {
    let s = trimTabs(line);
    if (s.startsWith('|')) s = s.slice(1);
    if (s.endsWith('|')) s = s.slice(0, -1);
    return s.split('|').every((c) => /^:?-+:?$/.test(trimTabs(c)));
  }

  function startsBlock(line) {
    return fenceOf(line) || headingOf(line) || isRule(line) || QUOTE.test(line) || ITEM.test(line);
  }

  function cells(line) {
    let s = line.trim();
    if (s.startsWith('|')) s = s.slice(1);
    if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
    return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
  }

  function table(head, rule, rows) {
    const align = cells(rule).map((c) =>
      c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : '');
    const row = (tag, cs) => '<tr>' + align.map((a, i) =>
      '<' + tag + (a ? ' class="align-' + a + '"' : '') + '>' + inline(cs[i] || '') + '</' + tag + '>').join('') + '</tr>';
    return '<div class="table"><table><thead>' + row('th', cells(head)) + '</thead><tbody>' +
      rows.map((r) => row('td', cells(r))).join('') + '</tbody></table></div>';
  }

  function blocks(lines, depth) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (/^\s*$/.test(line)) {
        ++i;
        continue;
      }
      if ((m = fenceOf(line))) {
        const fence = m.fence;
        const lang = m.lang.replace(/[^\w+#.-]/g, '').slice(0, 32);
        const body = [];
        const indent = line.match(/^ */)[0].length;
        ++i;
        while (i < lines.length) {
          const close = CLOSE_FENCE.exec(lines[i]);
          if (close && close[1][0] === fence[0] && close[1].length >= fence.length) break;
          body.push(lines[i].replace(new RegExp('^ {0,' + indent + '}'), ''));
          ++i;
        }
        const open = i >= lines.length;  // still streaming, or never closed
        ++i;
        out.push('<div class="code' + (open ? ' open' : '') + '"><div class="code-head"><span class="lang">' +
          escapeHtml(lang || 'text') + '</span><button type="button" class="copy">copy</button></div><pre><code' +
          (lang ? ' class="language-' + escapeHtml(lang) + '"' : '') + '>' + escapeHtml(body.join('\n')) +
          '</code></pre></div>');
        continue;
      }
      if ((m = headingOf(line))) {
        const n = m.level;
        out.push('<h' + n + '>' + inline(m.text) + '</h' + n + '>');
        ++i;
        continue;
      }
      if (isRule(line)) {
        out.push('<hr>');
        ++i;
        continue;
      }
      if (QUOTE.test(line)) {
        const body = [];
        while (i < lines.length && !/^\s*$/.test(lines[i])) {
          const q = QUOTE.exec(lines[i]);
          if (!q && startsBlock(lines[i])) break;
          body.push(q ? q[1] : lines[i]);
          ++i;
        }
        out.push('<blockquote>' + (depth < 8 ? blocks(body, depth + 1) : escapeHtml(body.join('\n'))) + '</blockquote>');
        continue;
      }
      if ((m = ITEM.exec(line))) {
        const ordered = /\d/.test(m[2]);
        const start = ordered ? parseInt(m[2], 10) : 1;
        const base = m[1].length;
        const items = [];
        let loose = false;
        let col = 0;  // the current item's content column: continuation lines are indented to it
        const sibling = (it) => it && /\d/.test(it[2]) === ordered && it[1].length <= base + 1;
        while (i < lines.length) {
          const it = ITEM.exec(lines[i]);
          if (sibling(it)) {
            items.push([it[3] || '']);
            col = it[1].length + it[2].length + 1;
            ++i;
            continue;
          }
          const cur = items[items.length - 1];
          if (/^\s*$/.test(lines[i])) {
            // A blank line continues the list when the next line belongs to it.
            const next = lines[i + 1];
            if (next === undefined) break;
            if (sibling(ITEM.exec(next)) || /^ {2,}\S/.test(next)) {
              cur.push('');
              loose = true;
              ++i;
              continue;
            }
            break;
          }
          const indent = lines[i].match(/^ */)[0].length;
          if (indent >= base + 2) {
            cur.push(lines[i].slice(Math.min(indent, col)));
            ++i;
            continue;
          }
          // A lazy continuation of the item's last paragraph.
          if (!startsBlock(lines[i]) && cur[cur.length - 1] !== '') {
            cur.push(lines[i]);
            ++i;
            continue;
          }
          break;
        }
        const tag = ordered ? 'ol' : 'ul';
        out.push('<' + tag + (ordered && start !== 1 ? ' start="' + start + '"' : '') + (loose ? '' : ' class="tight"') + '>' +
          items.map((it) => '<li>' + (depth < 8 ? blocks(it, depth + 1) : escapeHtml(it.join('\n'))) + '</li>').join('') +
          '</' + tag + '>');
        continue;
      }
      if (line.indexOf('|') >= 0 && i + 1 < lines.length && isTableRule(lines[i + 1]) && lines[i + 1].indexOf('-') >= 0 &&
          (lines[i + 1].indexOf('|') >= 0 || cells(line).length === 1)) {
        const head = line;
        const rule = lines[i + 1];
        const rows = [];
        i += 2;
        while (i < lines.length && !/^\s*$/.test(lines[i]) && lines[i].indexOf('|') >= 0) rows.push(lines[i++]);
        out.push(table(head, rule, rows));
        continue;
      }
      const para = [];
      while (i < lines.length && !/^\s*$/.test(lines[i]) && (para.length === 0 || !startsBlock(lines[i]))) {
        para.push(lines[i].replace(/^\s+/, ''));
        ++i;
      }
      out.push('<p>' + para.map(inline).join('<br>') + '</p>');
    }
    return out.join('');
  }

  // Markdown text -> HTML (a string safe to assign to innerHTML).
  function render(text) {
    const src = String(text == null ? '' : text).replace(/\r\n?/g, '\n').replace(/[\u0000-\u0002]/g, '');
    return blocks(src.split('\n'), 0);
  }

  root.GliaMarkdown = { render, escapeHtml };
})(typeof window !== 'undefined' ? window : globalThis);
