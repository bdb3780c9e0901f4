// format.js -- how the report shows numbers, tokens and words: functions
// with no page state, loaded by the page before report.js (and by the live
// page of `ffn serve` before live.js) and loaded as they are by
// tests/browser/test_report.mjs, which checks the panel against them.
'use strict';

function fmtCount(n) {
  if (n === null || n === undefined) return '-';
  var a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + 'B';
  if (a >= 1e6) return (n / 1e6).toFixed(2) + 'M';
  if (a >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return String(Math.round(n));
}
function fmtNum(x, digits) {
  if (x === null || x === undefined || !isFinite(x)) return '-';
  var a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return x.toExponential(2);
  return x.toFixed(digits === undefined ? 3 : digits);
}
function pct(x) { return (100 * x).toFixed(x < 0.1 ? 1 : 0) + '%'; }
function niceTicks(lo, hi, n) {
  var span = hi - lo;
  if (!(span > 0)) return [lo];
  var step = Math.pow(10, Math.floor(Math.log10(span / n)));
  var err = span / n / step;
  if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
  var out = [];
  for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
  return out;
}
/* a token's text made visible: whitespace-only tokens get a symbol */
function showToken(s) {
  if (s === undefined || s === null) return '?';
  if (s === '') return '\u2205';
  var t = s.replace(/\n/g, '\u21b5').replace(/\t/g, '\u21e5').replace(/\r/g, '\u240d')
    .replace(/[\u0000-\u001f\u007f]/g, function (c) { return '\\x' + (c.charCodeAt(0) < 16 ? '0' : '') + c.charCodeAt(0).toString(16).toUpperCase(); });
  if (/^ +$/.test(t)) return t.length === 1 ? '\u2423' : '\u2423\u00d7' + t.length;
  return t;
}
/* the page's words in the chosen language: every element under root with
   data-i18n="key" gets messages[key] (the catalogue of tools/i18n.c, sent
   by the server or embedded by the report); a key the messages lack keeps
   the page's own (English) text */
function applyMessages(messages, root) {
  if (!messages) return;
  var nodes = root.querySelectorAll('[data-i18n]');
  for (var i = 0; i < nodes.length; i++) {
    var key = nodes[i].getAttribute('data-i18n');
    if (Object.prototype.hasOwnProperty.call(messages, key)) nodes[i].textContent = messages[key];
  }
}
/* the text of key, or the fallback when the messages lack it */
function msg(messages, key, fallback) {
  return messages && Object.prototype.hasOwnProperty.call(messages, key) ? messages[key] : fallback;
}
/* the report's data: the JSON of the page's #ffn-data element */
function reportData() { return JSON.parse(document.getElementById('ffn-data').textContent); }
/* the words of a page: W(key, vars), the message of key in messages (the
   catalogue of tools/i18n.c; the key itself when it lacks one) filled from
   vars */
function wordsOf(messages) {
  return function (key, vars) { return fill(msg(messages, key, key), vars); };
}
/* an element of the report: tag, its text (none when undefined or null)
   and its class */
function el(tag, text, cls) {
  var e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
/* a link to the report's section #id, the words label, at the end of the
   page's nav (when it has one) */
function navLink(id, label) {
  var nav = document.querySelector('header nav');
  if (!nav) return;
  var a = document.createElement('a');
  a.href = '#' + id;
  a.textContent = label;
  nav.appendChild(document.createTextNode(' '));
  nav.appendChild(a);
}
/* shows the report's section #id (hidden until it has data) with its nav
   link: the section's body, #id-body */
function showSection(id, label) {
  document.getElementById(id).hidden = false;
  navLink(id, label);
  return document.getElementById(id + '-body');
}
/* a section of the report drawn from the report's data[field], when the
   data has it: shows #id with its nav link (the words of navKey) and calls
   draw(data[field], W the words, the section's body) */
function reportSection(field, id, navKey, draw) {
  var data = reportData();
  if (!data[field]) return;
  var W = wordsOf(data.messages);
  draw(data[field], W, showSection(id, W(navKey)));
}
/* a message with its {name} fields filled from vars: fill('{n} tokens', {n: 3}) */
function fill(template, vars) {
  return String(template).replace(/\{([a-zA-Z_]+)\}/g, function (m, name) {
    return vars && Object.prototype.hasOwnProperty.call(vars, name) ? String(vars[name]) : m;
  });
}
