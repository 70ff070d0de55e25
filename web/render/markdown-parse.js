// The markdown parser: text → a tree of plain objects (blocks with inline
// nodes). No DOM here; markdown.js renders the tree. Raw HTML is just text to
// it, and a link keeps its URL only when safeHref allows it.

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*))?$/;
const TABLE_SEP = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const PUNCT = /[!-/:-@[-`{-~]/;
const MAX_DEPTH = 16;
// Steps the emphasis matcher may take per inline run before giving up and
// showing the rest literally: keeps hostile input from going quadratic.
const SCAN_BUDGET = 200_000;

const isBlank = (line) => /^[ \t]*$/.test(line);
const indentOf = (line) => line.match(/^ */)[0].length;

function isFence(line) {
  const m = FENCE.exec(line);
  return m && !(m[1][0] === '`' && m[2].includes('`')) ? m : null;
}

/** Can this line interrupt a paragraph? */
function startsBlock(line) {
  if (isFence(line) || HEADING.test(line) || HR.test(line) || QUOTE.test(line)) return true;
  const m = ITEM.exec(line);
  return Boolean(m && m[4] && (!/\d/.test(m[2]) || m[2].startsWith('1')));
}

/** Markdown text → block tree. */
export function parseMarkdown(src) {
  const lines = String(src)
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((l) => l.replace(/^\t+/, (t) => '    '.repeat(t.length)));
  return parseBlocks(lines, 0);
}

function parseBlocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i++;
      continue;
    }
    let m;
    if ((m = isFence(line))) {
      const fence = m[1];
      const indent = indentOf(line);
      const body = [];
      i++;
      while (i < lines.length) {
        const close = FENCE_CLOSE.exec(lines[i]);
        if (close && close[1][0] === fence[0] && close[1].length >= fence.length) {
          i++;
          break;
        }
        body.push(lines[i].replace(new RegExp(`^ {0,${indent}}`), ''));
        i++;
      }
      out.push({ type: 'code', lang: m[2].trim().split(/\s+/)[0] || '', text: body.join('\n') });
      continue;
    }
    if ((m = HEADING.exec(line))) {
      out.push({ type: 'heading', level: m[1].length, text: m[2] || '' });
      i++;
      continue;
    }
    if (HR.test(line)) {
      out.push({ type: 'hr' });
      i++;
      continue;
    }
    if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const inner = [];
      while (i < lines.length && !isBlank(lines[i])) {
        const q = QUOTE.exec(lines[i]);
        if (q) inner.push(q[1]);
        else if (!startsBlock(lines[i])) inner.push(lines[i]);
        else break;
        i++;
      }
      out.push({ type: 'quote', children: parseBlocks(inner, depth + 1) });
      continue;
    }
    if (ITEM.test(line) && depth < MAX_DEPTH) {
      i = parseList(lines, i, out, depth);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && isTableSep(lines[i + 1])) {
      const table = parseTable(lines, i);
      if (table) {
        out.push(table.node);
        i = table.end;
        continue;
      }
    }
    const para = [line];
    i++;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i])) {
      if (lines[i].includes('|') && i + 1 < lines.length && isTableSep(lines[i + 1])) break;
      para.push(lines[i]);
      i++;
    }
    out.push({ type: 'para', text: para.join('\n').trim() });
  }
  return out;
}

function listKind(m) {
  const ordered = /\d/.test(m[2]);
  return { ordered, marker: ordered ? m[2].slice(-1) : m[2] };
}

function parseList(lines, i, out, depth) {
  const first = ITEM.exec(lines[i]);
  const kind = listKind(first);
  const baseIndent = first[1].length;
  const items = [];
  let loose = false;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m) break;
    const k = listKind(m);
    if (k.ordered !== kind.ordered || k.marker !== kind.marker) break;
    const spaces = m[3] ? Math.min(m[3].length, 4) : 1;
    const contentIndent = m[1].length + m[2].length + spaces;
    // Lenient: two spaces past the marker's column nest, as models often write.
    const nestIndent = Math.min(contentIndent, baseIndent + 2);
    const itemLines = [m[4] || ''];
    i++;
    while (i < lines.length) {
      const l = lines[i];
      if (isBlank(l)) {
        let j = i + 1;
        while (j < lines.length && isBlank(lines[j])) j++;
        if (j < lines.length && indentOf(lines[j]) >= nestIndent) {
          for (; i < j; i++) itemLines.push('');
          loose = true;
          continue;
        }
        break;
      }
      const indent = indentOf(l);
      if (indent >= nestIndent) {
        itemLines.push(l.slice(Math.min(indent, contentIndent)));
        i++;
        continue;
      }
      if (!startsBlock(l) && !ITEM.test(l) && !isBlank(itemLines[itemLines.length - 1])) {
        itemLines.push(l.trim());
        i++;
        continue;
      }
      break;
    }
    items.push(parseBlocks(itemLines, depth + 1));
    // A blank line between items makes the list loose; anything else ends it.
    if (i < lines.length && isBlank(lines[i])) {
      let j = i;
      while (j < lines.length && isBlank(lines[j])) j++;
      const next = j < lines.length ? ITEM.exec(lines[j]) : null;
      if (next && next[1].length <= baseIndent + 1) {
        const nk = listKind(next);
        if (nk.ordered === kind.ordered && nk.marker === kind.marker) {
          loose = true;
          i = j;
          continue;
        }
      }
      break;
    }
  }
  const start = kind.ordered ? parseInt(first[2], 10) : null;
  out.push({ type: 'list', ordered: kind.ordered, start, loose, items });
  return i;
}

function isTableSep(line) {
  return line.includes('-') && line.includes('|') && TABLE_SEP.test(line);
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

function parseTable(lines, i) {
  const header = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map((c) => {
    const left = c.startsWith(':');
    const right = c.endsWith(':');
    return left && right ? 'center' : right ? 'right' : left ? 'left' : null;
  });
  if (header.length !== aligns.length) return null;
  let j = i + 2;
  const rows = [];
  while (j < lines.length && !isBlank(lines[j]) && lines[j].includes('|')) {
    rows.push(splitRow(lines[j]).slice(0, header.length));
    j++;
  }
  return { node: { type: 'table', header, aligns, rows }, end: j };
}

/** Only absolute http(s) and mailto URLs; anything else is refused (null). */
export function safeHref(raw) {
  const url = String(raw).trim();
  if (!/^(?:https?:\/\/|mailto:)/i.test(url)) return null;
  try {
    const parsed = new URL(url);
    return ['http:', 'https:', 'mailto:'].includes(parsed.protocol) ? parsed.href : null;
  } catch {
    return null;
  }
}

/** Inline markdown → nodes: text, code, em, strong, del, link, br. */
export function parseInline(src) {
  return inline(String(src), { budget: SCAN_BUDGET }, 0);
}

function inline(s, ctx, depth) {
  const out = [];
  let buf = '';
  const flush = () => {
    if (buf) out.push({ type: 'text', text: buf });
    buf = '';
  };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === '\\' && i + 1 < s.length) {
      const d = s[i + 1];
      if (d === '\n') {
        flush();
        out.push({ type: 'br' });
        i += 2;
        continue;
      }
      if (PUNCT.test(d)) {
        buf += d;
        i += 2;
        continue;
      }
    }
    if (c === '`') {
      const n = runLength(s, i, '`');
      const close = findRun(s, i + n, '`', n);
      if (close >= 0) {
        flush();
        let code = s.slice(i + n, close).replace(/\n/g, ' ');
        if (code.length > 2 && code.startsWith(' ') && code.endsWith(' ') && code.trim()) {
          code = code.slice(1, -1);
        }
        out.push({ type: 'code', text: code });
        i = close + n;
        continue;
      }
      buf += s.slice(i, i + n);
      i += n;
      continue;
    }
    if ((c === '*' || c === '_' || c === '~') && depth < MAX_DEPTH) {
      const found = emphasis(s, i, ctx, depth);
      if (found) {
        flush();
        out.push(found.node);
        i = found.end;
        continue;
      }
      const n = runLength(s, i, c);
      buf += s.slice(i, i + n);
      i += n;
      continue;
    }
    if ((c === '[' || (c === '!' && s[i + 1] === '[')) && depth < MAX_DEPTH) {
      const image = c === '!';
      const found = link(s, image ? i + 1 : i);
      if (found) {
        flush();
        const href = safeHref(found.url);
        const children = image ? [{ type: 'text', text: found.text || found.url }] : inline(found.text, ctx, depth + 1);
        // Images become links (never <img>); unsafe targets become plain text.
        out.push(href ? { type: 'link', href, children } : { type: 'span', children });
        i = found.end;
        continue;
      }
    }
    if (c === '<') {
      const m = /^<((?:https?|mailto):[^\s<>]*)>/i.exec(s.slice(i, i + 2048));
      if (m && safeHref(m[1])) {
        flush();
        out.push({ type: 'link', href: safeHref(m[1]), children: [{ type: 'text', text: m[1] }] });
        i += m[0].length;
        continue;
      }
    }
    if (c === 'h' && (i === 0 || !/[\w/]/.test(s[i - 1]))) {
      const m = /^https?:\/\/[^\s<>"'`]+/.exec(s.slice(i, i + 2048));
      if (m) {
        const url = trimUrl(m[0]);
        const href = safeHref(url);
        if (href && url.length > 8) {
          flush();
          out.push({ type: 'link', href, children: [{ type: 'text', text: url }] });
          i += url.length;
          continue;
        }
      }
    }
    if (c === '\n') {
      if (/ {2,}$/.test(buf)) {
        buf = buf.replace(/ +$/, '');
        flush();
        out.push({ type: 'br' });
      } else {
        buf += '\n';
      }
      i++;
      continue;
    }
    buf += c;
    i++;
  }
  flush();
  return out;
}

