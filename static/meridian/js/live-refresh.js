"use strict";
// Server-rendered parts marked data-refresh-on="<event>" are re-rendered when that event
// arrives: the page is fetched again and the marked elements (matched by id) swapped in.
// Events are already coalesced server-side (one per sync), and a refresh in flight absorbs
// any that arrive meanwhile, so a busy fleet never turns into a request storm.
(function () {
  var busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "X-Requested-With": "live-refresh" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-refresh-on][id]").forEach(function (el) {
          var replacement = fresh.getElementById(el.id);
          if (replacement) el.replaceWith(replacement);
        });
      })
      .catch(function () { /* stale until the next event; the indicator tells */ })
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }

  document.addEventListener("meridian:event", function (e) {
    var wanted = Array.prototype.map.call(document.querySelectorAll("[data-refresh-on]"), function (el) { return el.dataset.refreshOn; });
    if (wanted.indexOf(e.detail.event) >= 0) refresh();
  });
})();
