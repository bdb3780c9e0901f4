// test_trace_report.mjs -- the report's causal-tracing section in headless
// Chromium (as test_report.mjs: /usr/bin/chromium through playwright-core).
//
// Trains a tiny model on the facts corpus, writes its report with
// --trace-facts 4 and without, and checks: no console error, page error or
// network request; with --trace-facts the section is visible, linked from
// the navigation, and draws three heat maps of layers x 7 position classes
// whose cells carry exactly the embedded effects (their tooltips); without
// it the section stays hidden.  A screenshot goes to build/test-artifacts/.
//
// Run: node tests/browser/test_trace_report.mjs   (FFN_BIN defaults to build/ffn)
import path from 'node:path';
import { artifacts, ffn, finish, launch, ok, openFile, requirePrerequisites, run, tempDir } from './lib.mjs';

requirePrerequisites();
const tmp = tempDir('ffn-trace-report-');
const model = path.join(tmp, 'm');
run(ffn, ['train', '--corpus', 'facts', '--tokenizer', 'word', '--corpus-sentences', '1500', '--hidden-size', '32',
  '--intermediate-size', '48', '--num-hidden-layers', '2', '--num-attention-heads', '2', '--num-key-value-heads', '2',
  '--seq-len', '32', '--batch-size', '8', '--steps', '30', '--eval-batches', '1', '--threads', '2', '--quiet', '--out', model]);
const withTrace = path.join(tmp, 'trace.html'), without = path.join(tmp, 'plain.html');
run(ffn, ['report', model, '--trace-facts', '4', '--out', withTrace, '--threads', '2']);
run(ffn, ['report', model, '--out', without, '--threads', '2']);

const context = await launch({ width: 1366, height: 900 });
const problems = [];
const open = (file) => openFile(context, file, problems);
try {
  const page = await open(withTrace);
  const data = await page.evaluate(() => JSON.parse(document.getElementById('ffn-data').textContent).trace);
  ok(data && data.classes.length === 7 && data.facts === 4, 'the report embeds the trace of 4 facts');
  ok(await page.isVisible('#trace'), 'the trace section is visible');
  ok(await page.locator('header nav a[href="#trace"]').count() === 1, 'the navigation links to it');
  const maps = await page.$$eval('#trace svg', (svgs) => svgs.map((s) => Array.from(s.querySelectorAll('rect title')).map((t) => t.textContent)));
  ok(maps.length === 3, 'three heat maps', maps.length);
  const L = data.mlp_out.length;
  const kinds = ['resid_post', 'mlp_out', 'attn_out'];
  maps.forEach((titles, k) => {
    ok(titles.length === L * 7, `${kinds[k]}: ${L} x 7 cells`, titles.length);
    let agree = 0, checked = 0;
    for (let l = 0; l < L; l++) for (let c = 0; c < 7; c++) {
      const title = titles[l * 7 + c], v = data[kinds[k]][l][c];
      if (!data.n_class[c]) { agree += /no such token/.test(title); checked++; continue; }
      const shown = parseFloat(title.split(': ').pop());
      agree += title.startsWith(`layer ${l}, ${data.classes[c]}:`) && Math.abs(shown - v) < 6e-4;
      checked++;
    }
    ok(agree === checked, `${kinds[k]}: every cell shows its embedded value`, `${agree}/${checked}`);
  });
  const text = await page.textContent('#trace-body');
  ok(text.includes(`layer ${data.mlp_peak_last_subject.layer} holds ${Math.round(100 * data.mlp_layer_share)}%`),
    'the summary names the peak layer and its share');
  await page.locator('#trace').screenshot({ path: path.join(artifacts, 'trace-section.png') });
  const plain = await open(without);
  ok(!(await plain.isVisible('#trace')), 'without --trace-facts the section is hidden');
  ok(await plain.locator('header nav a[href="#trace"]').count() === 0, 'and not linked');
} catch (e) {
  problems.push(`exception: ${e.message}`);
}
await context.close();
ok(problems.length === 0, 'no console error, page error or network request', problems.join('; '));
finish();
