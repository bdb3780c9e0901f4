// measured.js -- two measured tables of the ffn HTML report (hand-written;
// no library), from other tools' --json output given to `ffn report`:
//   DATA.purity        (--purity FILE: ffn transcoder purity --json) neurons
//                      vs transcoder vs SAE features of a layer: purity of a
//                      unit's top activations and the units a linear readout
//                      of the relation / object needs;
//   DATA.edit_compare  (--edit-compare FILE: ffn edit --compare --json) ROME
//                      one after another, FT-L and MEMIT on a batch of N
//                      facts, one row group per file, ordered by N, with a
//                      bar for each score.
// Without them the sections stay hidden.  tools/report.c keeps only the
// fields drawn here (numbers or null).
(function () {
  'use strict';
  var DATA = reportData();
  var W = wordsOf(DATA.messages);
  function f3(v) { return v === null || v === undefined ? '\u2013' : v.toFixed(3); }
  function header(table, prefix, keys) {
    var tr = el('tr');
    keys.forEach(function (k) { tr.appendChild(el('th', W(prefix + k))); });
    table.appendChild(tr);
  }

  if (DATA.purity && DATA.purity.length) {
    var pb = showSection('purity', W('report.nav_purity'));
    DATA.purity.forEach(function (P) {
      pb.appendChild(el('p', W('report.purity_lead', { layer: P.layer, samples: P.samples, file: P.file,
        top: P.top, accuracy: P.accuracy }), 'lead'));
      var t = el('table', undefined, 'purity-table');
      t.setAttribute('data-layer', String(P.layer));
      header(t, 'report.purity_col.', ['units', 'kind', 'count', 'pur_rel', 'pur_obj', 'need_rel', 'need_obj']);
      function need(a) {
        if (a.units_needed !== null && a.units_needed >= 0) return String(a.units_needed);
        return '>' + (a.largest === null ? '?' : a.largest) + ' (' + f3(a.best) + ')';
      }
      P.units.forEach(function (u) {
        var tr = el('tr');
        tr.setAttribute('data-kind', u.kind);
        [u.name, u.kind, String(u.count), f3(u.relation.purity), f3(u.object.purity),
          need(u.relation), need(u.object)].forEach(function (c, i) {
          tr.appendChild(el('td', c, i >= 2 ? 'num' : undefined));
        });
        t.appendChild(tr);
      });
      pb.appendChild(t);
      var u0 = P.units[0];
      if (u0) pb.appendChild(el('p', W('report.purity_chance', { rel: f3(u0.relation.chance),
        obj: f3(u0.object.chance) }), 'muted small'));
    });
  }

  if (DATA.edit_compare && DATA.edit_compare.length) {
    var eb = showSection('editcmp', W('report.nav_editcmp'));
    eb.appendChild(el('p', W('report.editcmp_lead'), 'lead'));
    var runs = DATA.edit_compare.slice().sort(function (a, b) { return a.n_edits - b.n_edits; });
    var t = el('table', undefined, 'editcmp-table');
    header(t, 'report.editcmp_col.', ['n', 'method', 'layers', 'efficacy', 'generalisation', 'specificity', 'dloss']);
    function bar(v) { // a score in [0, 1] as a number and a bar
      var td = el('td', undefined, 'num');
      td.appendChild(el('span', f3(v)));
      if (v !== null && v !== undefined) {
        var b = el('span', undefined, 'bar');
        b.style.display = 'inline-block';
        b.style.height = '0.7em';
        b.style.marginLeft = '0.4em';
        b.style.width = Math.round(60 * Math.max(0, Math.min(1, v))) + 'px';
        b.style.background = 'currentColor';
        b.style.opacity = '0.35';
        td.appendChild(b);
      }
      return td;
    }
    runs.forEach(function (R) {
      var rows = [{ method: W('report.editcmp_before'), scores: R.before, heldout_change: null, layers: '' }];
      R.methods.forEach(function (m) {
        rows.push({ method: m.method, scores: m.scores, heldout_change: m.heldout_change,
          layers: m.method === 'rome' ? String(R.rome_layer) : R.layers[0] + '\u2013' + R.layers[1] });
      });
      rows.forEach(function (row, i) {
        var tr = el('tr');
        tr.setAttribute('data-n', String(R.n_edits));
        tr.setAttribute('data-method', i ? row.method : 'before');
        tr.appendChild(el('td', i ? '' : String(R.n_edits), 'num'));
        tr.appendChild(el('td', row.method));
        tr.appendChild(el('td', row.layers));
        tr.appendChild(bar(row.scores.efficacy));
        tr.appendChild(bar(row.scores.generalisation));
        tr.appendChild(bar(row.scores.specificity));
        tr.appendChild(el('td', row.heldout_change === null ? '\u2013' :
          (row.heldout_change >= 0 ? '+' : '') + row.heldout_change.toFixed(4), 'num'));
        t.appendChild(tr);
      });
    });
    eb.appendChild(t);
  }
})();
