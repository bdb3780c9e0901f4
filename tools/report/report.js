// report.js -- the viewer of the ffn HTML report (hand-written; no library,
// no font, no network).  It reads the JSON of the element #ffn-data (the
// schema is written by tools/report.c: curves, settings, variants, params,
// models[] (with experts and experts_per_tok, 0 for a dense model),
// models[].tok[t][layer] = {x explained, c cosine, o output norm, e experts
// [[id, w]], n neurons [[expert, index, gate_pre, gate, up, product, weight,
// contribution, promoted ids, promoted logits]]}, collapse) and draws the
// sections.  Only the neuron panel of the selected token is built, on
// click, so long prompts stay fast.  Number and token formatting live in
// format.js, loaded first.
(function () {
  'use strict';
  var DATA = JSON.parse(document.getElementById('ffn-data').textContent);
  // the page's words in the report's language (ffn report --lang; applyMessages in format.js)
  var MSG = DATA.messages || {};
  /* every word the page draws is a message of tools/i18n.c, in the report's
   * language; a key the catalogue lacks shows as itself (the browser test
   * fails on it) */
  function T(key, vars) { return fill(msg(MSG, key, key), vars); }
  if (DATA.lang) document.documentElement.lang = DATA.lang;
  applyMessages(MSG, document);
  var SVGNS = 'http://www.w3.org/2000/svg';
  var PALETTE = ['#2f6fdf', '#d9822b', '#2e9e5b', '#c2413b', '#8456c9', '#7a5a3a',
    '#d45fa8', '#6b7280', '#9aa322', '#1fa5b8', '#244a8f', '#b8860b'];
  var PART_COLORS = { embeddings: '#8c6bb1', attention: '#2f6fdf', ffn: '#e07b28',
    router: '#c2413b', norms: '#9aa0a8', head: '#2e9e5b' };
  var PART_LABELS = {};
  Object.keys(PART_COLORS).forEach(function (k) { PART_LABELS[k] = T('report.part.' + k); });

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (k === 'text') e.textContent = attrs[k];
        else if (k === 'cls') e.className = attrs[k];
        else if (k === 'style') e.style.cssText = attrs[k];
        else e.setAttribute(k, attrs[k]);
      }
    }
    (kids || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }
  function sv(tag, attrs, parent) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) {
      if (k === 'text') e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    if (parent) parent.appendChild(e);
    return e;
  }
  /* A table in a box of its own that scrolls sideways when the page is
   * narrower than the table (a phone), with a hint that says so; the hint
   * shows only while the table overflows (updateScrollHints). */
  function scrollBox(table, hint) {
    return el('div', { cls: 'table-box' }, [
      el('p', { cls: 'scroll-hint muted small', text: hint || T('report.scroll_more') }),
      el('div', { cls: 'table-wrap' }, [table])]);
  }
  function updateScrollHints() {
    Array.prototype.forEach.call(document.querySelectorAll('.table-box'), function (b) {
      var w = b.querySelector('.table-wrap');
      b.classList.toggle('scrolls', w.scrollWidth > w.clientWidth + 1);
    });
  }

  /* ---- header ------------------------------------------------------------- */
  document.title = DATA.title;
  $('title').textContent = DATA.title;
  var sub = T('report.subtitle_run', { dir: DATA.run_dir });
  var st = DATA.settings;
  if (st && st.hidden_size && st.steps) {
    sub += '  \u00b7  ' + T('report.subtitle_settings', { D: st.hidden_size, L: st.num_hidden_layers, steps: st.steps,
      B: st.batch_size, T: st.seq_len, seeds: T(st.seeds === 1 ? 'report.seed_one' : 'report.seed_many', { n: st.seeds }) });
  }
  $('subtitle').textContent = sub;
  if ((DATA.variants || []).length > 1)
    $('curves-lead').appendChild(document.createTextNode(
      T((DATA.variants || []).some(function (v) { return v.variant === 'none'; }) ? 'report.curves_equal_none' : 'report.curves_equal')));
  $('footer').textContent = T('report.footer', { version: DATA.version });

  /* ---- 1. validation-loss curves -------------------------------------------- */
  var variantColor = {};
  var variantDash = {};
  (function assignColors() {
    var names = [];
    (DATA.variants || []).forEach(function (v) { if (names.indexOf(v.variant) < 0) names.push(v.variant); });
    (DATA.curves || []).forEach(function (c) { if (names.indexOf(c.variant) < 0) names.push(c.variant); });
    var dashes = ['', '6 3', '2 3', '8 3 2 3'];
    names.forEach(function (n, i) { variantColor[n] = PALETTE[i % PALETTE.length]; variantDash[n] = dashes[i % dashes.length]; });
  })();
  var hidden = {};

  function drawCurves() {
    var box = $('curve-plot');
    box.textContent = '';
    var curves = (DATA.curves || []).filter(function (c) { return !hidden[c.variant]; });
    var showTrain = $('show-train').checked;
    if (!DATA.curves || DATA.curves.length === 0) {
      box.appendChild(el('p', { cls: 'muted', text: T('report.no_metrics') }));
      return;
    }
    var W = Math.max(360, box.clientWidth || 600), H = Math.round(Math.min(320, Math.max(220, W * 0.5)));
    var m = { l: 46, r: 12, t: 8, b: 32 };
    var xs = [], ys = [];
    curves.forEach(function (c) {
      c.val.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); });
      if (showTrain) c.train.forEach(function (p) { xs.push(p[0]); ys.push(p[1]); });
    });
    if (xs.length === 0) { xs = [0, 1]; ys = [0, 1]; }
    var x0 = 0, x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x1 <= x0) x1 = x0 + 1;
    var pad = (y1 - y0) * 0.06 || 0.1; y0 -= pad; y1 += pad;
    function X(v) { return m.l + (v - x0) / (x1 - x0) * (W - m.l - m.r); }
    function Y(v) { return m.t + (y1 - v) / (y1 - y0) * (H - m.t - m.b); }
    var svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': T('report.nav_curves') });
    var ax = sv('g', { 'class': 'axis' }, svg);
    niceTicks(y0, y1, 5).forEach(function (t) {
      sv('line', { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t), 'class': 'gridline' }, ax);
      sv('text', { x: m.l - 5, y: Y(t) + 4, 'text-anchor': 'end', text: t.toFixed(2) }, ax);
    });
    niceTicks(x0, x1, 6).forEach(function (t) {
      sv('line', { x1: X(t), x2: X(t), y1: H - m.b, y2: H - m.b + 4 }, ax);
      sv('text', { x: X(t), y: H - m.b + 16, 'text-anchor': 'middle', text: String(t) }, ax);
    });
    sv('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }, ax);
    sv('line', { x1: m.l, x2: m.l, y1: m.t, y2: H - m.b }, ax);
    sv('text', { x: (m.l + W - m.r) / 2, y: H - 2, 'text-anchor': 'middle', text: T('report.axis_step') }, ax);
    sv('text', { x: 12, y: (m.t + H - m.b) / 2, 'text-anchor': 'middle',
      transform: 'rotate(-90 12 ' + (m.t + H - m.b) / 2 + ')', text: T('report.axis_loss') }, ax);
    function path(pts) {
      return pts.map(function (p, i) { return (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ' ' + Y(p[1]).toFixed(1); }).join('');
    }
    curves.forEach(function (c) {
      var col = variantColor[c.variant] || '#444';
      if (showTrain && c.train.length)
        sv('path', { d: path(c.train), fill: 'none', stroke: col, 'stroke-width': 1, 'stroke-opacity': 0.35 }, svg);
      if (c.val.length) {
        var attrs = { d: path(c.val), fill: 'none', stroke: col, 'stroke-width': 2 };
        if (variantDash[c.variant]) attrs['stroke-dasharray'] = variantDash[c.variant];
        sv('path', attrs, svg);
        c.val.forEach(function (p) { sv('circle', { cx: X(p[0]), cy: Y(p[1]), r: 2.3, fill: col }, svg); });
      }
    });
    var guide = sv('line', { y1: m.t, y2: H - m.b, stroke: '#8d95a3', 'stroke-dasharray': '3 3', visibility: 'hidden' }, svg);
    box.appendChild(svg);
    var tip = el('div', { cls: 'tip' });
    box.appendChild(tip);
    svg.addEventListener('mousemove', function (ev) {
      var r = svg.getBoundingClientRect();
      var sx = (ev.clientX - r.left) * W / r.width;
      var step = x0 + (sx - m.l) / (W - m.l - m.r) * (x1 - x0);
      var lines = [], best = null;
      curves.forEach(function (c) {
        var near = null;
        c.val.forEach(function (p) { if (!near || Math.abs(p[0] - step) < Math.abs(near[0] - step)) near = p; });
        if (near) { lines.push(c.run + '  ' + near[1].toFixed(4) + '  (' + T('report.tip_step', { n: near[0] }) + ')'); if (!best) best = near; }
      });
      if (!best) return;
      guide.setAttribute('x1', X(best[0])); guide.setAttribute('x2', X(best[0]));
      guide.setAttribute('visibility', 'visible');
      tip.textContent = T('report.nav_curves') + '\n' + lines.join('\n');
      tip.style.display = 'block';
      var left = (ev.clientX - r.left) + 14;
      if (left + tip.offsetWidth > box.clientWidth) left = (ev.clientX - r.left) - tip.offsetWidth - 14;
      tip.style.left = Math.max(0, left) + 'px';
      tip.style.top = Math.max(0, ev.clientY - r.top - 10) + 'px';
    });
    svg.addEventListener('mouseleave', function () { tip.style.display = 'none'; guide.setAttribute('visibility', 'hidden'); });
  }

  function drawCurveLegend() {
    var lg = $('curve-legend');
    lg.textContent = '';
    Object.keys(variantColor).forEach(function (v) {
      if (!(DATA.curves || []).some(function (c) { return c.variant === v; })) return;
      var b = el('button', { type: 'button', title: T('report.show_hide', { v: v }), cls: hidden[v] ? 'off' : '' },
        [el('span', { cls: 'sw', style: 'background:' + variantColor[v] }), v]);
      b.addEventListener('click', function () { hidden[v] = !hidden[v]; drawCurveLegend(); drawCurves(); });
      lg.appendChild(b);
    });
  }

  function drawVariantTable() {
    var vs = DATA.variants || [];
    var box = $('variant-table');
    if (!vs.length) return;
    var best = Infinity;
    vs.forEach(function (v) { if (v.val_loss_mean !== null && v.val_loss_mean < best) best = v.val_loss_mean; });
    /* the result (val loss) right after the name: on a phone it is the
     * column in view, the sizes scroll in after it */
    var head = el('tr', null, ['report.th_variant', 'report.th_val_loss', 'report.part.ffn', 'report.th_params', 'report.th_active',
      'report.th_flops', 'report.th_tok_s'].map(function (h) { return el('th', { text: T(h) }); }));
    var rows = vs.map(function (v) {
      var ffn = v.mlp_type === 'none' ? T('report.no_ffn') : v.mlp_type + (v.mlp_type === 'moe' ? ' (' + T('report.n_experts', { n: v.num_experts }) + ')' : '') + ', ' + v.hidden_act;
      var loss = fmtNum(v.val_loss_mean, 4) + (v.runs > 1 ? ' \u00b1 ' + fmtNum(v.val_loss_std, 4) : '');
      return el('tr', null, [
        el('td', null, [el('span', { cls: 'sw', style: 'display:inline-block;width:10px;height:10px;margin-right:5px;background:' + (variantColor[v.variant] || '#444') }), v.variant]),
        el('td', { text: loss, cls: 'val-loss' + (v.val_loss_mean === best ? ' best' : '') }),
        el('td', { text: ffn }), el('td', { text: fmtCount(v.total_params) }),
        el('td', { text: fmtCount(v.active_params) }), el('td', { text: fmtCount(v.flops_per_token) }),
        el('td', { text: v.tokens_per_s === null ? '-' : Math.round(v.tokens_per_s).toString() })]);
    });
    box.appendChild(scrollBox(el('table', null, [el('thead', null, [head]), el('tbody', null, rows)])));
  }

  /* ---- 2. parameters --------------------------------------------------------- */
  function partTotal(counts) {
    return Object.keys(PART_COLORS).reduce(function (s, k) { return s + (counts[k] || 0); }, 0);
  }
  /* What the bars say, from their numbers: the largest model and the
   * smallest one with an FFN, their FFN and embedding shares. */
  function paramSentence(view) {
    var ps = (DATA.params || []).filter(function (p) { return partTotal(p[view]) > 0; });
    if (!ps.length) return '';
    function share(p, k) { return (p[view][k] || 0) / partTotal(p[view]); }
    function said(p) { return T(view === 'active' ? 'report.param_whose_active' : 'report.param_whose', { name: p.name, count: fmtCount(partTotal(p[view])) }); }
    var big = ps.reduce(function (a, p) { return partTotal(p[view]) > partTotal(a[view]) ? p : a; });
    var withFfn = ps.filter(function (p) { return (p[view].ffn || 0) > 0; });
    var small = (withFfn.length ? withFfn : ps).reduce(function (a, p) { return partTotal(p[view]) < partTotal(a[view]) ? p : a; });
    var s = T('report.param_big', { who: said(big), ffn: pct(share(big, 'ffn')), emb: pct(share(big, 'embeddings')) });
    if (small === big) return s + T('report.param_end');
    s += T('report.param_small', { who: said(small), ffn: pct(share(small, 'ffn')), emb: pct(share(small, 'embeddings')) });
    var eb = share(big, 'embeddings'), es = share(small, 'embeddings');
    if (es > 1.5 * eb) s += T('report.param_small_emb');
    else if (eb > 1.5 * es) s += T('report.param_big_emb');
    return s;
  }
  /* a segment's label: the part and its share, the share alone, or nothing,
   * whichever fits (the tooltip always has all of it) */
  function fitLabels(box) {
    Array.prototype.forEach.call(box.querySelectorAll('.pbar div'), function (seg) {
      var tries = [seg.getAttribute('data-long'), seg.getAttribute('data-short'), ''];
      for (var i = 0; i < tries.length; i++) {
        seg.textContent = tries[i];
        if (seg.scrollWidth <= seg.clientWidth + 1) break;
      }
    });
  }
  function drawParams() {
    var view = $('param-view').value;
    var box = $('param-chart');
    box.textContent = '';
    $('param-lead').textContent = T('report.param_lead') + paramSentence(view);
    var parts = Object.keys(PART_COLORS);
    (DATA.params || []).forEach(function (p) {
      var counts = p[view];
      var total = parts.reduce(function (s, k) { return s + (counts[k] || 0); }, 0);
      var bar = el('div', { cls: 'pbar' });
      parts.forEach(function (k) {
        var v = counts[k] || 0;
        if (v <= 0 || total <= 0) return;
        var share = v / total;
        var seg = el('div', { style: 'width:' + (100 * share).toFixed(3) + '%;background:' + PART_COLORS[k],
          title: PART_LABELS[k] + ': ' + fmtCount(v) + ' (' + pct(share) + ')',
          'data-long': PART_LABELS[k] + ' ' + pct(share), 'data-short': pct(share) });
        bar.appendChild(seg);
      });
      var detail = (view === 'active' ? T('report.active_suffix', { n: fmtCount(total) }) : fmtCount(total)) + ' \u00b7 ' + p.ffn;
      var name = el('div', { cls: 'pname', title: p.source }, [
        el('b', { text: p.kind === 'published' ? T('report.published', { name: p.name }) : p.name }),
        el('small', { text: detail + ' \u00b7 D ' + p.D + ((p.parts.ffn || 0) > 0 ? ', F ' + p.F : '') + ', L ' + p.L + ', V ' + p.V })]);
      box.appendChild(el('div', { cls: 'prow' }, [name, bar]));
    });
    fitLabels(box);
    var lg = $('param-legend');
    lg.textContent = '';
    parts.forEach(function (k) {
      lg.appendChild(el('span', null, [el('span', { cls: 'sw', style: 'background:' + PART_COLORS[k] }), PART_LABELS[k]]));
    });
    /* the numbers behind the bars */
    var tbl = $('param-table');
    tbl.textContent = '';
    var shown = parts.filter(function (k) { return (DATA.params || []).some(function (p) { return p[view][k] > 0; }); });
    var head = el('tr', null, [el('th', { text: T('page.model') }), el('th', { text: T(view === 'active' ? 'report.th_active' : 'report.th_total') })].concat(
      shown.map(function (k) { return el('th', { text: PART_LABELS[k] }); })));
    var rows = (DATA.params || []).map(function (p) {
      var c = p[view];
      var total = parts.reduce(function (s, k) { return s + (c[k] || 0); }, 0);
      return el('tr', null, [el('td', { text: p.name }), el('td', { text: fmtCount(total) })].concat(
        shown.map(function (k) { return el('td', { text: fmtCount(c[k] || 0), title: total > 0 ? pct((c[k] || 0) / total) : '' }); })));
    });
    tbl.appendChild(scrollBox(el('table', null, [el('thead', null, [head]), el('tbody', null, rows)])));
    updateScrollHints();
  }

  /* ---- 3. neurons ------------------------------------------------------------ */
  var models = DATA.models || [];
  var state = { model: 0, layer: 0, token: -1, prev: -1, pinned: null };
  var tokenButtons = [];

  function currentModel() { return models[state.model]; }
  function layerEntry(mod, t, li) { return mod.tok[t] ? mod.tok[t][li] : null; }
  function tokText(mod, id) { return mod.vocab[String(id)]; }
  function neuronKey(n) { return n[0] + ':' + n[1]; }
  function neuronName(n) {
    if (n[0] === -1) return '#' + n[1];
    if (n[0] === -2) return T('page.shared', { i: n[1] });
    return 'E' + n[0] + ' #' + n[1];
  }

  /* The routing of every token of the prompt at layer li: for each expert,
   * the share of the tokens routed to it (an even router gives each K/E). */
  function expertLoad(mod, li) {
    var E = mod.experts || 0, nTok = mod.tok.length, count = [];
    mod.tok.forEach(function (row) {
      (row[li] ? row[li].e : []).forEach(function (p) { if (p[0] >= E) E = p[0] + 1; count[p[0]] = (count[p[0]] || 0) + 1; });
    });
    var load = [];
    for (var e = 0; e < E; e++) load.push(nTok > 0 ? (count[e] || 0) / nTok : 0);
    return load;
  }
  function drawExpertLoad(mod, li, panel) {
    var load = expertLoad(mod, li), K = mod.experts_per_tok || 0;
    if (!load.length) return;
    var even = K > 0 ? K / load.length : 0;
    var idle = [], top = 0;
    load.forEach(function (s, e) { if (s === 0) idle.push('E' + e); if (s > load[top]) top = e; });
    var note = T('report.load_note', { layer: mod.layers[li], n: mod.tok.length }) +
      (even > 0 ? T('report.load_even', { pct: pct(even), k: K, e: load.length }) : '') + T('report.load_end');
    if (idle.length) note += T('report.load_idle', { idle: idle.join(', ') });
    else if (even > 0 && load[top] >= Math.min(1, 2 * even)) note += T('report.load_uneven', { e: top, pct: pct(load[top]) });
    var grid = el('div', { cls: 'load', id: 'expert-load' });
    load.forEach(function (s, e) {
      var bar = el('span', { cls: 'lbar' }, [el('i', { style: 'width:' + (100 * s).toFixed(1) + '%' })]);
      if (even > 0) bar.appendChild(el('b', { style: 'left:' + (100 * even).toFixed(1) + '%' }));
      grid.appendChild(el('span', { text: 'E' + e }));
      grid.appendChild(bar);
      grid.appendChild(el('span', { cls: 'share', 'data-expert': String(e), text: pct(s) }));
    });
    panel.appendChild(el('p', { cls: 'small muted', text: note }));
    panel.appendChild(grid);
  }

  function fillSelectors() {
    var ms = $('model-select');
    ms.textContent = '';
    models.forEach(function (m, i) { ms.appendChild(el('option', { value: String(i), text: m.name + ' \u2014 ' + m.ffn })); });
    $('model-label').style.display = models.length > 1 ? '' : 'none';
    fillLayers();
  }
  function fillLayers() {
    var mod = currentModel();
    var ls = $('layer-select');
    ls.textContent = '';
    mod.layers.forEach(function (l, i) {
      ls.appendChild(el('option', { value: String(i), text: String(l) + (mod.layer_moe[i] ? ' (MoE)' : '') }));
    });
    var want = DATA.initial_layer >= 0 ? mod.layers.indexOf(DATA.initial_layer) : mod.layers.length - 1;
    state.layer = want >= 0 ? want : 0;
    ls.value = String(state.layer);
    var info = T('report.model_info', { D: mod.D, L: mod.L, tok: mod.tokenizer, V: mod.V });
    $('model-info').textContent = info;
  }

  function drawTokens() {
    var mod = currentModel();
    var box = $('tokens');
    box.textContent = '';
    tokenButtons = [];
    var frag = document.createDocumentFragment();
    mod.ids.forEach(function (id, t) {
      var b = el('button', { type: 'button', cls: 'tok', 'data-t': String(t), role: 'option',
        text: showToken(tokText(mod, id)) });
      tokenButtons.push(b);
      frag.appendChild(b);
    });
    box.appendChild(frag);
    shadeTokens();
    var notes = [T('page.n_tokens', { n: mod.ids.length })];
    if (mod.windows > 1) notes.push(T('report.windows', { c: mod.context, w: mod.windows }));
    if (mod.unk > 0) notes.push(T('report.unk', { n: mod.unk }));
    notes.push(T('report.shade'));
    $('token-note').textContent = notes.join(' \u00b7 ');
  }

  function shadeTokens() {
    var mod = currentModel();
    var max = 0;
    mod.tok.forEach(function (row) { var e = row[state.layer]; if (e && e.o > max) max = e.o; });
    tokenButtons.forEach(function (b, t) {
      var e = layerEntry(mod, t, state.layer);
      var a = e && max > 0 ? 0.06 + 0.5 * (e.o / max) : 0;
      b.style.background = 'rgba(47,111,223,' + a.toFixed(3) + ')';
      b.classList.toggle('sel', t === state.token);
      b.classList.toggle('prev', t === state.prev && t !== state.token);
      b.setAttribute('aria-selected', t === state.token ? 'true' : 'false');
      var hit = null;
      if (state.pinned && e) e.n.forEach(function (n) { if (neuronKey(n) === state.pinned) hit = n; });
      b.classList.toggle('hit-pos', !!hit && hit[7] >= 0);
      b.classList.toggle('hit-neg', !!hit && hit[7] < 0);
    });
  }

  /* where else does the pinned neuron fire: tokens that have it in their top-K */
  function pinNote() {
    var note = $('pin-note');
    if (!note) return;
    note.textContent = '';
    if (!state.pinned) {
      note.appendChild(document.createTextNode(T('report.pin_hint', { k: currentModel().top_k })));
      return;
    }
    var mod = currentModel(), count = 0, name = '';
    mod.tok.forEach(function (row) {
      var e = row[state.layer];
      if (e) e.n.forEach(function (n) { if (neuronKey(n) === state.pinned) { count++; name = neuronName(n); } });
    });
    note.appendChild(document.createTextNode(T('report.pin_note', { name: name, k: mod.top_k, count: count, n: mod.ids.length })));
  }

  /* a number with its bar; label names the column where a phone stacks the
   * cells of a row (report.css: .ntable at narrow widths) */
  function barCell(v, max, label) {
    var w = max > 0 ? Math.min(1, Math.abs(v) / max) * 50 : 0;
    var bar = el('span', { cls: 'bar' });
    var barFill = el('i', { style: (v >= 0 ? 'left:50%;' : 'right:50%;') + 'width:' + w.toFixed(2) + '%;background:' + (v >= 0 ? 'var(--pos)' : 'var(--neg)') });
    bar.appendChild(barFill);
    bar.appendChild(el('b'));
    return el('td', { cls: 'num', 'data-label': label }, [bar, el('span', { text: fmtNum(v, 3) })]);
  }

  function drawPanel() {
    var mod = currentModel();
    var panel = $('neuron-panel');
    panel.textContent = '';
    var t = state.token;
    if (t < 0 || t >= mod.ids.length) {
      panel.appendChild(el('p', { cls: 'muted', text: T('page.click_token') }));
      return;
    }
    var li = state.layer, layer = mod.layers[li];
    var e = layerEntry(mod, t, li);
    var isMoe = !!mod.layer_moe[li];
    var dense = /^dense/.test(mod.ffn);
    panel.setAttribute('data-token', String(t));
    panel.setAttribute('data-layer', String(layer));
    panel.setAttribute('data-model', mod.name);
    var head = el('div', { cls: 'head' });
    head.appendChild(el('span', { cls: 'big' }, [T('report.panel_token') + ' ', el('span', { cls: 'chip', text: showToken(tokText(mod, mod.ids[t])) }),
      T('report.panel_at', { t: t, l: layer })]));
    if (e.x !== null)
      head.appendChild(el('span', { title: T('report.explains_tip'),
        text: T('report.explains', { n: e.n.length, pct: pct(e.x), c: fmtNum(e.c, 2) }) }));
    if (state.prev >= 0 && state.prev !== t) {
      var pe = layerEntry(mod, state.prev, li);
      if (pe) {
        var keys = {};
        pe.n.forEach(function (n) { keys[neuronKey(n)] = 1; });
        var shared = e.n.filter(function (n) { return keys[neuronKey(n)]; }).length;
        head.appendChild(el('span', { cls: 'muted' }, [T('report.shares', { s: shared, n: e.n.length }),
          el('span', { cls: 'chip', text: showToken(tokText(mod, mod.ids[state.prev])) }), T('report.shares_pos', { p: state.prev })]));
      }
    }
    panel.appendChild(head);
    if (isMoe) {
      var ex = el('div', { cls: 'small' }, [T('report.routed')]);
      e.e.forEach(function (p) { ex.appendChild(el('span', { cls: 'chip exp', text: 'E' + p[0] + ' \u00b7 w ' + fmtNum(p[1], 2) })); });
      panel.appendChild(ex);
      drawExpertLoad(mod, li, panel);
    }
    var maxG = 0, maxU = 0, maxM = 0, maxC = 0;
    e.n.forEach(function (n) {
      maxG = Math.max(maxG, Math.abs(n[3])); maxU = Math.max(maxU, Math.abs(n[4]));
      maxM = Math.max(maxM, Math.abs(n[5])); maxC = Math.max(maxC, Math.abs(n[7]));
    });
    var cols = ['', T('page.neuron'), dense ? 'act(up)' : T('page.gate'), T('page.up'),
      T('page.product'), isMoe ? 'w\u00b7m' : null, T('page.promotes')].filter(function (c) { return c !== null; });
    var thead = el('tr', null, cols.map(function (c) { return el('th', { text: c }); }));
    var rows = e.n.map(function (n, j) {
      var promo = el('td', { cls: 'promo', 'data-label': cols[cols.length - 1] });
      n[8].forEach(function (id, q) {
        promo.appendChild(el('span', { cls: 'chip', title: T('report.promo_tip', { id: id, v: fmtNum(n[9][q], 3) }), text: showToken(tokText(mod, id)) }));
      });
      var cells = [el('td', { cls: 'muted rank', text: String(j + 1) }), el('td', { cls: 'key', text: neuronName(n),
        title: T('report.pre_tip', { which: dense ? 'up' : 'gate', v: fmtNum(n[2], 3) }) + (isMoe ? T('report.router_tip', { v: fmtNum(n[6], 3) }) : '') }),
        barCell(n[3], maxG, cols[2]), barCell(n[4], maxU, cols[3]), barCell(n[5], maxM, cols[4])];
      if (isMoe) cells.push(barCell(n[7], maxC, cols[5]));
      cells.push(promo);
      var tr = el('tr', { 'data-neuron': neuronKey(n), cls: 'nrow' + (state.pinned === neuronKey(n) ? ' pinned' : ''), title: T('report.row_tip', { k: mod.top_k }) }, cells);
      tr.addEventListener('click', function () {
        state.pinned = state.pinned === neuronKey(n) ? null : neuronKey(n);
        shadeTokens();
        drawPanel();
      });
      return tr;
    });
    /* no sideways scroller: on a phone each neuron is a stacked block with
     * its promoted tokens first (report.css) */
    panel.appendChild(el('div', { cls: 'ntable-box' }, [el('table', { cls: 'ntable' }, [el('thead', null, [thead]), el('tbody', null, rows)])]));
    panel.appendChild(el('p', { cls: 'small', id: 'pin-note' }));
    pinNote();
    panel.appendChild(el('p', { cls: 'muted small', text: T(isMoe ? 'report.ranked_moe' : 'report.ranked') }));
    updateScrollHints();
  }

  function selectToken(t) {
    var mod = currentModel();
    if (t < 0 || t >= mod.ids.length) return;
    if (t !== state.token) state.prev = state.token;
    state.token = t;
    shadeTokens();
    drawPanel();
  }

  function setupNeurons() {
    if (!models.length) {
      $('neuron-panel').appendChild(el('p', { cls: 'muted', text: T('report.no_models') }));
      document.querySelector('#neurons .controls').style.display = 'none';
      $('tokens').style.display = 'none';
      return;
    }
    fillSelectors();
    drawTokens();
    $('tokens').addEventListener('click', function (ev) {
      var b = ev.target.closest ? ev.target.closest('.tok') : null;
      if (b) selectToken(+b.getAttribute('data-t'));
    });
    $('tokens').addEventListener('keydown', function (ev) {
      if (ev.key === 'ArrowRight' || ev.key === 'ArrowLeft') {
        var t = state.token + (ev.key === 'ArrowRight' ? 1 : -1);
        if (t >= 0 && t < currentModel().ids.length) {
          selectToken(t);
          tokenButtons[t].focus();
          ev.preventDefault();
        }
      }
    });
    $('layer-select').addEventListener('change', function () {
      state.layer = +this.value;
      state.pinned = null;
      shadeTokens();
      drawPanel();
    });
    $('model-select').addEventListener('change', function () {
      state.model = +this.value;
      state.prev = -1;
      state.pinned = null;
      var n = currentModel().ids.length;
      if (state.token >= n) state.token = n - 1;
      fillLayers();
      drawTokens();
      drawPanel();
    });
    var n0 = currentModel().ids.length;
    selectToken(Math.min(n0 - 1, Math.max(0, Math.floor(n0 / 2))));
    state.prev = -1;
    shadeTokens();
    drawPanel();
  }

  /* ---- 4. linear collapse ------------------------------------------------------ */
  function drawCollapse() {
    var box = $('collapse-body');
    var c = DATA.collapse;
    if (!c) {
      box.appendChild(el('p', { cls: 'muted', text: T('report.no_collapse') }));
      return;
    }
    var D = c.D, F = c.F;
    box.appendChild(el('p', { cls: 'lead' }, [T('report.collapse_lead1', { y: 'W_down\u00b7(W_up\u00b7x' + (c.bias ? ' + b_up) + b_down' : ')') }),
      el('b', { text: c.run }), T('report.collapse_lead2', { n: c.inputs })]));
    var worst = 0;
    c.layers.forEach(function (l) { if (l.rel > worst) worst = l.rel; });
    var facts = el('table', { cls: 'facts' }, [el('tbody', null, [
      el('tr', null, [el('td', { text: T('report.two_layers') }), el('td', { text: 'W_up ' + F + '\u00d7' + D + ' + W_down ' + D + '\u00d7' + F }), el('td', { text: T('report.n_params', { n: fmtCount(c.params_before) }) }), el('td', { text: T('report.n_flops', { n: fmtCount(c.flops_before) }) })]),
      el('tr', null, [el('td', { text: T('report.merged') }), el('td', { text: 'W ' + D + '\u00d7' + D }), el('td', { text: T('report.n_params', { n: fmtCount(c.params_after) }) }), el('td', { text: T('report.n_flops', { n: fmtCount(c.flops_after) }) })]),
      el('tr', null, [el('td', { text: T('report.saving') }), el('td', { text: '' }), el('td', { text: T('report.fewer', { x: (c.params_before / c.params_after).toFixed(1) }) }), el('td', { text: T('report.fewer', { x: (c.flops_before / c.flops_after).toFixed(1) }) })])])]);
    box.appendChild(scrollBox(facts));
    var rows = c.layers.map(function (l) {
      return el('tr', null, [el('td', { text: String(l.layer) }), el('td', { text: fmtNum(l.max_diff, 3) }), el('td', { text: fmtNum(l.max_abs_out, 3) }),
        el('td', { text: fmtNum(l.rel, 3) }), el('td', { text: fmtNum(l.w_norm, 3) })]);
    });
    var head = el('tr', null, ['page.layer', 'report.th_max_diff', 'report.th_max_y', 'report.th_relative', 'report.th_w_norm'].map(function (h) { return el('th', { text: T(h) }); }));
    box.appendChild(scrollBox(el('table', { id: 'collapse-table' }, [el('thead', null, [head]), el('tbody', null, rows)])));
    var verdict = worst < 1e-4;
    box.appendChild(el('p', { cls: 'note' }, [el('span', { cls: verdict ? 'ok' : 'bad', text: T(verdict ? 'report.same_map' : 'report.differs') }),
      T(verdict ? 'report.same_text' : 'report.differs_text', { worst: fmtNum(worst, 2), D: D, F: F })]));
  }

  /* ---- start ------------------------------------------------------------------ */
  drawCurveLegend();
  drawCurves();
  drawVariantTable();
  $('show-train').addEventListener('change', drawCurves);
  drawParams();
  $('param-view').addEventListener('change', drawParams);
  setupNeurons();
  drawCollapse();
  updateScrollHints();
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { drawCurves(); fitLabels($('param-chart')); updateScrollHints(); }, 120);
  });
  document.body.setAttribute('data-ready', '1');
})();
