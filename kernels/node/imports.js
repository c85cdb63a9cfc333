'use strict';
// Module syntax in a cell. A cell is evaluated as a script (the inspector's
// REPL mode), where a static `import ... from 'm'` is a SyntaxError and
// import() has no loader to ask; both are rewritten to the kernel's
// __sandboxd_import(), and `export` before a declaration is dropped, as a
// notebook user expects them to work. A small tokenizer finds them so that
// strings, comments, template literals and regular expressions are never
// touched. Each rewritten statement keeps its line count, so the lines of
// an error's stack still point at the user's code. Anything it cannot
// parse is left as written, for the engine to report.

const ID_START = /[A-Za-z_$\u0080-\uffff]/;
const ID_PART = /[\w$\u0080-\uffff]/;
const REGEX_AFTER_WORD = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw',
  'case', 'do', 'else', 'yield', 'await']);
const EXPORTABLE = new Set(['const', 'let', 'var', 'function', 'class', 'async']);

// tokenize splits src into {type, value, start, end, nl} tokens: id, num,
// str, tmpl (a template literal's text, up to or from a ${ } part), regex,
// punct (one character, or '...'). nl: a line break came before it.
function tokenize(src) {
  const toks = [];
  const tmplDepth = []; // open braces inside each ${ } we are in
  const n = src.length;
  let i = 0;
  let nl = false;
  const push = (type, start) => {
    toks.push({ type, value: src.slice(start, i), start, end: i, nl });
    nl = false;
  };
  const regexAllowed = () => {
    const p = toks[toks.length - 1];
    if (!p) return true;
    if (p.type === 'id') return REGEX_AFTER_WORD.has(p.value);
    if (p.type === 'punct') return p.value !== ')' && p.value !== ']' && p.value !== '}';
    return false;
  };
  // scanTemplate reads template text from i; true when it stopped at '${'.
  const scanTemplate = () => {
    while (i < n) {
      const c = src[i];
      if (c === '\\') i += 2;
      else if (c === '`') { i++; return false; }
      else if (c === '$' && src[i + 1] === '{') { i += 2; return true; }
      else i++;
    }
    return false;
  };
  while (i < n) {
    const c = src[i];
    const start = i;
    if (c === '\n' || c === '\r' || c === '\u2028' || c === '\u2029') { nl = true; i++; continue; }
    if (/\s/.test(c)) { i++; continue; }
    if (c === '/' && src[i + 1] === '/') {
      while (i < n && src[i] !== '\n') i++;
      continue;
    }
    if (c === '/' && src[i + 1] === '*') {
      const close = src.indexOf('*/', i + 2);
      const stop = close < 0 ? n : close + 2;
      if (/[\n\r]/.test(src.slice(i, stop))) nl = true;
      i = stop;
      continue;
    }
    if (c === '"' || c === "'") {
      i++;
      while (i < n && src[i] !== c && src[i] !== '\n') i += src[i] === '\\' ? 2 : 1;
      i = Math.min(i + 1, n);
      push('str', start);
    } else if (c === '`') {
      i++;
      const open = scanTemplate();
      push('tmpl', start);
      if (open) tmplDepth.push(0);
    } else if (c === '}' && tmplDepth.length && tmplDepth[tmplDepth.length - 1] === 0) {
      tmplDepth.pop();
      i++;
      const open = scanTemplate();
      push('tmpl', start);
      if (open) tmplDepth.push(0);
    } else if (ID_START.test(c) || c === '#' || c === '\\') {
      i++;
      while (i < n && (ID_PART.test(src[i]) || src[i] === '\\')) i++;
      push('id', start);
    } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(src[i + 1] || ''))) {
      i++;
      while (i < n && /[\w.]/.test(src[i])) i++;
      push('num', start);
    } else if (c === '/' && regexAllowed()) {
      i++;
      let inClass = false;
      while (i < n && src[i] !== '\n') {
        const d = src[i];
        if (d === '\\') { i += 2; continue; }
        if (d === '[') inClass = true;
        else if (d === ']') inClass = false;
        else if (d === '/' && !inClass) break;
        i++;
      }
      i++;
      while (i < n && ID_PART.test(src[i])) i++;
      push('regex', start);
    } else if (c === '.' && src.startsWith('...', i)) {
      i += 3;
      push('punct', start);
    } else {
      i++;
      if (tmplDepth.length) {
        if (c === '{') tmplDepth[tmplDepth.length - 1]++;
        else if (c === '}') tmplDepth[tmplDepth.length - 1]--;
      }
      push('punct', start);
    }
  }
  return toks;
}

