// live.js -- the page of `ffn serve`: type a text, see its tokens, click one
// to see its strongest FFN neurons, switch neurons off or scale them and
// watch the next-token prediction change.  Everything comes from the
// server's JSON API (GET /api/info, POST /api/tokenize, /api/predict,
// /api/neurons, /api/trace, /api/edit, /api/edit/reset, /api/edit/save);
// nothing is computed here but the drawing.
//
// A new panel is one function that calls its endpoint and draws into its
// own section; refresh() calls the panels that depend on the text.
(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var S = {
    info: null, messages: {}, tokens: [], position: -1, layer: -1,
    edits: [],           // [{layer, neuron | feature, scale}] in the order made
    lastPredict: null, lastNeurons: null, busy: 0, seq: 0,
    lastEdit: null, modelEdits: 0   // facts edited into the served weights (/api/edit)
  };
  window.ffnLive = S;    // the browser test reads the page's state here

  /* every word the page draws is a message of tools/i18n.c (GET /api/info),
   * its {name} fields filled from vars; a missing key shows as itself */
  function T(key, vars) { return fill(msg(S.messages, key, key), vars); }
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'cls') e.className = attrs[k];
      else if (k === 'style') e.style.cssText = attrs[k]; // CSSOM: allowed by the page's CSP
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c !== null && c !== undefined) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function setBusy(d) {
    S.busy += d;
    document.body.setAttribute('data-busy', String(S.busy));
  }
  // Same-origin requests: the browser adds the token's cookie (HttpOnly: this
  // script never sees the token) and the Origin the server checks.
  function api(method, path, body) {
    setBusy(1);
    var init = { method: method, headers: {}, credentials: 'same-origin' };
    if (body !== undefined) { init.body = JSON.stringify(body); init.headers['Content-Type'] = 'application/json'; }
    return fetch(path, init).then(function (r) {
      return r.json().then(function (j) { return { ok: r.ok, status: r.status, json: j }; });
    }).finally(function () { setBusy(-1); });
  }
  function showError(e) { $('error').textContent = e ? T('live.error') + ': ' + e : ''; }
  function input() {
    return { text: $('text').value };
  }

  /* ---- tokens ------------------------------------------------------------ */
  function drawTokens() {
    var box = $('tokens');
    box.textContent = '';
    S.tokens.forEach(function (t, i) {
      var b = el('span', { cls: 'tok' + (i === S.position ? ' sel' : ''), role: 'option', tabindex: '0',
        'data-pos': String(i), 'data-id': String(t.id), title: 'id ' + t.id, text: showToken(t.piece) });
      b.addEventListener('click', function () { select(i); });
      b.addEventListener('keydown', function (ev) { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); select(i); } });
      box.appendChild(b);
    });
    $('token-note').textContent = S.tokens.length ? T('live.n_tokens', { n: S.tokens.length }) : T('live.empty');
  }
  function select(i) {
    S.position = i;
    drawTokens();
    loadNeurons();
  }

  /* ---- the prediction: before and after the edits ------------------------- */
  function predictBody() {
    var b = input();
    b.edits = S.edits.map(function (e) {
      return e.feature !== undefined ? { layer: e.layer, feature: e.feature, scale: e.scale }
        : { layer: e.layer, neuron: e.neuron, scale: e.scale };
    });
    return b;
  }
  function loadPredict() {
    var seq = ++S.seq;
    var body = predictBody();
    return api('POST', '/api/predict', body).then(function (r) {
      if (seq !== S.seq) return;      // a newer request is on its way
      if (!r.ok) { showError(r.json.error); return; }
      showError('');
      S.lastPredict = { request: body, reply: r.json };
      setModelEdits(r.json.model_edits || 0);
      drawPredict(r.json);
    });
  }
  function drawPredict(p) {
    var box = $('bars');
    box.textContent = '';
    var seen = {}, rows = [];
    p.before.concat(p.after).forEach(function (e) { if (!seen[e.id]) { seen[e.id] = 1; rows.push(e); } });
    rows.sort(function (a, b) { return b.p_after - a.p_after || a.id - b.id; });
    var top = 0;
    rows.forEach(function (e) { top = Math.max(top, e.p_before, e.p_after); });
    rows.forEach(function (e) {
      var bars = el('div', { cls: 'qbars' }, [
        el('i', { cls: 'b', style: 'width:' + (100 * e.p_before / (top || 1)).toFixed(2) + '%' }),
        el('i', { cls: 'a', style: 'width:' + (100 * e.p_after / (top || 1)).toFixed(2) + '%' })]);
      box.appendChild(el('div', { cls: 'qrow', 'data-id': String(e.id), 'data-p-before': String(e.p_before),
        'data-p-after': String(e.p_after), title: T('live.before') + ' ' + fmtNum(e.p_before, 4) + ', ' + T('live.after') + ' ' + fmtNum(e.p_after, 4) },
      [el('span', { cls: 'qtok', text: showToken(e.piece) }), bars, el('span', { cls: 'qp', text: fmtNum(e.p_after, 3) })]));
    });
    $('kl').textContent = fmtNum(p.kl, 4);
    $('kl').setAttribute('data-kl', String(p.kl));
    drawEdits();
  }
  function drawEdits() {
    var box = $('edits');
    box.textContent = '';
    if (!S.edits.length) { box.appendChild(el('p', { cls: 'muted small', text: T('live.no_edits') })); return; }
    var p = el('p', { cls: 'small' }, [T('live.edits') + ': ']);
    S.edits.forEach(function (e, k) {
      var rm = el('button', { type: 'button', title: T('live.remove'), text: '\u00d7' });
      rm.addEventListener('click', function () { S.edits.splice(k, 1); changed(); });
      var f = e.feature !== undefined;
      p.appendChild(el('span', { cls: 'chip edit', 'data-edit': e.layer + ':' + (f ? 'f' + e.feature : e.neuron) },
        ['L' + e.layer + (f ? ' ' + T('live.feature') + ' ' + e.feature : ' #' + e.neuron) + ' \u00d7' + e.scale + ' ', rm]));
    });
    var clear = el('button', { type: 'button', id: 'clear-edits', text: T('live.clear_edits') });
    clear.addEventListener('click', function () { S.edits = []; changed(); });
    p.appendChild(clear);
    box.appendChild(p);
  }
  /* the index in S.edits of the edit of `what` (neuron or feature) j at
     layer, or -1; setEdit gives it a scale (1 or null: no edit) */
  function findEdit(layer, what, j) {
    for (var k = 0; k < S.edits.length; k++) if (S.edits[k].layer === layer && S.edits[k][what] === j) return k;
    return -1;
  }
  function setEdit(layer, what, j, scale) {
    var k = findEdit(layer, what, j);
    if (scale === null || scale === 1) { if (k >= 0) S.edits.splice(k, 1); }
    else if (k >= 0) S.edits[k].scale = scale;
    else {
      var e = { layer: layer };
      e[what] = j;
      e.scale = scale;
      S.edits.push(e);
    }
    changed();
  }
  /* features of the server's --transcoder files: switched as neurons are */
  function setupFeatures(info) {
    var tcs = info.transcoders || [];
    if (!tcs.length) return;
    $('feature-controls').hidden = false;
    var sel = $('feature-layer');
    tcs.forEach(function (t) { sel.appendChild(el('option', { value: String(t.layer), text: String(t.layer) + ' (' + t.kind + ', ' + t.features + ')' })); });
    $('feature-apply').addEventListener('click', function () {
      var layer = +sel.value, j = +$('feature-index').value, sc = +$('feature-scale').value;
      if (!(j >= 0) || !isFinite(sc)) return;
      for (var k = 0; k < S.edits.length; k++)
        if (S.edits[k].layer === layer && S.edits[k].feature === j) { S.edits.splice(k, 1); break; }
      if (sc !== 1) S.edits.push({ layer: layer, feature: j, scale: sc });
      changed();
    });
  }
  function changed() {
    loadPredict();
    if (S.lastNeurons) drawNeurons(S.lastNeurons);
  }

  /* ---- a token's neurons ---------------------------------------------------- */
  function loadNeurons() {
    if (S.position < 0 || S.position >= S.tokens.length) { $('neuron-panel').textContent = T('page.click_token'); return Promise.resolve(); }
    var body = input();
    body.position = S.position;
    if (S.layer >= 0) body.layer = S.layer;
    body.k = 8;
    var want = S.position;
    return api('POST', '/api/neurons', body).then(function (r) {
      if (want !== S.position) return;
      if (!r.ok) { showError(r.json.error); return; }
      S.lastNeurons = r.json;
      drawNeurons(r.json);
    });
  }
  function bar(v, scale) {
    var w = Math.min(50, 50 * Math.abs(v) / (scale || 1));
    return el('span', null, [el('span', { cls: 'bar' }, [el('b'),
      el('i', { style: (v >= 0 ? 'left:50%;' : 'left:' + (50 - w).toFixed(2) + '%;') + 'width:' + w.toFixed(2) + '%;background:var(' + (v >= 0 ? '--pos' : '--neg') + ')' })]),
      el('span', { text: fmtNum(v, 3) })]);
  }
  function drawNeurons(n) {
    var panel = $('neuron-panel');
    panel.textContent = '';
    panel.appendChild(el('p', { cls: 'big' }, [T('live.neurons_of') + ' ',
      el('span', { cls: 'chip', text: showToken(n.token.piece) }), ' (' + T('live.position') + ' ' + n.position + ')']));
    n.layers.forEach(function (L) {
      var mx = { g: 0, u: 0, m: 0 };
      L.neurons.forEach(function (u) { mx.g = Math.max(mx.g, Math.abs(u.gate)); mx.u = Math.max(mx.u, Math.abs(u.up)); mx.m = Math.max(mx.m, Math.abs(u.product)); });
      var cols = [T('page.neuron'), T('live.gate_pre'), T('page.gate'), T('page.up'), T('page.product'), T('page.promotes'),
        T('live.label'), T('live.controls')];
      var head = el('tr', null, cols.map(function (h) { return el('th', { text: h }); }));
      var rows = L.neurons.map(function (u) {
        var name = u.expert >= 0 ? 'E' + u.expert + '/' + u.index : u.expert === -2 ? T('page.shared', { i: u.index }) : '#' + u.index;
        var k = u.neuron >= 0 ? findEdit(L.layer, 'neuron', u.neuron) : -1;
        var promo = el('td', { cls: 'promo', 'data-label': cols[5] }, u.promoted.map(function (p) { return el('span', { cls: 'chip', title: 'logit ' + fmtNum(p.logit, 3), text: showToken(p.piece) }); }));
        var label = u.label ? el('span', { cls: 'label', title: 'd = ' + fmtNum(u.label.d, 2) },
          [T('live.class.' + u.label.class, u.label.class) + ' ', el('span', { cls: 'muted', text: 'd ' + fmtNum(u.label.d, 2) })]) : el('span', { cls: 'muted', text: '-' });
        var ctl = el('td', { cls: 'ctl' });
        if (u.neuron >= 0) {
          var off = el('button', { type: 'button', cls: 'off', 'data-layer': String(L.layer), 'data-neuron': String(u.neuron),
            text: k >= 0 && S.edits[k].scale === 0 ? '\u2713 ' + T('live.off') : T('live.off') });
          off.addEventListener('click', function () { setEdit(L.layer, 'neuron', u.neuron, k >= 0 && S.edits[k].scale === 0 ? null : 0); });
          var sc = el('input', { type: 'number', step: '0.1', min: '-100', max: '100', cls: 'scale', value: k >= 0 ? String(S.edits[k].scale) : '1',
            'aria-label': T('live.scale') + ' L' + L.layer + ' #' + u.neuron });
          sc.addEventListener('change', function () { var v = parseFloat(sc.value); if (isFinite(v)) setEdit(L.layer, 'neuron', u.neuron, v); });
          ctl.appendChild(off); ctl.appendChild(document.createTextNode(' ')); ctl.appendChild(sc);
        }
        return el('tr', { cls: 'nrow' + (k >= 0 ? ' edited' : ''), 'data-layer': String(L.layer), 'data-neuron': String(u.neuron) },
          [el('td', { cls: 'key', text: name }), el('td', { cls: 'num', 'data-label': cols[1], text: fmtNum(u.gate_pre, 3) }),
            el('td', { cls: 'num', 'data-label': cols[2] }, [bar(u.gate, mx.g)]), el('td', { cls: 'num', 'data-label': cols[3] }, [bar(u.up, mx.u)]),
            el('td', { cls: 'num', 'data-label': cols[4] }, [bar(u.product, mx.m)]), promo, el('td', { cls: 'lab' }, [label]), ctl]);
      });
      panel.appendChild(el('h3', { cls: 'small', text: T('live.layer_head', { l: L.layer, mlp: L.mlp, F: L.d_ff }) }));
      panel.appendChild(el('div', { cls: 'ntable-box' }, [el('table', { cls: 'ntable', 'data-layer': String(L.layer) }, [el('thead', null, [head]), el('tbody', null, rows)])]));
      if (L.features) drawFeatures(panel, L);
    });
    if (S.info && S.info.labels.available) panel.appendChild(el('p', { cls: 'muted small', text: T('live.label_note') }));
  }

  /* the layer's --transcoder features active at the token (/api/neurons
   * "features"): a row each; clicking a row (or its off button) switches the
   * feature off, again switches it back on; the scale box sets any scale */
  function drawFeatures(panel, L) {
    var mx = 0;
    L.features.forEach(function (u) { mx = Math.max(mx, Math.abs(u.activation)); });
    var cols = [T('live.feature'), T('live.activation'), T('page.promotes'), T('live.controls')];
    var head = el('tr', null, cols.map(function (h) { return el('th', { text: h }); }));
    var rows = L.features.map(function (u) {
      var k = findEdit(L.layer, 'feature', u.feature), isOff = k >= 0 && S.edits[k].scale === 0;
      var promo = el('td', { cls: 'promo', 'data-label': cols[2] }, u.promoted.map(function (p) { return el('span', { cls: 'chip', title: 'logit ' + fmtNum(p.logit, 3), text: showToken(p.piece) }); }));
      var off = el('button', { type: 'button', cls: 'off', 'data-layer': String(L.layer), 'data-feature': String(u.feature),
        text: isOff ? '\u2713 ' + T('live.off') : T('live.off') });
      var sc = el('input', { type: 'number', step: '0.1', min: '-100', max: '100', cls: 'scale', value: k >= 0 ? String(S.edits[k].scale) : '1',
        'aria-label': T('live.scale') + ' L' + L.layer + ' ' + T('live.feature') + ' ' + u.feature });
      sc.addEventListener('click', function (ev) { ev.stopPropagation(); });
      sc.addEventListener('change', function () { var v = parseFloat(sc.value); if (isFinite(v)) setEdit(L.layer, 'feature', u.feature, v); });
      var tr = el('tr', { cls: 'frow' + (k >= 0 ? ' edited' : ''), 'data-layer': String(L.layer), 'data-feature': String(u.feature), title: T('live.feature_click') },
        [el('td', { cls: 'key', text: 'f' + u.feature }), el('td', { cls: 'num', 'data-label': cols[1] }, [bar(u.activation, mx)]), promo,
          el('td', { cls: 'ctl' }, [off, document.createTextNode(' '), sc])]);
      tr.addEventListener('click', function () { setEdit(L.layer, 'feature', u.feature, isOff ? null : 0); });
      return tr;
    });
    panel.appendChild(el('p', { cls: 'small', text: T('live.features_head', { l: L.layer, kind: L.transcoder.kind, n: L.transcoder.features, file: L.transcoder.file }) }));
    panel.appendChild(el('div', { cls: 'ntable-box' }, [el('table', { cls: 'ftable', 'data-layer': String(L.layer) }, [el('thead', null, [head]), el('tbody', null, rows)])]));
  }

  /* ---- the text ------------------------------------------------------------------ */
  var timer = null;
  function refresh() {
    var text = $('text').value;
    if (!text) { S.tokens = []; S.position = -1; drawTokens(); $('bars').textContent = ''; return Promise.resolve(); }
    return api('POST', '/api/tokenize', { text: text }).then(function (r) {
      if (!r.ok) { showError(r.json.error); return; }
      showError('');
      S.tokens = r.json.tokens;
      if (S.position >= S.tokens.length) S.position = -1;
      drawTokens();
      return Promise.all([loadPredict(), loadNeurons()]);
    });
  }
  /* ---- causal tracing (POST /api/trace) ----------------------------------- */
  function drawTrace(d) {
    var box = $('trace-panel');
    box.textContent = '';
    $('trace-summary').textContent = T('live.trace_p') + ': ' + d.p_clean.toFixed(4) + ' \u2192 ' +
      d.p_corrupt.toFixed(4) + ' ' + T('live.trace_corrupt');
    ['mlp_out', 'attn_out', 'resid_post'].forEach(function (kind) {
      var rows = d.effects[kind], max = 1e-9;
      rows.forEach(function (r) { r.forEach(function (v) { max = Math.max(max, Math.abs(v)); }); });
      var t = el('table', { cls: 'trace', 'data-kind': kind }, [el('caption', { text: T('live.kind.' + kind) })]);
      var head = el('tr', null, [el('th', { text: '' })]);
      d.tokens.forEach(function (tk, i) {
        head.appendChild(el('th', { cls: i >= d.subject[0] && i < d.subject[1] ? 'subj' : '', text: showToken(tk.piece) }));
      });
      t.appendChild(head);
      rows.forEach(function (r, l) {
        var tr = el('tr', null, [el('th', { text: String(l) })]);
        r.forEach(function (v) {
          var a = Math.max(0, v) / max;
          tr.appendChild(el('td', { title: v.toFixed(5), style: 'background: rgba(37, 99, 235, ' + a.toFixed(3) + ')' }));
        });
        t.appendChild(tr);
      });
      box.appendChild(el('div', { cls: 'trace-box' }, [t]));
      /* the colour scale: white is no effect, full blue the table's largest */
      box.appendChild(el('p', { cls: 'trace-scale small muted', 'data-kind': kind }, [
        el('span', { cls: 'ramp' }), ' ' + T('live.scale_legend', { max: fmtNum(max, 4) })]));
    });
  }
  function runTrace() {
    var body = { text: $('text').value, subject: $('trace-subject').value };
    if ($('trace-target').value) body.target = $('trace-target').value;
    return api('POST', '/api/trace', body).then(function (r) {
      if (!r.ok) { showError(r.json.error); return; }
      showError('');
      S.lastTrace = r.json;
      drawTrace(r.json);
    });
  }

  /* ---- editing a fact (POST /api/edit, /api/edit/reset, /api/edit/save) ---- */
  function setModelEdits(n) {
    S.modelEdits = n;
    $('edited-badge').hidden = !n;
    $('edited-count').textContent = n ? '(' + n + ')' : '';
    $('edited-badge').title = T('live.edited_n', { n: n });
    document.body.setAttribute('data-model-edits', String(n));
  }
  function pct(v) { return v === null || v === undefined ? '-' : fmtNum(v, 3); }
  function drawEdit(d) {
    var box = $('edit-panel');
    box.textContent = '';
    var rows = [
      ['p_new', 'live.edit_p_new', 'p(new object | prompt)'],
      ['p_old', 'live.edit_p_old', 'p(old object | prompt)'],
      ['efficacy', 'live.edit_efficacy', 'efficacy'],
      ['generalisation', 'live.edit_generalisation', 'generalisation'],
      ['specificity', 'live.edit_specificity', 'specificity'],
      ['heldout_loss', 'live.edit_heldout', 'held-out loss']];
    var head = el('tr', null, [el('th', { text: T('live.edit_measure') }), el('th', { text: T('live.before') }), el('th', { text: T('live.after') })]);
    var body = rows.map(function (r) {
      var b = d.before[r[0]], a = d.after[r[0]];
      var n = r[0] === 'generalisation' ? ' (' + d.after.n_paraphrases + ')' : r[0] === 'specificity' ? ' (' + d.after.n_neighbours + ')' : '';
      return el('tr', { 'data-key': r[0], 'data-before': String(b), 'data-after': String(a) },
        [el('td', { text: T(r[1]) + n }), el('td', { text: pct(b) }), el('td', { text: pct(a) })]);
    });
    box.appendChild(el('table', { cls: 'edit-scores' }, [el('thead', null, [head]), el('tbody', null, body)]));
    if (d.fact === null) box.appendChild(el('p', { cls: 'muted small', text: T('live.edit_no_fact') }));
  }
  function editBody() {
    return { prompt: $('edit-prompt').value, subject: $('edit-subject').value, target: $('edit-target').value,
      layer: +$('edit-layer').value, method: $('edit-method').value };
  }
  function runEdit() {
    var body = editBody();
    $('edit-status').textContent = T('live.edit_running');
    return api('POST', '/api/edit', body).then(function (r) {
      if (!r.ok) { $('edit-status').textContent = ''; showError(r.json.error); return; }
      showError('');
      S.lastEdit = { request: body, reply: r.json };
      setModelEdits(r.json.n_edits);
      $('edit-status').textContent = T('live.edit_done', { layer: r.json.layer, method: r.json.method, old: r.json.old, target: r.json.target });
      drawEdit(r.json);
      return refresh();   // the prediction and the neurons now come from the edited model
    });
  }
  function resetEdits() {
    return api('POST', '/api/edit/reset', {}).then(function (r) {
      if (!r.ok) { showError(r.json.error); return; }
      showError('');
      setModelEdits(0);
      S.lastEdit = null;
      $('edit-panel').textContent = '';
      $('edit-status').textContent = T('live.edit_reset_done');
      return refresh();
    });
  }
  function saveEdits() {
    return api('POST', '/api/edit/save', {}).then(function (r) {
      if (!r.ok) { showError(r.json.error); return; }
      showError('');
      S.lastSave = r.json;
      $('edit-status').textContent = T('live.edit_saved') + ' ' + r.json.path;
    });
  }
  function setupEdit(info) {
    var sel = $('edit-layer');
    info.layers.forEach(function (L) { if (L.mlp === 'dense' || L.mlp === 'gated') sel.appendChild(el('option', { value: String(L.layer), text: String(L.layer) })); });
    var ed = info.edit;
    setModelEdits(ed.n_edits);
    if (!ed.available) {
      $('edit-status').textContent = T('live.edit_off') + ed.reason;
      ['edit-run', 'edit-reset'].forEach(function (id) { $(id).disabled = true; });
      return;
    }
    $('edit-save').hidden = !ed.save;
    $('edit-run').addEventListener('click', runEdit);
    $('edit-reset').addEventListener('click', resetEdits);
    $('edit-save').addEventListener('click', saveEdits);
  }

  function start() {
    // the API needs the launch's token: the cookie the server set when the
    // URL it printed (?token=...) was opened; without it every call is a 401
    api('GET', '/api/info').then(function (r) {
      if (!r.ok) { showError(r.json.error || String(r.status)); return; }
      S.info = r.json;
      S.messages = r.json.messages || {};
      document.documentElement.lang = r.json.lang === 'zh' ? 'zh' : 'en';
      applyMessages(S.messages, document);
      document.title = T('live.title');
      var c = r.json.config;
      $('subtitle').textContent = T('live.subtitle', { model: r.json.model, format: r.json.format, L: c.num_hidden_layers,
        D: c.hidden_size, kind: r.json.vocab.kind, V: r.json.vocab.size, ctx: c.max_position_embeddings });
      var sel = $('layer-select');
      sel.appendChild(el('option', { value: '-1', text: T('live.all_layers') }));
      r.json.layers.forEach(function (L) { if (L.d_ff > 0) sel.appendChild(el('option', { value: String(L.layer), text: T('live.layer_option', { l: L.layer, mlp: L.mlp }) })); });
      sel.addEventListener('change', function () { S.layer = +sel.value; loadNeurons(); });
      $('labels-info').textContent = r.json.labels.available ? '' : T('live.label_none') + r.json.labels.reason;
      $('text').addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(refresh, 200); });
      $('neuron-panel').textContent = T('page.click_token');
      drawEdits();
      $('trace-run').addEventListener('click', runTrace);
      setupEdit(r.json);
      setupFeatures(r.json);
      /* the page opens with a sample text (in the page's language), not empty */
      if (!$('text').value) $('text').value = T('live.sample_text');
      refresh();
      document.body.setAttribute('data-ready', '1');
    });
  }
  start();
})();
