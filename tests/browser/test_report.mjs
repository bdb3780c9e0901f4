// test_report.mjs -- the HTML report as a person uses it, in headless
// Chromium (Debian's /usr/bin/chromium, driven by playwright-core from npm).
//
// Builds a tiny run directory (ffn compare: linear, swiglu, moe), writes the
// report, opens it and fails on any console error, page error or network
// request other than the file itself.  Clicks tokens and checks that the
// neuron panel shows exactly that token's data from the embedded JSON;
// switches layers and models; checks the parameter chart, the curves and the
// linear-collapse table; keeps screenshots in build/test-artifacts/; checks
// the page on a 390x844 phone screen (each neuron a stacked block with its
// promoted tokens on screen, wide tables scroll in their own box with a
// hint, labels unclipped, the MoE expert load); checks that a 200-token
// prompt loads and responds within a few seconds.  The number and token
// formatting it expects comes from tools/report/format.js itself, and the
// page must run tools/report/format.js and report.js byte for byte.
//
// Needs: node >= 20, /usr/bin/chromium (apt-get install chromium), and
// `npm ci` in tests/browser (scripts/test.sh does it).  A missing piece is
// a FAILURE with what to install, never a skip.
//
// Run: node tests/browser/test_report.mjs   (FFN_BIN defaults to build/ffn)
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { pathToFileURL } from 'node:url';
import { artifacts, ffn, finish, launch, ok, requirePrerequisites, root, run, tempDir } from './lib.mjs';

const t0 = Date.now();
requirePrerequisites();

// ---- a tiny run directory and its reports ----------------------------------------
const tmp = tempDir('ffn-report-test-');
const runDir = path.join(tmp, 'run');
run(ffn, ['compare', '--variants', 'linear,swiglu,moe', '--steps', '12', '--seeds', '1',
  '--hidden-size', '32', '--batch-size', '4', '--seq-len', '32', '--eval-every', '4',
  '--eval-batches', '2', '--sentences', '2000', '--threads', '2', '--out', runDir]);
console.log(`# run directory built in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const report = path.join(tmp, 'report.html');
run(ffn, ['report', runDir, '--out', report, '--threads', '2']);
ok(fs.existsSync(report) && !fs.existsSync(report + '.tmp'), 'report written atomically (no .tmp left)');
// 200 tokens of the built-in corpus's kind of text (char tokenizer: one token per character)
const sentence = 'Mary gave John the apple because he was hungry. ';
let long = '';
while (long.length < 200) long += sentence;
long = long.slice(0, 200);
const runNone = path.join(tmp, 'run-none');
run(ffn, ['compare', '--variants', 'none', '--steps', '4', '--seeds', '1', '--hidden-size', '32', '--batch-size', '4',
  '--seq-len', '32', '--eval-every', '2', '--eval-batches', '1', '--sentences', '500', '--threads', '2', '--out', runNone]);
const reportNone = path.join(tmp, 'report-none.html');
run(ffn, ['report', runNone, '--out', reportNone, '--threads', '2']);
const report200 = path.join(tmp, 'report200.html');
run(ffn, ['report', runDir, '--out', report200, '--prompt', long, '--threads', '2']);

// ---- the browser ------------------------------------------------------------------
const context = await launch({ width: 1366, height: 768 });

const problems = [];
async function openPage(file, viewport) {
  const page = await context.newPage();
  if (viewport) await page.setViewportSize(viewport);
  const url = pathToFileURL(file).href;
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error on ${path.basename(file)}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error on ${path.basename(file)}: ${e.message}`));
  page.on('request', (r) => { if (r.url() !== url) problems.push(`network request from ${path.basename(file)}: ${r.url()}`); });
  const start = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 15000 });
  return { page, ms: Date.now() - start };
}

// What the page should show for a number and a token: the viewer's own
// format.js, loaded as it is (the page embeds the same file).
const assetDir = path.join(root, 'tools', 'report');
const formatJs = fs.readFileSync(path.join(assetDir, 'format.js'), 'utf8');
const viewerJs = fs.readFileSync(path.join(assetDir, 'report.js'), 'utf8');
const fmt = vm.createContext({});
vm.runInContext(formatJs, fmt, { filename: 'format.js' });
const { fmtNum, showToken, niceTicks, pct } = fmt;
ok(typeof fmtNum === 'function' && typeof showToken === 'function' && typeof niceTicks === 'function',
  'tools/report/format.js defines fmtNum, showToken and niceTicks');
