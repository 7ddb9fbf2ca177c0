"use strict";
// Light/dark theme: the saved choice, else the system preference. Loaded in <head> to avoid a flash.
// A switch recolours every Plotly chart on the page and sends "meridian:theme" for pages that
// draw more in theme colours.
// Also the language picker: it switches on a pick with the mouse, or on Enter / leaving the
// field after choosing with the keyboard — never while arrowing through the languages.
// (Pages carry no inline handlers: the Content-Security-Policy allows scripts from files only.)
(function () {
  var saved = null;
  try { saved = localStorage.getItem("meridian-theme"); } catch (e) { /* storage disabled */ }
  var prefersDark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = saved || (prefersDark ? "dark" : "light");
  function languagePicker() {
    var select = document.getElementById("language");
    if (!select) return;
    var initial = select.value, byKeyboard = false;
    function submitIfChanged() { if (select.value !== initial) select.form.submit(); }
    select.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); submitIfChanged(); }
      else byKeyboard = true;
    });
    select.addEventListener("change", function () { if (!byKeyboard) submitIfChanged(); });
    select.addEventListener("blur", function () { if (byKeyboard) submitIfChanged(); byKeyboard = false; });
    select.addEventListener("mousedown", function () { byKeyboard = false; });
  }

  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

  // Charts are drawn in the theme's colours; every page's charts share this Plotly layout
  // (transparent, text and grid in those colours). `own` is a page's margins and legend, `extra`
  // one chart's additions (both shallow, as Object.assign).
  window.Meridian = window.Meridian || {};
  window.Meridian.cssVar = cssVar;
  window.Meridian.chartLayout = function (own, extra) {
    var text = cssVar("--text") || "#1c2430", grid = cssVar("--border") || "#d9dee7";
    return Object.assign({
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", font: { color: text },
      xaxis: { automargin: true, gridcolor: grid }, yaxis: { automargin: true, gridcolor: grid, rangemode: "tozero" }
    }, own, extra || {});
  };

  // Every Plotly chart on the page takes the new theme's text and grid colours at once.
  function recolourPlots() {
    if (!window.Plotly) return;
    var text = cssVar("--text"), grid = cssVar("--border");
    document.querySelectorAll(".js-plotly-plot").forEach(function (el) {
      var update = { "font.color": text };
      var full = el._fullLayout || {};
      Object.keys(full).forEach(function (key) { if (/^[xy]axis\d*$/.test(key)) update[key + ".gridcolor"] = grid; });
      Plotly.relayout(el, update);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    languagePicker();
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    button.addEventListener("click", function () {
      var next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
      document.documentElement.dataset.theme = next;
      try { localStorage.setItem("meridian-theme", next); } catch (e) { /* storage disabled */ }
      recolourPlots();
      // Charts read the theme's colours when drawn: pages that draw more than text and grid
      // (marks, bars in theme colours) draw again on this event.
      document.dispatchEvent(new CustomEvent("meridian:theme", { detail: { theme: next } }));
    });
  });
})();
