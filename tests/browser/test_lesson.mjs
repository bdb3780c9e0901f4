// test_lesson.mjs -- the lesson's two pages as a learner reads them: in
// English and in Chinese, on a laptop (1280x800) and on a phone (390x844),
// in headless Chromium (Debian's /usr/bin/chromium, playwright-core).
//
// Builds one small run directory (ffn compare: linear, swiglu, moe), writes
// its report in both languages (ffn report --lang en|zh) and serves its
// swiglu run (ffn serve --lang en|zh).  For each language and screen:
//   - nothing is wider than the screen (the document never scrolls
//     sideways);
//   - what the page is for is in view, not merely present: the report's
//     result column (val loss) of the variant table; the first neuron's
//     name and promoted tokens; on the live page, the first neuron's off
//     and scale controls, its label and promoted tokens, the trace's colour
//     scale and the edit panel's before and after columns -- each scrolled
//     into view vertically and then entirely inside the screen's width;
//   - the live page opens with the sample text of its language, tokenized;
//   - no message key shows as itself (a key the catalogue lacks);
//   - in Chinese, no English word a person reads: every visible text node
//     (and the selected option of every select) is scanned for Latin words,
//     which must be identifiers, units or model terms of an allow-list, or
//     the data itself (run names, token pieces, paths).
// Screenshots of every page, language and screen go to build/test-artifacts/
// (lesson-<page>-<lang>-<width>.png).
//
// Needs what tests/browser/test_report.mjs needs.
// Run: node tests/browser/test_lesson.mjs   (FFN_BIN defaults to build/ffn)
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { artifacts, ffn, finish, launch, ok, requirePrerequisites, run, servers, startServer, tempDir } from './lib.mjs';

const t0 = Date.now();
requirePrerequisites();

// ---- the run directory, its reports, its servers ------------------------------------------
const tmp = tempDir('ffn-lesson-test-');
const runDir = path.join(tmp, 'run');
run(ffn, ['compare', '--variants', 'linear,swiglu,moe', '--steps', '12', '--seeds', '1', '--hidden-size', '32',
  '--batch-size', '4', '--seq-len', '64', '--eval-every', '4', '--eval-batches', '2', '--sentences', '2000',
  '--threads', '2', '--out', runDir]);
const reports = {};
for (const lang of ['en', 'zh']) {
  reports[lang] = path.join(tmp, `report-${lang}.html`);
  run(ffn, ['report', runDir, '--lang', lang, '--threads', '2', '--out', reports[lang]]);
}
// the live page serves a word-level model of the facts corpus (its edit
// panel needs a model that predicts a word after the prompt)
const served = path.join(tmp, 'facts-m');
run(ffn, ['train', '--corpus', 'facts', '--tokenizer', 'word', '--hidden-size', '32',
  '--intermediate-size', '64', '--num-hidden-layers', '2', '--num-attention-heads', '2', '--num-key-value-heads', '2',
  '--seq-len', '64', '--batch-size', '8', '--steps', '60', '--eval-batches', '1', '--threads', '2', '--quiet', '--out', served]);
