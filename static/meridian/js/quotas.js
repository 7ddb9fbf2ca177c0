"use strict";
// Quota pages: the tree map of the whole quota tree (size = hard of one resource, colour =
// used / hard), the resource picker that re-colours it and the list's bars without a reload,
// the live feed of cash exhaustion events, and a group's cash burn-down chart.
//
// Data comes from json_script blocks the server rendered: #quota-tree-data is columnar,
// { keys, key, groups: [[name, parentIndex, [hard per key], [used per key]], ...], exhausted },
// so 5,000 groups stay a few hundred kilobytes.
(function () {
  var labels = readJSON("quota-labels") || {};
  var RED = "#c53030", FLEET = "__fleet__"; // group names are DNS names: no "_", no clash
  // Colour = used / hard on a scale to CMAX: green → amber at 80% → orange just below 100%,
  // then a solid red band for everything at or above hard (values above CMAX clamp to red).
  var CMAX = 1.1;
  var SCALE = [[0, "#2f9e5a"], [0.6 / CMAX, "#9bc53d"], [0.8 / CMAX, "#e0b422"], [0.999 / CMAX, "#e8742f"],
               [1 / CMAX, RED], [1, RED]];
  var MAX_SECTORS = 600;

  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  var cssVar = window.Meridian.cssVar;


  // A float back to a short human quantity (binary suffixes for exact multiples of 1024²).
  function fmt(v) {
    if (v === null || v === undefined) return "—";
    var units = [["Ti", Math.pow(1024, 4)], ["Gi", Math.pow(1024, 3)], ["Mi", Math.pow(1024, 2)]];
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(v) >= units[i][1] && v % units[i][1] === 0) return (v / units[i][1]) + units[i][0];
    }
    if (Math.abs(v) >= 1e9) return (v / 1e9).toFixed(2).replace(/\.?0+$/, "") + "G";
    return window.Meridian.number(Math.round(v * 1000) / 1000, 3);  // grouped as the page's language writes numbers
  }

  function ratioOf(used, hard) {
    if (hard === null || hard === undefined) return null;
    if (hard <= 0) return (used || 0) > 0 ? 2 : 0;
    return (used || 0) / hard;
  }

  // ------------------------------------------------------------------ tree map

  var tree = readJSON("quota-tree-data");
  var mapEl = document.getElementById("quota-treemap");
  var kids = [], roots = [], indexOf = {};
  if (tree) {
    tree.groups.forEach(function (row, i) { kids.push([]); indexOf[row[0]] = i; });
    tree.groups.forEach(function (row, i) { if (row[1] === null) roots.push(i); else kids[row[1]].push(i); });
  }
  var FLEET_TOP = roots.length > 1; // several roots: one labelled fleet sector instead of Plotly's blank one
  var focus = null; // the group index the map is rooted at; null: the whole fleet
  var currentKey = tree && tree.key;

  // Sizes with branchvalues "total": a parent is at least the sum of its children (a shrink
  // below the children's hard, or keys only children limit, must not break the layout).
  function sizes(k) {
    var g = tree.groups, v = new Array(g.length), i;
    for (i = 0; i < g.length; i++) v[i] = Math.max(g[i][2][k] || 0, 0);
    var sums = new Array(g.length).fill(0);
    for (i = g.length - 1; i >= 0; i--) { // children come after their parent (pre-order)
      v[i] = Math.max(v[i], sums[i]);
      if (g[i][1] !== null) sums[g[i][1]] += v[i];
    }
    return v;
  }

  // Level of detail: the focus, its ancestors (for the path bar), and whole levels below the
  // focus while they fit in MAX_SECTORS. A small tree is drawn whole; a 5,000-group tree is
  // drawn a few levels at a time (Plotly needs seconds for thousands of sectors), and a click
  // on a sector re-roots the map there.
  function visible(f) {
    var chain = [], shown = [], level = f === null ? roots.slice() : [f];
    for (var p = f === null ? null : tree.groups[f][1]; p !== null; p = tree.groups[p][1]) chain.unshift(p);
    while (level.length && (!shown.length || shown.length + level.length <= MAX_SECTORS)) {
      shown.push.apply(shown, level);
      var next = [];
      level.forEach(function (i) { next.push.apply(next, kids[i]); });
      level = next;
    }
    return chain.concat(shown);
  }

  function label(k, used, hard) {
    if (hard === null || hard === undefined) return labels.noKey || "";
    return fmt(used) + " / " + fmt(hard) + " " + tree.keys[k] + " (" + Math.round(100 * ratioOf(used, hard)) + "%)";
  }

  function traceFor(k) {
    var g = tree.groups, all = sizes(k), top = FLEET_TOP ? FLEET : "";
    var ids = [], parents = [], values = [], colors = [], text = [], sum = { used: 0, hard: 0, size: 0 };
    visible(focus).forEach(function (i) {
      var row = g[i], hard = row[2][k], used = row[3][k], r = ratioOf(used, hard);
      ids.push(row[0]); values.push(all[i]); colors.push(r === null ? 0 : r); text.push(label(k, used, hard));
      parents.push(row[1] === null ? top : g[row[1]][0]);
    });
    if (FLEET_TOP) {
      roots.forEach(function (i) { sum.used += g[i][3][k] || 0; sum.hard += g[i][2][k] || 0; sum.size += all[i]; });
      var whole = ratioOf(sum.used, sum.hard);
      ids.push(FLEET); parents.push(""); values.push(sum.size); colors.push(whole === null ? 0 : whole);
      text.push(label(k, sum.used, sum.hard));
    }
    return {
      type: "treemap", ids: ids, labels: ids.map(function (id) { return id === FLEET ? labels.fleet || "Fleet" : id; }),
      parents: parents, values: values, branchvalues: "total", level: focus === null ? top : g[focus][0],
      // Every tile prints its name and used / hard (%), and is framed in the page's background
      // colour with a band for its children: groups at the same level of use stay tiles, not one
      // block of a single colour.
      text: text, textinfo: "label+text", texttemplate: "<b>%{label}</b><br>%{text}",
      hovertemplate: "<b>%{label}</b><br>%{text}<extra></extra>",
      textfont: { color: "#1c2430" }, tiling: { pad: 3 },
      marker: { colors: colors, colorscale: SCALE, cmin: 0, cmax: CMAX, showscale: true,
                line: { width: 2, color: cssVar("--panel") || "#ffffff" }, pad: { t: 22, l: 4, r: 4, b: 4 },
                colorbar: { title: { text: labels.used + " / " + labels.hard }, thickness: 10, tickformat: ".0%",
                            tickvals: [0, 0.25, 0.5, 0.75, 1] } },
      pathbar: { visible: true }
    };
  }

  function layout() {
    var text = cssVar("--text") || "#1c2430";
    return { margin: { t: 28, l: 4, r: 4, b: 4 }, paper_bgcolor: "rgba(0,0,0,0)", font: { color: text } };
  }

  function drawMap(key) {
    if (!tree || !mapEl || !window.Plotly || !tree.groups.length) return;
    var k = tree.keys.indexOf(key);
    if (k < 0) return;
    currentKey = key;
    mapEl.dataset.key = key;
    mapEl.dataset.focus = focus === null ? "" : tree.groups[focus][0];
    Plotly.react(mapEl, [traceFor(k)], layout(), { responsive: true, displaylogo: false });
  }

  // The server-rendered list: same bars, for the chosen key.
  function updateList(key) {
    var k = tree.keys.indexOf(key);
    document.querySelectorAll("#quota-tree li[data-i]").forEach(function (li) {
      var row = tree.groups[+li.dataset.i], holder = li.querySelector(".qt-row-bar");
      if (!row || !holder) return;
      var hard = row[2][k], used = row[3][k], r = ratioOf(used, hard);
      if (hard === null) { holder.innerHTML = '<span class="qt-num muted">—</span>'; return; }
      var bar = document.createElement("span"), fill = document.createElement("span"), num = document.createElement("span");
      bar.className = "qt-bar";
      if (r >= 1) fill.className = "hot"; else if (r >= 0.8) fill.className = "warm";
      fill.style.width = (Math.min(Math.max(r, 0), 1) * 100).toFixed(1) + "%";
      num.className = "qt-num"; num.textContent = fmt(used) + " / " + fmt(hard);
      bar.appendChild(fill);
      holder.replaceChildren(bar, num);
    });
    var wrap = document.getElementById("quota-tree"), name = document.getElementById("quota-tree-keyname");
    if (wrap) wrap.dataset.key = key;
    if (name) name.textContent = key;
  }

  var picker = document.getElementById("quota-key");
  if (tree && picker) {
    document.querySelectorAll("[data-nojs]").forEach(function (el) { el.hidden = true; });
    picker.addEventListener("change", function () {
      drawMap(picker.value);
      updateList(picker.value);
      var url = new URL(location.href);
      url.searchParams.set("key", picker.value);
      history.replaceState(null, "", url);
    });
  }
  if (tree && tree.key) drawMap(tree.key);

  // A click re-roots the map at the sector Plotly would zoom to (a click on the current root
  // goes up one level); the link under the map opens the clicked group's page.
  var openLink = document.getElementById("quota-treemap-open");
  if (mapEl && mapEl.on) {
    mapEl.on("plotly_treemapclick", function (event) {
      var point = event && event.points && event.points[0];
      if (!point) return undefined;
      if (openLink && point.id !== FLEET) {
        openLink.href = tree.detailUrl.replace("__name__", encodeURIComponent(point.id));
        openLink.querySelector("span").textContent = point.id;
        openLink.hidden = false;
      }
      var target = event.nextLevel;
      if (target === undefined && indexOf[point.id] !== undefined && kids[indexOf[point.id]].length) target = point.id;
      if (target === undefined) return undefined; // a leaf: nothing to zoom into
      focus = target === FLEET || target === "" || indexOf[target] === undefined ? null : indexOf[target];
      drawMap(currentKey);
      return false;
    });
  }

  // ------------------------------------------------------------------ live feed

  var exhausted = new Set((tree && tree.exhausted) || []);

  function feedLine(ev) {
    var feed = document.getElementById("quota-feed");
    if (!feed) return;
    var d = ev.data || {}, li = document.createElement("li"), a = document.createElement("a");
    var spent = ev.event === "quotas.cash_exhausted";
    li.className = spent ? "error" : "";
    li.dataset.group = d.group || "";
    a.textContent = d.group || "?";
    if (tree && tree.detailUrl) a.href = tree.detailUrl.replace("__name__", encodeURIComponent(d.group || ""));
    li.append(new Date(ev.time * 1000).toLocaleTimeString() + "  " + (spent ? labels.cashExhausted : labels.cashReplenished) + ": ", a,
              "  " + ((spent ? d.newly : d.exhausted) || []).join(", "));
    if (feed.firstElementChild && feed.firstElementChild.classList.contains("muted")) feed.replaceChildren();
    feed.prepend(li);
    while (feed.children.length > 50) feed.lastElementChild.remove();
  }

  function countExhausted(ev) {
    var d = ev.data || {}, stat = document.getElementById("stat-cash-exhausted");
    if (!d.group) return;
    if ((d.exhausted || []).length) exhausted.add(d.group); else exhausted.delete(d.group);
    if (stat) { stat.textContent = exhausted.size; stat.classList.toggle("error", exhausted.size > 0); }
  }

  function groupNote(ev) {
    var note = document.getElementById("quota-live-note");
    if (!note || note.dataset.group !== (ev.data || {}).group) return;
    note.textContent = (ev.event === "quotas.cash_exhausted" ? labels.cashExhausted : labels.cashReplenished) +
      ": " + ((ev.data.exhausted || []).join(", ") || "—");
    note.hidden = false;
  }

  function onCash(data, ev) { feedLine(ev); countExhausted(ev); groupNote(ev); }
  if (window.Meridian && window.Meridian.live) {
    window.Meridian.live.on("quotas.cash_exhausted", onCash);
    window.Meridian.live.on("quotas.cash_replenished", onCash);
  }

  // ------------------------------------------------------------------ cash burn-down

  var cash = readJSON("quota-cash-data");
  var chartEl = document.getElementById("quota-cash-chart");
  if (cash && chartEl && window.Plotly) {
    var traces = [], shapes = [], annotations = [];
    cash.series.forEach(function (s) {
      traces.push({ type: "scatter", mode: "lines+markers", name: s.key + " " + labels.used, x: s.times, y: s.used });
      var last = s.times.length ? s.times[s.times.length - 1] : null;
      if (s.exhaustion && last) {
        traces.push({ type: "scatter", mode: "lines", name: s.key + " " + labels.projected, x: [last, s.exhaustion],
                      y: [s.used[s.used.length - 1], s.hard], line: { dash: "dot" } });
      }
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: s.hard, y1: s.hard,
                    line: { color: RED, width: 1.5, dash: "dash" } });
      annotations.push({ xref: "paper", x: 0, y: s.hard, yanchor: "bottom", xanchor: "left", showarrow: false,
                         text: s.key + " " + labels.hard + " " + fmt(s.hard), font: { color: RED, size: 11 } });
    });
    Plotly.newPlot(chartEl, traces, Object.assign(layout(), { shapes: shapes, annotations: annotations, margin: { t: 16, l: 56, r: 16, b: 40 },
      legend: { orientation: "h" }, yaxis: { rangemode: "tozero" } }), { responsive: true, displaylogo: false });
  }
})();
