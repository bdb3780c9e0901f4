// lib.mjs -- what the browser tests share: the paths (ffn, Chromium, the
// artifacts directory), the checks' counters (ok, die, finish), temporary
// directories and servers removed or stopped on every exit, the
// prerequisites (node >= 20, Chromium, ffn, playwright-core: each missing
// one a failure naming what to install), running a command, starting `ffn
// serve` and reading the URL it prints, the API called as curl would
// (token, same origin, JSON), and headless Chromium in a fresh profile.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, '..', '..');
export const ffn = process.env.FFN_BIN || path.join(root, 'build', 'ffn');
export const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
export const artifacts = path.join(root, 'build', 'test-artifacts');
export const servers = []; // every `ffn serve` started here, stopped by cleanup()

const counts = { passes: 0, failures: 0 };
const dirs = []; // removed by cleanup()
let chromium = null;

export function ok(cond, what, detail) {
  if (cond) { counts.passes++; console.log(`ok   ${what}`); }
  else { counts.failures++; console.log(`FAIL ${what}${detail !== undefined ? ': ' + detail : ''}`); }
  return cond;
}
export function cleanup() {
  for (const s of servers) if (s.exitCode === null) s.kill('SIGTERM');
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  dirs.length = 0;
}
export function die(msg) {
  cleanup();
  console.log(`FAIL ${msg}`);
  console.log(`${counts.passes} passed, ${counts.failures + 1} failed`);
  process.exit(1);
}
// the end of a test: the counts, and its exit code (t0: also the time taken)
export function finish(t0) {
  cleanup();
  if (t0 !== undefined) console.log(`# ${((Date.now() - t0) / 1000).toFixed(1)} s in all`);
  console.log(`${counts.passes} passed, ${counts.failures} failed`);
  process.exit(counts.failures ? 1 : 0);
}
export function tempDir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
}

// ---- prerequisites: fail loudly with what to install --------------------------
export function requirePrerequisites() {
  if (+process.versions.node.split('.')[0] < 20)
    die(`node ${process.versions.node} is too old: install Node.js >= 20 (apt-get install nodejs npm)`);
  if (!fs.existsSync(chromiumPath))
    die(`${chromiumPath} not found: install Chromium (apt-get install chromium, or bash scripts/setup.sh test)`);
  if (!fs.existsSync(ffn)) die(`${ffn} not found: build it first (make all)`);
  try {
    ({ chromium } = createRequire(path.join(here, 'package.json'))('playwright-core'));
  } catch (e) {
    die(`playwright-core is not installed in tests/browser: run (cd tests/browser && npm ci) -- ${e.message}`);
  }
}

// cmd's standard output; a failure ends the test naming the command and its stderr
export function run(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 << 20 });
  } catch (e) {
    die(`${cmd} ${args.join(' ')} failed (exit ${e.status}): ${e.stderr}`);
  }
}

// `ffn serve MODEL --port 0 --threads 2 ARGS...`: resolves to the process
// with its printed URL in .url
export function startServer(model, args = []) {
  return new Promise((resolve) => {
    const p = spawn(ffn, ['serve', model, '--port', '0', '--threads', '2', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    servers.push(p);
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => die(`ffn serve did not print its URL in 120 s: ${err}`), 120000);
    p.on('exit', (code) => { if (!p.url) die(`ffn serve exited (${code}) before serving: ${err}`); });
    readline.createInterface({ input: p.stdout }).once('line', (line) => {
      clearTimeout(timer);
      p.url = line.trim();
      resolve(p);
    });
  });
}

// the test's own request to the server at url (its printed URL), as curl
// would send it: the token, same-origin, JSON for a POST (body given)
export async function api(url, p, body) {
  const u = new URL(url);
  const headers = { Authorization: `token ${u.searchParams.get('token')}`, Origin: u.origin };
  const init = body === undefined ? { headers } : { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify(body) };
  const r = await fetch(u.origin + p, init);
  return { status: r.status, json: await r.json() };
}

// headless Chromium in a fresh profile (removed by cleanup()); the
// artifacts directory made
export async function launch(viewport) {
  fs.mkdirSync(artifacts, { recursive: true });
  const userDataDir = tempDir('ffn-chromium-');
  try {
    return await chromium.launchPersistentContext(userDataDir, {
      executablePath: chromiumPath, headless: true, viewport,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  } catch (e) {
    die(`cannot start ${chromiumPath}: ${e.message}`);
  }
}

// ---- pages ----------------------------------------------------------------------
// console errors and page errors of `page` into problems
export function recordErrors(page, problems) {
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
}
// a served page: only requests to origin (and data: URLs) go out, each
// counted by onServed; any other is aborted and named in problems
export async function keepToOrigin(page, origin, problems, onServed = () => {}) {
  await page.route('**/*', (route) => {
    const u = route.request().url();
    if (u.startsWith(origin + '/') || u.startsWith('data:')) { onServed(); return route.continue(); }
    problems.push(`a request left the server: ${u}`);
    return route.abort();
  });
  recordErrors(page, problems);
}
// a report file, loaded in a new page; any request but the file itself is a problem
export async function openFile(context, file, problems) {
  const page = await context.newPage();
  const url = pathToFileURL(file).href;
  recordErrors(page, problems);
  page.on('request', (r) => { if (r.url() !== url) problems.push(`network request: ${r.url()}`); });
  await page.goto(url, { waitUntil: 'load' });
  return page;
}
