// The UI builds DOM from text only. A use of an HTML-parsing sink or of
// eval anywhere in it fails here, before a browser ever runs it.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const web = join(dirname(fileURLToPath(import.meta.url)), '..');
const SINKS = /\b(?:innerHTML|outerHTML|insertAdjacentHTML|createContextualFragment|document\.write|eval\s*\(|new\s+Function\s*\(|setAttribute\(\s*['"](?:on\w+|style)['"]|DOMParser|srcdoc)\b/;

test('no HTML string sinks, eval, inline handlers or inline styles in the UI', () => {
  const files = ['', 'views', 'render'].flatMap((dir) =>
    readdirSync(join(web, dir)).filter((f) => f.endsWith('.js')).map((f) => join(dir, f)),
  );
  assert.ok(files.length > 10);
  for (const file of files) {
    readFileSync(join(web, file), 'utf8').split('\n').forEach((line, i) => {
      assert.ok(!SINKS.test(line), `${file}:${i + 1}: ${line.trim()}`);
    });
  }
  const html = readFileSync(join(web, 'index.html'), 'utf8');
  assert.ok(!/<script(?![^>]*\bsrc=)[^>]*>/.test(html), 'no inline script in index.html');
  assert.ok(!/\sstyle=|\son\w+=/.test(html), 'no inline style or handler in index.html');
});