ok(fmtNum(0.5) === '0.500' && fmtNum(123456) === '1.23e+5' && fmtNum(NaN) === '-' && fmtNum(2, 1) === '2.0',
  'format.js: fmtNum', [fmtNum(0.5), fmtNum(123456), fmtNum(NaN), fmtNum(2, 1)].join(' '));
ok(showToken(' ') === '\u2423' && showToken('   ') === '\u2423\u00d73' && showToken('\n') === '\u21b5' &&
  showToken('') === '\u2205' && showToken('\u0001') === '\\x01' && showToken('ab') === 'ab',
  'format.js: showToken makes whitespace and control bytes visible');
ok(JSON.stringify(niceTicks(2.13, 4.87, 5)) === JSON.stringify([2.5, 3, 3.5, 4, 4.5]),
  'format.js: niceTicks gives round ticks', JSON.stringify(niceTicks(2.13, 4.87, 5)));

// The panel's rows against the JSON entry of (model, token, layer).
async function checkPanel(page, data, mi, t, li, what) {
  const mod = data.models[mi];
  const entry = mod.tok[t][li];
  const shown = await page.evaluate(() => {
    const p = document.getElementById('neuron-panel');
    return {
      token: p.getAttribute('data-token'), layer: p.getAttribute('data-layer'), model: p.getAttribute('data-model'),
      rows: [...p.querySelectorAll('tbody tr')].map((tr) => ({
        key: tr.getAttribute('data-neuron'),
        cells: [...tr.querySelectorAll('td')].map((td) => td.textContent),
        chips: [...tr.querySelectorAll('td.promo .chip')].map((c) => c.textContent),
      })),
      experts: [...p.querySelectorAll('.chip.exp')].map((c) => c.textContent),
    };
  });
  ok(shown.token === String(t) && shown.layer === String(mod.layers[li]) && shown.model === mod.name,
    `${what}: panel shows model ${mod.name}, token ${t}, layer ${mod.layers[li]}`, JSON.stringify([shown.model, shown.token, shown.layer]));
  ok(shown.rows.length === entry.n.length && entry.n.length > 0, `${what}: ${entry.n.length} neuron rows`, shown.rows.length);
  let mismatch = null;
  entry.n.forEach((n, j) => {
    const row = shown.rows[j];
    if (!row) { mismatch = mismatch || `row ${j} missing`; return; }
    if (row.key !== `${n[0]}:${n[1]}`) mismatch = mismatch || `row ${j}: neuron ${row.key}, JSON ${n[0]}:${n[1]}`;
    const texts = row.cells.join('|');
    for (const [label, v] of [['gate', n[3]], ['up', n[4]], ['product', n[5]]])
      if (!texts.includes(fmtNum(v, 3))) mismatch = mismatch || `row ${j}: ${label} ${fmtNum(v, 3)} not in "${texts}"`;
    const want = n[8].map((id) => showToken(mod.vocab[String(id)]));
    if (JSON.stringify(row.chips) !== JSON.stringify(want))
      mismatch = mismatch || `row ${j}: promoted ${JSON.stringify(row.chips)}, JSON ${JSON.stringify(want)}`;
  });
  ok(!mismatch, `${what}: every row's neuron, gate, up, product and promoted tokens match the embedded JSON`, mismatch);
  if (mod.layer_moe[li]) {
    const want = entry.e.map((p) => `E${p[0]} \u00b7 w ${fmtNum(p[1], 2)}`);
    ok(entry.e.length > 0 && JSON.stringify(shown.experts) === JSON.stringify(want),
      `${what}: MoE routing shown (${want.join(', ')})`, JSON.stringify(shown.experts));
  }
  return shown;
}

async function clickToken(page, t) {
  await page.click(`#tokens .tok[data-t="${t}"]`);
  await page.waitForFunction((tt) => document.getElementById('neuron-panel').getAttribute('data-token') === String(tt), t, { timeout: 5000 });
}

