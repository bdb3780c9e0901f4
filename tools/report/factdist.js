// factdist.js -- the "how distributed is a fact" section of the ffn HTML
// report (hand-written; no library).  It reads DATA.fact_dist, written by
// tools/trace_dist.c when `ffn report --fact-dist N` is given: per scope
// (the neurons of one layer, of all layers) the distribution of the
// smallest ablation set's size over the facts the model knows, and what
// else each ablation breaks.  Without DATA.fact_dist the section stays
// hidden.
reportSection('fact_dist', 'factdist', 'report.nav_factdist', function (FD, W, body) {
  'use strict';
  function num(x, d) { return x === null || x === undefined ? '-' : x.toFixed(d); }
  body.appendChild(el('p', W('report.factdist_lead', { facts: FD.facts, present: FD.present }), 'lead'));
  var t = el('table');
  var head = el('tr');
  ['scope', 'units', 'removed', 'not', 'median', 'q1', 'q3', 'max', 'flips', 'dloss'].forEach(function (k) {
    head.appendChild(el('th', W('report.factdist_col.' + k)));
  });
  t.appendChild(head);
  FD.scopes.forEach(function (s) {
    var r = el('tr');
    [s.scope, s.units, s.removed, s.not_removed, num(s.median, 1), num(s.q1, 1), num(s.q3, 1), s.max,
      num(s.flip_share, 3), num(s.heldout_delta, 4)].forEach(function (v) { r.appendChild(el('td', String(v))); });
    t.appendChild(r);
  });
  body.appendChild(t);
  // the histogram of set sizes: one row of bars per scope
  var h = el('table', null, 'factdist-hist');
  var hh = el('tr');
  hh.appendChild(el('th', W('report.factdist_col.scope')));
  var bins = FD.scopes.length ? FD.scopes[0].histogram.bins : [];
  bins.concat([W('report.factdist_col.not')]).forEach(function (b) { hh.appendChild(el('th', b)); });
  h.appendChild(hh);
  FD.scopes.forEach(function (s) {
    var r = el('tr');
    r.appendChild(el('td', s.scope));
    var counts = s.histogram.counts.concat([s.not_removed]), most = Math.max.apply(null, counts.concat([1]));
    counts.forEach(function (c) {
      var td = el('td', String(c));
      td.style.background = 'rgba(0,128,0,' + (c / most).toFixed(3) + ')';
      r.appendChild(td);
    });
    h.appendChild(r);
  });
  body.appendChild(el('p', W('report.factdist_hist'), 'small'));
  body.appendChild(h);
  body.appendChild(el('p', W('report.factdist_read', { heldout: num(FD.heldout_before, 4) }), 'muted small'));
});