function trimUrl(url) {
  let end = url.length;
  while (end > 0 && /[.,;:!?'")\]*_]/.test(url[end - 1])) {
    // Keep a closing paren that closes one inside the URL (Wikipedia style).
    if (url[end - 1] === ')' && count(url.slice(0, end), '(') >= count(url.slice(0, end), ')')) break;
    end--;
  }
  return url.slice(0, end);
}

function count(s, ch) {
  return s.split(ch).length - 1;
}

function runLength(s, i, ch) {
  let j = i;
  while (s[j] === ch) j++;
  return j - i;
}

/** Start of the next run of exactly `n` `ch` at or after `from`, or -1. */
function findRun(s, from, ch, n) {
  let j = s.indexOf(ch, from);
  while (j >= 0) {
    const len = runLength(s, j, ch);
    if (len === n) return j;
    j = s.indexOf(ch, j + len);
  }
  return -1;
}

const isSpace = (ch) => ch === undefined || /\s/.test(ch);
const isWord = (ch) => ch !== undefined && /[\p{L}\p{N}]/u.test(ch);

function emphasis(s, i, ctx, depth) {
  const c = s[i];
  const run = runLength(s, i, c);
  if (c === '~' && run !== 2) return null;
  if (c === '_' && isWord(s[i - 1])) return null;
  const n = c === '~' ? 2 : Math.min(run, 3);
  const open = i + run - n;
  if (open !== i) return null; // leading extra delimiters stay literal
  if (isSpace(s[i + n])) return null;
  let from = i + n;
  while (ctx.budget-- > 0) {
    const j = s.indexOf(c, from);
    if (j < 0) return null;
    const len = runLength(s, j, c);
    const end = j + len;
    if (len >= n && j > i + n - 1 && !isSpace(s[j - 1]) && !(c === '_' && isWord(s[end]))) {
      const close = end - n; // the closer sits at the end of its run
      if (close > i + n - 1) {
        const inner = s.slice(i + n, close);
        if (inner) {
          const children = inline(inner, ctx, depth + 1);
          let node;
          if (c === '~') node = { type: 'del', children };
          else if (n === 3) node = { type: 'strong', children: [{ type: 'em', children }] };
          else node = { type: n === 2 ? 'strong' : 'em', children };
          return { node, end };
        }
      }
    }
    from = end;
  }
  return null;
}

/** `[text](url "title")` starting at `s[i] === '['`. */
function link(s, i) {
  let depth = 0;
  let j = i;
  for (; j < s.length; j++) {
    const ch = s[j];
    if (ch === '\\') j++;
    else if (ch === '[') depth++;
    else if (ch === ']' && --depth === 0) break;
    else if (ch === '\n' && s[j + 1] === '\n') return null;
  }
  if (j >= s.length || s[j + 1] !== '(') return null;
  let k = j + 2;
  while (s[k] === ' ') k++;
  let url = '';
  if (s[k] === '<') {
    const close = s.indexOf('>', k);
    if (close < 0) return null;
    url = s.slice(k + 1, close);
    k = close + 1;
  } else {
    let parens = 0;
    const start = k;
    for (; k < s.length; k++) {
      const ch = s[k];
      if (ch === '\\') k++;
      else if (/\s/.test(ch)) break;
      else if (ch === '(') parens++;
      else if (ch === ')' && parens-- === 0) break;
    }
    url = s.slice(start, k);
  }
  while (s[k] === ' ' || s[k] === '\n') k++;
  if (s[k] === '"' || s[k] === "'") {
    const close = s.indexOf(s[k], k + 1);
    if (close < 0) return null;
    k = close + 1;
    while (s[k] === ' ') k++;
  }
  if (s[k] !== ')') return null;
  return { text: s.slice(i + 1, j), url, end: k + 1 };
}
