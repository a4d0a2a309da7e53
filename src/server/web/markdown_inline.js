// The inline part of the chat page's Markdown renderer (markdown.js has the blocks): code
// spans, links, bare http(s) URLs, **strong**, __strong__, *emphasis*, _emphasis_ and
// ~~strike-through~~ within one line.
//
// Time: linear in the line. Each step scans the line left to right once; none uses a
// regular expression with unbounded quantifiers that can backtrack (a 64,000-character
// URL or run of '[' took seconds that way), and the page renders a reply again on every
// frame while it streams. The markup is not spliced into the text: the steps mark which
// characters are markup (`skip`) and which HTML goes before a character (`before`), and
// the last step writes the escaped text with that HTML.
//
// Safety: every character of the line that is shown is HTML-escaped; links keep only
// http(s) and mailto URLs, escaped in the attribute.
'use strict';

(function (root) {
  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  function escapeHtml(s) {
    s = String(s);
    return /[&<>"']/.test(s) ? s.replace(/[&<>"']/g, (c) => ESC[c]) : s;
  }

  // Whitespace and word characters as the regular expressions' \s and \w have them.
  function isSpace(c) {
    if (c === undefined) return false;
    const n = c.charCodeAt(0);
    return n === 32 || (n >= 9 && n <= 13) || (n > 127 && /\s/.test(c));
  }
  function isWord(c) {
    if (c === undefined) return false;
    const n = c.charCodeAt(0);
    return (n >= 48 && n <= 57) || (n >= 65 && n <= 90) || (n >= 97 && n <= 122) || n === 95;
  }

  // Only http(s) and mailto links.
  const linkOpen = (url) => /^(https?:\/\/|mailto:)/i.test(url) ?
    '<a href="' + escapeHtml(url) + '" target="_blank" rel="noopener noreferrer">' : null;

  // One line being rendered.
  class Line {
    constructor(s) {
      this.s = s;
      this.skip = new Uint8Array(s.length);  // 1: markup or inside a code span or URL, not shown as text
      this.tagAt = new Int32Array(s.length + 1);  // 1 + the index in `tags` of the HTML written before the character
      this.tags = [];
    }
    // The character at p as the emphasis rules see it: markup reads as a punctuation mark.
    at(p) {
      if (p < 0 || p >= this.s.length) return undefined;
      return this.skip[p] ? '\u0001' : this.s[p];
    }
    free(p, c) { return this.s[p] === c && !this.skip[p]; }
    add(p, html) {
      if (this.tagAt[p]) this.tags[this.tagAt[p] - 1] += html;
      else this.tagAt[p] = this.tags.push(html);
    }
    hide(from, to) { this.skip.fill(1, from, to); }
    // The first p >= from, or -1, where test(p) holds. The calls on one finder must not
    // ask for a smaller `from` than before: each character is tested once.
    finder(test) {
      let found = -2;
      return (from) => {
        if (found === -1 || found >= from) return found;
        for (let p = from; p < this.s.length; ++p)
          if (test(p)) return (found = p);
        return (found = -1);
      };
    }
    html() {
      const { s, skip, tagAt, tags } = this;
      const out = [];
      let run = 0;  // start of the text not yet written
      for (let p = 0; p <= s.length; ++p) {
        const t = tagAt[p];
        if (!t && p < s.length && !skip[p]) continue;
        if (run < p) out.push(escapeHtml(s.slice(run, p)));
        if (t) out.push(tags[t - 1]);
        run = p + 1;
        if (p < s.length && !skip[p]) run = p;
      }
      return out.join('');
    }
  }

  // Code spans: a run of n backticks up to the next run of exactly n; the content is shown
  // as is (one space on each side is dropped). A run without its closing run is text.
  function codeSpans(L) {
    const s = L.s;
    const runs = [];
    const byLength = new Map();  // run length -> { starts of the runs of that length, next to look at }
    for (let i = s.indexOf('`'); i >= 0; i = s.indexOf('`', i)) {
      let j = i;
      while (s[j] === '`') ++j;
      runs.push(i, j - i);
      if (!byLength.has(j - i)) byLength.set(j - i, { starts: [], next: 0 });
      byLength.get(j - i).starts.push(i);
      i = j;
    }
    let last = 0;
    for (let r = 0; r < runs.length; r += 2) {
      const start = runs[r];
      const n = runs[r + 1];
      if (start < last) continue;  // inside a span already taken
      const same = byLength.get(n);
      while (same.next < same.starts.length && same.starts[same.next] <= start) ++same.next;
      if (same.next >= same.starts.length) continue;
      const close = same.starts[same.next];
      let c = s.slice(start + n, close);
      if (c.length >= 2 && c[0] === ' ' && c[c.length - 1] === ' ' && c.trim() !== '') c = c.slice(1, -1);
      L.add(start, '<code>' + escapeHtml(c) + '</code>');
      L.hide(start, close + n);
      last = close + n;
    }
  }

  // A character of a link's address (inside the parentheses) or of a bare URL.
  function urlChar(L, p, inParens) {
    const c = L.s[p];
    return c !== undefined && !L.skip[p] && !isSpace(c) && c !== '"' && c !== "'" &&
      (inParens ? c !== '(' && c !== ')' : c !== '<' && c !== '>');
  }

  // [label](url "title") and bare http(s) URLs (trailing punctuation is not part of one).
  // The label stays text (it keeps its emphasis); the title is dropped.
  function links(L) {
    const s = L.s;
    const nextClose = L.finder((p) => L.free(p, ']'));
    const spaces = (p) => {
      while (isSpace(L.at(p))) ++p;
      return p;
    };
    const tails = new Map();  // index of a ']' -> { url, end } of the "(url)" right after it, or null
    const tail = (close) => {
      if (tails.has(close)) return tails.get(close);
      let r = null;
      if (L.free(close + 1, '(')) {
        const from = spaces(close + 2);
        let p = from;
        while (urlChar(L, p, true)) ++p;
        const url = s.slice(from, p);
        const q = spaces(p);
        if (url && L.free(q, ')')) {
          r = { url, end: q + 1 };
        } else if (url && q > p && L.free(q, '"')) {
          let e = q + 1;  // the title's closing quote: the next one (each quote is looked at once)
          while (e < s.length && !L.free(e, '"')) ++e;
          e = spaces(e + 1);
          if (L.free(e, ')')) r = { url, end: e + 1 };
        }
      }
      tails.set(close, r);
      return r;
    };
    for (let i = 0; i < s.length; ++i) {
      if (L.skip[i]) continue;
      const c = s[i];
      if (c === '[') {
        const close = nextClose(i + 1);
        const t = close > i + 1 ? tail(close) : null;
        const open = t && linkOpen(t.url.replace(/^</, '').replace(/>$/, ''));
        if (open) {
          L.add(i, open);
          L.hide(i, i + 1);
          L.add(close, '</a>');
          L.hide(close, t.end);
          i = t.end - 1;
        }
      } else if (c === 'h' && (i === 0 || isSpace(L.at(i - 1)) || L.at(i - 1) === '(') &&
                 (s.startsWith('http://', i) || s.startsWith('https://', i))) {
        const body = i + (s[i + 4] === 's' ? 8 : 7);
        let end = body;
        while (urlChar(L, end, false)) ++end;
        while (end > body + 1 && '.,:;!?)'.indexOf(s[end - 1]) >= 0) --end;
        if (end > body) {
          const url = s.slice(i, end);
          L.add(i, linkOpen(url) + escapeHtml(url) + '</a>');
          L.hide(i, end);
          i = end - 1;
        }
      }
    }
  }

  // **strong**, __strong__, ~~deleted~~: the pair of delimiter characters d, a non-space,
  // and the first closing pair after it that closes(p) accepts (the character before it is
  // no space). `wordBound`: the opening pair is not preceded by a word character.
  function pairs(L, d, tag, wordBound, closes) {
    const s = L.s;
    const isPair = (p) => L.free(p, d) && L.free(p + 1, d);
    const next = L.finder((p) => isPair(p) && !isSpace(L.at(p - 1)) && (!closes || closes(p)));
    const open = '<' + tag + '>';
    const close = '</' + tag + '>';
    for (let i = s.indexOf(d + d); i >= 0; i = s.indexOf(d + d, i)) {
      if (isPair(i) && i + 2 < s.length && !isSpace(L.at(i + 2)) && !(wordBound && isWord(L.at(i - 1)))) {
        const j = next(i + 3);
        if (j < 0) return;  // no closing pair from here on
        L.add(i, open);
        L.hide(i, i + 2);
        L.add(j, close);
        L.hide(j, j + 2);
        i = j + 2;
        continue;
      }
      ++i;
    }
  }

  // *emphasis* and _emphasis_: no free delimiter inside, no space just inside, no word
  // character just outside (and for '*', no other star just outside).
  function single(L, d) {
    const s = L.s;
    const outside = (c) => c === undefined || !(isWord(c) || (d === '*' && c === '*'));
    const nextFree = (from) => {
      let p = s.indexOf(d, from);
      while (p >= 0 && L.skip[p]) p = s.indexOf(d, p + 1);
      return p;
    };
    for (let i = nextFree(0); i >= 0;) {
      const j = nextFree(i + 1);
      if (j < 0) return;
      if (outside(L.at(i - 1)) && j > i + 1 && !isSpace(L.at(i + 1)) && !isSpace(L.at(j - 1)) && outside(L.at(j + 1))) {
        L.add(i, '<em>');
        L.hide(i, i + 1);
        L.add(j, '</em>');
        L.hide(j, j + 1);
        i = nextFree(j + 1);
        continue;
      }
      i = j;
    }
  }

  // One line of Markdown text -> HTML.
  function inline(text) {
    text = String(text);
    if (!/[`[*_~]|https?:\/\//.test(text)) return escapeHtml(text);  // nothing to mark up
    const L = new Line(text);
    codeSpans(L);
    links(L);
    pairs(L, '*', 'strong', false, null);
    pairs(L, '_', 'strong', true, (p) => !isWord(L.at(p + 2)));
    single(L, '*');
    single(L, '_');
    pairs(L, '~', 'del', false, null);
    return L.html();
  }

  root.GliaMarkdownInline = { inline, escapeHtml };
})(typeof window !== 'undefined' ? window : globalThis);
