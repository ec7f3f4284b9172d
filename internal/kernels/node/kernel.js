// kiln's JavaScript and TypeScript REPL kernel. It runs as
// `node -e <this source>` (or from a loader that read it from fd 3:
// kernels.Spec.Boot) and speaks package kernelproto on fd 3;
// KILN_KERNEL_LANG (javascript or typescript) says which language, and
// KILN_TYPESCRIPT where the TypeScript compiler lives.
//
// Cells run in the kernel's own realm with vm.Script.runInThisContext, as
// in Node's REPL, so require(), Buffer and what modules return are the
// cell's own. Top-level let, const and class become var before a cell
// runs, so they persist and may be declared again (const is then
// reassignable). A small scanner does this for most cells; a cell with
// top-level await, import or export is parsed with the TypeScript
// compiler's parser, loaded on the first such cell: it runs in an async
// arrow whose declarations become assignments to globals declared in front
// of it, and its static imports become require(). Stack traces are mapped
// back to the cell's lines and columns, and the kernel's frames dropped, by
// Error.prepareStackTrace.
//
// TypeScript cells are checked against a declaration context (the .d.ts of
// every earlier cell, keyed by name so a cell can declare a name again),
// with Node's globals declared loosely and every module as any; a cell
// with errors does not run and fails with an error named TSError
// (SyntaxError for syntax), listing every diagnostic as line:col. Then the
// emitted JavaScript runs as above, mapped back through its source map.
//
// Display: display(...values) shows values as the cell's result would
// (util.inspect, plus _repr_html_ and friends), and display.text,
// display.html, display.markdown, display.svg, display.png (base64 or
// bytes), display.json and display.mime({type: data}) show one output.
//
// Interrupts: see the watchdog below. process.exit() in a cell ends the
// kernel, after its output is written: the agent sees the kernel exit.
// The kernel keeps its own references to the globals it uses: a cell may
// declare any of those names.
((process, require, globalThis, Buffer, Promise, Map, Set, WeakMap, Symbol, Error, SyntaxError, TypeError, Object, Array, String, Number, Math, Atomics, SharedArrayBuffer, Int32Array, ArrayBuffer, setImmediate, queueMicrotask) => {
  'use strict';
  const fs = require('fs');
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const { Readable } = require('stream');

  const LANG = process.env.KILN_KERNEL_LANG === 'typescript' ? 'typescript' : 'javascript';
  const TS_DIR = process.env.KILN_TYPESCRIPT || '/usr/local/lib/node_modules/typescript';
  delete process.env.KILN_KERNEL_LANG;
  delete process.env.KILN_TYPESCRIPT;
  const isTS = LANG === 'typescript';

  const MAX_LINE = 32 << 20; // kernelproto.MaxLine
  const FD = 3; // kernelproto.ChannelFD
  const MAX_TEXT = 1 << 20; // longest text/plain of a value, in characters
  const stringify = JSON.stringify;
  const parseJSON = JSON.parse;
  const inspect = util.inspect;
  const stdout = process.stdout;
  const stderr = process.stderr;
  const INTERRUPTED = Symbol('interrupted');
  const CELL_ERROR = Symbol('cell error');
  // Dynamic import() in cells uses the kernel's own loader.
  const DYN = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;

  // Writes to stdout and stderr block, so a cell's output is in the pipes
  // when its Done is sent, and process.exit() loses nothing.
  for (const s of [stdout, stderr]) {
    try {
      if (s._handle && typeof s._handle.setBlocking === 'function') s._handle.setBlocking(true);
    } catch {}
  }
  // Using DYN warns once that it is experimental; the user did not ask for it.
  const emitWarning = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    if (String(warning && warning.message || warning).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
    return emitWarning.call(this, warning, ...rest);
  };

  // ---- the channel ----

  const nap = new Int32Array(new SharedArrayBuffer(4));

  function writeFully(fd, buf) {
    for (let off = 0; off < buf.length;) {
      try {
        off += fs.writeSync(fd, buf, off, buf.length - off);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
        Atomics.wait(nap, 0, 0, 2);
      }
    }
  }

  // send writes one message synchronously: messages keep their order with
  // the output, and nothing is lost when a cell calls process.exit().
  function send(msg) {
    let line = stringify(msg) + '\n';
    if (line.length > MAX_LINE / 3 && Buffer.byteLength(line) > MAX_LINE) {
      line = stringify(shrink(msg, Buffer.byteLength(line))) + '\n';
      if (Buffer.byteLength(line) > MAX_LINE) return;
    }
    try {
      writeFully(FD, Buffer.from(line));
    } catch {
      process.exit(0); // the agent is gone
    }
  }

  function shrink(msg, size) {
    switch (msg.type) {
      case 'display':
      case 'execute_result':
        return { type: msg.type, cell: msg.cell, data: { 'text/plain': `[${size}-byte output not shown: over the ${MAX_LINE >> 20} MiB message limit]` } };
      case 'error':
        return { ...msg, message: cut(msg.message, MAX_TEXT), traceback: msg.traceback.slice(0, 200).map((s) => cut(s, 4096)) };
      case 'completion':
        return { ...msg, matches: msg.matches.slice(0, 1000) };
    }
    return msg;
  }

  function cut(s, n) {
    s = String(s);
    return s.length <= n ? s : `${s.slice(0, n)}… [${s.length - n} more characters]`;
  }

  // feed splits what the channel delivered into lines and dispatches
  // them. The channel's data event calls it, and so does a cell's
  // synchronous stdin read (readStdinSync), which reads the channel itself
  // while the event loop cannot run.
  let parts = [];
  let size = 0;
  let skipping = false; // inside a line longer than MAX_LINE
  function feed(chunk) {
    for (let start = 0; ;) {
      const nl = chunk.indexOf(10, start);
      if (nl < 0) {
        if (!skipping) {
          parts.push(chunk.subarray(start));
          size += chunk.length - start;
          if (size > MAX_LINE) [parts, size, skipping] = [[], 0, true];
        }
        return;
      }
      if (!skipping) {
        parts.push(chunk.subarray(start, nl));
        const line = Buffer.concat(parts).toString('utf8');
        let msg;
        try {
          msg = parseJSON(line);
        } catch {} // not JSON: ignore the line
        try {
          dispatch(msg);
        } catch (e) {
          stderr.write(`kiln kernel: ${e && e.stack || e}\n`);
        }
      }
      [parts, size, skipping] = [[], 0, false];
      start = nl + 1;
    }
  }

  function listen() {
    const chan = new net.Socket({ fd: FD, readable: true, writable: true });
    chan.on('data', feed);
    chan.on('end', () => process.exit(0));
    chan.on('error', () => process.exit(0));
  }

  const queue = [];
  let running = false;

  function dispatch(msg) {
    if (!msg || typeof msg !== 'object') return;
    const cell = typeof msg.cell === 'string' ? msg.cell : '';
    const code = typeof msg.code === 'string' ? msg.code : '';
    if (msg.type === 'execute') {
      queue.push(msg);
      pump();
      return;
    }
    if (msg.type === 'stdin') {
      answerStdin(msg);
      return;
    }
    // While a cell awaits, this is the kernel's code, not the cell's: the
    // watchdog must leave it alone.
    const phase = Atomics.exchange(shared, 0, 0);
    try {
      answer(msg, cell, code);
    } finally {
      Atomics.store(shared, 0, phase);
    }
  }

  function answer(msg, cell, code) {
    switch (msg.type) {
      case 'complete': {
        let r = { matches: [], cursor_start: 0, cursor_end: 0 };
        try {
          r = complete(code, Number.isInteger(msg.cursor) ? msg.cursor : Infinity);
        } catch {}
        send({ type: 'completion', cell, ...r });
        break;
      }
      case 'check': {
        let r = { status: 'complete' };
        try {
          r = check(code);
        } catch {}
        send({ type: 'check_result', cell, ...r });
        break;
      }
    }
  }

  // pump starts the next cell. Cells run in a microtask of their own,
  // never inside the channel's data event: if the watchdog terminates a
  // cell, the frames it unwinds are the cell's and the kernel's, not the
  // socket stream's.
  function pump() {
    if (running || !queue.length) return;
    running = true;
    const msg = queue.shift();
    queueMicrotask(() => execute(msg));
  }

  // ---- running a cell ----

  let current = null; // the running cell: { id, file, interrupt, finished }
  let count = 0; // cells run, for "<cell N>"; a warm-up cell takes no number

  // Packages installed into the session (POST /v1/sessions/{id}/packages)
  // go into node_modules on the sandbox's private /tmp
  // (service/packages.go). When it appears, it joins NODE_PATH and
  // require's global paths are read again, so a cell finds them without a
  // restart. (import() of a bare name does not read NODE_PATH.)
  const PKG_MODULES = path.join(process.env.TMPDIR || '/tmp', '.kiln', 'packages', 'node', 'node_modules');
  // A session's prebuilt environment (service/environments.go) is a
  // read-only layer the service links at $TMPDIR/.kiln-environment; its
  // node_modules comes after the session's own, so those win.
  const ENV_MODULES = path.join(process.env.TMPDIR || '/tmp', '.kiln-environment', 'node', 'node_modules');
  const baseNodePath = process.env.NODE_PATH;
  let pkgSeen = false;
  let envSeen = false;
  function seePackages() {
    const pkg = pkgSeen || fs.existsSync(PKG_MODULES);
    const env = envSeen || fs.existsSync(ENV_MODULES);
    if (pkg === pkgSeen && env === envSeen) return;
    pkgSeen = pkg;
    envSeen = env;
    process.env.NODE_PATH = [pkg && PKG_MODULES, env && ENV_MODULES, baseNodePath].filter(Boolean).join(path.delimiter);
    require('module')._initPaths();
  }

  async function execute(msg) {
    seePackages();
    const cell = typeof msg.cell === 'string' ? msg.cell : '';
    const file = msg.warmup ? '<warm-up>' : `<cell ${++count}>`;
    // A one-shot run's script name and arguments, as node would give them.
    if (Array.isArray(msg.argv) && msg.argv.length > 0 && msg.argv.every((a) => typeof a === 'string')) {
      process.argv = [process.argv[0], ...msg.argv];
    }
    const cur = (current = { id: cell, file, interrupt: null, finished: false });
    cellInput = msg.stdin_open ? openSource(cur) : msg.has_stdin ? fixedSource(String(msg.stdin ?? '')) : null;
    cellStdin = null;
    let status = 'ok';
    try {
      const p = prepare(typeof msg.code === 'string' ? msg.code : '', cur.file);
      Atomics.store(shared, 0, 1);
      let value = p.script.runInThisContext({ breakOnSigint: !watchdog, displayErrors: false });
      if (p.async) {
        const promise = value;
        value = await new Promise((resolve, reject) => {
          cur.interrupt = () => reject(INTERRUPTED);
          promise.then(resolve, reject);
        });
      }
      Atomics.store(shared, 0, 0);
      if (value !== undefined) send({ type: 'execute_result', cell, data: bundle(value) });
    } catch (e) {
      Atomics.store(shared, 0, 0);
      if (e === INTERRUPTED || (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')) {
        status = 'interrupted';
      } else {
        status = 'error';
        try {
          send(errorMessage(cell, cur.file, e));
        } catch (e2) {
          stderr.write(`kiln kernel: ${e2 && e2.stack || e2}\n`);
        }
      }
    }
    finish(cur, status);
  }

  // finish ends a cell once. execute calls it, and so does the SIGINT
  // listener, for when the watchdog's termination ended execute itself.
  function finish(cur, status) {
    if (cur.finished) return;
    cur.finished = true;
    Atomics.store(shared, 0, 0);
    if (current === cur) current = null;
    if (cellInput) end(cellInput);
    cellInput = cellStdin = null;
    // After a turn of the event loop, so that Node has reported the
    // promises the cell left rejected (on stderr, in this cell).
    setImmediate(() => flush().then(() => {
      send({ type: 'done', cell: cur.id, status });
      running = false;
      pump();
    }));
  }

  // Interrupts. The main thread cannot stop code that runs on it, so a
  // watchdog thread hears SIGINT too. If the main thread's SIGINT listener
  // has not heard it (shared[1] counts) within 100 ms while cell code may
  // be running (shared[0]), the main thread is busy in the cell, and the
  // watchdog ends that code with the inspector's
  // Runtime.terminateExecution: a loop at the top of a cell, after an
  // await, or in an async function the cell awaits. The listener then
  // finishes the cell as interrupted. When the cell is only awaiting, the
  // listener answers and stops waiting for it itself. A SIGINT while idle
  // changes nothing.
  //
  // Without the watchdog (no inspector, no signal_wrap) the top of a cell
  // runs with vm's breakOnSigint instead. The two cannot be mixed: vm
  // resets SIGINT's handler after each run, and libuv only reinstalls its
  // own while no other thread is listening.
  const shared = new Int32Array(new SharedArrayBuffer(8));
  let watchdog = null;

  const WATCHDOG = `
const { workerData: shared, parentPort } = require('worker_threads');
const inspector = require('inspector');
let Signal;
const warn = process.emitWarning;
process.emitWarning = () => {};
try {
  ({ Signal } = process.binding('signal_wrap'));
} catch {}
process.emitWarning = warn;
let h;
if (Signal && typeof inspector.Session.prototype.connectToMainThread === 'function') {
  // Both threads hear every SIGINT; seen counts this thread's, shared[1]
  // the main thread's answers.
  let seen = Atomics.load(shared, 1);
  let terminating = false;
  h = new Signal();
  h.onsignal = () => {
    const mine = ++seen;
    let tries = 0;
    const poll = setInterval(() => {
      if (Atomics.load(shared, 1) >= mine || ++tries > 100) return clearInterval(poll);
      if (Atomics.load(shared, 0) !== 1 || terminating) return;
      clearInterval(poll);
      terminating = true;
      try {
        const s = new inspector.Session();
        s.connectToMainThread();
        s.post('Runtime.terminateExecution', () => {
          s.disconnect();
          const wait = setInterval(() => {
            if (Atomics.load(shared, 1) < mine) return;
            clearInterval(wait);
            terminating = false;
          }, 20);
        });
      } catch {
        terminating = false;
      }
    }, 100);
  };
}
if (!h || h.start(2) !== 0) parentPort.postMessage('unavailable');
`;

  function startWatchdog() {
    try {
      const { Worker } = require('worker_threads');
      const w = new Worker(WATCHDOG, { eval: true, workerData: shared });
      const off = () => {
        if (watchdog === w) watchdog = null;
      };
      w.on('message', off);
      w.on('error', off);
      w.on('exit', off);
      w.unref();
      watchdog = w;
    } catch {}
  }

  process.on('SIGINT', () => {
    Atomics.add(shared, 1, 1);
    const cur = current;
    if (!cur) return;
    if (cur.interrupt) cur.interrupt();
    setImmediate(() => finish(cur, 'interrupted'));
  });
  process.on('uncaughtException', (e) => {
    try {
      stderr.write(`Uncaught ${describe(e)}\n`);
    } catch {}
  });
  process.on('unhandledRejection', (e) => {
    try {
      stderr.write(`Unhandled promise rejection: ${describe(e)}\n`);
    } catch {}
  });

  function describe(e) {
    try {
      return isError(e) ? String(e.stack) : inspect(e);
    } catch {
      return '<value that cannot be shown>';
    }
  }

  function isError(e) {
    return util.types.isNativeError(e) || e instanceof Error;
  }

  function flush() {
    return Promise.all([stdout, stderr].map((s) => new Promise((resolve) => {
      try {
        while (s.writableCorked) s.uncork();
        if (!s.writableLength) return resolve();
        s.write('', () => resolve());
      } catch {
        resolve();
      }
    })));
  }

  // Cells read stdin through process.stdin, which serves the Execute's
  // stdin; without one, reading fails at once. Open stdin (stdin_open) is
  // pulled: when the cell reads and nothing is buffered, the kernel sends
  // stdin_request, and the agent's answer is added to the cell's source.
  // process.stdin hears of it in a turn of its own (never inside the
  // channel's data event). Raw reads of fd 0 (fs.readSync(0, ...),
  // fs.readFileSync(0) or '/dev/stdin') read the same source
  // synchronously: the kernel reads the channel itself until the answer
  // comes. Without stdin they read the kernel's own fd 0, which is empty,
  // and so does a child process. The source ends with the cell.
  let cellInput = null; // the running cell's stdin source, or null
  let cellStdin = null;
  Object.defineProperty(process, 'stdin', {
    configurable: true,
    enumerable: true,
    get() {
      if (!cellStdin) cellStdin = cellInput ? makeStdin(cellInput) : noStdin();
      return cellStdin;
    },
  });

  function fixedSource(text) {
    return { chunks: text ? [Buffer.from(text)] : [], eof: true, err: null, cur: null, asked: false, wake: null };
  }

  function openSource(cur) {
    return { chunks: [], eof: false, err: null, cur, asked: false, wake: null };
  }

  // ask sends the source's stdin request, once until it is answered.
  function ask(src) {
    if (src.asked || src.eof) return;
    if (current !== src.cur) return end(src);
    src.asked = true;
    send({ type: 'stdin_request', cell: src.cur.id });
  }

  function end(src) {
    src.eof = true;
    if (src.wake) src.wake();
  }

  // take returns at most max bytes of what the source holds.
  function take(src, max) {
    const b = src.chunks[0];
    if (b.length <= max) return src.chunks.shift();
    src.chunks[0] = b.subarray(max);
    return b.subarray(0, max);
  }

  function answerStdin(msg) {
    const src = cellInput;
    if (!src || !src.cur || src.cur !== current || msg.cell !== current.id) return; // a cell that ended
    src.asked = false;
    if (typeof msg.data === 'string' && msg.data) src.chunks.push(Buffer.from(msg.data, 'base64'));
    if (typeof msg.error === 'string' && msg.error) {
      src.err = msg.error;
      src.eof = true;
    } else if (msg.eof) src.eof = true;
    const wake = src.wake;
    if (wake) setImmediate(wake);
  }

  function lostError(text) {
    return Object.assign(new Error(text), { code: 'ESTDINLOST' });
  }

  function makeStdin(src) {
    let ended = false;
    // pass pushes what the source holds; false if it waits for more.
    const pass = () => {
      if (ended) return true;
      while (src.chunks.length) r.push(take(src, Infinity));
      if (src.err) {
        const text = src.err;
        src.err = null;
        ended = true;
        r.destroy(lostError(text));
      } else if (src.eof) {
        ended = true;
        r.push(null);
      }
      return ended;
    };
    const r = new Readable({
      read() {
        if (!pass()) ask(src);
      },
    });
    src.wake = pass;
    r.fd = 0;
    r.isTTY = false;
    return r;
  }

  function noStdin() {
    const r = new Readable({
      read() {
        this.destroy(Object.assign(new Error('stdin is not available: the cell was run without input'), { code: 'ENOSTDIN' }));
      },
    });
    r.fd = 0;
    r.isTTY = false;
    return r;
  }

  // readStdinSync returns at most max bytes of the cell's stdin, waiting
  // for the agent if nothing is buffered; an empty buffer is end of file.
  const chunk = Buffer.alloc(1 << 16);
  function readStdinSync(src, max) {
    while (!src.chunks.length && !src.eof) {
      ask(src);
      if (src.eof) break;
      let n;
      try {
        n = fsReadSync(FD, chunk, 0, chunk.length, null);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
        Atomics.wait(nap, 0, 0, 10);
        continue;
      }
      if (n === 0) process.exit(0); // the agent is gone
      feed(Buffer.from(chunk.subarray(0, n)));
    }
    if (src.chunks.length) return take(src, max);
    if (src.err) {
      const text = src.err;
      src.err = null;
      throw lostError(text);
    }
    return Buffer.alloc(0);
  }

  function isStdinPath(p) {
    return p === 0 || p === '/dev/stdin' || p === '/proc/self/fd/0';
  }

  const fsReadSync = fs.readSync;
  const fsReadFileSync = fs.readFileSync;
  fs.readSync = function readSync(fd, buffer, offsetOrOptions, length, position) {
    const src = cellInput;
    if (fd !== 0 || !src || !ArrayBuffer.isView(buffer)) return Reflect.apply(fsReadSync, this, arguments);
    let offset = offsetOrOptions;
    if (offset !== null && typeof offset === 'object') ({ offset, length } = offset);
    offset = Number.isInteger(offset) ? offset : 0;
    if (!Number.isInteger(length)) length = buffer.byteLength - offset;
    if (offset < 0 || length < 0 || offset + length > buffer.byteLength) return Reflect.apply(fsReadSync, this, arguments); // Node's own range error
    const got = readStdinSync(src, length);
    new Uint8Array(buffer.buffer, buffer.byteOffset + offset, got.length).set(got);
    return got.length;
  };
  fs.readFileSync = function readFileSync(file, options) {
    const src = cellInput;
    if (!src || !isStdinPath(file)) return Reflect.apply(fsReadFileSync, this, arguments);
    const parts = [];
    for (let b; (b = readStdinSync(src, 1 << 20)).length;) parts.push(b);
    const all = Buffer.concat(parts);
    const enc = typeof options === 'string' ? options : options && options.encoding;
    return enc ? all.toString(enc) : all;
  };
  try {
    require('module').syncBuiltinESMExports(); // import { readFileSync } from 'fs' too
  } catch {}

  // ---- display ----

  const REPRS = [
    ['_repr_html_', 'text/html'],
    ['_repr_markdown_', 'text/markdown'],
    ['_repr_svg_', 'image/svg+xml'],
    ['_repr_png_', 'image/png'],
    ['_repr_json_', 'application/json'],
  ];

  // bundle is a value's MIME bundle: util.inspect as text/plain, plus what
  // its _repr_html_ and friends return (Jupyter's convention).
  function bundle(v) {
    const data = { 'text/plain': cut(inspect(v), MAX_TEXT) };
    if (v !== null && (typeof v === 'object' || typeof v === 'function')) {
      for (const [method, mime] of REPRS) {
        try {
          if (typeof v[method] !== 'function') continue;
          const r = v[method]();
          if (r === undefined || r === null) continue;
          if (mime === 'application/json') stringify(r);
          data[mime] = mime === 'application/json' ? r : mime === 'image/png' ? base64(r) : String(r);
        } catch {}
      }
    }
    return data;
  }

  function base64(x) {
    return typeof x === 'string' ? x.replace(/\s+/g, '') : Buffer.from(x).toString('base64');
  }

  function emit(data) {
    if (!current) {
      stdout.write(`${data['text/plain']}\n`);
      return;
    }
    send({ type: 'display', cell: current.id, data });
  }

  // display(...values) shows each value as execute_result would; its
  // helpers show one rich output each.
  function display(...values) {
    for (const v of values) emit(bundle(v));
  }
  display.text = (s) => emit({ 'text/plain': String(s) });
  display.html = (s) => emit({ 'text/html': String(s), 'text/plain': cut(String(s), MAX_TEXT) });
  display.markdown = (s) => emit({ 'text/markdown': String(s), 'text/plain': cut(String(s), MAX_TEXT) });
  display.svg = (s) => emit({ 'image/svg+xml': String(s), 'text/plain': '[SVG image]' });
  display.png = (data) => {
    const b = base64(data);
    emit({ 'image/png': b, 'text/plain': `[PNG image, ${Math.floor(b.length * 3 / 4)} bytes]` });
  };
  display.json = (v) => {
    if (stringify(v) === undefined) throw new TypeError('display.json: the value has no JSON form');
    emit({ 'application/json': v, 'text/plain': cut(inspect(v, { depth: 4 }), MAX_TEXT) });
  };
  display.mime = (b) => {
    const data = {};
    for (const [k, v] of Object.entries(b || {})) {
      if (k === 'application/json' || k.endsWith('+json')) {
        if (stringify(v) === undefined) throw new TypeError(`display.mime: ${k} has no JSON form`);
        data[k] = v;
      } else data[k] = k.startsWith('image/') && typeof v !== 'string' ? base64(v) : String(v);
    }
    if (!('text/plain' in data)) data['text/plain'] = `[${Object.keys(data).join(', ')}]`;
    emit(data);
  };
  Object.defineProperty(globalThis, 'display', { value: display, writable: true, configurable: true, enumerable: false });

  // ---- errors and stack traces ----

  const cells = new Map(); // script file name -> { map }
  const frameInfo = new WeakMap(); // error -> its kept frames

  // Stack traces: positions in a cell are mapped back to the cell's code,
  // and the frames after the last cell frame (the kernel's) are dropped.
  Error.prepareStackTrace = function (err, sites) {
    const frames = [];
    for (const s of sites) {
      let text;
      try {
        text = String(s);
      } catch {
        text = '<unknown>';
      }
      const file = s.getFileName();
      const c = file && cells.get(file);
      let line = s.getLineNumber();
      let col = s.getColumnNumber();
      let cell = false;
      if (c && line) {
        try {
          const pos = c.map(line, col);
          if (pos) {
            text = text.replace(`${file}:${line}:${col}`, `${file}:${pos[0]}:${pos[1]}`);
            [line, col, cell] = [...pos, true];
          }
        } catch {}
      }
      frames.push({ file, line, col, cell, text });
    }
    let last = -1;
    frames.forEach((f, i) => {
      if (f.cell) last = i;
    });
    const kept = last < 0 ? frames : frames.slice(0, last + 1);
    if (err !== null && (typeof err === 'object' || typeof err === 'function')) frameInfo.set(err, kept);
    let head;
    try {
      head = Error.prototype.toString.call(err);
    } catch {
      head = 'Error';
    }
    return head + kept.map((f) => `\n    at ${f.text}`).join('');
  };

  function cellError(name, message, traceback, line) {
    return { [CELL_ERROR]: true, name, message, traceback, line };
  }

  function errorMessage(cell, file, e) {
    if (e && e[CELL_ERROR]) return { type: 'error', cell, name: e.name, message: e.message, traceback: e.traceback, line: e.line };
    if (isError(e)) {
      let stack;
      let name = 'Error';
      let message = '';
      try {
        stack = String(e.stack);
        name = String(e.name);
        message = String(e.message);
      } catch {}
      const frames = frameInfo.get(e);
      const here = frames && frames.find((f) => f.file === file);
      return { type: 'error', cell, name, message, traceback: String(stack).split('\n'), line: here ? here.line : undefined };
    }
    const shown = describe(e);
    return { type: 'error', cell, name: 'Uncaught', message: shown, traceback: [`Uncaught ${shown}`] };
  }

  // pointAt is the lines that show a position in a cell, Node's way.
  function pointAt(file, code, line, col) {
    if (!line) return [file];
    const src = code.split('\n')[line - 1] ?? '';
    return [`${file}:${line}`, src, ' '.repeat(Math.max(0, (col || 1) - 1)) + '^'];
  }

  // compileError turns V8's SyntaxError for a cell into a cell error,
  // with the position Node puts in front of the stack.
  function compileError(e, p, file, code) {
    if (!(e instanceof SyntaxError)) return e;
    const m = /^(.*):(\d+)\n.*\n([ \t]*)(\^)?/.exec(String(e.stack));
    let line;
    let col;
    if (m && m[1] === file) {
      try {
        [line, col] = p.map(+m[2], m[4] ? m[3].length + 1 : 1) || [];
      } catch {}
    }
    return cellError('SyntaxError', e.message, [...pointAt(file, code, line, col), `SyntaxError: ${e.message}`], line);
  }

  // ---- positions ----

  function lineStarts(text) {
    const starts = [0];
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
    return starts;
  }

  // offsetOf turns a 1-based line and column into an offset.
  function offsetOf(starts, line, col) {
    const l = Math.min(Math.max(line, 1), starts.length);
    return starts[l - 1] + Math.max(col - 1, 0);
  }

  // lineCol turns an offset into a 1-based line and column.
  function lineCol(starts, off) {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= off) lo = mid;
      else hi = mid - 1;
    }
    return [lo + 1, off - starts[lo] + 1];
  }

  // applyEdits applies edits ({pos, del, text, rank, wrap}) to text; back
  // maps an offset in the result to one in text, or to -1 inside the text
  // of a wrap edit (the kernel's own code around a cell).
  function applyEdits(text, edits) {
    edits = edits.map((e, i) => ({ del: 0, rank: 0, ...e, i }))
      .sort((a, b) => a.pos - b.pos || a.rank - b.rank || a.i - b.i);
    let out = '';
    const segs = []; // [start in out, start in text, copied?]
    let at = 0;
    for (const e of edits) {
      if (e.pos > at) {
        segs.push([out.length, at, true]);
        out += text.slice(at, e.pos);
        at = e.pos;
      }
      if (e.text) {
        segs.push([out.length, e.wrap ? -1 : e.pos, false]);
        out += e.text;
      }
      at = Math.max(at, e.pos + e.del);
    }
    if (at < text.length || !segs.length) {
      segs.push([out.length, at, true]);
      out += text.slice(at);
    }
    const back = (g) => {
      let lo = 0;
      let hi = segs.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (segs[mid][0] <= g) lo = mid;
        else hi = mid - 1;
      }
      const [gs, os, copied] = segs[lo];
      return copied ? os + (g - gs) : os;
    };
    return { text: out, back };
  }

  const ins = (pos, text, rank = 0) => ({ pos, del: 0, text, rank });

  // at is lineCol, or null for an offset of -1.
  const at = (starts, off) => (off < 0 ? null : lineCol(starts, off));

  // then composes position maps that may answer null.
  const then = (pos, f) => (pos ? f(...pos) : null);

  // ---- preparing a cell ----

  function prepare(code, file) {
    const p = isTS ? prepareTS(code, file) : prepareJS(code, file);
    cells.delete(file);
    cells.set(file, { map: p.map });
    if (cells.size > 5000) cells.delete(cells.keys().next().value);
    try {
      p.script = new vm.Script(p.src, { filename: file, importModuleDynamically: DYN });
    } catch (e) {
      throw compileError(e, p, file, code);
    }
    if (p.commit) p.commit();
    return p;
  }

  function compiles(src) {
    try {
      new vm.Script(src);
      return true;
    } catch {
      return false;
    }
  }

  function fromEdits(code, edits, async) {
    const a = applyEdits(code, edits);
    const s0 = lineStarts(code);
    const s1 = lineStarts(a.text);
    return { src: a.text, async, map: (l, c) => at(s0, a.back(offsetOf(s1, l, c))) };
  }

  const identity = (code) => ({ src: code, async: false, map: (l, c) => [l, c] });

  // A cell that is an object literal, {a: 1}, shows the object, as in
  // Node's REPL.
  const objectLike = (code) => /^\s*\{/.test(code) && !/;\s*$/.test(code);

  function prepareJS(code, file) {
    if (objectLike(code) && compiles(`(${code}\n)`)) return fromEdits(code, [ins(0, '('), ins(code.length, '\n)')], false);
    if (!/\b(?:let|const|class|await|import|export)\b/.test(code)) return identity(code);
    const scanned = scan(code);
    if (scanned) {
      if (!scanned.edits.length) return identity(code);
      const p = fromEdits(code, scanned.edits, false);
      if (compiles(p.src)) return p;
      if (!compiles(code)) return identity(code); // V8 reports the error
    }
    const ts = loadTS();
    if (!ts) {
      // Without the parser, a cell with top-level await runs in an async
      // arrow that returns its last statement, and keeps its declarations
      // to itself.
      if (compiles(code) || !/\bawait\b/.test(code)) return identity(code);
      const wrap = [{ ...ins(0, '(async () => {', -1), wrap: true }, { ...ins(code.length, '\n})()', 1), wrap: true }];
      const s = scan(code, true);
      if (s && s.last.start >= 0) {
        const p = fromEdits(code, [...wrap, ins(s.last.start, 'return ('), ins(s.last.end, ')')], true);
        if (compiles(p.src)) return p;
      }
      return fromEdits(code, wrap, true);
    }
    const sf = parse(ts, code, false);
    if (sf.parseDiagnostics.length) {
      // Prefer V8's message; the TypeScript parser's when V8 only
      // complains about the await.
      try {
        new vm.Script(code, { filename: '<check>' });
        return identity(code);
      } catch (e) {
        if (e instanceof SyntaxError && !/\bawait\b/.test(e.message)) return identity(code);
      }
      throw diagnosticsError(ts, 'SyntaxError', sf.parseDiagnostics.slice(0, 1), (o) => o, code, file);
    }
    const pre = moduleEdits(ts, sf, code, false);
    if (!pre.length) return rewrite(ts, sf, code);
    const a = applyEdits(code, pre);
    const r = rewrite(ts, parse(ts, a.text, false), a.text);
    const s0 = lineStarts(code);
    const s1 = lineStarts(a.text);
    return { ...r, map: (l, c) => then(r.map(l, c), (l1, c1) => lineCol(s0, a.back(offsetOf(s1, l1, c1)))) };
  }

  const EXPRESSION_KEYWORDS = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'extends', 'await']);
  const STATEMENT_KEYWORDS = new Set(['if', 'for', 'while', 'do', 'switch', 'try', 'throw', 'return', 'break', 'continue', 'var', 'let', 'const', 'class', 'function', 'async', 'debugger', 'with', 'import', 'export']);

  // scan rewrites the common cell without a parser: it finds the let,
  // const and class declarations at the top level by tokenizing (strings,
  // templates, comments and regular expressions skipped) and returns the
  // edits rewrite would make in a script, and where the last top-level
  // statement starts and ends. It returns null when the cell needs the
  // parser (await, unless allowed; import; export) or when it is not sure;
  // callers check that what they make of it compiles.
  function scan(code, allowAwait = false) {
    const n = code.length;
    const edits = [];
    const templates = []; // depth at each open ${
    let i = 0;
    let depth = 0;
    let prev = 'start'; // start ; } ) op kw id value
    let newline = false;
    let decl = null; // a top-level let: { name: end of a declarator's name, expectName }
    let cls = null; // a top-level class: { open: its body has begun }
    const last = { start: -1, word: '', end: 0 }; // the last statement
    const identStart = /[A-Za-z_$\u0080-\uffff\\#]/;
    const identPart = /[\w$\u0080-\uffff\\]/;
    // template skips a template's text from i; it stops after the closing
    // backtick, or after a ${ (true).
    const template = () => {
      for (; i < n; i++) {
        if (code[i] === '\\') i++;
        else if (code[i] === '`') {
          i++;
          return false;
        } else if (code[i] === '$' && code[i + 1] === '{') {
          i += 2;
          return true;
        }
      }
      return null;
    };
    const enterTemplate = () => {
      const r = template();
      if (r === null) return false;
      if (r) templates.push(depth++);
      prev = r ? 'op' : 'value';
      return true;
    };
    while (i < n) {
      const c = code[i];
      if (c === '\n') {
        newline = true;
        i++;
        continue;
      }
      if (c === ' ' || c === '\t' || c === '\r' || /\s/.test(c)) {
        i++;
        continue;
      }
      if (c === '/' && code[i + 1] === '/') {
        i = code.indexOf('\n', i);
        if (i < 0) i = n;
        continue;
      }
      if (c === '/' && code[i + 1] === '*') {
        const e = code.indexOf('*/', i + 2);
        if (e < 0) return null;
        if (code.slice(i, e).includes('\n')) newline = true;
        i = e + 2;
        continue;
      }
      // Does a statement start here? After ; or }, or after a line break
      // between a value and a word (where ASI ends the statement).
      const start = prev === 'start' || prev === ';' || prev === '}' ||
        (newline && (prev === 'id' || prev === 'value' || prev === ')') && /[\w$\u0080-\uffff'"]/.test(c));
      if (decl && depth === 0 && decl.name !== undefined) {
        // The token after a let's declarator name. Where the statement
        // ends by ASI, add the ; too: void 0 could go on.
        if (c === ',' || c === ';') edits.push(ins(decl.name, ' = void 0'));
        else if (newline) edits.push(ins(decl.name, ' = void 0;'));
        decl.name = undefined;
      }
      if (decl && depth === 0 && start) decl = null;
      newline = false;
      if (start && depth === 0) [last.start, last.word] = [i, ''];
      if (identStart.test(c)) {
        let e = i + 1;
        while (e < n && identPart.test(code[e])) e++;
        const word = code.slice(i, e);
        if (start && depth === 0) last.word = word;
        if ((word === 'await' && !allowAwait) || word === 'export' || (word === 'import' && !/^\s*[(.]/.test(code.slice(e)))) return null;
        if (depth === 0 && start && (word === 'let' || word === 'const') && /^\s*[\w$\u0080-\uffff[{]/.test(code.slice(e))) {
          edits.push({ pos: i, del: word.length, text: word === 'const' ? 'var  ' : 'var' });
          decl = word === 'let' ? { expectName: true } : null;
          prev = 'op';
        } else if (depth === 0 && start && word === 'class') {
          const m = /^\s+([A-Za-z_$][\w$]*)/.exec(code.slice(e));
          if (!m || cls) return null;
          edits.push(ins(i, `var ${m[1]} = `));
          cls = { open: false };
          prev = 'op';
        } else if (decl && decl.expectName && depth === 0) {
          decl.name = e;
          decl.expectName = false;
          prev = 'id';
        } else {
          prev = EXPRESSION_KEYWORDS.has(word) ? 'kw' : 'id';
        }
        i = last.end = e;
        continue;
      }
      if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(code[i + 1] || ''))) {
        while (i < n && /[\w.]/.test(code[i])) i++;
        prev = 'value';
        last.end = i;
        continue;
      }
      if (c === '"' || c === "'") {
        for (i++; i < n && code[i] !== c; i++) {
          if (code[i] === '\\') i++;
          else if (code[i] === '\n') return null;
        }
        if (i++ >= n) return null;
        prev = 'value';
        last.end = i;
        continue;
      }
      if (c === '`') {
        i++;
        if (!enterTemplate()) return null;
        last.end = i;
        continue;
      }
      if (c === '/' && (prev === 'start' || prev === 'op' || prev === '}' || prev === 'kw' || prev === ';')) {
        let inClass = false;
        for (i++; i < n; i++) {
          if (code[i] === '\\') i++;
          else if (code[i] === '\n') return null;
          else if (code[i] === '[') inClass = true;
          else if (code[i] === ']') inClass = false;
          else if (code[i] === '/' && !inClass) break;
        }
        if (i++ >= n) return null;
        while (i < n && identPart.test(code[i])) i++;
        prev = 'value';
        last.end = i;
        continue;
      }
      i++;
      if (c !== ';') last.end = i;
      if (c === '(' || c === '[' || c === '{') {
        if (c === '{' && cls && !cls.open && depth === 0) cls.open = true;
        if (depth === 0 && decl && decl.expectName) decl.expectName = false;
        depth++;
        prev = 'op';
      } else if (c === ')' || c === ']' || c === '}') {
        if (--depth < 0) return null;
        prev = c === '}' ? '}' : ')';
        if (c === '}' && templates.length && templates[templates.length - 1] === depth) {
          templates.pop();
          if (!enterTemplate()) return null;
          last.end = i;
        } else if (c === '}' && cls && cls.open && depth === 0) {
          edits.push(ins(i, ';'));
          cls = null;
        }
      } else if (c === ';') {
        prev = ';';
        if (depth === 0) decl = null;
      } else {
        if (c === ',' && decl && depth === 0) decl.expectName = true;
        prev = 'op';
      }
    }
    if (decl && decl.name !== undefined) edits.push(ins(decl.name, ' = void 0;'));
    if (depth || templates.length || cls) return null;
    if (last.start >= 0 && (STATEMENT_KEYWORDS.has(last.word) || code[last.start] === '{' || last.end <= last.start)) last.start = -1;
    return { edits, last };
  }

  function parse(ts, text, typed) {
    return ts.createSourceFile(typed ? '/kiln/cell.ts' : '/kiln/cell.js', text, ts.ScriptTarget.Latest, true, typed ? ts.ScriptKind.TS : ts.ScriptKind.JS);
  }

  function bindingNames(ts, name, out = []) {
    if (ts.isIdentifier(name)) out.push(name.text);
    else for (const el of name.elements) if (!ts.isOmittedExpression(el)) bindingNames(ts, el.name, out);
    return out;
  }

  function hasAwait(ts, node) {
    if (ts.isAwaitExpression(node) || (ts.isForOfStatement(node) && node.awaitModifier)) return true;
    if (ts.isFunctionLike(node) || ts.isClassStaticBlockDeclaration(node)) return false;
    return !!ts.forEachChild(node, (c) => hasAwait(ts, c) || undefined);
  }

  // moduleEdits turns static imports into require() declarations and
  // drops export keywords, keeping every other position in place.
  function moduleEdits(ts, sf, code, typed) {
    const edits = [];
    const blank = (s, e) => edits.push({ pos: s, del: e - s, text: code.slice(s, e).replace(/[^\n]/g, ' ') });
    const interop = typed ? '((m: any) => m && m.__esModule ? m.default : m)' : '(m => m && m.__esModule ? m.default : m)';
    for (const st of sf.statements) {
      if (ts.isImportDeclaration(st)) {
        const start = st.getStart(sf);
        const newlines = '\n'.repeat(code.slice(start, st.end).split('\n').length - 1);
        const req = `require(${st.moduleSpecifier.getText(sf)})`;
        const c = st.importClause;
        let text = '';
        if (!c) text = `${req};`;
        else if (!c.isTypeOnly) {
          const parts = [];
          if (c.name) parts.push(`${c.name.text} = ${interop}(${req})`);
          const nb = c.namedBindings;
          if (nb && ts.isNamespaceImport(nb)) parts.push(`${nb.name.text} = ${req}`);
          else if (nb) {
            const els = nb.elements.filter((e) => !e.isTypeOnly)
              .map((e) => e.propertyName ? `${e.propertyName.getText(sf)}: ${e.name.text}` : e.name.text);
            if (els.length) parts.push(`{ ${els.join(', ')} } = ${req}`);
          }
          if (parts.length) text = `const ${parts.join(', ')};`;
        }
        edits.push({ pos: start, del: st.end - start, text: text + newlines });
      } else if (ts.isExportDeclaration(st)) {
        blank(st.getStart(sf), st.end);
      } else if (ts.isExportAssignment(st)) {
        blank(st.getStart(sf), st.expression.getStart(sf));
      } else if (ts.canHaveModifiers(st)) {
        for (const m of ts.getModifiers(st) || []) {
          if (m.kind === ts.SyntaxKind.ExportKeyword || m.kind === ts.SyntaxKind.DefaultKeyword) blank(m.getStart(sf), m.end);
        }
      }
    }
    return edits;
  }

  // rewrite makes a cell's top-level declarations global. Without
  // top-level await the cell stays a script: let and const become var
  // (same length, so columns hold) and class C {} becomes
  // var C = class C {};. With it the cell runs in an async arrow:
  // declarations become assignments to globals declared in front of it,
  // functions are copied to the global object, and the last expression
  // statement is returned.
  function rewrite(ts, sf, code) {
    const stmts = sf.statements;
    const async = stmts.some((s) => hasAwait(ts, s));
    const edits = [];
    const hoisted = new Set();
    const functions = [];
    for (const st of stmts) {
      if (ts.isVariableStatement(st)) {
        const list = st.declarationList;
        const kind = list.flags & 7; // 0 var, 1 let, 2 const, else using
        if (kind > 2 || (kind === 0 && !async)) continue;
        const kw = list.getStart(sf);
        const len = kind === 2 ? 5 : 3;
        if (!async) edits.push({ pos: kw, del: len, text: kind === 2 ? 'var  ' : 'var' });
        else edits.push({ pos: kw, del: len, text: 'void (' });
        for (const d of list.declarations) {
          if (async) bindingNames(ts, d.name).forEach((n) => hoisted.add(n));
          if (!d.initializer && kind !== 0) edits.push(ins(d.end, ' = void 0'));
        }
        if (async) edits.push(ins(list.end, ')'));
        if (!code.slice(list.end, st.end).includes(';')) edits.push(ins(list.end, ';')); // it ended by ASI
      } else if (ts.isFunctionDeclaration(st) && st.name && st.body && async) {
        hoisted.add(st.name.text);
        functions.push(st.name.text);
      } else if (ts.isClassDeclaration(st) && st.name) {
        const name = st.name.text;
        if (async) hoisted.add(name);
        edits.push(ins(st.getStart(sf), async ? `${name} = ` : `var ${name} = `));
        edits.push(ins(st.end, ';'));
      }
    }
    if (async) {
      const last = stmts[stmts.length - 1];
      if (last && ts.isExpressionStatement(last)) {
        edits.push(ins(last.expression.getStart(sf), 'return ('));
        edits.push(ins(last.expression.end, ')'));
      }
      const head = (hoisted.size ? `var ${[...hoisted].join(', ')}; ` : '') + '(async () => { ' +
        functions.map((f) => `this.${f} = ${f}; `).join('');
      edits.push({ ...ins(0, head, -1), wrap: true });
      edits.push({ ...ins(code.length, '\n})()', 1), wrap: true });
    }
    return fromEdits(code, edits, async);
  }

  // ---- TypeScript ----

  let tsModule; // undefined until loaded; null if missing

  function loadTS() {
    if (tsModule === undefined) {
      try {
        tsModule = require(TS_DIR);
      } catch {
        tsModule = null;
      }
    }
    return tsModule;
  }

  function tsVersion() {
    try {
      return parseJSON(fs.readFileSync(path.join(TS_DIR, 'package.json'), 'utf8')).version;
    } catch {
      return 'missing';
    }
  }

  // Diagnostics TypeScript gives because a cell is a script, not a module:
  // top-level await and for await.
  const IGNORED = new Set([1375, 1378, 1431, 1432]);

  // AMBIENT declares the Node globals (there is no @types/node), any
  // module as any, and display; a cell may declare any of these names
  // again.
  const AMBIENT = `
declare var console: { log(...data: any[]): void; error(...data: any[]): void; warn(...data: any[]): void; info(...data: any[]): void; debug(...data: any[]): void; trace(...data: any[]): void; dir(item?: any, options?: any): void; table(data: any, columns?: string[]): void; time(label?: string): void; timeEnd(label?: string): void; timeLog(label?: string, ...data: any[]): void; count(label?: string): void; countReset(label?: string): void; group(...label: any[]): void; groupEnd(): void; assert(condition?: boolean, ...data: any[]): void; [name: string]: any };
declare var process: any;
declare var require: { (id: string): any; resolve(id: string): string; cache: any; [name: string]: any };
declare var module: any;
declare var exports: any;
declare var __filename: string;
declare var __dirname: string;
declare var global: typeof globalThis;
declare var Buffer: any;
type Buffer = any;
declare function setTimeout(callback: (...args: any[]) => void, ms?: number, ...args: any[]): any;
declare function setInterval(callback: (...args: any[]) => void, ms?: number, ...args: any[]): any;
declare function setImmediate(callback: (...args: any[]) => void, ...args: any[]): any;
declare function clearTimeout(id: any): void;
declare function clearInterval(id: any): void;
declare function clearImmediate(id: any): void;
declare function queueMicrotask(callback: () => void): void;
declare function structuredClone<T>(value: T, options?: any): T;
declare function atob(data: string): string;
declare function btoa(data: string): string;
declare function fetch(input: any, init?: any): Promise<any>;
declare var performance: { now(): number; timeOrigin: number; [name: string]: any };
declare var crypto: any;
declare var WebAssembly: any;
declare var URL: any; type URL = any;
declare var URLSearchParams: any; type URLSearchParams = any;
declare var TextEncoder: any; type TextEncoder = any;
declare var TextDecoder: any; type TextDecoder = any;
declare var AbortController: any; type AbortController = any;
declare var AbortSignal: any; type AbortSignal = any;
declare var Blob: any; type Blob = any;
declare var Headers: any; type Headers = any;
declare var Request: any; type Request = any;
declare var Response: any; type Response = any;
declare var FormData: any; type FormData = any;
declare var Event: any; type Event = any;
declare var EventTarget: any; type EventTarget = any;
declare var MessageChannel: any; type MessageChannel = any;
declare var MessagePort: any; type MessagePort = any;
declare var BroadcastChannel: any; type BroadcastChannel = any;
declare namespace NodeJS { type Timeout = any; type Timer = any; type Immediate = any; type ProcessEnv = Record<string, string | undefined>; type ErrnoException = Error & { code?: string; errno?: number; path?: string; syscall?: string }; }
declare module '*';
declare var display: { (...values: any[]): void; text(text: string): void; html(html: string): void; markdown(markdown: string): void; svg(svg: string): void; png(data: string | Uint8Array): void; json(value: any): void; mime(bundle: Record<string, any>): void };
`;

  // entries splits declarations into name -> texts, one var per name.
  function entries(ts, text) {
    const sf = ts.createSourceFile('/kiln/entries.d.ts', text, ts.ScriptTarget.Latest, true);
    const out = new Map();
    const add = (name, t) => out.set(name, [...(out.get(name) || []), t]);
    for (const st of sf.statements) {
      if (ts.isVariableStatement(st)) {
        const kw = ['var', 'let', 'const'][st.declarationList.flags & 3] || 'var';
        for (const d of st.declarationList.declarations) {
          if (ts.isIdentifier(d.name)) add(d.name.text, `declare ${kw} ${d.getText(sf)};`);
        }
      } else if (st.name && (ts.isIdentifier(st.name) || ts.isStringLiteral(st.name))) {
        add(ts.isIdentifier(st.name) ? st.name.text : stringify(st.name.text), st.getText(sf));
      }
    }
    return out;
  }

  // declared lists the names a cell declares at its top level.
  function declared(ts, sf) {
    const names = new Set();
    for (const st of sf.statements) {
      if (ts.isVariableStatement(st)) {
        for (const d of st.declarationList.declarations) bindingNames(ts, d.name).forEach((n) => names.add(n));
      } else if (st.name && (ts.isIdentifier(st.name) || ts.isStringLiteral(st.name))) {
        names.add(ts.isIdentifier(st.name) ? st.name.text : stringify(st.name.text));
      }
    }
    return names;
  }

  // sourceMap decodes a source map's mappings into a function from a
  // 0-based line and column of the output to the source's.
  function sourceMap(json) {
    const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const lines = [];
    let sl = 0;
    let sc = 0;
    for (const groups of (json ? parseJSON(json).mappings : '').split(';')) {
      const segs = [];
      let gc = 0;
      for (const g of groups.split(',')) {
        if (!g) continue;
        const v = [];
        for (let i = 0, value = 0, shift = 0; i < g.length; i++) {
          const d = B64.indexOf(g[i]);
          value += (d & 31) << shift;
          if (d & 32) shift += 5;
          else {
            v.push(value & 1 ? -(value >>> 1) : value >>> 1);
            value = shift = 0;
          }
        }
        gc += v[0];
        if (v.length >= 4) {
          sl += v[2];
          sc += v[3];
          segs.push([gc, sl, sc]);
        }
      }
      lines.push(segs);
    }
    return (line, col) => {
      for (let l = Math.min(line, lines.length - 1); l >= 0; l--) {
        const segs = lines[l];
        if (!segs.length) continue;
        if (l < line) return [segs[segs.length - 1][1], segs[segs.length - 1][2]];
        let best = segs[0];
        for (const s of segs) if (s[0] <= col) best = s;
        return [best[1], best[2] + Math.max(0, col - best[0])];
      }
      return [0, 0];
    };
  }

  let service;

  // checker keeps the declaration context and checks and emits cells.
  function checker(ts) {
    if (service) return service;
    const libDir = path.join(TS_DIR, 'lib');
    const CTX = '/kiln/context.d.ts';
    const options = {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext, // import() stays import()
      lib: ['lib.es2023.d.ts'],
      strict: true,
      alwaysStrict: false,
      types: [],
      declaration: true,
      sourceMap: true,
      skipLibCheck: true,
      esModuleInterop: true,
      newLine: ts.NewLineKind.LineFeed,
    };
    const libs = new Map();
    const mem = new Map(); // our files: name -> SourceFile
    const ctx = entries(ts, AMBIENT);
    let ctxText;
    let old;
    let n = 0;
    const host = {
      getSourceFile(name, lang) {
        if (mem.has(name)) return mem.get(name);
        if (!libs.has(name)) {
          let sf;
          try {
            sf = ts.createSourceFile(name, fs.readFileSync(name, 'utf8'), lang);
          } catch {}
          libs.set(name, sf);
        }
        return libs.get(name);
      },
      getDefaultLibFileName: () => path.join(libDir, 'lib.es2023.d.ts'),
      getDefaultLibLocation: () => libDir,
      writeFile: () => {},
      getCurrentDirectory: () => '/kiln',
      getCanonicalFileName: (f) => f,
      useCaseSensitiveFileNames: () => true,
      getNewLine: () => '\n',
      fileExists: (f) => mem.has(f) || fs.existsSync(f),
      readFile: (f) => (mem.has(f) ? mem.get(f).text : fs.readFileSync(f, 'utf8')),
      directoryExists: (d) => d === '/kiln' || fs.existsSync(d),
      getDirectories: () => [],
    };
    function compile(code) {
      const name = `/kiln/cell${++n}.ts`;
      const sf = ts.createSourceFile(name, code, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
      const names = declared(ts, sf);
      const text = [...ctx].filter(([k]) => !names.has(k)).map(([, v]) => v.join('\n')).join('\n');
      if (text !== ctxText) {
        ctxText = text;
        mem.set(CTX, ts.createSourceFile(CTX, text, ts.ScriptTarget.ES2022, true));
      }
      for (const k of mem.keys()) if (k !== CTX) mem.delete(k);
      mem.set(name, sf);
      const program = (old = ts.createProgram([CTX, name], options, host, old));
      const keep = (d) => d.category === ts.DiagnosticCategory.Error && !IGNORED.has(d.code);
      const syntax = program.getSyntacticDiagnostics(sf).filter(keep);
      if (syntax.length) return { kind: 'SyntaxError', diagnostics: syntax };
      const semantic = program.getSemanticDiagnostics(sf).filter(keep);
      if (semantic.length) return { kind: 'TSError', diagnostics: semantic };
      const out = {};
      program.emit(sf, (f, t) => {
        out[f.endsWith('.d.ts') ? 'dts' : f.endsWith('.map') ? 'map' : 'js'] = t;
      });
      const decls = entries(ts, out.dts || '');
      return {
        js: (out.js || '').replace(/\n\/\/# sourceMappingURL=.*\s*$/, '\n'),
        map: sourceMap(out.map),
        commit() {
          for (const k of names) ctx.delete(k);
          for (const [k, v] of decls) ctx.set(k, v);
        },
      };
    }
    return (service = { compile, names: () => [...ctx.keys()] });
  }

  function diagnosticsError(ts, name, diags, pos, code, file = '<cell>') {
    const starts = lineStarts(code);
    const shown = diags.slice(0, 100).map((d) => {
      const [line, col] = d.start === undefined ? [0, 0] : lineCol(starts, pos(d.start));
      return { line, col, text: `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}` };
    });
    const message = name === 'SyntaxError' && shown.length === 1
      ? shown[0].text.replace(/^TS\d+: /, '')
      : shown.map((s) => (s.line ? `${s.line}:${s.col} ${s.text}` : s.text)).join('\n');
    const traceback = shown.flatMap((s) => [...pointAt(file, code, s.line, s.col).slice(0, 3), `${name}: ${s.text}`]);
    return cellError(name, message, traceback, shown[0] && shown[0].line || undefined);
  }

  function prepareTS(code, file) {
    const ts = loadTS();
    if (!ts) throw cellError('Error', `the TypeScript compiler is not installed in ${TS_DIR}`, [`Error: the TypeScript compiler is not installed in ${TS_DIR}`]);
    const sf = parse(ts, code, true);
    const pre = sf.parseDiagnostics.length ? [] : moduleEdits(ts, sf, code, true);
    if (objectLike(code) && !sf.parseDiagnostics.length) {
      const w = parse(ts, `(${code}\n)`, true);
      if (!w.parseDiagnostics.length && w.statements.length === 1) pre.push(ins(0, '('), ins(code.length, '\n)'));
    }
    const a1 = applyEdits(code, pre);
    const s0 = lineStarts(code);
    const s1 = lineStarts(a1.text);
    const r = checker(ts).compile(a1.text);
    if (r.diagnostics) throw diagnosticsError(ts, r.kind, r.diagnostics, a1.back, code, file);
    const js = rewrite(ts, parse(ts, r.js, false), r.js);
    const sj = lineStarts(r.js);
    return {
      src: js.src,
      async: js.async,
      commit: r.commit,
      map: (l, c) => then(js.map(l, c), (jl, jc) => {
        const [sl, sc] = r.map(jl - 1, jc - 1);
        return lineCol(s0, a1.back(offsetOf(s1, sl + 1, sc + 1)));
      }),
    };
  }

  // ---- check and complete ----

  const AsyncFunction = (async () => {}).constructor;

  function check(code) {
    if (isTS) {
      const ts = loadTS();
      if (ts) return classify(ts, code, parse(ts, code, true));
    }
    if (compiles(code)) return { status: 'complete' };
    try {
      new AsyncFunction(code);
      return { status: 'complete' };
    } catch {}
    const scanned = scan(code); // a declaration made again is fine in a cell
    if (scanned && scanned.edits.length && compiles(applyEdits(code, scanned.edits).text)) return { status: 'complete' };
    const file = '<check>';
    let e;
    try {
      new vm.Script(code, { filename: file });
    } catch (err) {
      e = err;
    }
    // The parser tells incomplete from invalid; V8 says what is wrong,
    // as it would when the cell runs, unless it only minds an await.
    const ts = loadTS();
    const r = ts ? classify(ts, code, parse(ts, code, false)) : null;
    if (r && r.status === 'incomplete') return r;
    if (r && r.status === 'complete') {
      try {
        if (compiles(prepareJS(code, file).src)) return r; // import, export
      } catch {}
    }
    if (!r && /Unexpected end of input|Unterminated template/.test(e && e.message)) return { status: 'incomplete' };
    if (!(e instanceof SyntaxError) || (r && r.status === 'invalid' && /\bawait\b/.test(e.message))) return r || { status: 'complete' };
    const err = compileError(e, identity(code), file, code);
    const col = (err.traceback[2] || '^').indexOf('^') + 1;
    return { status: 'invalid', line: err.line, column: err.line ? col : undefined, message: e.message };
  }

  // classify reads the parser's first complaint: at the end of the code it
  // means more is expected, anywhere else that the code is wrong.
  function classify(ts, code, sf) {
    const d = sf.parseDiagnostics[0];
    if (!d) return { status: 'complete' };
    if (d.start >= code.trimEnd().length && d.code !== 1002) return { status: 'incomplete' };
    const [line, column] = lineCol(lineStarts(code), d.start);
    return { status: 'invalid', line, column, message: ts.flattenDiagnosticMessageText(d.messageText, '\n') };
  }

  const KEYWORDS = ('async await break case catch class const continue debugger default delete do else export extends false finally ' +
    'for function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield' +
    (isTS ? ' abstract as declare enum implements interface keyof namespace private protected public readonly satisfies type' : '')).split(' ');

  // complete offers the global names, or the properties of the object
  // named before the last dot, that start with the word at the cursor.
  function complete(code, cursor) {
    const chars = Array.from(code);
    cursor = Math.max(0, Math.min(cursor, chars.length));
    const before = chars.slice(0, cursor).join('');
    const m = /(?:([A-Za-z_$][\w$]*(?:\s*\??\.\s*[A-Za-z_$][\w$]*)*)\s*\??\.\s*)?([\w$]*)$/.exec(before);
    const word = m[2];
    const from = before.length - m[0].length;
    const r = { matches: [], cursor_start: cursor - Array.from(word).length, cursor_end: cursor };
    if (before.slice(0, from).trimEnd().endsWith('.')) return r; // a property of something not named
    let names;
    if (m[1]) {
      const parts = m[1].split(/\s*\??\.\s*/);
      let obj = vm.runInThisContext(parts[0]);
      for (const p of parts.slice(1)) obj = obj == null ? obj : obj[p];
      if (obj == null) return r;
      names = properties(obj);
    } else {
      names = properties(globalThis).concat(KEYWORDS);
      if (isTS && service) names = names.concat(service.names());
    }
    const hidden = word.startsWith('_') ? /^$/ : /^__/; // __proto__ and friends, unless asked for
    const matches = [...new Set(names)].filter((n) => n.startsWith(word) && /^[A-Za-z_$][\w$]*$/.test(n) && !hidden.test(n)).sort();
    r.matches = matches.slice(0, 5000);
    return r;
  }

  function properties(obj) {
    const names = [];
    let o = Object(obj);
    for (let depth = 0; o && depth < 50; depth++, o = Object.getPrototypeOf(o)) {
      if (Array.isArray(o) || ArrayBuffer.isView(o)) names.push('length');
      else names.push(...Object.getOwnPropertyNames(o));
    }
    return names;
  }

  // ---- start ----

  listen();
  send({
    type: 'ready',
    language: LANG,
    version: isTS ? `TypeScript ${tsVersion()}, Node.js ${process.version}` : `Node.js ${process.version}`,
  });
  startWatchdog();
  if (isTS) {
    // Load the compiler and check an empty cell while the kernel is idle,
    // so the first real cell does not pay for it.
    setImmediate(() => {
      try {
        const ts = loadTS();
        if (ts) checker(ts).compile('');
      } catch {}
    });
  }
})(process, require, globalThis, Buffer, Promise, Map, Set, WeakMap, Symbol, Error, SyntaxError, TypeError, Object, Array, String, Number, Math, Atomics, SharedArrayBuffer, Int32Array, ArrayBuffer, setImmediate, queueMicrotask);
