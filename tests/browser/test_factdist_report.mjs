// test_factdist_report.mjs -- the report's "how distributed is a fact"
// section (tools/report/factdist.js) in headless Chromium (as
// test_trace_report.mjs: /usr/bin/chromium through playwright-core).
//
// Trains a tiny model on the facts corpus, writes its report with
// --fact-dist 12 and without, and checks: no console error, page error or
// network request; with --fact-dist the section is visible, linked from the
// navigation, its table has one row per embedded scope showing that
// scope's counts and median, and the histogram rows add up to the facts
// the model knows; without it the section stays hidden.  A screenshot goes
// to build/test-artifacts/.
//
// Run: node tests/browser/test_factdist_report.mjs   (FFN_BIN defaults to build/ffn)
import path from 'node:path';
import { artifacts, ffn, finish, launch, ok, openFile, requirePrerequisites, run, tempDir } from './lib.mjs';

requirePrerequisites();
const tmp = tempDir('ffn-factdist-report-');
const model = path.join(tmp, 'm');
run(ffn, ['train', '--corpus', 'facts', '--tokenizer', 'word', '--corpus-sentences', '1500', '--hidden-size', '32',
  '--intermediate-size', '48', '--num-hidden-layers', '2', '--num-attention-heads', '2', '--num-key-value-heads', '2',
  '--seq-len', '32', '--batch-size', '8', '--steps', '400', '--lr', '3e-3', '--eval-batches', '1', '--threads', '2', '--quiet', '--out', model]);
const withFd = path.join(tmp, 'fd.html'), without = path.join(tmp, 'plain.html');
run(ffn, ['report', model, '--fact-dist', '12', '--out', withFd, '--threads', '2']);
run(ffn, ['report', model, '--out', without, '--threads', '2']);

const context = await launch({ width: 1366, height: 900 });
const problems = [];
const open = (file) => openFile(context, file, problems);
try {
  const page = await open(withFd);
  const data = await page.evaluate(() => JSON.parse(document.getElementById('ffn-data').textContent).fact_dist);
  ok(data && data.facts === 12 && data.scopes.length === 3, 'the report embeds the ablation sets of 12 facts over 3 scopes',
    data && data.scopes.length);
  ok(data && data.present >= 1, 'the model knows at least one of them (else the checks below prove nothing)',
    data && data.present);
  ok(await page.isVisible('#factdist'), 'the section is visible');
  ok(await page.locator('header nav a[href="#factdist"]').count() === 1, 'the navigation links to it');
  const rows = await page.$$eval('#factdist-body table:first-of-type tr', (trs) => trs.slice(1).map((tr) =>
    Array.from(tr.querySelectorAll('td')).map((td) => td.textContent)));
  ok(rows.length === data.scopes.length, 'one table row per scope', rows.length);
  let agree = 0;
  data.scopes.forEach((s, i) => {
    const r = rows[i] || [];
    agree += r[0] === s.scope && r[1] === String(s.units) && r[2] === String(s.removed) &&
      r[3] === String(s.not_removed) && r[4] === (s.median === null ? '-' : s.median.toFixed(1));
  });
  ok(agree === data.scopes.length, 'each row shows its scope, units, removed, not removed and median', agree);
  const hist = await page.$$eval('#factdist-body table.factdist-hist tr', (trs) => trs.slice(1).map((tr) =>
    Array.from(tr.querySelectorAll('td')).slice(1).map((td) => Number(td.textContent))));
  ok(hist.length === data.scopes.length && hist.every((h) => h.reduce((a, b) => a + b, 0) === data.present),
    'each histogram row adds up to the facts the model knows', JSON.stringify(hist));
  await page.locator('#factdist').screenshot({ path: path.join(artifacts, 'factdist-section.png') });
  const plain = await open(without);
  ok(!(await plain.isVisible('#factdist')), 'without --fact-dist the section is hidden');
  ok(await plain.locator('header nav a[href="#factdist"]').count() === 0, 'and not linked');
} catch (e) {
  problems.push(`exception: ${e.message}`);
}
await context.close();
ok(problems.length === 0, 'no console error, page error or network request', problems.join('; '));
finish();
