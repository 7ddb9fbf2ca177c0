"use strict";
// The console's live connection: one websocket to /ws/, subscribing to the topics the page
// names in <body data-topics="...">. Events are re-dispatched as "meridian:event" DOM events.
// Reconnects with capped exponential backoff; the indicator shows live or stale, and a gap
// in a topic's sequence numbers fires "meridian:gap" so a page can backfill over REST.
(function () {
  var indicator = document.getElementById("live-indicator");
  var topics = (document.body.dataset.topics || "").split(/\s+/).filter(Boolean);
  var lastSeq = {};
  var delay = 1000, socket = null;

  function setLive(live) {
    if (!indicator) return;
    indicator.classList.toggle("connected", live);
    indicator.classList.toggle("stale", !live);
    indicator.textContent = live ? indicator.dataset.liveLabel : indicator.dataset.staleLabel;
    document.body.dataset.live = live ? "1" : "0";
  }

  function emit(name, detail) { document.dispatchEvent(new CustomEvent(name, { detail: detail })); }

  function onMessage(message) {
    var msg;
    try { msg = JSON.parse(message.data); } catch (e) { return; }
    if (msg.type === "hello") { setLive(true); delay = 1000; topics.forEach(subscribe); }
    else if (msg.type === "subscribed") {
      if (lastSeq[msg.topic] !== undefined && msg.seq > lastSeq[msg.topic]) emit("meridian:gap", { topic: msg.topic, from: lastSeq[msg.topic], to: msg.seq });
      lastSeq[msg.topic] = msg.seq;
    } else if (msg.type === "event") {
      var previous = lastSeq[msg.topic];
      if (previous !== undefined && msg.seq > previous + 1) emit("meridian:gap", { topic: msg.topic, from: previous, to: msg.seq });
      lastSeq[msg.topic] = msg.seq;
      emit("meridian:event", msg);
    } else if (msg.type === "error") { emit("meridian:error", msg); }
  }

  function subscribe(topic) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "subscribe", topic: topic }));
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/");
    socket.onmessage = onMessage;
    socket.onclose = function () {
      setLive(false);
      setTimeout(connect, delay + Math.random() * 500);
      delay = Math.min(delay * 2, 30000);
    };
  }

  window.meridianLive = { subscribe: function (topic) { if (topics.indexOf(topic) < 0) topics.push(topic); subscribe(topic); } };
  setLive(false);
  connect();
})();
