"use strict";
// Federation pages: live phases and per-cluster progress, the water-level dashboard (charts,
// live table, cordon dialog), and the what-if's before/after chart.
//
// Objects: the index and an object's page hold server-rendered parts marked
// data-live-fragment="live", which live.js re-renders from "?fragment=live" (a small template,
// not the page) when their events arrive or events were missed; an event's own data updates
// the phase badges at once.
//
// Water levels: #fed-water-data is one columnar JSON blob ({clusters, weight, state,
// resources: {cpu: {allocatable, requested, available, deploy_rate}}, history: {t0, series}});
// a "water-levels" sample or a cordon refetches the same JSON from the page's endpoint and
// updates the table's cells and the charts in place. A big fleet's page comes without the
// history (null), which is then fetched once the page is up. Zooming a history chart fetches
// that range (at a finer grain); drains, cordons and downgrades are drawn as marks. A theme
// switch ("meridian:theme", theme.js) redraws every chart in the new colours.
(function () {
  var labels = readJSON("fed-labels") || {};
  var phases = labels.phases || {};
  var HISTORY_VISIBLE = 10, HISTORY_TRACES = 50;
  var PALETTE = { cpu: "#2458d3", memory: "#1b8a4b", gpu: "#b7791f", before: "#98a2b3", after: "#2458d3" };

  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function layout(extra) {
    return window.Meridian.chartLayout({ margin: { t: 12, l: 52, r: 12, b: 80 }, legend: { orientation: "h", y: 1.12 } }, extra);
  }

  function plot(el, traces, extra) {
    if (!el || !window.Plotly) return;
    Plotly.react(el, traces, layout(extra), { responsive: true, displaylogo: false });
  }

  function setPhase(badge, phase) {
    if (!badge || !phase) return;
    badge.className = "badge fed-phase fed-" + phase;
    badge.dataset.phase = phase;
    badge.textContent = phases[phase] || phase;
  }

  // ------------------------------------------------------------------ live parts
  // The parts marked data-live-fragment are re-rendered by live.js (the console's one live
  // module); here only what can change at once from an event's own data: the phase badges.

  var objectEl = document.getElementById("fed-object");
  var objectId = objectEl ? objectEl.dataset.objectId : null;
  var live = window.Meridian && window.Meridian.live;

  if (live) {
    live.on("object.status", function (data, msg) {
      if (objectId && msg.topic === "federation-object-" + objectId) {
        setPhase(document.querySelector("#fed-object-phase .fed-phase"), data.phase);
      } else if (!objectId && data.id !== undefined) {
        setPhase(document.querySelector('#fed-objects tr[data-object-id="' + data.id + '"] .fed-phase'), data.phase);
      }
    });
    live.on("object.deleted", function (data) {
      var note = document.getElementById("fed-deleted-note");
      if (objectId && String(data.id) === objectId && note) { note.textContent = labels.deleted || "Deleted."; note.hidden = false; }
    });
  }
  // The heading's badge follows the re-rendered summary (whatever event caused the refresh).
  document.addEventListener("meridian:refreshed", function () {
    var fresh = document.querySelector("#fed-summary .fed-phase");
    if (objectId && fresh) setPhase(document.querySelector("#fed-object-phase .fed-phase"), fresh.dataset.phase);
  });

  // ------------------------------------------------------------------ water levels

  var water = readJSON("fed-water-data");
  var totalsEl = document.getElementById("fed-water-totals");
  var hoursEl = document.getElementById("fed-hours"), resourceEl = document.getElementById("fed-history-resource");

  function drawLevels(d) {
    plot(document.getElementById("fed-chart-rates"), d.keys.map(function (key) {
      return { type: "bar", name: labels[key] || key, x: d.clusters, y: d.resources[key].deploy_rate,
               marker: { color: PALETTE[key] }, hovertemplate: "%{x}: %{y}%<extra>" + (labels[key] || key) + "</extra>" };
    }), { barmode: "group", xaxis: { automargin: true, showgrid: false },
          yaxis: { title: { text: labels.deployRate }, rangemode: "tozero", automargin: true } });
    plot(document.getElementById("fed-chart-weights"), [{
      type: "bar", name: labels.weight, x: d.clusters, y: d.weight, marker: { color: PALETTE.cpu },
      hovertemplate: "%{x}: %{y}‰<extra></extra>"
    }], { xaxis: { automargin: true, showgrid: false }, yaxis: { title: { text: labels.weight }, rangemode: "tozero", automargin: true },
          showlegend: false });
  }

  // The clusters the history charts draw: highest deploy rate first, the first few visible.
  function historyOrder(d, key) {
    var rates = (d.resources[key] || d.resources[d.keys[0]]).deploy_rate;
    return d.clusters.map(function (name, i) { return [name, rates[i] || 0]; })
      .sort(function (a, b) { return b[1] - a[1] || (a[0] < b[0] ? -1 : 1); })
      .slice(0, HISTORY_TRACES).map(function (pair) { return pair[0]; });
  }

  var EVENT_COLORS = { drain: "#d97706", cordon: "#b7791f", uncordon: "#1b8a4b", emergency_downgrade: "#d92d20", restore: "#1b8a4b" };

  // Drains, cordons and downgrades in the range: a dashed line each, labelled on top.
  function eventMarks(h) {
    var shapes = [], notes = [], names = labels.events || {};
    (h.events || []).forEach(function (e) {
      var x = new Date(h.t0 + e.t * 1000), color = EVENT_COLORS[e.kind] || "#667085";
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1, line: { color: color, width: 1.5, dash: "dash" } });
      notes.push({ xref: "x", yref: "paper", x: x, y: 1, yanchor: "bottom", showarrow: false, font: { size: 10, color: color },
                   text: (names[e.kind] || e.kind) + " " + e.object,
                   hovertext: (names[e.kind] || e.kind) + " " + e.object + (e.reason ? ": " + e.reason : "") + " (" + e.actor + ")" });
    });
    return { shapes: shapes, annotations: notes };
  }

  var zoomed = null, zoomWired = false;
  function drawHistory(d) {
    if (!d.history) return; // a big fleet's page fetches it after load
    var key = resourceEl && d.keys.indexOf(resourceEl.value) >= 0 ? resourceEl.value : d.keys[0];
    var h = d.history, names = historyOrder(d, key), marks = eventMarks(h);
    function traces(field) {
      return names.filter(function (name) { return h.series[name]; }).map(function (name, i) {
        var s = h.series[name];
        return { type: "scatter", mode: s.t.length > 30 ? "lines" : "lines+markers", name: name, visible: i < HISTORY_VISIBLE ? true : "legendonly",
                 x: s.t.map(function (t) { return new Date(h.t0 + t * 1000); }), y: s[field] };
      });
    }
    var x = { type: "date", automargin: true, range: [new Date(h.t0), new Date(h.t1 || d.at)] };
    var common = { xaxis: x, legend: { orientation: "v" }, margin: { t: 24, l: 52, r: 12, b: 40 },
                   shapes: marks.shapes, annotations: marks.annotations };
    plot(document.getElementById("fed-chart-history-rate"), traces(key), Object.assign({
      yaxis: { title: { text: (labels[key] || key) + " · " + labels.deployRate }, rangemode: "tozero", automargin: true } }, common));
    plot(document.getElementById("fed-chart-history-weight"), traces("weight"), Object.assign({
      yaxis: { title: { text: labels.weight }, rangemode: "tozero", automargin: true } }, common));
    var grainEl = document.getElementById("fed-history-grain");
    if (grainEl) grainEl.textContent = (d.grains && d.grains[h.grain]) || h.grain;
    document.body.dataset.historyGrain = h.grain;
    wireZoom();
  }

  // Zoom: dragging across a history chart asks the server for that range, which answers at
  // the finest grain the range affords (minutes, hours, days); a double-click goes back to
  // the window.
  function wireZoom() {
    if (zoomWired) return;
    ["fed-chart-history-rate", "fed-chart-history-weight"].forEach(function (id) {
      var el = document.getElementById(id);
      if (!el || !el.on) return;
      zoomWired = true;
      el.on("plotly_relayout", function (ev) {
        if (ev["xaxis.range[0]"] !== undefined && ev["xaxis.range[1]"] !== undefined) {
          var a = new Date(String(ev["xaxis.range[0]"]).replace(" ", "T")), b = new Date(String(ev["xaxis.range[1]"]).replace(" ", "T"));
          if (isNaN(a) || isNaN(b) || b - a < 60000) return;
          zoomed = [a.getTime(), b.getTime()];
          refetchWater();
        } else if (ev["xaxis.autorange"]) {
          zoomed = null;
          refetchWater();
        }
      });
    });
  }

  // As the server formats the cells: 1,234.5 and 12 (not 12.0).
  function fmt(v) { return window.Meridian.number(Math.round(v * 10) / 10, 1); }

  function levelClass(rate) { return rate >= 90 ? "hot" : rate >= 70 ? "warm" : ""; }

  function updateTable(d) {
    var rows = {};
    document.querySelectorAll("#fed-water-table tbody tr[data-cluster]").forEach(function (tr) { rows[tr.dataset.cluster] = tr; });
    d.clusters.forEach(function (name, i) {
      var tr = rows[name];
      if (!tr) return;
      if (tr.dataset.state !== d.state[i]) {
        tr.dataset.state = d.state[i];
        var cell = tr.querySelector('[data-f="state"]');
        if (cell) {
          cell.textContent = "";
          if (d.state[i]) {
            var badge = document.createElement("span");
            badge.className = "badge fed-cordon " + d.state[i];
            badge.textContent = labels[d.state[i]] || d.state[i];
            cell.appendChild(badge);
          }
        }
      }
      var weight = tr.querySelector('[data-f="weight"]');
      if (weight) weight.textContent = d.weight[i];
      d.keys.forEach(function (key) {
        var td = tr.querySelector('td[data-res="' + key + '"]'), r = d.resources[key];
        if (!td) return;
        var rate = r.deploy_rate[i], level = levelClass(rate);
        td.className = level;
        td.querySelector("b").style.setProperty("--r", Math.min(Math.max(rate, 0), 100).toFixed(1) + "%");
        td.querySelector("span").textContent = fmt(rate) + "%";
        td.querySelector("small").textContent = fmt(r.requested[i]) + " / " + fmt(r.allocatable[i]) + " · " + fmt(r.available[i]);
      });
    });
    if (totalsEl) {
      d.keys.forEach(function (key) {
        var card = totalsEl.querySelector('[data-total-res="' + key + '"]'), t = d.totals[key];
        if (!card || !t) return;
        card.querySelector('[data-total="rate"]').textContent = fmt(t.deploy_rate) + "%";
        var fill = card.querySelector(".bar > span");
        fill.style.width = Math.min(Math.max(t.deploy_rate, 0), 100).toFixed(1) + "%";
        fill.className = levelClass(t.deploy_rate);
        card.querySelector('[data-total="detail"]').textContent =
          fmt(t.requested) + " / " + fmt(t.allocatable) + " " + d.units[key] + " · " + fmt(t.available) + " " + (labels.free || "free");
      });
      var set = function (name, value) { var el = totalsEl.querySelector('[data-total="' + name + '"]'); if (el) el.textContent = value; };
      set("ready", fmt(d.ready.filter(Boolean).length));
      set("clusters", fmt(d.clusters.length));
      set("cordoned", fmt(d.state.filter(Boolean).length));
    }
  }

  var fetching = false, fetchAgain = false;
  function refetchWater() {
    if (!totalsEl) return;
    if (fetching) { fetchAgain = true; return; }
    fetching = true;
    var url = totalsEl.dataset.jsonUrl + "?hours=" + encodeURIComponent(hoursEl ? hoursEl.value : "1") +
      (zoomed ? "&start=" + Math.round(zoomed[0]) + "&end=" + Math.round(zoomed[1]) : "");
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (d) {
        water = d;
        updateTable(d); drawLevels(d); drawHistory(d);
        document.body.dataset.waterAt = d.at;
      })
      .catch(function () { /* stale until the next event */ })
      .finally(function () { fetching = false; if (fetchAgain) { fetchAgain = false; refetchWater(); } });
  }

  if (water) {
    drawLevels(water);
    if (water.history) drawHistory(water); else refetchWater();
    if (hoursEl) {
      hoursEl.addEventListener("change", function () {
        var params = new URLSearchParams(location.search);
        params.set("hours", hoursEl.value);
        history.replaceState(null, "", location.pathname + "?" + params.toString());
        zoomed = null;
        refetchWater();
      });
    }
    if (resourceEl) resourceEl.addEventListener("change", function () { drawHistory(water); });
    document.querySelectorAll("#fed-history-form [data-nojs]").forEach(function (el) { el.hidden = true; });
    if (live) {
      live.on("water_level.sampled", refetchWater);
      live.on("cluster.cordoned", refetchWater);
      live.onBackfill(function (topic) { if (!topic || topic === "water-levels" || topic === "fleet") refetchWater(); });
    }
  }

  // Cordon / drain / uncordon: the row's link opens a dialog asking the reason (without
  // JavaScript the link leads to the cluster's cordon page with the same form).
  var dialog = document.getElementById("fed-cordon-dialog");
  if (dialog && typeof dialog.showModal === "function") {
    var form = document.getElementById("fed-cordon-form");
    document.addEventListener("click", function (e) {
      var link = e.target.closest ? e.target.closest("a[data-cordon]") : null;
      if (!link) return;
      e.preventDefault();
      var action = link.dataset.cordon, cluster = link.closest("tr").dataset.cluster;
      form.action = new URL(link.href, location.href).pathname;
      form.elements.action.value = action;
      form.elements.reason.value = "";
      document.getElementById("fed-cordon-title").textContent = (labels[action] || action) + " " + cluster;
      document.getElementById("fed-cordon-submit").textContent = labels[action] || action;
      dialog.showModal();
      form.elements.reason.focus();
    });
    document.getElementById("fed-cordon-cancel").addEventListener("click", function () { dialog.close(); });
  }

  // ------------------------------------------------------------------ what-if

  var whatif = readJSON("fed-whatif-data"), whatifEl = document.getElementById("fed-chart-whatif");
  var whatifResource = document.getElementById("fed-whatif-resource");
  function drawWhatIf() {
    var key = whatifResource ? whatifResource.value : whatif.keys[0];
    plot(whatifEl, [
      { type: "bar", name: labels.before, x: whatif.clusters, y: whatif.before[key], marker: { color: PALETTE.before } },
      { type: "bar", name: labels.after, x: whatif.clusters, y: whatif.after[key], marker: { color: PALETTE.after } }
    ], { barmode: "group", xaxis: { automargin: true, showgrid: false },
         yaxis: { title: { text: (labels[key] || key) + " · " + labels.deployRate }, rangemode: "tozero", automargin: true } });
  }
  if (whatif && whatifEl && whatif.clusters.length) {
    drawWhatIf();
    if (whatifResource) whatifResource.addEventListener("change", drawWhatIf);
  }

  // Plots follow the theme: the layout reads the page's colours when drawn, so a theme switch
  // draws every chart again with the new ones.
  document.addEventListener("meridian:theme", function () {
    if (water) { drawLevels(water); drawHistory(water); }
    if (whatif && whatifEl && whatif.clusters.length) drawWhatIf();
  });
})();
