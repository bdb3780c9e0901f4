// trace.js -- the causal-tracing section of the ffn HTML report (hand-written;
// no library).  It reads DATA.trace, written by tools/trace_report.c when
// `ffn report --trace-facts N` is given: the three (layer, position class)
// tables of indirect effects (resid_post, mlp_out, attn_out), averaged over
// the facts the model recalls, and the MLP summary.  Without DATA.trace the
// section stays hidden.
reportSection('trace', 'trace', 'report.nav_trace', function (T, W, body) {
  'use strict';
  var SVGNS = 'http://www.w3.org/2000/svg';
  var KINDS = [['resid_post', W('report.kind.resid_post'), '128,0,128'], ['mlp_out', W('report.kind.mlp_out'), '0,128,0'],
    ['attn_out', W('report.kind.attn_out'), '200,0,0']];
  function p(text, cls) {
    var e = document.createElement('p');
    if (cls) e.className = cls;
    e.textContent = text;
    body.appendChild(e);
    return e;
  }
  function fmt(x) {
    if (x === null || x === undefined) return '-';
    return x === 0 || Math.abs(x) >= 0.001 ? x.toFixed(3) : x.toExponential(2);
  }
  p(W('report.trace_lead', { noise: T.noise, averaged: T.averaged, facts: T.facts, recalled: T.recalled,
    model: T.model, p_clean: fmt(T.p_clean), p_corrupt: fmt(T.p_corrupt) }), 'lead');
  var wrap = document.createElement('div');
  wrap.className = 'trace-maps';
  wrap.style.cssText = 'display:flex;flex-wrap:wrap;gap:16px';
  body.appendChild(wrap);
  // the class names in the page's language (T.classes: the names ffn trace prints)
  var classes = T.classes.map(function (name, i) { return W('report.class.' + i); }), n = T.n_class;
  KINDS.forEach(function (k) {
    var m = T[k[0]];
    if (!m) return;
    var L = m.length, C = classes.length, cw = 46, ch = 20, left = 34, top = 20, bottom = 84;
    var max = 0;
    m.forEach(function (row) { row.forEach(function (v) { if (v !== null) max = Math.max(max, Math.abs(v)); }); });
    var svg = document.createElementNS(SVGNS, 'svg');
    svg.setAttribute('width', left + C * cw + 4);
    svg.setAttribute('height', top + L * ch + bottom);
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', W('report.trace_aria', { what: k[1] }));
    function t(x, y, s, extra) {
      var e = document.createElementNS(SVGNS, 'text');
      e.setAttribute('x', x);
      e.setAttribute('y', y);
      e.setAttribute('font-size', '10');
      if (extra) for (var a in extra) e.setAttribute(a, extra[a]);
      e.textContent = s;
      svg.appendChild(e);
    }
    t(left, 12, W('report.trace_max', { kind: k[0], what: k[1], max: fmt(max) }));
    for (var l = 0; l < L; l++) {
      var y = top + (L - 1 - l) * ch; // layer 0 at the bottom
      t(4, y + 14, String(l));
      for (var c = 0; c < C; c++) {
        var v = m[l][c], r = document.createElementNS(SVGNS, 'rect');
        r.setAttribute('x', left + c * cw);
        r.setAttribute('y', y);
        r.setAttribute('width', cw);
        r.setAttribute('height', ch);
        r.setAttribute('stroke', '#ddd');
        r.setAttribute('fill', n[c] ? 'rgb(' + k[2] + ')' : '#f4f4f4');
        r.setAttribute('fill-opacity', n[c] && max > 0 ? Math.max(v, 0) / max : 1);
        var title = document.createElementNS(SVGNS, 'title');
        title.textContent = W('report.trace_cell', { l: l, cls: classes[c], v: n[c] ? fmt(v) : W('report.trace_none') });
        r.appendChild(title);
        svg.appendChild(r);
      }
    }
    for (var c2 = 0; c2 < C; c2++) {
      var x = left + c2 * cw + cw / 2, yy = top + L * ch + 8;
      t(x, yy, classes[c2], { transform: 'rotate(60 ' + x + ' ' + yy + ')' });
    }
    wrap.appendChild(svg);
  });
  var s = T.mlp_peak_last_subject, l2 = T.mlp_peak_last;
  p(W('report.trace_summary', { sl: s.layer, se: fmt(s.effect), ll: l2.layer, le: fmt(l2.effect),
    share: Math.round(100 * T.mlp_layer_share) }));
  p(W('report.trace_read'), 'muted small');
});
