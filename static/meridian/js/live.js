"use strict";
// The console's one live module (window.Meridian.live): every page's live parts go through it.
//
// Connection: one websocket to /ws/, subscribing to the topics in <body data-topics>, the
// data-live-topic attributes on the page, and whatever a page script adds with subscribe().
// It reconnects with capped exponential backoff (plus jitter) for as long as the page is
// open, drives the live/stale indicator, and answers the server's pings.
//
// Fragment contract: an element with an id and data-live-fragment="<name>" is re-rendered
// by the server. When an event arrives whose type is in its data-refresh-on (space-separated;
// absent = any event of the page's topics), or when events were missed, the page is fetched
// again — as "?fragment=<name>" when a name is given (the view may render just that part) —
// and every marked element is swapped for the fresh one with the same id. At most one fetch
// is in flight and one starts per second, so a busy fleet never becomes a request storm.
//
// Backfill: every event carries its topic's sequence number. A jump in the numbers, a
// reconnect, or a topic whose counter restarted (Redis restarted: the number went down)
// means events were missed: fragments are refreshed and the page's backfill handlers run
// (onBackfill), which re-read over REST what they show.
//
// Page scripts listen with on(eventType, fn) (fn(data, message)); after fragments were swapped,
// the "meridian:refreshed" DOM event lets a page redraw what lives in them.
(function () {
  var MIN_FETCH_MS = 1000, MAX_DELAY_MS = 30000, PING_MS = 25000;
  var indicator = document.getElementById("live-indicator");
  var topics = (document.body.dataset.topics || "").split(/\s+/).filter(Boolean);
  var lastSeq = {}, handlers = {}, backfills = [];
  var delay = 1000, socket = null, pingTimer = null, everConnected = false;
  var fetching = false, fetchAgain = false, lastFetch = 0;

  document.querySelectorAll("[data-live-topic]").forEach(function (el) {
    if (topics.indexOf(el.dataset.liveTopic) < 0) topics.push(el.dataset.liveTopic);
  });

  function setLive(live) {
    if (indicator) {
      indicator.classList.toggle("connected", live);
      indicator.classList.toggle("stale", !live);
      indicator.textContent = live ? indicator.dataset.liveLabel : indicator.dataset.staleLabel;
    }
    document.body.dataset.live = live ? "1" : "0";
  }

  function emit(name, detail) { document.dispatchEvent(new CustomEvent(name, { detail: detail })); }

  // ------------------------------------------------------------------ fragments

  function fragments() { return document.querySelectorAll("[data-live-fragment][id]"); }

  function wants(el, eventType) {
    var on = (el.dataset.refreshOn || "").split(/\s+/).filter(Boolean);
    return !on.length || on.indexOf(eventType) >= 0;
  }

  function fragmentURL() {
    var names = [];
    fragments().forEach(function (el) { if (el.dataset.liveFragment && names.indexOf(el.dataset.liveFragment) < 0) names.push(el.dataset.liveFragment); });
    if (names.length !== 1) return location.href;  // several or unnamed parts: the whole page
    var params = new URLSearchParams(location.search);
    params.set("fragment", names[0]);
    return location.pathname + "?" + params.toString();
  }

  function refreshFragments() {
    if (!fragments().length) return;
    if (fetching) { fetchAgain = true; return; }
    var wait = lastFetch + MIN_FETCH_MS - Date.now();
    fetching = true;
    if (wait > 0) { setTimeout(function () { fetching = false; refreshFragments(); }, wait); return; }
    lastFetch = Date.now();
    fetch(fragmentURL(), { credentials: "same-origin", headers: { "X-Requested-With": "meridian-live" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        fragments().forEach(function (el) {
          var replacement = fresh.getElementById(el.id);
          if (replacement) el.replaceWith(replacement);
        });
        emit("meridian:refreshed", {});
      })
      .catch(function () { /* stale until the next event or reconnect; the indicator tells */ })
      .finally(function () { fetching = false; if (fetchAgain) { fetchAgain = false; refreshFragments(); } });
  }

  // ------------------------------------------------------------------ events and gaps

  function backfill(topic, reason) {
    refreshFragments();
    backfills.forEach(function (fn) { try { fn(topic, reason); } catch (e) { /* one handler must not stop the others */ } });
  }

  function onEvent(msg) {
    var previous = lastSeq[msg.topic];
    lastSeq[msg.topic] = msg.seq;
    if (previous !== undefined && msg.seq !== previous + 1) backfill(msg.topic, "gap");
    (handlers[msg.event] || []).concat(handlers["*"] || []).forEach(function (fn) {
      try { fn(msg.data || {}, msg); } catch (e) { /* keep the socket's loop alive */ }
    });
    var stale = false;
    fragments().forEach(function (el) { if (wants(el, msg.event)) stale = true; });
    if (stale) refreshFragments();
  }

  function onSubscribed(msg) {
    var known = lastSeq[msg.topic];
    lastSeq[msg.topic] = msg.seq;
    // After a reconnect: anything published meanwhile, or a counter that restarted, was missed.
    if (known !== undefined && msg.seq !== known) backfill(msg.topic, msg.seq < known ? "restarted" : "gap");
  }

  function onMessage(message) {
    var msg;
    try { msg = JSON.parse(message.data); } catch (e) { return; }
    if (msg.type === "hello") {
      setLive(true);
      delay = 1000;
      if (everConnected) backfills.forEach(function (fn) { try { fn(null, "reconnect"); } catch (e) { /* ignore */ } });
      everConnected = true;
      topics.forEach(send_subscribe);
    } else if (msg.type === "subscribed") onSubscribed(msg);
    else if (msg.type === "event") onEvent(msg);
    else if (msg.type === "batch") (msg.events || []).forEach(onEvent);  // events that came close together
  }

  function send_subscribe(topic) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "subscribe", topic: topic }));
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/");
    socket.onmessage = onMessage;
    socket.onopen = function () {
      clearInterval(pingTimer);
      pingTimer = setInterval(function () {
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "ping" }));
      }, PING_MS);
    };
    socket.onclose = function () {
      clearInterval(pingTimer);
      setLive(false);
      setTimeout(connect, delay + Math.random() * 500);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    };
  }

  var api = {
    subscribe: function (topic) { if (topics.indexOf(topic) < 0) topics.push(topic); send_subscribe(topic); },
    on: function (eventType, fn) { (handlers[eventType] = handlers[eventType] || []).push(fn); },
    onBackfill: function (fn) { backfills.push(fn); },
    refresh: refreshFragments,
    isLive: function () { return document.body.dataset.live === "1"; }
  };
  window.Meridian = window.Meridian || {};
  window.Meridian.live = api;
  // Numbers as the server writes them ({{ n|floatformat:"0g" }}): grouped in the page's language
  // (198,512), at most `digits` decimals. The one formatter of live figures.
  var formats = {};
  window.Meridian.number = function (value, digits) {
    var key = digits || 0;
    formats[key] = formats[key] || new Intl.NumberFormat(document.documentElement.lang || undefined, { maximumFractionDigits: key });
    return formats[key].format(value || 0);
  };
  setLive(false);
  connect();
})();
