// test_serve_features.mjs -- the feature rows of the live page of `ffn serve
// --transcoder FILE`, clicked as a person would, in headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core).
//
// Trains a small char model and a transcoder of its layer 1, starts `ffn
// serve --transcoder` on a free port of 127.0.0.1, opens the page, types a
// sentence and clicks its last token.  Checks that
//   - the layer-1 feature table lists the features /api/neurons gives for
//     that token, in its order, and the same features (with the same
//     activations to 1e-4) that an independent computation reads there
//     (tests/cli/serve_feature_driver.c: layers.1.tc_features through the
//     public tap API, in its own process); layer 0 (no transcoder) has none;
//   - clicking the strongest feature's row sends the edit {"layer": 1,
//     "feature": j, "scale": 0}, shows its chip, and the before/after bars
//     and KL the page shows equal /api/predict for the same request and the
//     driver's (feature j off at every position: (0 - 1) a_j d_j ADDed to
//     layers.1.mlp_out) to 1e-5 in p, the edit's own effect on p at least
//     100x that disagreement, and KL > 0;
//   - the scale box of the second feature at 40 adds {"feature": j2,
//     "scale": 40}, again equal to /api/predict and the driver;
//   - clicking the first row again switches it back on (its edit gone) and
//     clearing the edits gives before = after, KL 0.
// Every request is intercepted: one that does not go to the server fails
// the test; so does any console or page error.  A screenshot is kept in
// build/test-artifacts/serve-features.png.
// Needs node >= 20, chromium, npm ci in tests/browser, cc with build/libffn.a.
// Run: node tests/browser/test_serve_features.mjs   (FFN_BIN defaults to build/ffn)
import path from 'node:path';
import { api as apiAt, artifacts, ffn, finish, keepToOrigin, launch, ok, requirePrerequisites, root, run, startServer,
  tempDir } from './lib.mjs';

requirePrerequisites();

// ---- the model, its transcoder, the driver, the server ----------------------------------
const tmp = tempDir('ffn-serve-features-');
const model = path.join(tmp, 'm'), tc = path.join(tmp, 'tc1.st');
run(ffn, ['train', '--steps', '150', '--hidden-size', '32', '--intermediate-size', '50', '--num-hidden-layers', '2',
  '--batch-size', '4', '--seq-len', '64', '--threads', '2', '--seed', '3', '--out', model]);
run(ffn, ['transcoder', 'train', model, '--layer', '1', '--features', '96', '--k', '6', '--steps', '40',
  '--batch-size', '4', '--seq-len', '64', '--eval-windows', '2', '--threads', '2', '--out', tc]);
const driver = path.join(tmp, 'driver');
run('cc', ['-std=c11', '-D_GNU_SOURCE', '-O2', '-fopenmp', '-I' + path.join(root, 'include'), '-o', driver,
  path.join(root, 'tests/cli/serve_feature_driver.c'), path.join(root, 'build/libffn.a'), '-ldnnl', '-fopenmp', '-lm', '-lpthread', '-lpcre2-8']);

const server = await startServer(model, ['--no-labels', '--transcoder', tc]);
const url = server.url;
const api = (p, body) => apiAt(url, p, body);