const startLive = (lang) => startServer(served, ['--lang', lang]);
const live = { en: await startLive('en'), zh: await startLive('zh') };
console.log(`# built and served in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

// ---- what the page shows -------------------------------------------------------------------
// Latin words a Chinese page may show: identifiers, units and model terms.
const ALLOW = new Set(('ffn moe rome ft kl logit lens gate up act down_proj resid_post mlp_out attn_out p_clean p_corrupt ' +
  'p_restored p_restore w_up w_down b_up b_down d_ff gelu swiglu relu linear none dense gated silu geglu reglu bilinear glu ' +
  'frobenius shazeer flops tok cos max sd rmsnorm svg json jsonl metrics unk char word bpe byte gguf hf llama ' +
  'cpu lm id ids ok').split(' '));
// every visible text node's words (and each select's shown option), minus
// what is data: token strips and chips, the given strings, paths
async function latinWords(page, dataWords) {
  const words = await page.evaluate(() => {
    const out = [];
    // data (tokens, pieces) and the server's diagnostics (#error: English, as on stderr)
    const skip = (e) => e.closest('.tok, .chip, #tokens, .qtok, textarea, script, style, svg title, #error');
    const visible = (e) => { const r = e.getClientRects(); return r.length > 0 && getComputedStyle(e).visibility !== 'hidden'; };
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const e = n.parentElement;
      if (!e || skip(e) || !visible(e) || e.tagName === 'OPTION') continue;
      out.push(n.textContent);
    }
    for (const s of document.querySelectorAll('select')) if (visible(s) && s.selectedOptions[0]) out.push(s.selectedOptions[0].textContent);
    out.push(document.title);
    return out;
  });
  const found = new Set();
  for (let text of words) {
    text = text.replace(/\S*\/\S*/g, ' ');               // paths and ratios of names
    text = text.replace(/\bffn( [a-z]+){1,2}( [A-Z]+)?\b/g, ' ');  // a command: ffn serve, ffn trace MODEL
    text = text.replace(/--[a-z][a-z-]*/g, ' ');          // its flags
    text = text.replace(/'[^']*'/g, ' ');                 // quoted data: '{old}' -> '{target}'
    for (const d of dataWords) text = text.split(d).join(' ');
    for (const w of text.match(/[A-Za-z][A-Za-z_]*[A-Za-z]/g) || [])
      if (!ALLOW.has(w.toLowerCase()) && !/^[A-Z]\d*$/.test(w)) found.add(w);
  }
  return [...found];
}
// the elements, each scrolled into view: inside the screen's width and
// height (not cut by a scroller either); names those that are not
async function outOfView(page, selectors) {
  const bad = [];
  for (const sel of selectors) {
    const loc = page.locator(sel).first();
    if (await loc.count() === 0) { bad.push(`${sel}: missing`); continue; }
    await loc.scrollIntoViewIfNeeded();
    const r = await loc.evaluate((e) => {
      const b = e.getBoundingClientRect();
      let clip = null; // the nearest ancestor that clips sideways
      for (let p = e.parentElement; p; p = p.parentElement) {
        const ox = getComputedStyle(p).overflowX;
        if (ox !== 'visible') { const q = p.getBoundingClientRect(); clip = { left: q.left, right: q.right }; break; }
      }
      return { left: b.left, right: b.right, top: b.top, bottom: b.bottom, w: b.width, vw: document.documentElement.clientWidth,
        vh: window.innerHeight, clip };
    });
    const inside = r.w > 0 && r.left >= -0.5 && r.right <= r.vw + 0.5 && r.top >= -0.5 && r.bottom <= r.vh + 0.5 &&
      (!r.clip || (r.left >= r.clip.left - 0.5 && r.right <= r.clip.right + 0.5));
    if (!inside) bad.push(`${sel} at ${Math.round(r.left)}..${Math.round(r.right)} x ${Math.round(r.top)}..${Math.round(r.bottom)}` +
      ` (screen ${r.vw}x${r.vh}${r.clip ? `, clipped to ${Math.round(r.clip.left)}..${Math.round(r.clip.right)}` : ''})`);
  }
  return bad;
}
// a message key shown as itself: the catalogue lacks it
async function rawKeys(page) {
  return page.evaluate(() => (document.body.innerText.match(/\b(page|report|live)\.[a-z_]+(\.[a-z_0-9]+)?\b/g) || []));
}
async function sideways(page) {
  return page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
}

const context = await launch({ width: 1280, height: 800 });
const problems = [];
async function open(url, viewport, allowed) {
  const page = await context.newPage();
  await page.setViewportSize(viewport);
  await page.route('**/*', (route) => {
    const u = route.request().url();
    if (allowed(u) || u.startsWith('data:')) return route.continue();
    problems.push(`a request left the page's origin: ${u}`);
    return route.abort();
  });
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('response', async (r) => { if (r.status() >= 400) problems.push(`${r.status()} from ${r.url()}: ${(await r.text()).slice(0, 200)}`); });
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  return page;
}
const idle = (page) => page.waitForFunction(() => document.body.getAttribute('data-busy') === '0', null, { timeout: 120000 });
const screens = [{ width: 1280, height: 800 }, { width: 390, height: 844 }];

