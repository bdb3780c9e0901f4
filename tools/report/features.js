// features.js -- the feature section of the ffn HTML report (hand-written;
// no library).  It reads DATA.features, written by tools/tc_report.c when
// `ffn report --transcoder FILE` is given: per transcoder or SAE file, each
// prompt token's most active features with the tokens their decoder rows
// promote, and (when the model's text is recorded) each file's held-out
// figures of `ffn transcoder eval`.  Without DATA.features the section
// stays hidden.
reportSection('features', 'features', 'report.nav_features', function (F, W, body) {
  'use strict';
  function show(s) { return s.replace(/\n/g, '\u21b5').replace(/ /g, '\u00b7'); }
  // the files side by side on the held-out text (ffn transcoder eval's figures)
  var evals = F.files.filter(function (f) { return f.eval; });
  if (evals.length) {
    body.appendChild(el('p', W('report.features_eval_lead'), 'lead'));
    var et = el('table', undefined, 'features-eval');
    var eh = el('tr');
    ['file', 'kind', 'layer', 'fvu', 'l0', 'dead', 'loss', 'replaced', 'zeroed', 'recovered'].forEach(function (k) {
      eh.appendChild(el('th', W('report.features_eval_col.' + k)));
    });
    et.appendChild(eh);
    function n4(v) { return v === null || v === undefined ? '\u2013' : v.toFixed(4); }
    evals.forEach(function (f) {
      var e = f.eval, tr = el('tr');
      tr.setAttribute('data-file', f.file);
      [f.file, f.kind, String(f.layer), n4(e.fvu), e.l0.toFixed(2), String(e.dead), n4(e.loss_original),
        n4(e.loss_replaced), n4(e.loss_zero), e.loss_recovered === null ? '\u2013' : e.loss_recovered.toFixed(3)].forEach(function (c, i) {
        tr.appendChild(el('td', c, i >= 2 ? 'num' : undefined));
      });
      et.appendChild(tr);
    });
    body.appendChild(et);
  }
  F.files.forEach(function (file) {
    body.appendChild(el('p', W('report.features_lead', { kind: file.kind, layer: file.layer, file: file.file,
      features: file.features, k: file.k }), 'lead'));
    var table = el('table', undefined, 'features-table');
    table.setAttribute('data-layer', String(file.layer));
    var head = el('tr');
    head.appendChild(el('th', W('report.features_token')));
    head.appendChild(el('th', W('report.features_active')));
    table.appendChild(head);
    file.tokens.forEach(function (t) {
      var tr = el('tr');
      tr.setAttribute('data-pos', String(t.position));
      tr.appendChild(el('td', show(t.piece), 'tok'));
      var td = el('td');
      t.features.forEach(function (f, i) {
        var s = el('span', (i ? '; ' : '') + '#' + f.feature + ' ' + f.activation.toFixed(2) + ': ' +
          f.promoted.map(function (p) { return show(p.piece); }).join(' '), 'feature');
        s.setAttribute('data-feature', String(f.feature));
        td.appendChild(s);
      });
      tr.appendChild(td);
      table.appendChild(tr);
    });
    body.appendChild(table);
  });
  body.appendChild(el('p', W('report.features_read'), 'muted small'));
});
