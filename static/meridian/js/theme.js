"use strict";
// Light/dark theme: the saved choice, else the system preference. Loaded in <head> to avoid a flash.
(function () {
  var saved = null;
  try { saved = localStorage.getItem("meridian-theme"); } catch (e) { /* storage disabled */ }
  var prefersDark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = saved || (prefersDark ? "dark" : "light");
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    button.addEventListener("click", function () {
      var next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
      document.documentElement.dataset.theme = next;
      try { localStorage.setItem("meridian-theme", next); } catch (e) { /* storage disabled */ }
    });
  });
})();
