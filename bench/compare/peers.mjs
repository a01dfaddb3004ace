// Runs bench/compare's workloads on a peer sandbox (pyodide or @pydantic/monty) installed under a
// node_modules directory. Usage: node peers.mjs PEER NODE_MODULES_DIR
// It reads one JSON request per line on stdin and answers one JSON line per request on file descriptor 3:
//   {"op":"fresh"}              -> {"ms": time to a new instance that has run print(1)}
//   {"op":"run","code":S}       -> {"s": seconds the workload took, timed around it in this process}
//   {"op":"tool","n":N}         -> {"us": µs per call of a host function echo(i), N calls from a Python function}
// Any failure answers {"error": "..."}. No network: fetch is replaced by a function that throws, so a package
// that tried to download anything (pyodide's CDN) fails instead of silently reaching out.
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { writeSync } from 'node:fs';

// Answers go to file descriptor 3, so that what the peers print on stdout cannot mix with them.
const answer = (o) => writeSync(3, JSON.stringify(o) + '\n');

const [peer, modules] = process.argv.slice(2);
const fetched = [];
globalThis.fetch = async (u) => { fetched.push(String(u)); throw new Error('network refused: ' + u); };

let make, runCode, toolLoop, version;
if (peer === 'pyodide') {
  const dir = path.join(modules, 'pyodide');
  const { loadPyodide, version: v } = await import(pathToFileURL(path.join(dir, 'pyodide.mjs')).href);
  version = v;
  make = async () => {
    const py = await loadPyodide({ indexURL: dir + path.sep, stdout: () => {}, stderr: () => {}, checkAPIVersion: true });
    py.registerJsModule('tools', { echo: (x) => x });
    return py;
  };
  const inst = await make();
  runCode = async (code) => { const t = performance.now(); inst.runPython(code); return (performance.now() - t) / 1000; };
  toolLoop = async (n) => {
    const t = performance.now();
    inst.runPython(`import tools\ndef w3(n):\n    for i in range(n):\n        tools.echo(i)\nw3(${n})\n`);
    return (performance.now() - t) * 1000 / n;
  };
  make.first = async () => { const py = await make(); py.runPython('print(1)'); };
} else if (peer === 'monty') {
  const dir = path.join(modules, '@pydantic', 'monty');
  const { Monty } = await import(pathToFileURL(path.join(dir, 'wrapper.js')).href);
  version = JSON.parse((await import('node:fs')).readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  runCode = async (code) => { const t = performance.now(); new Monty(code).run(); return (performance.now() - t) / 1000; };
  toolLoop = async (n) => {
    const m = new Monty(`def w3(n):\n    for i in range(n):\n        echo(i)\nw3(${n})\n`);
    const t = performance.now();
    m.run({ externalFunctions: { echo: (x) => x } });
    return (performance.now() - t) * 1000 / n;
  };
  make = { first: async () => { new Monty('print(1)').run(); } };
} else {
  answer({ error: 'unknown peer ' + peer });
  process.exit(2);
}
answer({ ready: true, version });

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  let out;
  try {
    const req = JSON.parse(line);
    if (req.op === 'fresh') {
      const t = performance.now();
      await make.first();
      out = { ms: performance.now() - t };
    } else if (req.op === 'run') {
      out = { s: await runCode(req.code) };
    } else if (req.op === 'tool') {
      out = { us: await toolLoop(req.n) };
    } else {
      out = { error: 'unknown op ' + req.op };
    }
  } catch (e) {
    out = { error: String(e && e.message || e).split('\n').slice(0, 3).join(' ') };
  }
  if (fetched.length) out.network = fetched.splice(0);
  answer(out);
}