try {
  const { page, ms } = await openPage(report);
  console.log(`# report loaded in ${ms} ms`);
  const data = await page.evaluate(() => JSON.parse(document.getElementById('ffn-data').textContent));
  const scripts = await page.evaluate(() => [...document.querySelectorAll('script:not([type])')].map((s) => s.textContent));
  ok(scripts.length === 2 && scripts[0] === '\n' + formatJs && scripts[1] === '\n' + viewerJs,
    'the page runs tools/report/format.js and report.js byte for byte', scripts.map((x) => x.length).join(','));

  // curves, table, parameters, collapse
  const curvePaths = await page.locator('#curve-plot svg path').count();
  ok(data.curves.length === 3 && curvePaths >= 3, `validation curves drawn (${data.curves.length} runs, ${curvePaths} paths)`);
  ok(await page.locator('#variant-table tbody tr').count() === 3, 'compare.json table has 3 variants');
  const prow = await page.locator('#param-chart .prow').count();
  ok(prow === data.params.length && prow === 4, `parameter chart: ${prow} bars (3 variants + Llama-2-7B)`);
  const llama = data.params.find((p) => p.name === 'Llama-2-7B');
  ok(llama && llama.total === 6738415616, 'Llama-2-7B counted as 6,738,415,616 parameters', llama && llama.total);
  const ffnShare = llama.parts.ffn / llama.total;
  ok(ffnShare > 0.6 && ffnShare < 0.7, `Llama-2-7B FFN share ${(100 * ffnShare).toFixed(1)}% (expected about 2/3)`);
  const collapseRows = await page.locator('#collapse-table tbody tr').count();
  ok(data.collapse && collapseRows === data.collapse.layers.length && collapseRows === 2, `collapse table: ${collapseRows} layers`);
  ok(data.collapse.layers.every((l) => l.rel < 1e-4), 'collapse: the merged map equals the two-layer map to float rounding',
    JSON.stringify(data.collapse.layers.map((l) => l.rel)));
  ok(data.collapse.params_before === 2 * data.collapse.D * data.collapse.F && data.collapse.params_after === data.collapse.D ** 2,
    'collapse: parameter counts 2DF before, D² after');
  ok(await page.locator('#collapse .ok').count() === 1, 'collapse verdict shown as "Same map"');

  // neurons: models, tokens, clicks, layers
  ok(data.models.length === 2 && data.models[0].name === 'swiglu' && data.models[1].name === 'moe',
    'default models: swiglu and moe', data.models.map((m) => m.name).join(','));
  const mod = data.models[0];
  const nTok = await page.locator('#tokens .tok').count();
  ok(nTok === mod.ids.length && nTok === 'Mary gave John the apple because he was hungry.'.length,
    `token strip: ${nTok} tokens of the default prompt`);
  const layerSel = await page.locator('#layer-select').inputValue();
  const li0 = +layerSel;
  await clickToken(page, 0);
  const first = await checkPanel(page, data, 0, 0, li0, 'click token 0');
  await clickToken(page, 5);
  const second = await checkPanel(page, data, 0, 5, li0, 'click token 5');
  ok(JSON.stringify(first.rows) !== JSON.stringify(second.rows), 'the panel changed between the two tokens');
  ok(await page.locator('#neuron-panel').getByText(/shares \d+ of its \d+ top neurons/).count() === 1,
    'the panel compares with the previous token');
  const otherLayer = li0 === 0 ? 1 : 0;
  await page.selectOption('#layer-select', String(otherLayer));
  await page.waitForFunction((l) => document.getElementById('neuron-panel').getAttribute('data-layer') === String(l),
    mod.layers[otherLayer], { timeout: 5000 });
  await checkPanel(page, data, 0, 5, otherLayer, `switch to layer ${mod.layers[otherLayer]}`);
  // pin a neuron: the tokens that also have it in their top-K get marked
  const pinKey = await page.locator('#neuron-panel tbody tr').nth(1).getAttribute('data-neuron');
  await page.locator('#neuron-panel tbody tr').nth(1).click();
  const marked = await page.locator('#tokens .tok.hit-pos, #tokens .tok.hit-neg').count();
  const expected = mod.tok.filter((row) => row[otherLayer].n.some((n) => `${n[0]}:${n[1]}` === pinKey)).length;
  ok(marked === expected && expected >= 1, `pinning neuron ${pinKey} marks the ${expected} tokens that have it in their top ${mod.top_k}`, marked);
  ok(/among the top \d+ of \d+ of the \d+ tokens/.test(await page.locator('#pin-note').textContent()), 'the pin note counts them');
  await page.locator(`#neuron-panel tbody tr[data-neuron="${pinKey}"]`).click();
  ok(await page.locator('#tokens .tok.hit-pos, #tokens .tok.hit-neg').count() === 0, 'a second click clears the marks');
  // keyboard: arrow right moves to the next token
  await page.focus('#tokens .tok[data-t="5"]');
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction(() => document.getElementById('neuron-panel').getAttribute('data-token') === '6', null, { timeout: 5000 });
  await checkPanel(page, data, 0, 6, otherLayer, 'arrow key to token 6');
  // the MoE model: experts per token
  await page.selectOption('#model-select', '1');
  await page.waitForFunction(() => document.getElementById('neuron-panel').getAttribute('data-model') === 'moe', null, { timeout: 5000 });
  await clickToken(page, 2);
  const moeLi = +(await page.locator('#layer-select').inputValue());
  await checkPanel(page, data, 1, 2, moeLi, 'moe model, token 2');
  // back to swiglu, the clicked state shown in the screenshot
  await page.selectOption('#model-select', '0');
  await page.selectOption('#layer-select', String(mod.layers.length - 1));
  await clickToken(page, 17);
  await page.screenshot({ path: path.join(artifacts, 'report.png'), fullPage: true });
  await page.screenshot({ path: path.join(artifacts, 'report-viewport.png') });
  await page.locator('#neurons').screenshot({ path: path.join(artifacts, 'report-neurons.png') });
  ok(fs.statSync(path.join(artifacts, 'report.png')).size > 10000, 'screenshot kept: build/test-artifacts/report.png');
  // readable at 1366x768: nothing wider than the window
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  ok(overflow <= 0, 'no horizontal scrolling at 1366x768', `${overflow}px too wide`);
  ok(await page.locator('#neuron-panel .ntable-box').count() === 1 && await page.locator('#neuron-panel .scroll-hint').count() === 0 &&
    await page.evaluate(() => { const b = document.querySelector('#neuron-panel .ntable-box'); return b.scrollWidth <= b.clientWidth + 1; }),
    'at 1366x768 the neuron table fits its box');
  // the sentence over the bars follows from their numbers; a model without an FFN has no F
  const lead = await page.locator('#param-lead').textContent();
  const tot = (p) => Object.values(p.parts).reduce((a, b) => a + b, 0);
  const largest = data.params.reduce((a, p) => (tot(p) > tot(a) ? p : a));
  ok(lead.includes(`Of ${largest.name}\u2019s`) && lead.includes(`${pct(largest.parts.ffn / tot(largest))} are in the FFN and ${pct(largest.parts.embeddings / tot(largest))} in the embeddings`),
    'the parameter sentence states the largest model\'s FFN and embedding shares', lead);
  // the parameter view toggle
  await page.selectOption('#param-view', 'active');
  const moeBar = await page.locator('#param-chart .prow').nth(2).locator('small').textContent();
  ok(/active/.test(moeBar), 'parameter chart switches to active parameters', moeBar);
  await page.close();

  // ---- a phone: 390x844 ----------------------------------------------------------
  const phone = (await openPage(report, { width: 390, height: 844 })).page;
  await clickToken(phone, 5);
  // nothing wider than the screen, except inside a box that scrolls sideways
  const wide = await phone.evaluate(() => {
    const vw = document.documentElement.clientWidth, out = [];
    const inScrollBox = (e) => {
      for (let p = e.parentElement; p; p = p.parentElement) {
        const ox = getComputedStyle(p).overflowX;
        if ((ox === 'auto' || ox === 'scroll') && p.getBoundingClientRect().right <= vw + 0.5) return true;
      }
      return false;
    };
    for (const e of document.querySelectorAll('body *')) {
      const r = e.getBoundingClientRect();
      if (r.width > 0 && (r.right > vw + 0.5 || r.left < -0.5) && !inScrollBox(e))
        out.push(`${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className ? '.' + String(e.className).split(' ')[0] : ''} ${Math.round(r.left)}..${Math.round(r.right)}`);
    }
    return { vw, scroll: document.documentElement.scrollWidth, out };
  });
  ok(wide.vw === 390 && wide.scroll <= 390 && wide.out.length === 0,
    'phone 390x844: no element wider than the screen outside a scroll box', `page ${wide.scroll}px; ${wide.out.slice(0, 5).join(', ')}`);
  // the neuron table needs no sideways scrolling: each neuron is a stacked
  // block, its name and promoted tokens on screen without scrolling anything
  const ntable = await phone.evaluate(() => {
    const row = document.querySelector('#neuron-panel tbody tr');
    const cell = row.querySelector('td.promo'), key = row.querySelector('td.key');
    cell.scrollIntoView();
    const r = cell.getBoundingClientRect(), k = key.getBoundingClientRect();
    const at = document.elementFromPoint(Math.min(r.left + 10, r.right - 1), r.top + r.height / 2);
    return { box: !document.querySelector('#neuron-panel .table-box'), left: r.left, right: r.right, keyRight: k.right,
      hit: !!(at && cell.contains(at)), table: document.querySelector('#neuron-panel table').getBoundingClientRect().width };
  });
  ok(ntable.box && ntable.table <= 390, `phone: the neuron table (${Math.round(ntable.table)}px) fits the screen, no scroll box`, JSON.stringify(ntable));
  ok(ntable.hit && ntable.left >= 0 && ntable.right <= 390 && ntable.keyRight <= 390,
    'phone: the first neuron and its promoted tokens are on screen', JSON.stringify(ntable));
  // the parameter labels: above their bars, not clipped; the segment labels fit
  const params = await phone.evaluate(() => [...document.querySelectorAll('#param-chart .prow')].map((r) => {
    const name = r.querySelector('.pname'), bar = r.querySelector('.pbar');
    return { text: name.textContent, clipped: name.scrollWidth > name.clientWidth + 1, bar: bar.getBoundingClientRect().width,
      segs: [...bar.children].filter((d) => d.scrollWidth > d.clientWidth + 1).map((d) => d.textContent) };
  }));
  ok(params.length === 4 && params.every((p) => !p.clipped && p.bar > 300 && p.segs.length === 0),
    'phone: parameter labels unclipped above full-width bars, every segment label fits', JSON.stringify(params));
  await phone.screenshot({ path: path.join(artifacts, 'report-phone.png'), fullPage: true });
  await phone.locator('#neurons').screenshot({ path: path.join(artifacts, 'report-phone-neurons.png') });
  await phone.locator('#params').screenshot({ path: path.join(artifacts, 'report-phone-params.png') });
  // the MoE model on the phone: the expert load of the prompt at this layer
  await phone.selectOption('#model-select', '1');
  await phone.waitForFunction(() => document.getElementById('neuron-panel').getAttribute('data-model') === 'moe', null, { timeout: 5000 });
  const moeM = data.models[1], moeLayer = +(await phone.locator('#layer-select').inputValue());
  const load = await phone.evaluate(() => [...document.querySelectorAll('#expert-load .share')].map((e) => [+e.getAttribute('data-expert'), e.textContent]));
  const wantLoad = [];
  for (let x = 0; x < moeM.experts; x++)
    wantLoad.push([x, pct(moeM.tok.filter((row) => row[moeLayer].e.some((p) => p[0] === x)).length / moeM.tok.length)]);
  ok(moeM.experts === 4 && moeM.experts_per_tok === 2 && JSON.stringify(load) === JSON.stringify(wantLoad),
    `MoE: per-expert token share of the prompt shown (${wantLoad.map((w) => 'E' + w[0] + ' ' + w[1]).join(', ')})`, JSON.stringify(load));
  await phone.locator('#neurons').screenshot({ path: path.join(artifacts, 'report-phone-moe.png') });
  await phone.close();

  // a run without an FFN (variant none): no F in its label, no neuron section to fill
  const nonePage = (await openPage(reportNone)).page;
  const noneRow = await nonePage.locator('#param-chart .prow').first().textContent();
  ok(/^none/.test(noneRow) && /no FFN/.test(noneRow) && !/, F \d/.test(noneRow), 'the variant without an FFN shows no F', noneRow);
  await nonePage.close();

  // a 200-token prompt
  const big = await openPage(report200);
  console.log(`# 200-token report loaded in ${big.ms} ms`);
  const d2 = await big.page.evaluate(() => JSON.parse(document.getElementById('ffn-data').textContent));
  ok(d2.models[0].ids.length === 200 && d2.models[0].windows === Math.ceil(200 / d2.models[0].context),
    `200-token prompt embedded (${d2.models[0].windows} windows of ${d2.models[0].context})`);
  ok(big.ms < 5000, `200-token report loads in ${big.ms} ms (< 5000)`);
  const c0 = Date.now();
  await clickToken(big.page, 199);
  await checkPanel(big.page, d2, 0, 199, +(await big.page.locator('#layer-select').inputValue()), '200 tokens, click the last');
  const clickMs = Date.now() - c0;
  ok(clickMs < 2000, `a click on the 200-token page answers in ${clickMs} ms (< 2000)`);
  await big.page.close();
} catch (e) {
  ok(false, 'browser session', e.stack || e.message);
} finally {
  await context.close();
}

ok(problems.length === 0, 'no console error, page error or network request', problems.join('\n     '));
finish(t0);
