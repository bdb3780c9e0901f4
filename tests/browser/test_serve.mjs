// test_serve.mjs -- the live page of `ffn serve` as a person uses it, in
// headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core).
//
// Trains a small model, starts `ffn serve` on a free port of 127.0.0.1,
// opens the page, types a sentence, checks the tokens against
// /api/tokenize, clicks a token and checks the neuron table against
// /api/neurons (neurons, values and word-class labels), switches a neuron
// off and scales another, and checks that the prediction the page shows
// equals the server's /api/predict for the same request and an independent
// computation (tests/cli/serve_predict_driver.c: the same edits through the
// public tap API in its own process).  Every request is intercepted: one
// that does not go to the server fails the test (and is aborted); so does
// any console or page error.  On a second server, of a word-level model
// trained on the facts corpus (with --save-dir): a neuron switched off in
// the page gives the prediction `ffn inspect MODEL --ablate L:i --json`
// prints for the same text (top tokens and probabilities, KL); an edit run
// from the page's edit panel shows the before/after numbers `ffn edit
// --json` prints for the same arguments, the "edited" badge appears, the
// prediction becomes that of `ffn inspect` on ffn edit's output, "save"
// writes the same weights, and "reset" brings the original prediction
// back.  Every request the page makes to /api/ carries the launch's token
// (the cookie set when the printed URL ?token=... is opened, which then
// redirects to /) and is same-origin; a page of another origin
// (http://localhost:PORT, another site for the browser) that posts to the
// API with fetch(..., {mode: 'no-cors'}) changes nothing (nothing saved,
// no edit).  Then the page of `ffn serve --lang zh` shows
// the Chinese labels of the catalogue, and so does `ffn report --lang zh`
// of the same run directory (opened offline).  Screenshots are kept in
// build/test-artifacts/.
//
// Needs what tests/browser/test_report.mjs needs (node >= 20, chromium,
// npm ci in tests/browser) and cc with build/libffn.a for the driver.
// Run: node tests/browser/test_serve.mjs   (FFN_BIN defaults to build/ffn)
import fs from 'node:fs';
import path from 'node:path';
import { api, artifacts, ffn, finish, keepToOrigin, launch, ok, requirePrerequisites, root, run, servers, startServer,
  tempDir } from './lib.mjs';

const t0 = Date.now();
requirePrerequisites();

// ---- a small model, the driver, the servers ---------------------------------------------
const tmp = tempDir('ffn-serve-test-');
const model = path.join(tmp, 'm');
run(ffn, ['train', '--steps', '200', '--hidden-size', '32', '--intermediate-size', '50', '--num-hidden-layers', '2',
  '--batch-size', '4', '--seq-len', '64', '--threads', '2', '--seed', '3', '--out', model]);
// the facts model: word-level, trained on the facts corpus (its text and
// facts are what ffn serve and ffn edit find from its train_state)
const factsModel = path.join(tmp, 'facts-m');
run(ffn, ['train', '--corpus', 'facts', '--tokenizer', 'word', '--steps', '300', '--hidden-size', '64', '--intermediate-size', '128',
  '--num-hidden-layers', '2', '--num-attention-heads', '4', '--num-key-value-heads', '4', '--batch-size', '8', '--seq-len', '64',
  '--threads', '2', '--seed', '3', '--out', factsModel]);
const factsFile = path.join(tmp, 'facts.jsonl');
fs.writeFileSync(factsFile, run(ffn, ['corpus', '--facts', '--json']));
const saveDir = path.join(tmp, 'saved');
fs.mkdirSync(saveDir);
const driver = path.join(tmp, 'driver');
run('cc', ['-std=c11', '-D_GNU_SOURCE', '-O2', '-fopenmp', '-I' + path.join(root, 'include'), '-o', driver,
  path.join(root, 'tests/cli/serve_predict_driver.c'), path.join(root, 'build/libffn.a'), '-ldnnl', '-fopenmp', '-lm', '-lpthread', '-lpcre2-8']);

const serve = (args, which) => startServer(which || model, args);
const srv = await serve([]);
ok(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}$/.test(srv.url), `ffn serve prints its URL on 127.0.0.1 with a token`);

