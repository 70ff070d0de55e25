// node --test web/test/ — the markdown parser and highlighter, without a DOM.
import test from 'node:test';
import assert from 'node:assert/strict';
import { parseMarkdown, parseInline, safeHref } from '../render/markdown-parse.js';
import { tokenize, langForPath } from '../render/highlight.js';

const types = (nodes) => nodes.map((n) => n.type);

test('only http(s) and mailto links survive', () => {
  assert.equal(safeHref('https://example.com/a?b=1'), 'https://example.com/a?b=1');
  assert.equal(safeHref('mailto:a@b.c'), 'mailto:a@b.c');
  for (const bad of ['javascript:alert(1)', ' JaVaScRiPt:alert(1)', 'data:text/html,x', '/relative', 'vbscript:x', 'java\nscript:x', '//evil.com']) {
    assert.equal(safeHref(bad), null, bad);
  }
});

test('a javascript: link is plain text, a safe one a link', () => {
  const nodes = parseInline('[click me](javascript:window.x=1) and [ok](https://example.com)');
  assert.deepEqual(types(nodes), ['span', 'text', 'link']);
  assert.equal(nodes[0].children[0].text, 'click me');
  assert.equal(nodes[2].href, 'https://example.com/');
});

test('raw HTML stays text', () => {
  const nodes = parseInline('<img src=x onerror=alert(1)> <script>alert(2)</script>');
  assert.deepEqual(types(nodes), ['text']);
  assert.match(nodes[0].text, /<img src=x/);
});

test('images become links, never images', () => {
  const nodes = parseInline('![logo](https://example.com/l.png) ![x](javascript:1)');
  assert.deepEqual(types(nodes), ['link', 'text', 'span']);
});

test('emphasis, code, strike', () => {
  const nodes = parseInline('**bold** *it* _em_ ***both*** `co*de*` ~~gone~~ snake_case_name');
  assert.deepEqual(types(nodes).filter((t) => t !== 'text'), ['strong', 'em', 'em', 'strong', 'code', 'del']);
  assert.equal(nodes.at(-1).text, ' snake_case_name');
  const nested = parseInline('**bold *it***');
  assert.equal(nested[0].type, 'strong');
  assert.equal(nested[0].children[1].type, 'em');
});

test('hostile emphasis input stays fast', () => {
  const started = Date.now();
  parseInline('*a '.repeat(40000));
  assert.ok(Date.now() - started < 2000);
});

test('blocks', () => {
  const md = [
    '# Title', '', 'Para one', 'continues.', '', '```rust', 'fn main() {}', '```', '',
    '- a', '- b', '  - nested', '', '1. one', '2. two', '', '> quoted', '', '---', '',
    '| a | b |', '|---|:-:|', '| 1 | 2 |', '', 'unclosed', '```js', 'let x',
  ].join('\n');
  const blocks = parseMarkdown(md);
  assert.deepEqual(types(blocks), ['heading', 'para', 'code', 'list', 'list', 'quote', 'hr', 'table', 'para', 'code']);
  assert.equal(blocks[2].lang, 'rust');
  assert.equal(blocks[3].items.length, 2);
  assert.equal(blocks[3].items[1][1].type, 'list');
  assert.equal(blocks[4].ordered, true);
  assert.deepEqual(blocks[7].aligns, [null, 'center']);
  assert.equal(blocks[9].text, 'let x');
});

test('bare URLs link, trailing punctuation stays out', () => {
  const nodes = parseInline('see https://example.com/x. and (https://e.org/a_(b))');
  const links = nodes.filter((n) => n.type === 'link').map((n) => n.href);
  assert.deepEqual(links, ['https://example.com/x', 'https://e.org/a_(b)']);
});

test('highlighter tokens', () => {
  const toks = tokenize('fn main() { let x = "s"; // c\n}', 'rust').filter((t) => t.t);
  assert.deepEqual(toks.map((t) => t.t), ['kw', 'fn', 'kw', 'str', 'com']);
  assert.deepEqual(tokenize('x', 'nope'), [{ t: null, v: 'x' }]);
  assert.equal(langForPath('src/hello.py'), 'python');
  const py = tokenize('def greet():\n    return "hi"\n', 'python').filter((t) => t.t);
  assert.deepEqual(py.map((t) => t.t), ['kw', 'fn', 'kw', 'str']);
});

test('index.html preloads every module of the UI', async () => {
  const { readFileSync, readdirSync } = await import('node:fs');
  const { join, dirname } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  const web = join(dirname(fileURLToPath(import.meta.url)), '..');
  const html = readFileSync(join(web, 'index.html'), 'utf8');
  const preloaded = new Set([...html.matchAll(/rel="modulepreload" href="\/ui\/([^"]+)"/g)].map((m) => m[1]));
  const modules = ['', 'views', 'render'].flatMap((dir) =>
    readdirSync(join(web, dir)).filter((f) => f.endsWith('.js')).map((f) => (dir ? `${dir}/${f}` : f)),
  );
  for (const m of modules) if (m !== 'app.js') assert.ok(preloaded.has(m), `${m} is not in a modulepreload link`);
  for (const m of preloaded) assert.ok(modules.includes(m), `${m} is preloaded but does not exist`);
});
