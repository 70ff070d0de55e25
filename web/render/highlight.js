// Syntax highlighting by a small tokenizer per language family: comments,
// strings, numbers, keywords, literals, function names, and a few extras.
// Output is text nodes and <span class="tok-…">, never HTML strings.

const words = (s) => new Set(s.split(/\s+/).filter(Boolean));

const JS_KW =
  'break case catch class const continue debugger default delete do else export extends finally for function if import in instanceof let new return super switch this throw try typeof var void while with yield async await of static get set from as';
const C_KW =
  'auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class namespace template typename public private protected virtual override new delete this throw try catch final import package extends implements interface abstract boolean byte fun val var when object companion data sealed suspend using func let guard protocol extension self struct mut';

const LANGS = {
  js: {
    line: ['//'],
    block: [['/*', '*/']],
    str: ['`', '"', "'"],
    kw: words(JS_KW),
    lit: words('true false null undefined NaN Infinity'),
  },
  ts: {
    line: ['//'],
    block: [['/*', '*/']],
    str: ['`', '"', "'"],
    kw: words(`${JS_KW} interface type enum implements private public protected readonly declare namespace abstract keyof infer is satisfies`),
    lit: words('true false null undefined NaN Infinity'),
  },
  rust: {
    line: ['//'],
    block: [['/*', '*/']],
    str: ['"'],
    kw: words(
      'as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait type unsafe use where while',
    ),
    lit: words('true false None Some Ok Err'),
    meta: /#!?\[[^\]\n]*\]|\b[a-z_]+!/y,
  },
  python: {
    line: ['#'],
    str: ['"""', "'''", '"', "'"],
    kw: words(
      'and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case',
    ),
    lit: words('True False None self cls'),
    meta: /@[\w.]+/y,
  },
  go: {
    line: ['//'],
    block: [['/*', '*/']],
    str: ['"', '`', "'"],
    kw: words(
      'break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var',
    ),
    lit: words('true false nil iota'),
  },
  sh: {
    line: ['#'],
    str: ['"', "'"],
    kw: words(
      'if then else elif fi for while until do done case esac in function return exit export local readonly set unset shift break continue echo cd printf source alias trap sudo',
    ),
    lit: words('true false'),
    meta: /\$\{[^}\n]*\}|\$[\w@#?*!$-]/y,
  },
  c: {
    line: ['//'],
    block: [['/*', '*/']],
    str: ['"', "'"],
    kw: words(C_KW),
    lit: words('true false null nullptr NULL nil'),
    meta: /#[ \t]*[a-z]+|@\w+/y,
  },
  json: { str: ['"'], lit: words('true false null') },
  toml: {
    line: ['#'],
    str: ['"""', "'''", '"', "'"],
    lit: words('true false null yes no on off'),
    meta: /^[ \t]*\[[^\]\n]*\]|^[ \t]*[\w.-]+(?=[ \t]*[=:])|^[ \t]*- /my,
  },
  css: {
    block: [['/*', '*/']],
    str: ['"', "'"],
    meta: /[.#]?[a-zA-Z][\w-]*(?=[^{};]*\{)|@[\w-]+/y,
  },
  html: {
    block: [['<!--', '-->']],
    str: ['"', "'"],
    meta: /<\/?[\w:-]+|\/?>/y,
  },
  sql: {
    line: ['--'],
    block: [['/*', '*/']],
    str: ["'", '"'],
    ci: true,
    kw: words(
      'select from where insert into values update set delete create table alter drop index join left right inner outer on group by order having limit offset as and or not null is in like between primary key foreign references distinct union all case when then else end begin commit rollback returning with exists default unique',
    ),
    lit: words('true false'),
  },
  diff: { lines: true },
};

const ALIASES = {
  javascript: 'js', mjs: 'js', cjs: 'js', jsx: 'js', node: 'js',
  typescript: 'ts', tsx: 'ts',
  rs: 'rust',
  py: 'python', python3: 'python',
  golang: 'go',
  bash: 'sh', shell: 'sh', zsh: 'sh', console: 'sh', shellsession: 'sh',
  h: 'c', cpp: 'c', 'c++': 'c', hpp: 'c', cc: 'c', java: 'c', kotlin: 'c', kt: 'c',
  cs: 'c', csharp: 'c', swift: 'c', scala: 'c',
  yml: 'toml', yaml: 'toml', ini: 'toml', conf: 'toml', cfg: 'toml', dockerfile: 'sh', make: 'sh', makefile: 'sh',
  htm: 'html', xml: 'html', svg: 'html', vue: 'html',
  scss: 'css', less: 'css',
  patch: 'diff',
  jsonc: 'json', json5: 'json',
};

