"use strict";
// A job's page: its log lines arrive as job.log events and are appended as they come; after
// a reconnect or missed events the whole log is read again over REST (live.js's backfill).
(function () {
  var pre = document.getElementById("job-log");
  if (!pre || !window.Meridian || !Meridian.live) return;

  function atBottom() { return pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24; }

  Meridian.live.on("job.log", function (data) {
    if (String(data.id) !== pre.dataset.job) return;
    var follow = atBottom();
    pre.textContent += data.lines.join("\n") + "\n";
    if (follow) pre.scrollTop = pre.scrollHeight;
  });

  Meridian.live.onBackfill(function () {
    fetch(pre.dataset.api, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (job) { if (job) pre.textContent = job.log; });
  });
})();
