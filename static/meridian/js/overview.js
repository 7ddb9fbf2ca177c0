"use strict";
// Overview: live worker/job counters and the feed of what happens (through live.js).
(function () {
  var live = window.Meridian && window.Meridian.live;
  if (!live) return;
  function setText(id, text) { var el = document.getElementById(id); if (el) el.textContent = text; }

  live.on("system.status", function (d) {  // a heartbeat, not something that happened: not in the feed
    setText("stat-workers", d.workers);
    setText("stat-jobs-running", d.jobs_running);
  });
  live.on("fleet.summary", function (d) {
    setText("stat-clusters", d.ready_clusters + "/" + d.clusters);
    setText("stat-nodes", d.ready_nodes + "/" + d.nodes);
    setText("stat-cores", d.cores);
    setText("stat-cpu-level", d.cpu_level + "%");
  });
  live.on("*", function (d, ev) {
    var feed = document.getElementById("event-feed");
    if (!feed || ev.event === "system.status" || ev.event === "fleet.summary") return;
    var li = document.createElement("li");
    li.textContent = new Date(ev.time * 1000).toLocaleTimeString() + "  " + ev.topic + " #" + ev.seq + "  " + ev.event;
    if (feed.firstElementChild && feed.firstElementChild.classList.contains("muted")) feed.replaceChildren();
    feed.prepend(li);
    while (feed.children.length > 50) feed.lastElementChild.remove();
  });
})();