// parseImport reads a static import declaration starting at toks[k]
// ('import'); it returns {end (token index past it), text} or null.
function parseImport(toks, k, code) {
  let j = k + 1;
  const at = (t, v) => toks[j] && toks[j].type === t && (v === undefined || toks[j].value === v);
  let def = null;
  let ns = null;
  let named = null;
  if (!at('str')) {
    if (at('id') && toks[j].value !== 'from') {
      def = toks[j++].value;
      if (!at('punct', ',')) {
        if (!at('id', 'from')) return null;
      } else j++;
    }
    if (at('punct', '*')) {
      j++;
      if (!at('id', 'as')) return null;
      j++;
      if (!at('id')) return null;
      ns = toks[j++].value;
    } else if (at('punct', '{')) {
      j++;
      named = [];
      while (!at('punct', '}')) {
        if (!at('id') && !at('str')) return null;
        const name = toks[j++].value;
        let local = name;
        if (at('id', 'as')) {
          j++;
          if (!at('id')) return null;
          local = toks[j++].value;
        } else if (toks[j - 1].type === 'str') return null;
        named.push(local === name ? name : `${name}: ${local}`);
        if (at('punct', ',')) j++;
        else if (!at('punct', '}')) return null;
      }
      j++;
    }
    if (def === null && ns === null && named === null) return null;
    if (!at('id', 'from')) return null;
    j++;
  }
  if (!at('str')) return null;
  const spec = toks[j++].value;
  let opts = '';
  if ((at('id', 'with') || at('id', 'assert')) && toks[j + 1] && toks[j + 1].value === '{' && !toks[j].nl) {
    const kw = toks[j++].value;
    const open = j;
    let depth = 0;
    for (; j < toks.length; j++) {
      if (toks[j].value === '{') depth++;
      else if (toks[j].value === '}' && --depth === 0) break;
    }
    if (j >= toks.length) return null;
    opts = `, { ${kw}: ${code.slice(toks[open].start, toks[j].end)} }`;
    j++;
  }
  if (at('punct', ';')) j++;
  const load = `await __sandboxd_import(${spec}${opts})`;
  let text;
  if (def === null && ns === null && named === null) text = `${load};`;
  else if (def !== null && (ns !== null || named !== null)) {
    const second = ns !== null ? ns : `{ ${named.join(', ')} }`;
    text = `const [${def}, ${second}] = ((m) => [m.default ?? m, m])(${load});`;
  } else if (def !== null) text = `const ${def} = ((m) => m.default ?? m)(${load});`;
  else if (ns !== null) text = `const ${ns} = ${load};`;
  else text = `const { ${named.join(', ')} } = ${load};`;
  return { end: j, text };
}

function atStatementStart(toks, k) {
  const p = toks[k - 1];
  return !p || toks[k].nl || (p.type === 'punct' && (p.value === ';' || p.value === '}'));
}

// rewrite returns code with its module syntax made runnable in a cell.
function rewrite(code) {
  let toks;
  try {
    toks = tokenize(code);
  } catch (_) {
    return code;
  }
  const edits = []; // [start, end, text], in order
  let depth = 0;
  for (let k = 0; k < toks.length; k++) {
    const t = toks[k];
    if (t.type === 'punct') {
      if (t.value === '(' || t.value === '[' || t.value === '{') depth++;
      else if (t.value === ')' || t.value === ']' || t.value === '}') depth--;
      continue;
    }
    if (t.type !== 'id') continue;
    const prev = toks[k - 1];
    if (prev && prev.type === 'punct' && (prev.value === '.' || prev.value === '?')) continue; // obj.import
    const next = toks[k + 1];
    if (t.value === 'import') {
      if (next && next.value === '(') {
        edits.push([t.start, t.end, '__sandboxd_import']);
      } else if (depth === 0 && next && next.value !== '.' && atStatementStart(toks, k)) {
        const im = parseImport(toks, k, code);
        if (!im) continue;
        const end = toks[im.end - 1].end;
        const lines = (code.slice(t.start, end).match(/\r\n|\r|\n/g) || []).length;
        edits.push([t.start, end, im.text + '\n'.repeat(lines)]);
        k = im.end - 1;
      }
    } else if (t.value === 'export' && depth === 0 && next && next.type === 'id' && EXPORTABLE.has(next.value) &&
      atStatementStart(toks, k)) {
      edits.push([t.start, next.start, '']);
    }
  }
  if (!edits.length) return code;
  let out = '';
  let at = 0;
  for (const [s, e, text] of edits) {
    out += code.slice(at, s) + text;
    at = e;
  }
  return out + code.slice(at);
}

module.exports = { rewrite, tokenize };
