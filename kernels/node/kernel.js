'use strict';
// sandboxd's JavaScript kernel: a persistent REPL context driven over fds 3
// and 4 with newline-delimited JSON (the same protocol as the Python kernel).
//
// Cells run on this (main) thread through an in-process inspector session's
// Runtime.evaluate in REPL mode, which gives top-level await and lets
// let/const/class be declared again in a later cell. The evaluate call is
// made inside vm.runInThisContext with breakOnSigint, so a SIGINT from
// sandboxd terminates a runaway synchronous loop and keeps the context (an
// inspector session on another thread cannot interrupt this one: its
// messages wait for the loop to end). A SIGINT while the cell awaits ends
// the wait instead. No npm packages are used.

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const inspector = require('inspector');
const Module = require('module');
const { pathToFileURL } = require('url');
const imports = require('./imports.js');

const PROTO_IN = 3;
const PROTO_OUT = 4;
const STREAM_CHUNK = 8192;

// Every message sent while a cell runs names it ("cell"), and sandboxd drops
// a message of another cell (one delivered twice across a reconnect).
function send(msg) {
  if (current && msg.cell === undefined && msg.type !== 'done') msg = Object.assign({ cell: current.id }, msg);
  const data = Buffer.from(JSON.stringify(msg) + '\n', 'utf8');
  let off = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(PROTO_OUT, data, off, data.length - off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

// ---- output: console and process.stdout/stderr become stream messages ----

// Runs of [name, texts] in the order written, so stderr stays between the
// stdout lines it came between.
let pending = [];
let pendingSize = 0;
// Text that waits FLUSH_AFTER_MS is sent while the event loop is free (an
// awaited sleep between prints), so a streamed call sees it as it comes.
const FLUSH_AFTER_MS = 100;
let flushTimer = null;

function flushStreams() {
  if (flushTimer) {
    clearTimeout(flushTimer);
    flushTimer = null;
  }
  const runs = pending;
  pending = [];
  pendingSize = 0;
  for (const [name, texts] of runs) send({ type: 'stream', name, text: texts.join('') });
}

function streamWrite(name) {
  return function write(chunk, encoding, cb) {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const last = pending[pending.length - 1];
    if (last && last[0] === name) last[1].push(text);
    else pending.push([name, [text]]);
    pendingSize += text.length;
    if (pendingSize >= STREAM_CHUNK) flushStreams();
    else if (!flushTimer) {
      flushTimer = setTimeout(flushStreams, FLUSH_AFTER_MS);
      flushTimer.unref();
    }
    if (typeof encoding === 'function') encoding();
    else if (typeof cb === 'function') cb();
    return true;
  };
}
process.stdout.write = streamWrite('stdout');
process.stderr.write = streamWrite('stderr');

function display(value, mime, main) {
  flushStreams();
  const data = {};
  if (typeof mime === 'string') {
    data[mime] = String(value);
    if (mime !== 'text/plain') data['text/plain'] = `<${mime}>`;
  } else {
    data['text/plain'] = typeof value === 'string' ? value : util.inspect(value, { colors: false, depth: 4 });
  }
  const msg = { type: 'display', data };
  if (main === true) msg.main = true;
  send(msg);
}

// ---- the tool bridge ----

const calls = new Map(); // call id -> {resolve, reject}
let callSeq = 0;

function tool(name, args) {
  if (typeof name !== 'string') return Promise.reject(new TypeError("tool(name, args): name must be a tool name such as 'read'"));
  if (args === undefined || args === null) args = {};
  if (typeof args !== 'object' || Array.isArray(args)) return Promise.reject(new TypeError("tool(name, args): args must be an object of the tool's arguments"));
  flushStreams();
  const call = ++callSeq;
  return new Promise((resolve, reject) => {
    calls.set(call, { resolve, reject });
    send({ type: 'tool_call', call, name, args });
  });
}

class ToolError extends Error {}
ToolError.prototype.name = 'ToolError';

function toolResult(msg) {
  const waiter = calls.get(msg.call);
  if (!waiter) return;
  calls.delete(msg.call);
  const text = (msg.content || []).filter((b) => b.type === 'text').map((b) => b.text).join('\n');
  if (msg.is_error) waiter.reject(new ToolError(text));
  else waiter.resolve(text);
}

// ---- the REPL context ----

const workdir = process.cwd();
const userRequire = Module.createRequire(path.join(workdir, '<eval>'));
globalThis.require = userRequire;
globalThis.module = { exports: {}, require: userRequire, id: '<eval>', filename: path.join(workdir, '<eval>') };
globalThis.exports = globalThis.module.exports;
globalThis.__filename = path.join(workdir, '<eval>');
globalThis.__dirname = workdir;
globalThis.display = display;
globalThis.tool = tool;
globalThis.ToolError = ToolError;
globalThis.input = globalThis.prompt = () => {
  throw new Error('input is not available in eval: the kernel has no stdin. Put the value in the code instead.');
};
// import() inside inspector-evaluated code has no module loader to ask, so
// dynamic imports are routed through this module, resolved from the workdir.
const importBase = pathToFileURL(path.join(workdir, '<eval>')).href;
Object.defineProperty(globalThis, '__sandboxd_import', {
  value: (spec, options) => {
    if (typeof spec === 'string' && (spec.startsWith('./') || spec.startsWith('../') || spec.startsWith('/'))) {
      spec = new URL(spec, importBase).href;
    } else if (typeof spec === 'string' && Module.builtinModules.includes(spec)) {
      spec = 'node:' + spec;
    } else if (typeof spec === 'string' && !spec.includes(':')) {
      try {
        spec = pathToFileURL(userRequire.resolve(spec)).href;
      } catch (e) {
        if (e && e.code === 'MODULE_NOT_FOUND') {
          // import() would name the kernel's own folder; say where we looked.
          const err = new Error(`Cannot find package '${spec}' from ${workdir}: install it there (npm install ${spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/')}) or give a path`);
          err.code = 'ERR_MODULE_NOT_FOUND';
          return Promise.reject(err);
        }
        // Anything else (an ESM-only package's exports): let import() try.
      }
    }
    return options === undefined ? import(spec) : import(spec, options);
  },
});

const session = new inspector.Session();
session.connect();

let current = null; // the running cell: {id, count, finished}
// Cells run by this kernel, failed ones included (IPython's execution_count).
let executionCount = 0;
const goScript = new vm.Script('__sandboxd_go()', { filename: 'sandboxd-eval' });

function finish(cell, status, error, ename, evalue) {
  if (cell.finished) return;
  cell.finished = true;
  flushStreams();
  if (current === cell) current = null;
  restoreEnv(cell.savedEnv);
  const done = { type: 'done', id: cell.id, status, error: error || null, execution_count: cell.count };
  if (status !== 'ok') {
    done.ename = ename || (status === 'interrupted' ? 'Interrupted' : 'Error');
    done.evalue = evalue === undefined ? String(error || '') : evalue;
  }
  send(done);
}

// A cell's "env": variables set while it runs, put back when it ends.
function setEnv(env) {
  const saved = {};
  if (!env || typeof env !== 'object') return saved;
  for (const [k, v] of Object.entries(env)) {
    if (!k || k.includes('=') || k.includes('\0')) continue;
    saved[k] = Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined;
    process.env[k] = String(v);
  }
  return saved;
}

function restoreEnv(saved) {
  for (const [k, v] of Object.entries(saved || {})) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
}

// The exception's class name and message, reported apart from its stack.
function errorParts(details) {
  const ex = details && details.exception;
  if (!ex) return ['Error', (details && details.text) || ''];
  const name = ex.className || (ex.type === 'object' ? 'Error' : 'Uncaught');
  let value = '';
  if (ex.description) {
    const first = String(ex.description).split('\n')[0];
    value = first.startsWith(name + ': ') ? first.slice(name.length + 2) : first === name ? '' : first;
  } else if ('value' in ex) {
    value = util.inspect(ex.value);
  }
  return [name, value];
}

function format(result, cell) {
  if (!result || result.type === 'undefined') return null;
  if (result.objectId) {
    let text = null;
    session.post('Runtime.callFunctionOn', {
      objectId: result.objectId,
      functionDeclaration: 'function () { return require("util").inspect(this, { colors: false, depth: 4 }); }',
      returnByValue: true,
    }, (err, r) => {
      if (!err && r && r.result) text = r.result.value;
    });
    session.post('Runtime.releaseObject', { objectId: result.objectId }, () => {});
    return text == null ? result.description : text;
  }
  if (result.type === 'string') return util.inspect(result.value);
  if (result.unserializableValue) return result.unserializableValue;
  if ('value' in result) return util.inspect(result.value);
  return result.description || null;
}

// cleanStack drops the kernel's own frames (everything from the inspector
// call down) from an error's stack.
// Frames of node's own machinery and of this kernel's files are dropped
// too: the user's frames and words are what a notebook shows.
function cleanStack(text) {
  const lines = String(text).split('\n');
  const cut = lines.findIndex((l) => /^\s+at (Session\.post|.*__sandboxd_go) /.test(l));
  const kept = (cut > 0 ? lines.slice(0, cut) : lines).filter((l) => !internalFrame(l));
  // "imported from <this file>": the import was the cell's.
  return kept.join('\n').split(__filename).join(path.join(workdir, '<eval>'));
}

function internalFrame(line) {
  if (!/^\s+at /.test(line)) return false;
  return /\(?node:internal\//.test(line) || line.includes(__dirname + path.sep) || /__sandboxd_(import|go)/.test(line);
}

function errorText(details, code) {
  if (!details) return 'Error';
  const ex = details.exception;
  if (ex) {
    if (ex.description) {
      const text = cleanStack(ex.description);
      // A cell that does not parse has no frames: say where, with its line.
      if (ex.className === 'SyntaxError' && !/\n\s+at /.test(text) && typeof details.lineNumber === 'number') {
        const line = String(code).split('\n')[details.lineNumber];
        if (line !== undefined) return `${text}\n  at line ${details.lineNumber + 1}: ${line.trim()}`;
      }
      return text;
    }
    if ('value' in ex) return 'Uncaught ' + util.inspect(ex.value);
  }
  return details.text || 'Error';
}

function execute(msg) {
  const cell = { id: msg.id, count: ++executionCount, finished: false, savedEnv: setEnv(msg.env) };
  current = cell;
  const params = {
    expression: imports.rewrite(msg.code || ''),
    replMode: true,
    awaitPromise: true,
    generatePreview: false,
    objectGroup: 'cell',
  };
  globalThis.__sandboxd_go = () => {
    session.post('Runtime.evaluate', params, (err, r) => {
      if (cell.finished) return;
      if (err) return finish(cell, 'error', String(err.message || err));
      if (r.exceptionDetails) {
        const [ename, evalue] = errorParts(r.exceptionDetails);
        return finish(cell, 'error', errorText(r.exceptionDetails, msg.code), ename, evalue);
      }
      const text = format(r.result, cell);
      if (text != null) display(text, 'text/plain', true);
      finish(cell, 'ok');
    });
  };
  try {
    goScript.runInThisContext({ breakOnSigint: true });
  } catch (e) {
    if (!cell.finished) finish(cell, 'interrupted', 'Interrupted: ' + (e && e.message ? e.message : String(e)));
  }
}

// A SIGINT outside a synchronous run (the cell awaits) ends the wait; the
// awaited work may still settle later and its result is dropped.
process.on('SIGINT', () => {
  if (current) finish(current, 'interrupted', 'Interrupted while awaiting: the pending promise was abandoned');
});

// ---- the protocol reader ----

let buf = '';
// A pipe read through libuv's event loop (not the fs thread pool).
const input = new (require('net').Socket)({ fd: PROTO_IN, readable: true, writable: false });
input.setEncoding('utf8');
input.on('data', (chunk) => {
  buf += chunk;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (!line.trim()) continue;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch (_) {
      continue;
    }
    if (msg.type === 'execute') {
      if (current) finish(current, 'error', 'superseded by a new cell');
      execute(msg);
    } else if (msg.type === 'tool_result') {
      toolResult(msg);
    }
  }
});
input.on('end', () => process.exit(0));
input.on('error', () => process.exit(0));

process.on('uncaughtException', (e) => {
  process.stderr.write('Uncaught ' + (e && e.stack ? e.stack : String(e)) + '\n');
});
process.on('unhandledRejection', (e) => {
  process.stderr.write('Unhandled rejection: ' + (e && e.stack ? e.stack : String(e)) + '\n');
});

send({ type: 'hello', language: 'javascript', version: process.versions.node, pid: process.pid });
