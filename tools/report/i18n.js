// i18n.js -- the pages' words in the chosen language: every element with
// data-i18n="key" gets the catalogue's text for key (tools/i18n.c holds the
// catalogue; the page receives its language's entries as one object).  A
// key the catalogue lacks keeps the page's own (English) text.
'use strict';

function applyMessages(messages, root) {
  if (!messages) return;
  var nodes = (root || document).querySelectorAll('[data-i18n]');
  for (var i = 0; i < nodes.length; i++) {
    var key = nodes[i].getAttribute('data-i18n');
    if (Object.prototype.hasOwnProperty.call(messages, key)) nodes[i].textContent = messages[key];
  }
}
/* the text of key, or the fallback when the catalogue lacks it */
function msg(messages, key, fallback) {
  return messages && Object.prototype.hasOwnProperty.call(messages, key) ? messages[key] : fallback;
}