// ---- the browser ----------------------------------------------------------------------------
const context = await launch({ width: 1366, height: 900 });
const problems = [];
let served = 0;
const apiSeen = { n: 0, bad: [] }; // the page's /api/ requests: token and same-origin
async function openPage(url) {
  const origin = new URL(url).origin, token = new URL(url).searchParams.get('token');
  const page = await context.newPage();
  page.on('request', async (req) => {
    if (!req.url().startsWith(origin + '/api/')) return;
    const h = await req.allHeaders();
    apiSeen.n++;
    const cookie = (h.cookie || '').split(/;\s*/).includes(`ffn_token_${new URL(url).port}=${token}`);
    // (Chromium sends Sec-Fetch-Site only to secure origins: when it is there it must say same-origin)
    if (!cookie || (h['sec-fetch-site'] && h['sec-fetch-site'] !== 'same-origin') || (req.method() === 'POST' && h.origin !== origin))
      apiSeen.bad.push(`${req.method()} ${req.url()}: cookie ${cookie}, sec-fetch-site ${h['sec-fetch-site']}, origin ${h.origin}`);
  });
  await keepToOrigin(page, origin, problems, () => served++);
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  return page;
}
const idle = (page) => page.waitForFunction(() => document.body.getAttribute('data-busy') === '0', null, { timeout: 60000 });

