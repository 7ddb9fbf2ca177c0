"use strict";
// Overview: live worker/job counters and the event feed.
document.addEventListener("meridian:event", function (e) {
  var ev = e.detail, feed = document.getElementById("event-feed");
  if (ev.event === "system.status") {
    document.getElementById("stat-workers").textContent = ev.data.workers.length;
    document.getElementById("stat-jobs-running").textContent = ev.data.jobs_running;
  }
  if (ev.event === "fleet.summary") {
    var d = ev.data;
    document.getElementById("stat-clusters").textContent = d.ready_clusters + "/" + d.clusters;
    document.getElementById("stat-nodes").textContent = d.ready_nodes + "/" + d.nodes;
    document.getElementById("stat-cores").textContent = d.cores;
    document.getElementById("stat-cpu-level").textContent = d.cpu_level + "%";
  }
  var li = document.createElement("li");
  li.textContent = new Date(ev.time * 1000).toLocaleTimeString() + "  " + ev.topic + " #" + ev.seq + "  " + ev.event;
  if (feed.firstElementChild && feed.firstElementChild.classList.contains("muted")) feed.innerHTML = "";
  feed.prepend(li);
  while (feed.children.length > 50) feed.lastElementChild.remove();
});
