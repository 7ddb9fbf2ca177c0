"use strict";
// Scheduling pages: the placement simulator's charts. Data comes from #sched-sim-data
// ({runs: [{policy, chart: {nodes, replicas, cpu, memory}, allocation_rate, stranded}]}) and the
// labels from #sched-labels (json_script); Plotly is served locally (vendor/plotly).
(function () {
  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }
  var data = readJSON("sched-sim-data"), labels = readJSON("sched-labels") || {};
  if (!data || !window.Plotly) return;

  function layout(extra) {
    return window.Meridian.chartLayout({ margin: { t: 12, l: 52, r: 52, b: 90 }, legend: { orientation: "h", y: 1.15 } }, extra);
  }
  var config = { responsive: true, displaylogo: false };

  data.runs.forEach(function (run, i) {
    var el = document.getElementById("sched-chart-" + i);
    if (!el) return;
    var c = run.chart;
    Plotly.react(el, [
      { type: "bar", name: labels.replicas || "Replicas", x: c.nodes, y: c.replicas, marker: { color: "#2458d3" } },
      { type: "scatter", mode: "markers", name: labels.cpu || "CPU", x: c.nodes, y: c.cpu, yaxis: "y2", marker: { color: "#b7791f" } },
      { type: "scatter", mode: "markers", name: labels.memory || "Memory", x: c.nodes, y: c.memory, yaxis: "y2", marker: { color: "#1b8a4b" } }
    ], layout({ yaxis2: { overlaying: "y", side: "right", range: [0, 1], tickformat: ".0%" } }), config);
  });

  var compare = document.getElementById("sched-compare");
  if (compare && data.runs.length > 1) {
    var resources = Object.keys(data.runs[0].allocation_rate);
    var traces = [];
    data.runs.forEach(function (run) {
      traces.push({ type: "bar", name: run.policy + " · " + (labels.allocation || "allocation"),
                    x: resources, y: resources.map(function (r) { return run.allocation_rate[r]; }) });
      traces.push({ type: "bar", name: run.policy + " · " + (labels.stranded || "stranded"),
                    x: resources, y: resources.map(function (r) { return run.stranded[r]; }) });
    });
    Plotly.react(compare, traces, layout({ barmode: "group", yaxis: { tickformat: ".0%", rangemode: "tozero" } }), config);
  }
})();