const sentence = 'Mary gave John the apple because';
try {
  const page = await openPage(srv.url);
  // the page opens with a sample text, already tokenized; replace it
  const info0 = (await api(srv.url, '/api/info')).json;
  ok(await page.locator('#text').inputValue() === info0.messages['live.sample_text'] && await page.locator('#tokens .tok').count() > 0,
    'the page opens with the sample text, tokenized', await page.locator('#text').inputValue());
  await page.locator('#text').fill('');
  await page.locator('#text').dispatchEvent('input');
  await page.waitForFunction(() => document.querySelectorAll('#tokens .tok').length === 0, null, { timeout: 30000 });
  await page.locator('#text').pressSequentially(sentence, { delay: 5 });
  await page.waitForFunction((n) => document.querySelectorAll('#tokens .tok').length === n, sentence.length, { timeout: 30000 });
  await idle(page);
  const tok = (await api(srv.url, '/api/tokenize', { text: sentence })).json;
  const shown = await page.$$eval('#tokens .tok', (els) => els.map((e) => +e.getAttribute('data-id')));
  ok(JSON.stringify(shown) === JSON.stringify(tok.tokens.map((t) => t.id)), 'typed text: the page shows the tokens of /api/tokenize', shown.join(' '));
  const ids = tok.tokens.map((t) => t.id);

  // click a token: its neurons, against /api/neurons
  const pos = 14; // the space after John
  await page.locator(`#tokens .tok[data-pos="${pos}"]`).click();
  await page.waitForSelector('#neuron-panel table.ntable', { timeout: 30000 });
  await idle(page);
  const nref = (await api(srv.url, '/api/neurons', { text: sentence, position: pos, k: 8 })).json;
  const table = await page.$$eval('#neuron-panel table.ntable', (ts) => ts.map((t) => ({
    layer: +t.getAttribute('data-layer'),
    rows: [...t.querySelectorAll('tbody tr')].map((r) => ({ neuron: +r.getAttribute('data-neuron'), label: r.children[6].textContent })),
  })));
  const sameNeurons = table.length === nref.layers.length && table.every((t, i) => t.layer === nref.layers[i].layer &&
    JSON.stringify(t.rows.map((r) => r.neuron)) === JSON.stringify(nref.layers[i].neurons.map((n) => n.neuron)));
  ok(sameNeurons, 'clicked token: the neuron tables show the neurons of /api/neurons, per layer', JSON.stringify(table).slice(0, 300));
  const labelled = table.every((t, i) => t.rows.every((r, j) => r.label.startsWith(nref.layers[i].neurons[j].label.class)));
  ok(labelled, 'every neuron shows its gate-probe label (word class and d)', table[0].rows.map((r) => r.label).join(' | '));
  ok((await page.locator('#tokens .tok.sel').getAttribute('data-pos')) === String(pos), 'the clicked token is marked');

  // switch the strongest neuron of layer 1 off, scale the second by 3
  const n1 = nref.layers[1].neurons[0].neuron, n2 = nref.layers[1].neurons[1].neuron;
  await page.locator(`table.ntable[data-layer="1"] button.off[data-neuron="${n1}"]`).click();
  await page.waitForSelector(`#edits .edit[data-edit="1:${n1}"]`, { timeout: 30000 });
  await idle(page);
  const scaleBox = page.locator(`table.ntable[data-layer="1"] tr[data-neuron="${n2}"] input.scale`);
  await scaleBox.fill('3');
  await scaleBox.dispatchEvent('change');
  await page.waitForSelector(`#edits .edit[data-edit="1:${n2}"]`, { timeout: 30000 });
  await idle(page);
  const st = await page.evaluate(() => ({ req: window.ffnLive.lastPredict.request, kl: document.getElementById('kl').getAttribute('data-kl'),
    rows: [...document.querySelectorAll('#bars .qrow')].map((r) => ({ id: +r.getAttribute('data-id'), b: r.getAttribute('data-p-before'), a: r.getAttribute('data-p-after') })) }));
  ok(JSON.stringify(st.req.edits) === JSON.stringify([{ layer: 1, neuron: n1, scale: 0 }, { layer: 1, neuron: n2, scale: 3 }]),
    'the page sends the edits made: neuron off (scale 0), neuron scaled by 3', JSON.stringify(st.req.edits));
  const pref = (await api(srv.url, '/api/predict', st.req)).json;
  const byId = {};
  pref.before.concat(pref.after).forEach((e) => { byId[e.id] = e; });
  const union = Object.keys(byId).length;
  ok(st.rows.length === union && st.rows.every((r) => byId[r.id] && String(byId[r.id].p_before) === r.b && String(byId[r.id].p_after) === r.a) &&
    st.kl === String(pref.kl), `the page's before/after bars (${st.rows.length} tokens) and KL equal /api/predict for the same request`);
  const drv = JSON.parse(run(driver, [model, ids.join(' '), `1:${n1}:0`, `1:${n2}:3`]));
  let worst = 0;
  st.rows.forEach((r) => { worst = Math.max(worst, Math.abs(+r.b - drv.before[r.id]), Math.abs(+r.a - drv.after[r.id])); });
  ok(worst <= 1e-6 && Math.abs(+st.kl - drv.kl) <= 1e-4 * drv.kl + 1e-9,
    `the page's prediction equals the tap-API driver (max |dp| ${worst.toExponential(2)}, KL ${(+st.kl).toPrecision(6)} vs ${drv.kl.toPrecision(6)})`);
  ok(+st.kl > 0, `the edits change the prediction (KL ${(+st.kl).toPrecision(4)} > 0)`);
  await page.screenshot({ path: path.join(artifacts, 'serve.png'), fullPage: true });
  ok(fs.statSync(path.join(artifacts, 'serve.png')).size > 10000, 'screenshot kept: build/test-artifacts/serve.png');

  // clearing the edits: before and after the same again
  await page.locator('#clear-edits').click();
  await page.waitForFunction(() => !document.querySelector('#edits .edit'), null, { timeout: 30000 });
  await idle(page);
  const cleared = await page.evaluate(() => [...document.querySelectorAll('#bars .qrow')].every((r) => r.getAttribute('data-p-before') === r.getAttribute('data-p-after')));
  ok(cleared && (await page.locator('#kl').getAttribute('data-kl')) === '0', 'clear all edits: before = after, KL 0');

  // causal tracing in the page: the tables are /api/trace's, cell for cell
  await page.locator('#trace-subject').fill('John');
  await page.locator('#trace-run').click();
  await page.waitForSelector('#trace-panel table.trace[data-kind="mlp_out"]', { timeout: 60000 });
  await idle(page);
  const tref = (await api(srv.url, '/api/trace', { text: sentence, subject: 'John' })).json;
  const cells = await page.$$eval('#trace-panel table.trace[data-kind="mlp_out"] tr', (rs) => rs.slice(1).map((r) => [...r.querySelectorAll('td')].map((c) => +c.getAttribute('title'))));
  const sameTrace = cells.length === tref.effects.mlp_out.length &&
    cells.every((row, l) => row.length === tref.n_tokens && row.every((v, i) => Math.abs(v - tref.effects.mlp_out[l][i]) < 1e-5));
  ok(sameTrace, 'trace: the page\'s MLP table is /api/trace\'s (layers x tokens)', JSON.stringify(cells).slice(0, 200));
  await page.screenshot({ path: path.join(artifacts, 'serve-trace.png'), fullPage: true });
  await page.close();


  // ---- the facts model: a neuron off against ffn inspect --ablate, an edit against ffn edit ----
  const fsrv = await serve(['--no-labels', '--samples', '500', '--save-dir', saveDir], factsModel);
  const fpage = await openPage(fsrv.url);
  const prompt = 'Sevelle lives in';
  await fpage.locator('#text').fill(prompt);
  await fpage.locator('#text').dispatchEvent('input');
  await fpage.waitForFunction(() => document.querySelectorAll('#tokens .tok').length === 3, null, { timeout: 30000 });
  await idle(fpage);
  await fpage.locator('#tokens .tok[data-pos="2"]').click();
  await fpage.waitForSelector('#neuron-panel table.ntable[data-layer="1"]', { timeout: 30000 });
  await idle(fpage);
  const fneur = await fpage.evaluate(() => window.ffnLive.lastNeurons);
  const off = fneur.layers[1].neurons[0].neuron;
  await fpage.locator(`table.ntable[data-layer="1"] button.off[data-neuron="${off}"]`).click();
  await fpage.waitForSelector(`#edits .edit[data-edit="1:${off}"]`, { timeout: 30000 });
  await idle(fpage);
  const pageBars = () => fpage.evaluate(() => ({ kl: document.getElementById('kl').getAttribute('data-kl'), reply: window.ffnLive.lastPredict.reply,
    rows: [...document.querySelectorAll('#bars .qrow')].map((r) => ({ id: +r.getAttribute('data-id'), b: +r.getAttribute('data-p-before'), a: +r.getAttribute('data-p-after') })) }));
  const ab = await pageBars();
  const ins = JSON.parse(run(ffn, ['inspect', factsModel, '--prompt', prompt, '--ablate', `1:${off}`, '--json', '--threads', '2']));
  const near = (x, y) => Math.abs(x - y) <= 2e-5 * (Math.abs(y) + 1e-6);   // inspect prints 6 digits
  const rowOf = {};
  ab.rows.forEach((r) => { rowOf[r.id] = r; });
  const sameTop = JSON.stringify(ab.reply.before.map((e) => e.id)) === JSON.stringify(ins.before.map((e) => e.id)) &&
    JSON.stringify(ab.reply.after.map((e) => e.id)) === JSON.stringify(ins.after.map((e) => e.id));
  const sameP = ins.before.every((e) => rowOf[e.id] && near(rowOf[e.id].b, e.p) && near(rowOf[e.id].a, e.p_after)) &&
    ins.after.every((e) => rowOf[e.id] && near(rowOf[e.id].a, e.p) && near(rowOf[e.id].b, e.p_before));
  ok(sameTop && sameP && Math.abs(+ab.kl - ins.kl) <= 1e-4 * ins.kl + 1e-9,
    `neuron 1:${off} off in the page = ffn inspect --ablate 1:${off} --json (top ${ins.before.length} before and after, p, KL ${(+ab.kl).toPrecision(4)})`,
    JSON.stringify({ page: ab.reply.after.slice(0, 3), inspect: ins.after.slice(0, 3) }));
  await fpage.locator('#clear-edits').click();
  await fpage.waitForFunction(() => !document.querySelector('#edits .edit'), null, { timeout: 30000 });
  await idle(fpage);
  const original = await pageBars();

  // the edit panel: ROME at layer 0, then FT at layer 1 (edits add up)
  const factsModelSum = run('sha256sum', [path.join(factsModel, 'model.safetensors')]);
  ok(await fpage.locator('#edited-badge').isHidden(), 'no "edited" badge before an edit');
  ok(await fpage.locator('#edit-save').isVisible(), 'with --save-dir the page offers "save edited model"');
  const editFromPage = async (layer, method) => {
    await fpage.locator('#edit-prompt').fill(prompt);
    await fpage.locator('#edit-subject').fill('Sevelle');
    await fpage.locator('#edit-target').fill('Keshdun');
    await fpage.locator('#edit-layer').selectOption(String(layer));
    await fpage.locator('#edit-method').selectOption(method);
    const before = await fpage.evaluate(() => window.ffnLive.lastEdit);
    await fpage.locator('#edit-run').click();
    await fpage.waitForFunction((b) => window.ffnLive.lastEdit && window.ffnLive.lastEdit !== b, before, { timeout: 120000 });
    await idle(fpage);
    return fpage.evaluate(() => ({ reply: window.ffnLive.lastEdit.reply, request: window.ffnLive.lastEdit.request,
      rows: [...document.querySelectorAll('#edit-panel table.edit-scores tbody tr')].map((r) => ({ key: r.getAttribute('data-key'), b: r.getAttribute('data-before'), a: r.getAttribute('data-after') })) }));
  };
  const closeTo = (x, y) => (x === null && y === null) || (x !== null && y !== null && Math.abs(x - y) <= 2e-5 * (1 + Math.abs(y)));
  const sameAsCli = (pg, cli) => {
    const bad = [];
    for (const when of ['before', 'after']) {
      const a = pg.reply[when], b = cli[when];
      for (const k of ['logp_new', 'logp_old', 'efficacy', 'generalisation', 'specificity', 'heldout_loss']) if (!closeTo(a[k], b[k])) bad.push(`${when}.${k} ${a[k]} vs ${b[k]}`);
      if (!closeTo(a.p_new, Math.exp(b.logp_new)) || !closeTo(a.p_old, Math.exp(b.logp_old))) bad.push(`${when} p`);
    }
    // the table shows the reply's numbers
    for (const r of pg.rows) if (String(pg.reply.before[r.key]) !== r.b || String(pg.reply.after[r.key]) !== r.a) bad.push(`row ${r.key}`);
    if (pg.rows.length !== 6) bad.push(`${pg.rows.length} rows`);
    if (pg.reply.old !== cli.old || pg.reply.steps !== cli.steps || !closeTo(pg.reply.loss_last, cli.loss_last)) bad.push('v*');
    return bad;
  };
  const pr = await editFromPage(0, 'rome');
  ok(JSON.stringify(pr.request) === JSON.stringify({ prompt, subject: 'Sevelle', target: 'Keshdun', layer: 0, method: 'rome' }), 'the page sends the edit asked for', JSON.stringify(pr.request));
  const cliRome = JSON.parse(run(ffn, ['edit', factsModel, '--facts', factsFile, '--fact', '0', '--target', 'Keshdun', '--layer', '0',
    '--samples', '500', '--cache', tmp, '--threads', '2', '--out', path.join(tmp, 'e-rome'), '--json']));
  let bad = sameAsCli(pr, cliRome);
  ok(bad.length === 0, `ROME from the page: before/after = ffn edit --json (log p(new) ${pr.reply.before.logp_new.toFixed(4)} -> ${pr.reply.after.logp_new.toFixed(4)})`, bad.join('; '));
  ok(await fpage.locator('#edited-badge').isVisible(), 'the "edited" badge shows after an edit');
  const factsText = path.join(tmp, 'facts.txt');
  fs.writeFileSync(factsText, run(ffn, ['corpus', '--facts', '--text', '--sentences', '20000']));
  const pf = await editFromPage(1, 'ft');
  const cliFt = JSON.parse(run(ffn, ['edit', path.join(tmp, 'e-rome'), '--facts', factsFile, '--fact', '0', '--target', 'Keshdun', '--layer', '1',
    '--method', 'ft', '--data', factsText, '--cache', tmp, '--threads', '2', '--out', path.join(tmp, 'e-ft'), '--json']));
  bad = sameAsCli(pf, cliFt);
  ok(bad.length === 0, `FT from the page after the ROME edit = ffn edit --method ft on ffn edit's output (efficacy ${pf.reply.before.efficacy} -> ${pf.reply.after.efficacy})`, bad.join('; '));
  const edited = await pageBars();
  const insE = JSON.parse(run(ffn, ['inspect', path.join(tmp, 'e-ft'), '--prompt', prompt, '--ablate', '0:0', '--json', '--threads', '2']));
  ok(edited.reply.model_edits === 2 && JSON.stringify(edited.reply.before.map((e) => e.id)) === JSON.stringify(insE.before.map((e) => e.id)) &&
    edited.rows.every((r) => r.b === r.a) &&
    insE.before.every((e) => edited.reply.before.some((x) => x.id === e.id && near(x.p_before, e.p))),
    'after the edits the page\'s prediction is the edited model\'s (= ffn inspect of ffn edit\'s output)');
  ok(JSON.stringify(edited.rows) !== JSON.stringify(original.rows), 'the edits changed the page\'s prediction');
  await fpage.screenshot({ path: path.join(artifacts, 'serve-edit.png'), fullPage: true });
  ok(fs.statSync(path.join(artifacts, 'serve-edit.png')).size > 10000, 'screenshot kept: build/test-artifacts/serve-edit.png');
  await fpage.locator('#edit-save').click();
  await fpage.waitForFunction(() => window.ffnLive.lastSave, null, { timeout: 60000 });
  const saved = await fpage.evaluate(() => window.ffnLive.lastSave);
  ok(saved.name === 'facts-m-edited-1' && fs.readFileSync(path.join(saveDir, saved.name, 'model.safetensors')).equals(fs.readFileSync(path.join(tmp, 'e-ft', 'model.safetensors'))),
    `"save edited model" wrote ${saved.name} in --save-dir with ffn edit's weights, byte for byte`);
  await fpage.locator('#edit-reset').click();
  await fpage.waitForFunction(() => window.ffnLive.modelEdits === 0, null, { timeout: 30000 });
  await idle(fpage);
  const back = await pageBars();
  ok(JSON.stringify(back.rows) === JSON.stringify(original.rows) && back.reply.model_edits === 0 && await fpage.locator('#edited-badge').isHidden(),
    'reset: the original prediction is back, the badge gone');
  ok(run('sha256sum', [path.join(factsModel, 'model.safetensors')]) === factsModelSum, 'the model on disk never changed');
  await fpage.close();

  // another site's page posting to the API: refused, nothing changes
  const fport = new URL(fsrv.url).port;
  const evil = await context.newPage();
  await evil.goto(`http://localhost:${fport}/`, { waitUntil: 'load' }); // another origin (and site) for the browser
  const attempts = await evil.evaluate(async (target) => {
    const out = [];
    for (const [p, body] of [['/api/edit/save', '{}'], ['/api/edit', '{"prompt":"Sevelle lives in","subject":"Sevelle","target":"Keshdun","layer":1,"method":"ft"}']]) {
      try { const r = await fetch(target + p, { method: 'POST', mode: 'no-cors', body }); out.push(`${p}: opaque ${r.type}`); } catch (e) { out.push(`${p}: ${e.message}`); }
      try { await fetch(target + p, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body }); out.push(`${p}: READ`); } catch (e) { out.push(`${p}: cors refused`); }
    }
    return out;
  }, `http://127.0.0.1:${fport}`);
  await evil.close();
  const after = (await api(fsrv.url, '/api/info')).json;
  ok(after.edit.n_edits === 0 && after.edit.saves === 1 && fs.readdirSync(saveDir).length === 1 && !attempts.some((a) => a.endsWith('READ')),
    `another site's page cannot drive the server (no-cors and CORS posts: no edit, no save; ${attempts.join(', ')})`);

  // the page in Chinese
  // (an English model: the probe on the Chinese corpus fails its coverage
  // check, so the labels come from the English one, named in Chinese)
  const zh = await serve(['--lang', 'zh']);
  const info = (await api(zh.url, '/api/info')).json;
  const zpage = await openPage(zh.url);
  const h1 = await zpage.locator('#title').textContent();
  ok(h1 === info.messages['live.title'] && /[\u4e00-\u9fff]/.test(h1), `--lang zh: the title is the catalogue's Chinese (${h1})`);
  ok((await zpage.evaluate(() => document.documentElement.lang)) === 'zh', '--lang zh: <html lang="zh">');
  const zedit = await zpage.locator('#edit h2').textContent(), zrun = await zpage.locator('#edit-run').textContent();
  ok(zedit === info.messages['live.edit_title'] && /[\u4e00-\u9fff]/.test(zedit) && zrun === info.messages['live.edit_run'] && /[\u4e00-\u9fff]/.test(zrun),
    `--lang zh: the edit panel in Chinese (${zedit} / ${zrun})`);
  await zpage.locator('#text').fill('Mary gave');
  await zpage.locator('#text').dispatchEvent('input');
  await zpage.waitForFunction(() => document.querySelectorAll('#tokens .tok').length === 9, null, { timeout: 30000 });
  await idle(zpage);
  await zpage.locator('#tokens .tok[data-pos="2"]').click();
  await zpage.waitForSelector('#neuron-panel table.ntable', { timeout: 30000 });
  const heads = await zpage.$$eval('#neuron-panel table.ntable th', (ths) => ths.map((t) => t.textContent));
  ok(heads.includes('神经元') && heads.includes('乘积 m'), '--lang zh: the neuron table has Chinese headings', heads.join(' | '));
  const zlabels = await zpage.$$eval('#neuron-panel table.ntable tbody tr', (rs) => rs.map((r) => r.children[6].textContent));
  const zhClasses = ['人名', '代词', '物品', '动词', '功能词', '修饰词', '标点'];
  ok(info.labels.available && info.labels.corpus === 'en' && zlabels.length > 0 && zlabels.every((t) => zhClasses.some((c) => t.startsWith(c))),
    '--lang zh: the word-class labels in Chinese (probe fell back to the English corpus)', zlabels.slice(0, 4).join(' | '));
  await zpage.screenshot({ path: path.join(artifacts, 'serve-zh.png'), fullPage: true });
  await zpage.close();

  // the static report of the same run directory, --lang zh: the words from
  // the same catalogue, offline (the file is the only request)
  const zhReport = path.join(tmp, 'report-zh.html');
  run(ffn, ['report', model, '--lang', 'zh', '--threads', '2', '--out', zhReport]);
  const rpage = await context.newPage();
  const fileUrl = 'file://' + zhReport;
  await rpage.route('**/*', (route) => {
    if (route.request().url() === fileUrl || route.request().url().startsWith('data:')) return route.continue();
    problems.push(`the report made a request: ${route.request().url()}`);
    return route.abort();
  });
  rpage.on('console', (m) => { if (m.type() === 'error') problems.push(`report console error: ${m.text()}`); });
  rpage.on('pageerror', (e) => problems.push(`report page error: ${e.message}`));
  await rpage.goto(fileUrl, { waitUntil: 'load' });
  await rpage.waitForSelector('body[data-ready="1"]', { timeout: 15000 });
  const rmsg = await rpage.evaluate(() => JSON.parse(document.getElementById('ffn-data').textContent).messages);
  const rh2 = await rpage.locator('#neurons h2').textContent();
  const nav = await rpage.locator('nav').textContent();
  ok(rh2 === rmsg['page.neurons_title'] && /[\u4e00-\u9fff]/.test(rh2) && /验证损失/.test(nav),
    `ffn report --lang zh: headings and navigation in Chinese (${rh2})`);
  await rpage.locator('#tokens .tok').nth(2).click();
  const rheads = await rpage.$$eval('#neuron-panel th', (ths) => ths.map((t) => t.textContent));
  ok(rheads.includes('神经元') && rheads.includes('乘积 m'), 'ffn report --lang zh: the neuron table has Chinese headings', rheads.join(' | '));
  await rpage.screenshot({ path: path.join(artifacts, 'report-zh.png'), fullPage: true });
  await rpage.close();
} catch (e) {
  ok(false, 'browser session', e.stack || e.message);
} finally {
  await context.close();
}
ok(served > 5 && problems.length === 0, `every request went to the server (${served}); no console or page error`, problems.join('\n     '));
ok(apiSeen.n > 10 && apiSeen.bad.length === 0, `every /api/ request of the page (${apiSeen.n}) carried the token cookie and was same-origin`, apiSeen.bad.slice(0, 5).join('\n     '));
for (const s of servers) {
  s.kill('SIGINT');
  const code = await new Promise((r) => (s.exitCode !== null ? r(s.exitCode) : s.on('exit', r)));
  ok(code === 0, `ffn serve stops cleanly on SIGINT (exit ${code})`);
}
finish(t0);
