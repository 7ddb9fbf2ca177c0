"use strict";
// Keyboard shortcuts of every page (listed in the #shortcuts-help dialog of base.html):
//   /        focus the page's table search (input[data-table-search], else a search field)
//   g + key  follow the header link whose data-shortcut is "g <key>" (overview, fleet, …)
//   ?        open the help dialog (also the header's Shortcuts button)
// Never while typing: keys pressed in a field, a select or editable text are the field's, as
// are keys with Ctrl/Alt/Meta. The links come from the page, so the URLs live in the template.
(function () {
  var SEQUENCE_MS = 1500;
  var pendingG = 0;
  var dialog = document.getElementById("shortcuts-help");

  function typing(el) {
    if (!el || el === document.body) return false;
    if (el.isContentEditable) return true;
    var tag = el.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    if (tag !== "INPUT") return false;
    return ["button", "submit", "reset", "checkbox", "radio", "range", "color", "file", "image"].indexOf(el.type) < 0;
  }

  function openHelp() {
    if (dialog && !dialog.open) dialog.showModal();
  }

  function focusSearch() {
    var field = document.querySelector("input[data-table-search]") || document.querySelector('main input[type="search"]');
    if (!field) return false;
    field.focus();
    field.select();
    return true;
  }

  function follow(key) {
    var link = document.querySelector('a[data-shortcut="g ' + key + '"]');
    if (!link) return false;
    window.location.assign(link.href);
    return true;
  }

  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    if (typing(e.target) || (dialog && dialog.open)) return;
    var now = Date.now(), key = e.key;
    if (pendingG && now - pendingG <= SEQUENCE_MS) {
      pendingG = 0;
      if (follow(key.toLowerCase())) e.preventDefault();
      return;
    }
    pendingG = 0;
    if (key === "g") { pendingG = now; return; }
    if (key === "?") { e.preventDefault(); openHelp(); return; }
    if (key === "/" && focusSearch()) e.preventDefault();
  });

  var button = document.getElementById("shortcuts-button");
  if (button) button.addEventListener("click", openHelp);
})();