// ---- the browser --------------------------------------------------------------------------
const context = await launch({ width: 1366, height: 900 });
const problems = [];
const origin = new URL(url).origin;
const sentence = 'Mary gave John the apple because';
try {
  const page = await context.newPage();
  await keepToOrigin(page, origin, problems);
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  const idle = () => page.waitForFunction(() => document.body.getAttribute('data-busy') === '0', null, { timeout: 60000 });
  await page.locator('#text').fill(sentence);
  await page.locator('#text').dispatchEvent('input');
  await page.waitForFunction((n) => document.querySelectorAll('#tokens .tok').length === n, sentence.length, { timeout: 30000 });
  await idle();
  const ids = (await api('/api/tokenize', { text: sentence })).json.tokens.map((t) => t.id);
  const last = ids.length - 1;

  // the last token: its layer-1 features, against /api/neurons and the driver
  await page.locator(`#tokens .tok[data-pos="${last}"]`).click();
  await page.waitForSelector('#neuron-panel table.ftable[data-layer="1"] tr.frow', { timeout: 30000 });
  await idle();
  const nref = (await api('/api/neurons', { text: sentence, position: last, k: 8 })).json;
  const L1 = nref.layers.find((l) => l.layer === 1), L0 = nref.layers.find((l) => l.layer === 0);
  ok(L1 && Array.isArray(L1.features) && L1.features.length > 0 && L1.transcoder && L1.transcoder.features === 96,
    `/api/neurons gives layer 1's transcoder features at the token (${L1 && L1.features ? L1.features.length : 0} active of k 6)`);
  ok(L0 && L0.features === undefined && (await page.locator('#neuron-panel table.ftable[data-layer="0"]').count()) === 0,
    'layer 0 (no transcoder): no features in the reply, no feature table');
  const rows = await page.$$eval('#neuron-panel table.ftable[data-layer="1"] tr.frow', (rs) => rs.map((r) => +r.getAttribute('data-feature')));
  ok(JSON.stringify(rows) === JSON.stringify(L1.features.map((f) => f.feature)),
    'the page\'s feature rows are /api/neurons\' features, in its order', rows.join(' '));
  const d0 = JSON.parse(run(driver, [model, tc, ids.join(' ')]));
  const act = {};
  d0.active.forEach(([j, a]) => { act[j] = a; });
  const sameActive = L1.features.length === d0.active.length &&
    L1.features.every((f) => act[f.feature] !== undefined && Math.abs(act[f.feature] - f.activation) <= 1e-4 * Math.max(1, Math.abs(f.activation)));
  ok(sameActive, 'the features and activations shown are those the tap-API driver reads at the token',
    JSON.stringify(L1.features.map((f) => [f.feature, f.activation])) + ' vs ' + JSON.stringify(d0.active));
  const sorted = L1.features.every((f, i) => i === 0 || L1.features[i - 1].activation >= f.activation);
  ok(sorted && L1.features.every((f) => f.promoted.length === 5), 'largest first, 5 promoted tokens each');

  async function shown() {
    return page.evaluate(() => ({ req: window.ffnLive.lastPredict.request, kl: document.getElementById('kl').getAttribute('data-kl'),
      rows: [...document.querySelectorAll('#bars .qrow')].map((r) => ({ id: +r.getAttribute('data-id'), b: r.getAttribute('data-p-before'), a: r.getAttribute('data-p-after') })) }));
  }
  async function against(st, driverEdits, what) {
    const pref = (await api('/api/predict', st.req)).json;
    const byId = {};
    pref.before.concat(pref.after).forEach((e) => { byId[e.id] = e; });
    ok(st.rows.length === Object.keys(byId).length && st.rows.every((r) => byId[r.id] && String(byId[r.id].p_before) === r.b && String(byId[r.id].p_after) === r.a) &&
      st.kl === String(pref.kl), `${what}: the page's bars (${st.rows.length} tokens) and KL equal /api/predict for the same request`);
    const drv = JSON.parse(run(driver, [model, tc, ids.join(' '), ...driverEdits]));
    let worst = 0, effect = 0;
    st.rows.forEach((r) => {
      worst = Math.max(worst, Math.abs(+r.b - drv.before[r.id]), Math.abs(+r.a - drv.after[r.id]));
      effect = Math.max(effect, Math.abs(+r.a - +r.b));
    });
    // the edit's own effect on p must stand far above the disagreement, or the check could not fail
    ok(worst <= 1e-5 && worst * 100 < effect && Math.abs(+st.kl - drv.kl) <= 1e-3 * drv.kl + 1e-12,
      `${what}: equals the tap-API driver (max |dp| ${worst.toExponential(2)}, the edit moves p by up to ${effect.toExponential(2)}, ` +
      `KL ${(+st.kl).toPrecision(6)} vs ${drv.kl.toPrecision(6)})`);
    ok(+st.kl > 0, `${what}: the prediction changes (KL ${(+st.kl).toPrecision(4)} > 0)`);
  }

  // click the strongest feature's row: switched off
  const j1 = L1.features[0].feature;
  await page.locator(`table.ftable[data-layer="1"] tr.frow[data-feature="${j1}"] td.key`).click();
  await page.waitForSelector(`#edits .edit[data-edit="1:f${j1}"]`, { timeout: 30000 });
  await idle();
  let st = await shown();
  ok(JSON.stringify(st.req.edits) === JSON.stringify([{ layer: 1, feature: j1, scale: 0 }]),
    `clicking feature ${j1}'s row sends {"layer": 1, "feature": ${j1}, "scale": 0}`, JSON.stringify(st.req.edits));
  ok((await page.locator(`table.ftable[data-layer="1"] tr.frow.edited[data-feature="${j1}"] button.off`).textContent()).startsWith('\u2713'),
    'the row is marked edited, its off button checked');
  await against(st, [`${j1}:0`], `feature ${j1} off`);
  await page.screenshot({ path: path.join(artifacts, 'serve-features.png'), fullPage: true });

  // the second feature scaled by 40 through its scale box
  if (L1.features.length > 1) {
    const j2 = L1.features[1].feature;
    const box = page.locator(`table.ftable[data-layer="1"] tr.frow[data-feature="${j2}"] input.scale`);
    await box.fill('40');
    await box.dispatchEvent('change');
    await page.waitForSelector(`#edits .edit[data-edit="1:f${j2}"]`, { timeout: 30000 });
    await idle();
    st = await shown();
    ok(JSON.stringify(st.req.edits) === JSON.stringify([{ layer: 1, feature: j1, scale: 0 }, { layer: 1, feature: j2, scale: 40 }]),
      `feature ${j2}'s scale box at 40 adds {"feature": ${j2}, "scale": 40}`, JSON.stringify(st.req.edits));
    await against(st, [`${j1}:0`, `${j2}:40`], `feature ${j1} off and ${j2} x40`);
    await page.locator('#clear-edits').click();
    await page.waitForFunction(() => !document.querySelector('#edits .edit'), null, { timeout: 30000 });
    await idle();
    await page.locator(`table.ftable[data-layer="1"] tr.frow[data-feature="${j1}"] td.key`).click();
    await page.waitForSelector(`#edits .edit[data-edit="1:f${j1}"]`, { timeout: 30000 });
    await idle();
  }
  // the row clicked again: the feature on again
  await page.locator(`table.ftable[data-layer="1"] tr.frow[data-feature="${j1}"] td.key`).click();
  await page.waitForFunction(() => !document.querySelector('#edits .edit'), null, { timeout: 30000 });
  await idle();
  st = await shown();
  ok(st.req.edits.length === 0 && st.rows.every((r) => r.b === r.a) && st.kl === '0',
    `clicking feature ${j1}'s row again switches it back on: no edit, before = after, KL 0`, JSON.stringify(st.req.edits));
  await page.close();
} catch (e) {
  ok(false, 'the page test ran to the end', e.stack);
}
ok(problems.length === 0, 'no console or page error, no request off the server', problems.join('; '));
await context.close();
finish();
