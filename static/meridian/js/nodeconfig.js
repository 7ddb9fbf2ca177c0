"use strict";
// Node config pages: live rollout progress, and form fields shown per chosen mode/scope.
//
// Progress bars (.nc-progress[data-target-id]) and the fields next to them are updated from
// the "target.progress" event's own data (through live.js, the console's one live module):
// the publisher already coalesces one summary per target a second, so no page is refetched
// per event. When events were missed (a gap, a reconnect) bars are backfilled from the REST API.
(function () {
  var SEGMENTS = ["applied", "failed", "pending", "held"];
  var BACKFILL_LIMIT = 50;
  var labelsEl = document.getElementById("nc-state-labels");
  var stateLabels = labelsEl ? JSON.parse(labelsEl.textContent) : {};

  // Elements matching `selector` that are, or are inside, an element of this target.
  function within(id, selector) {
    var found = [];
    document.querySelectorAll('[data-target-id="' + id + '"]').forEach(function (scope) {
      if (scope.matches(selector)) found.push(scope);
      scope.querySelectorAll(selector).forEach(function (el) { found.push(el); });
    });
    return found.filter(function (el, i) { return found.indexOf(el) === i; });
  }

  function renderBar(bar, p) {
    var total = p.targeted || 0;
    SEGMENTS.forEach(function (name) {
      var seg = bar.querySelector(".nc-seg." + name);
      if (seg) seg.style.width = (total ? (100 * (p[name] || 0) / total) : 0).toFixed(2) + "%";
    });
    var img = bar.querySelector(".nc-bar"), counts = bar.querySelector(".nc-counts");
    if (img && counts) img.setAttribute("aria-label", counts.textContent.replace(/\s+/g, " ").trim());
  }

  function update(p) {
    if (!p || p.target_id === undefined) return;
    var id = p.target_id;
    ["targeted", "delivered"].concat(SEGMENTS).forEach(function (name) {
      within(id, '[data-count="' + name + '"]').forEach(function (el) { el.textContent = p[name]; });
    });
    within(id, ".nc-progress").forEach(function (bar) { renderBar(bar, p); });
    within(id, "[data-nc-delivery]").forEach(function (el) { el.hidden = p.delivery !== "pending"; });
    within(id, '[data-nc-field="current_revision"]').forEach(function (el) { el.textContent = p.current_revision; });
    within(id, '[data-nc-field="matched_nodes"]').forEach(function (el) { el.textContent = window.Meridian.number(p.matched_nodes); });
    within(id, '[data-nc-field="hash"]').forEach(function (el) { el.textContent = p.hash; });
    // The rollout controls follow the true state: Resume once paused (an auto-pause on
    // failures arrives here), Pause while running, the form gone once complete.
    var complete = p.rollout_state === "complete";
    within(id, '[data-nc-when]').forEach(function (el) {
      var when = el.dataset.ncWhen;
      el.hidden = when === "complete" ? !complete : when === "incomplete" ? complete
        : when === "paused" ? !p.paused : when === "running" ? !!p.paused : el.hidden;
    });
    within(id, '[data-nc-field="message"]').forEach(function (el) { el.textContent = p.message || "—"; });
    within(id, '[data-nc-field="rollout_state"]').forEach(function (el) {
      el.textContent = stateLabels[p.rollout_state] || p.rollout_state;
      el.className = "badge nc-state " + p.rollout_state;
    });
  }

  function targetIds() {
    var ids = [];
    document.querySelectorAll(".nc-progress[data-target-id]").forEach(function (bar) {
      if (ids.indexOf(bar.dataset.targetId) < 0) ids.push(bar.dataset.targetId);
    });
    return ids;
  }

  function backfill() {
    targetIds().slice(0, BACKFILL_LIMIT).forEach(function (id) {
      fetch("/api/v1/nodeconfig/targets/" + encodeURIComponent(id) + "/progress/",
            { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(update)
        .catch(function () { /* still stale; the indicator says so */ });
    });
  }

  var live = window.Meridian && window.Meridian.live;
  if (live) {
    live.on("target.progress", update);
    // Missed events (a gap, a reconnect, a Redis restart): re-read the bars over REST.
    live.onBackfill(function (topic) { if (!topic || /^nodeconfig/.test(topic)) backfill(); });
  }

  // data-show-when="name:value1,value2": shown only while the form's radio `name` has one of
  // the values. Without JavaScript everything stays visible and the server ignores the rest.
  function toggleDependents(form) {
    form.querySelectorAll("[data-show-when]").forEach(function (el) {
      var rule = el.dataset.showWhen.split(":"), checked = form.querySelector('input[name="' + rule[0] + '"]:checked');
      el.hidden = !checked || rule[1].split(",").indexOf(checked.value) < 0;
    });
  }
  document.querySelectorAll("form").forEach(function (form) {
    if (!form.querySelector("[data-show-when]")) return;
    form.addEventListener("change", function () { toggleDependents(form); });
    toggleDependents(form);
  });

  // [data-confirm-scope]: the emergency form's confirmation shows, as its placeholder, the
  // name to type for the chosen scope (the server checks it: EmergencyForm.confirmation).
  function confirmationHint(form, input) {
    var scope = form.querySelector('input[name="scope"]:checked'), value = scope ? scope.value : "";
    var cluster = form.querySelector('select[name="cluster"]'), selector = form.querySelector('input[name="selector"]');
    input.placeholder = value === "fleet" ? "fleet"
      : value === "cluster" ? (cluster && cluster.value) || ""
      : value === "selector" ? (selector && selector.value.trim()) || "" : "";
  }
  document.querySelectorAll("[data-confirm-scope]").forEach(function (input) {
    var form = input.form;
    ["change", "input"].forEach(function (kind) {
      form.addEventListener(kind, function (event) { if (event.target !== input) confirmationHint(form, input); });
    });
    confirmationHint(form, input);
  });
})();