try {
  for (const lang of ['en', 'zh']) {
    for (const vp of screens) {
      const where = `${lang} ${vp.width}x${vp.height}`;
      // ---- the report -------------------------------------------------------------------
      const url = pathToFileURL(reports[lang]).href;
      const page = await open(url, vp, (u) => u === url);
      const data = await page.evaluate(() => JSON.parse(document.getElementById('ffn-data').textContent));
      await page.locator('#tokens .tok').nth(5).click();
      await page.waitForFunction(() => document.getElementById('neuron-panel').getAttribute('data-token') === '5', null, { timeout: 5000 });
      ok(await sideways(page) <= 0, `report ${where}: the page does not scroll sideways`, `${await sideways(page)}px`);
      ok((await rawKeys(page)).length === 0, `report ${where}: every message key is in the catalogue`, (await rawKeys(page)).join(', '));
      const rbad = await outOfView(page, ['#variant-table tbody tr:first-child td.val-loss', '#neuron-panel tbody tr:first-child td.key',
        '#neuron-panel tbody tr:first-child td.promo .chip', '#param-chart .prow .pbar', '#collapse-table']);
      // the collapse table may scroll in its box on a phone: its first column must show
      const rfix = rbad.filter((b) => !b.startsWith('#collapse-table'));
      ok(rfix.length === 0, `report ${where}: the result column and the first neuron's promoted tokens are in view`, rfix.join('; '));
      ok(await page.locator('#variant-table thead th').nth(1).textContent() === data.messages['report.th_val_loss'],
        `report ${where}: val loss is the column after the variant`);
      if (lang === 'zh') {
        const runs = (data.variants || []).map((v) => v.run).concat(data.models.map((m) => m.name), (data.curves || []).map((c) => c.run),
          data.params.map((p) => p.name), [data.version, data.run_dir, path.basename(runDir)]).filter(Boolean);
        const words = await latinWords(page, runs.sort((a, b) => b.length - a.length));
        ok(words.length === 0, `report ${where}: no English words on the Chinese page`, words.join(', '));
      }
      await page.screenshot({ path: path.join(artifacts, `lesson-report-${lang}-${vp.width}.png`), fullPage: true });
      await page.close();

      // ---- the live page ----------------------------------------------------------------
      const srv = live[lang];
      const origin = new URL(srv.url).origin;
      const lpage = await open(srv.url, vp, (u) => u.startsWith(origin + '/'));
      await idle(lpage);
      const info = await lpage.evaluate(() => window.ffnLive.info);
      const sample = info.messages['live.sample_text'];
      ok(await lpage.locator('#text').inputValue() === sample && await lpage.locator('#tokens .tok').count() > 0,
        `live ${where}: opens with the sample text, tokenized (${sample})`);
      // the model is English: the Chinese page reads an English text (data)
      if (lang === 'zh') {
        await lpage.locator('#text').fill(live.en.sample || 'Mary gave John the apple because he was');
        await lpage.locator('#text').dispatchEvent('input');
        await lpage.waitForFunction(() => document.querySelectorAll('#tokens .tok').length > 3, null, { timeout: 30000 });
        await idle(lpage);
      } else live.en.sample = sample;
      const nTok = await lpage.locator('#tokens .tok').count();
      await lpage.locator('#tokens .tok').nth(Math.floor(nTok / 2)).click();
      await lpage.waitForSelector('#neuron-panel table.ntable', { timeout: 60000 });
      await idle(lpage);
      // trace the sample's subject; then edit it
      const subject = 'John';   // a subject of the (English) text
      await lpage.locator('#trace-subject').fill(subject);
      await lpage.locator('#trace-run').click();
      await lpage.waitForSelector('#trace-panel .trace-scale', { timeout: 120000 });
      await idle(lpage);
      // a fact of the model's corpus (English: the data, typed into the fields)
      await lpage.locator('#edit-prompt').fill('Sevelle lives in');
      await lpage.locator('#edit-subject').fill('Sevelle');
      await lpage.locator('#edit-target').fill('Keshdun');
      await lpage.locator('#edit-run').click();
      await lpage.waitForFunction(() => window.ffnLive.lastEdit || document.getElementById('error').textContent, null, { timeout: 180000 });
      await idle(lpage);
      const editErr = await lpage.locator('#error').textContent();
      ok(await lpage.locator('#edit-panel table.edit-scores').count() === 1, `live ${where}: the edit ran`, editErr);
      ok(await sideways(lpage) <= 0, `live ${where}: the page does not scroll sideways`, `${await sideways(lpage)}px`);
      ok((await rawKeys(lpage)).length === 0, `live ${where}: every message key is in the catalogue`, (await rawKeys(lpage)).join(', '));
      const lbad = await outOfView(lpage, ['table.ntable tbody tr:first-child td.key', 'table.ntable tbody tr:first-child button.off',
        'table.ntable tbody tr:first-child input.scale', 'table.ntable tbody tr:first-child td.lab',
        'table.ntable tbody tr:first-child td.promo .chip', '#trace-panel .trace-scale',
        '#edit-panel tbody tr:first-child td:nth-child(2)', '#edit-panel tbody tr:first-child td:nth-child(3)',
        '#edit-panel tbody tr:last-child td:nth-child(3)', '#bars .qrow .qp']);
      ok(lbad.length === 0, `live ${where}: controls, label, promoted tokens, trace scale and the edit's before/after in view`, lbad.join('; '));
      if (lang === 'zh') {
        // the data: the model's names and the English text's tokens (the trace's columns)
        const text = (live.en.sample || '').split(' ');
        const words = await latinWords(lpage, [info.model, info.format, info.vocab.kind].concat(text).filter(Boolean).sort((a, b) => b.length - a.length));
        ok(words.length === 0, `live ${where}: no English words on the Chinese page`, words.join(', '));
      }
      await lpage.screenshot({ path: path.join(artifacts, `lesson-live-${lang}-${vp.width}.png`), fullPage: true });
      // reset the edit for the next screen
      await lpage.locator('#edit-reset').click();
      await lpage.waitForFunction(() => window.ffnLive.modelEdits === 0, null, { timeout: 30000 });
      await idle(lpage);
      await lpage.close();
    }
  }
  // the report's causal-tracing section, in Chinese, on a phone
  const traceReport = path.join(tmp, 'report-trace-zh.html');
  run(ffn, ['report', served, '--trace-facts', '4', '--lang', 'zh', '--threads', '2', '--out', traceReport]);
  const turl = pathToFileURL(traceReport).href;
  const tpage = await open(turl, screens[1], (u) => u === turl);
  ok(await tpage.locator('#trace svg').count() === 3, 'report --trace-facts zh: three heat maps');
  const tdata = await tpage.evaluate(() => JSON.parse(document.getElementById('ffn-data').textContent));
  const twords = await latinWords(tpage, [tdata.version, tdata.run_dir, path.basename(served)].concat(tdata.params.map((p) => p.name),
    tdata.models.map((m) => m.name), [tdata.trace.model]).filter(Boolean).sort((a, b) => b.length - a.length));
  ok(twords.length === 0, 'report --trace-facts zh 390x844: no English words in the trace section either', twords.join(', '));
  ok((await rawKeys(tpage)).length === 0, 'report --trace-facts zh: every message key is in the catalogue', (await rawKeys(tpage)).join(', '));
  await tpage.locator('#trace').screenshot({ path: path.join(artifacts, 'lesson-report-trace-zh-390.png') });
  await tpage.close();
} catch (e) {
  ok(false, 'browser session', e.stack || e.message);
} finally {
  await context.close();
}
ok(problems.length === 0, 'no console error, page error or request elsewhere', problems.join('\n     '));
for (const s of servers) {
  s.kill('SIGINT');
  await new Promise((r) => (s.exitCode !== null ? r(s.exitCode) : s.on('exit', r)));
}
finish(t0);
