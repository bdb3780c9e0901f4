// serve_load_client.mjs -- a load client for `ffn serve` (tests/cli/test_serve_load.sh):
//   node serve_load_client.mjs URL N CLIENTS [EDIT]
// N requests from CLIENTS concurrent clients over loopback (each client
// one keep-alive connection, requests one after another), cycling through
// GET /api/info, POST /api/tokenize, /api/predict (with and without an
// edit) and /api/neurons.  URL is the one `ffn serve` prints: its ?token=
// goes into every request's Authorization header, with the Origin of the
// page.  With EDIT (the JSON body of a POST /api/edit), the first client
// edits instead: /api/edit, /api/predict, /api/edit/reset, /api/predict in
// turn (the other clients wait for its edits: one model, one lock).  Prints one JSON line: {"requests", "errors",
// "seconds", "p50_ms", "p90_ms", "p99_ms", "max_ms"}; exit 1 on any error
// (a status other than 200, a reply that is not JSON, a dropped connection).
import http from 'node:http';

const [url, nArg, cArg, editArg] = process.argv.slice(2);
const N = +nArg, C = +cArg;
const base = new URL(url);
const token = base.searchParams.get('token');
const auth = token ? { Authorization: `token ${token}`, Origin: base.origin } : {};
const text = 'Mary gave John the apple because';
const bodies = [
  ['GET', '/api/info', null],
  ['POST', '/api/tokenize', { text }],
  ['POST', '/api/predict', { text, k: 5 }],
  ['POST', '/api/predict', { text, edits: [{ layer: 1, neuron: 3, scale: 0 }], k: 5 }],
  ['POST', '/api/neurons', { text, position: 5, layer: 1, k: 4 }],
];
const editing = editArg ? [
  ['POST', '/api/edit', JSON.parse(editArg)],
  ['POST', '/api/predict', { text, k: 5 }],
  ['POST', '/api/edit/reset', {}],
  ['POST', '/api/predict', { text, k: 5 }],
] : null;
function one(agent, k, list) {
  const [method, path, body] = list[k % list.length];
  const data = body ? JSON.stringify(body) : null;
  return new Promise((resolve) => {
    const t = process.hrtime.bigint();
    const req = http.request({ host: base.hostname, port: base.port, path, method, agent,
      headers: data ? { ...auth, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : auth }, (res) => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { s += c; });
      res.on('end', () => {
        let okJson = true;
        try { JSON.parse(s); } catch { okJson = false; }
        resolve({ ms: Number(process.hrtime.bigint() - t) / 1e6, ok: res.statusCode === 200 && okJson, why: `${path}: ${res.statusCode} ${s.slice(0, 200)}` });
      });
    });
    req.on('error', (e) => resolve({ ms: 0, ok: false, why: `${path}: ${e.message}` }));
    if (data) req.write(data);
    req.end();
  });
}
let next = 0;
const lat = [], errors = [];
const t0 = Date.now();
await Promise.all(Array.from({ length: C }, async (_, c) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const list = c === 0 && editing ? editing : bodies;
  for (let k, j = 0; (k = next++) < N; j++) {
    const r = await one(agent, list === bodies ? k : j, list);
    lat.push(r.ms);
    if (!r.ok) errors.push(r.why);
  }
  agent.destroy();
}));
lat.sort((a, b) => a - b);
const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
console.log(JSON.stringify({ requests: lat.length, clients: C, errors: errors.length, seconds: (Date.now() - t0) / 1000,
  p50_ms: +q(0.5).toFixed(2), p90_ms: +q(0.9).toFixed(2), p99_ms: +q(0.99).toFixed(2), max_ms: +lat[lat.length - 1].toFixed(2) }));
if (errors.length) { console.error(errors.slice(0, 5).join('\n')); process.exit(1); }
