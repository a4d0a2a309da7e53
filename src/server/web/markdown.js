// A small Markdown renderer for the chat page's replies: paragraphs, headings, lists,
// block quotes, rules, pipe tables, fenced code blocks (a fence left open, as while a reply
// streams, runs to the end), code spans, emphasis, strike-through and links.
//
// Safety: the model's text is untrusted. Every piece of it is HTML-escaped before any
// markup is added, markup is added only by the patterns below, links only keep http(s)
// and mailto URLs, and attribute values are built from escaped text, so the result can
// be assigned to innerHTML. Nothing else in the page puts model or user text into HTML.
'use strict';

(function (root) {
  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, (c) => ESC[c]);
  }

  // Placeholders (\u0001<n>\u0002) keep finished HTML (code spans, links) away from the
  // later inline patterns; the input's own control characters of that kind are dropped.
  function inline(raw) {
    const saved = [];
    const keep = (html) => '\u0001' + (saved.push(html) - 1) + '\u0002';
    let text = '';
    // Code spans first, on the raw text: their content is shown as is.
    const code = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g;
    let last = 0;
    let m;
    while ((m = code.exec(raw)) !== null) {
      text += escapeHtml(raw.slice(last, m.index));
      let c = m[2];
      if (/^ [\s\S]* $/.test(c) && c.trim() !== '') c = c.slice(1, -1);
      text += keep('<code>' + escapeHtml(c) + '</code>');
      last = m.index + m[0].length;
    }
    text += escapeHtml(raw.slice(last));

    // Only http(s) and mailto links; `label` is escaped text (it keeps its emphasis).
    const link = (label, url) => {
      const u = url.replace(/^&lt;|&gt;$/g, '');
      if (!/^(https?:\/\/|mailto:)/i.test(u)) return null;
      return keep('<a href="' + u + '" target="_blank" rel="noopener noreferrer">') + label + keep('</a>');
    };
    // [label](url "title") — the label keeps its emphasis; the title is dropped.
    text = text.replace(/\[([^\]\n]+)\]\(\s*((?:[^\s()&]|&amp;|&lt;|&gt;)+)(?:\s+&quot;[^\n]*?&quot;)?\s*\)/g,
      (all, label, url) => link(label, url) || all);
    // Bare URLs.
    text = text.replace(/(^|[\s(])(https?:\/\/(?:[^\s<>&\u0001\u0002]|&amp;)+?)(?=[.,:;!?)]*(?:\s|$|&quot;|&#39;|&lt;|&gt;|\u0001))/g,
      (all, pre, url) => pre + (link(keep(url), url) || url));

    text = text
      .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>')
      .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
      .replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![*\w])/g, '$1<em>$2</em>')
      .replace(/(^|[^\w])_(?=[^\s_])([^_\n]*?[^\s_])_(?!\w)/g, '$1<em>$2</em>')
      .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>');
    // Placeholders may nest (a code span inside a link's label): restore until none are left.
    for (let i = 0; i < 4 && text.indexOf('\u0001') >= 0; ++i)
      text = text.replace(/\u0001(\d+)\u0002/g, (all, n) => saved[Number(n)]);
    return text;
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`\n]*$/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const QUOTE = /^ {0,3}>[ ]?(.*)$/;
  const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*$)/;
  const TABLE_RULE = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

  function startsBlock(line) {
    return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
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
      if ((m = FENCE.exec(line))) {
        const fence = m[1];
        const lang = m[2].replace(/[^\w+#.-]/g, '').slice(0, 32);
        const body = [];
        const indent = line.match(/^ */)[0].length;
        ++i;
        while (i < lines.length) {
          const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
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
      if ((m = HEADING.exec(line))) {
        const n = m[1].length;
        out.push('<h' + n + '>' + inline(m[2] || '') + '</h' + n + '>');
        ++i;
        continue;
      }
      if (RULE.test(line)) {
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
      if (line.indexOf('|') >= 0 && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].indexOf('-') >= 0 &&
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
