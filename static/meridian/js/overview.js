"use strict";
// Overview: live worker/job counters and the feed of what happens (through live.js). The feed
// shows sentences people read (the server's translated labels per event type, each naming and
// linking what it is about); heartbeats and per-node progress have no label and stay out.
(function () {
  var live = window.Meridian && window.Meridian.live;
  if (!live) return;
  var labelsEl = document.getElementById("overview-feed-labels");
  var labels = labelsEl ? JSON.parse(labelsEl.textContent) : {};
  function setText(id, text) { var el = document.getElementById(id); if (el) el.textContent = text; }
  var n = window.Meridian.number;

  live.on("system.status", function (d) {  // a heartbeat, not something that happened: not in the feed
    setText("stat-workers", n(d.workers));
    setText("stat-jobs-running", n(d.jobs_running));
  });
  live.on("fleet.summary", function (d) {
    setText("stat-clusters", n(d.ready_clusters) + "/" + n(d.clusters));
    setText("stat-nodes", n(d.ready_nodes) + "/" + n(d.nodes));
    setText("stat-cores", n(d.cores));
    setText("stat-cpu-level", d.cpu_level + "%");
  });

  // The label a cordon event reads as: cordoned, draining or uncordoned.
  function labelKey(ev, d) {
    if (ev.event !== "cluster.cordoned") return ev.event;
    return d.uncordoned ? "cluster.uncordoned" : d.drain ? "cluster.drained" : "cluster.cordoned";
  }

  // Where the event's subject lives, or null when it is gone.
  function link(ev, d) {
    if (ev.event === "cluster.deleted" || ev.event === "object.deleted") return null;
    if (d.cluster) return "/fleet/clusters/" + encodeURIComponent(d.cluster) + "/";
    if (d.group) return "/quotas/groups/" + encodeURIComponent(d.group) + "/";
    if (d.id && ev.event.indexOf("object.") === 0) return "/federation/objects/" + encodeURIComponent(d.id) + "/";
    return null;
  }

  function sentence(template, d) {
    return template.replace(/%\((\w+)\)s/g, function (_, field) {
      var value = d[field];
      return Array.isArray(value) ? value.join(", ") : value === undefined || value === null ? "" : String(value);
    });
  }

  live.on("*", function (d, ev) {
    var feed = document.getElementById("event-feed");
    var key = labelKey(ev, d || {});
    if (!feed || !labels[key]) return;
    var li = document.createElement("li");
    li.dataset.event = ev.event;
    var time = document.createElement("time");
    time.textContent = new Date(ev.time * 1000).toLocaleTimeString();
    li.append(time, " ");
    var href = link(ev, d || {}), text = sentence(labels[key], d || {});
    if (href) {
      var a = document.createElement("a");
      a.href = href;
      a.textContent = text;
      li.append(a);
    } else {
      li.append(text);
    }
    if (feed.firstElementChild && feed.firstElementChild.classList.contains("muted")) feed.replaceChildren();
    feed.prepend(li);
    while (feed.children.length > 50) feed.lastElementChild.remove();
  });
})();