const EXTENSIONS = {
  js: 'js', mjs: 'js', cjs: 'js', jsx: 'js', ts: 'ts', tsx: 'ts', rs: 'rust', py: 'python',
  go: 'go', sh: 'sh', bash: 'sh', zsh: 'sh', c: 'c', h: 'c', cpp: 'c', hpp: 'c', cc: 'c',
  java: 'c', kt: 'c', cs: 'c', swift: 'c', scala: 'c', json: 'json', toml: 'toml', yaml: 'toml',
  yml: 'toml', ini: 'toml', cfg: 'toml', lock: 'toml', html: 'html', htm: 'html', xml: 'html', svg: 'html',
  css: 'css', scss: 'css', sql: 'sql', diff: 'diff', patch: 'diff',
};

/** Beyond this, code is shown plain: highlighting it would stall the page. */
const MAX_CHARS = 200_000;

export function resolveLang(lang) {
  const key = String(lang || '').toLowerCase();
  if (LANGS[key]) return key;
  return ALIASES[key] || null;
}

/** The language for a file name, by its extension (or name). */
export function langForPath(path) {
  const name = String(path).split('/').pop().toLowerCase();
  if (name === 'makefile' || name === 'dockerfile') return 'sh';
  const ext = name.includes('.') ? name.split('.').pop() : '';
  return EXTENSIONS[ext] || null;
}

const IDENT = /[A-Za-z_$][\w$]*/y;
const NUMBER = /(?:0x[\da-fA-F_]+|0b[01_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)[a-zA-Z\d]*/y;

/** Code → [{t: class or null, v: text}]. */
export function tokenize(code, lang) {
  const key = resolveLang(lang);
  const spec = key && LANGS[key];
  if (!spec || code.length > MAX_CHARS) return [{ t: null, v: code }];
  if (spec.lines) return diffTokens(code);
  const out = [];
  let plain = '';
  const push = (t, v) => {
    if (plain) out.push({ t: null, v: plain });
    plain = '';
    out.push({ t, v });
  };
  let i = 0;
  const n = code.length;
  outer: while (i < n) {
    for (const prefix of spec.line || []) {
      if (code.startsWith(prefix, i)) {
        let end = code.indexOf('\n', i);
        if (end < 0) end = n;
        push('com', code.slice(i, end));
        i = end;
        continue outer;
      }
    }
    for (const [open, close] of spec.block || []) {
      if (code.startsWith(open, i)) {
        let end = code.indexOf(close, i + open.length);
        end = end < 0 ? n : end + close.length;
        push('com', code.slice(i, end));
        i = end;
        continue outer;
      }
    }
    for (const quote of spec.str || []) {
      if (code.startsWith(quote, i)) {
        const end = stringEnd(code, i, quote);
        push('str', code.slice(i, end));
        i = end;
        continue outer;
      }
    }
    if (spec.meta) {
      spec.meta.lastIndex = i;
      const m = spec.meta.exec(code);
      if (m && m[0] && m.index === i) {
        push('meta', m[0]);
        i += m[0].length;
        continue;
      }
    }
    const ch = code[i];
    const prev = i > 0 ? code[i - 1] : '';
    if (/\d/.test(ch) && !/[\w$]/.test(prev)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(code);
      push('num', m[0]);
      i += m[0].length;
      continue;
    }
    if (/[A-Za-z_$]/.test(ch) && !/[\w$]/.test(prev)) {
      IDENT.lastIndex = i;
      const word = IDENT.exec(code)[0];
      const key = spec.ci ? word.toLowerCase() : word;
      if (spec.kw && spec.kw.has(key)) push('kw', word);
      else if (spec.lit && spec.lit.has(key)) push('lit', word);
      else if (code[i + word.length] === '(' && spec.kw) push('fn', word);
      else plain += word;
      i += word.length;
      continue;
    }
    plain += ch;
    i++;
  }
  if (plain) out.push({ t: null, v: plain });
  return out;
}

/** End (exclusive) of the string starting at `i` with `quote`. */
function stringEnd(code, i, quote) {
  const multiline = quote.length === 3 || quote === '`';
  let j = i + quote.length;
  while (j < code.length) {
    const ch = code[j];
    if (ch === '\\') {
      j += 2;
      continue;
    }
    if (code.startsWith(quote, j)) return j + quote.length;
    if (ch === '\n' && !multiline) return j;
    j++;
  }
  return code.length;
}

function diffTokens(code) {
  return code.split(/(?<=\n)/).map((line) => {
    if (/^(?:\+\+\+|---|@@|diff |index )/.test(line)) return { t: 'meta', v: line };
    if (line.startsWith('+')) return { t: 'add', v: line };
    if (line.startsWith('-')) return { t: 'del', v: line };
    return { t: null, v: line };
  });
}

/** Code → a DocumentFragment of text nodes and token spans. */
export function highlight(code, lang) {
  const frag = document.createDocumentFragment();
  for (const token of tokenize(String(code), lang)) {
    if (!token.t) {
      frag.append(document.createTextNode(token.v));
    } else {
      const span = document.createElement('span');
      span.className = `tok-${token.t}`;
      span.textContent = token.v;
      frag.append(span);
    }
  }
  return frag;
}
