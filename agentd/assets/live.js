// live.js: the dashboard's live pages (ours, no dependencies; served from /assets/ under a
// hashed name, so the pages' Content-Security-Policy `script-src 'self'` holds: no inline
// script, no eval).
//
// A page that names its event stream (`<main data-events="/events?...">`) follows it with an
// EventSource, which reconnects by itself and sends `Last-Event-ID`, so nothing is missed. When
// an event says something changed, the page's own URL is fetched again (at most one fetch at a
// time, ~200 ms after the first event of a burst) and each region marked `data-live="<id>"` is
// replaced by the fresh one of the same id, unless it is the same as before: the scroll stays,
// and a region holding a form being edited (focused, changed, or showing errors) is left alone. `<time data-since>` shows the time
// elapsed and `<time data-until>` the time left, each second. A step starting (`step.started`,
// told live only) shows at once in `[data-running]`, a model call being retried
// (`task.retrying`) in `[data-retry]`. Where the stream cannot be opened (over the per-user
// limit of streams, say), the page refreshes itself every 10 s and tries again. It also stores
// the browser's time zone in the `tz` cookie, which the server writes times in. Without
// JavaScript, pages are the same (times in UTC, labelled), and reloading shows what changed.
(function () {
  "use strict";

  var DEBOUNCE_MS = 200;
  var RETRY_MS = 10000;
  // Events after which the page may show something else; the other two are shown directly.
  var CHANGES = [
    "task.added", "task.requeued", "task.started", "step.finished", "approval.requested",
    "approval.approved", "approval.denied", "task.completed", "task.failed", "task.cancelled",
    "agent.status", "activity", "resync", "message"
  ];
  var ENDS = ["task.completed", "task.failed", "task.cancelled"];

  var source = null;
  var sourceUrl = null;
  var retryTimer = null;
  var debounceTimer = null;
  var inFlight = false;
  var again = false;
  var held = false;
  // The URL and ETag of the page the live regions show, as last swapped in: a refresh sends the
  // tag, and an unchanged page is answered 304 without a body.
  var tagged = { url: null, etag: null };
  // The server's clock minus the browser's, in ms (times on the page are the server's).
  var skew = 0;
  var skewFrom = null;
  // Each region's HTML as the server last sent it, by its id.
  var served = {};
  // The step running now, as told by `step.started`: {task, seq, kind, tool, at}.
  var live = null;
  // The model call being retried, as told by `task.retrying`: {task, attempt, status, ...}.
  var retry = null;

  function each(selector, action, root) {
    Array.prototype.forEach.call((root || document).querySelectorAll(selector), action);
  }

  function main() {
    return document.querySelector("main");
  }

  function readSkew(doc) {
    var element = doc.querySelector("main[data-now]");
    var at = element ? Date.parse(element.getAttribute("data-now")) : NaN;
    if (!isNaN(at)) {
      skew = at - Date.now();
    }
  }

  var streamState = "none";

  // The stream's state on <main data-stream> (for people reading the page, and the tests).
  function mark(state) {
    streamState = state;
    var element = main();
    if (element) {
      element.setAttribute("data-stream", state);
    }
  }

  // Follows the stream the current page names, if it is not followed already.
  function connect() {
    // A page just loaded or swapped in by htmx: its time is the server's now, its regions
    // as the server made them.
    if (main() !== skewFrom) {
      skewFrom = main();
      readSkew(document);
      // Another page (or the same one loaded again): its regions are not the tagged ones.
      tagged = { url: null, etag: null };
      served = {};
      each("[data-live]", function (region) {
        served[region.getAttribute("data-live")] = region.outerHTML;
      });
    }
    var element = document.querySelector("main[data-events]");
    var url = element ? element.getAttribute("data-events") : null;
    if (url === sourceUrl && (source || retryTimer)) {
      // The same stream; a page htmx swapped in learns its state.
      if (element && element.getAttribute("data-stream") !== streamState) {
        element.setAttribute("data-stream", streamState);
      }
      return;
    }
    if (url !== sourceUrl) {
      live = null;
      retry = null;
    }
    disconnect();
    sourceUrl = url;
    if (!url) {
      return;
    }
    if (!window.EventSource) {
      mark("closed");
      retryLater();
      return;
    }
    var stream = new EventSource(url);
    source = stream;
    mark("connecting");
    stream.addEventListener("open", function () {
      mark("open");
      // What happened between the page being made and the stream opening.
      schedule();
    });
    stream.addEventListener("error", function () {
      if (source !== stream) {
        return;
      }
      if (stream.readyState === EventSource.CLOSED) {
        source = null;
        mark("closed");
        retryLater();
      } else {
        mark("connecting");
      }
    });
    CHANGES.forEach(function (type) {
      stream.addEventListener(type, changed);
    });
    stream.addEventListener("step.started", started);
    stream.addEventListener("task.retrying", retrying);
  }

  function disconnect() {
    if (source) {
      source.close();
      source = null;
    }
    clearTimeout(retryTimer);
    retryTimer = null;
  }

  // The stream was refused or ended for good: refresh now and then, and try it again.
  function retryLater() {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(function () {
      retryTimer = null;
      schedule();
      sourceUrl = null;
      connect();
    }, RETRY_MS);
  }

  function data(event) {
    try {
      return JSON.parse(event.data);
    } catch (_) {
      return {};
    }
  }

  function changed(event) {
    var told = data(event);
    if (event.type === "resync") {
      live = null;
      retry = null;
    } else if (event.type === "step.finished" && told.step) {
      if (live && live.task === told.task_id && told.step.seq >= live.seq) {
        live = null;
      }
      if (retry && retry.task === told.task_id) {
        retry = null;
      }
    } else if (ENDS.indexOf(event.type) >= 0) {
      if (live && live.task === told.task_id) {
        live = null;
      }
      if (retry && retry.task === told.task_id) {
        retry = null;
      }
    }
    paint();
    schedule();
  }

  function started(event) {
    var told = data(event);
    if (!told.started) {
      return;
    }
    live = {
      task: told.task_id,
      seq: told.started.seq,
      kind: told.started.kind,
      tool: told.started.tool,
      at: told.at
    };
    if (retry && retry.task === told.task_id) {
      retry = null;
    }
    paint();
  }

  function retrying(event) {
    var told = data(event);
    if (!told.retry) {
      return;
    }
    retry = {
      task: told.task_id,
      attempt: told.retry.attempt,
      status: told.retry.status,
      reason: told.retry.reason || "",
      next: told.retry.next_attempt_at
    };
    paint();
  }

  function schedule() {
    if (debounceTimer === null) {
      debounceTimer = setTimeout(function () {
        debounceTimer = null;
        refresh();
      }, DEBOUNCE_MS);
    }
  }

  function here() {
    return location.pathname + location.search;
  }

  // Fetches this page again and swaps its live regions; signed out, goes where it was sent.
  function refresh() {
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    var url = here();
    var headers = { Accept: "text/html" };
    var etag = null;
    // The page as last swapped in: unchanged, the server answers 304 without it.
    if (tagged.url === url && tagged.etag) {
      headers["If-None-Match"] = tagged.etag;
    }
    fetch(url, { credentials: "same-origin", headers: headers })
      .then(function (response) {
        var landed = new URL(response.url, location.href);
        if (response.redirected && landed.pathname !== location.pathname) {
          location.assign(response.url);
          return null;
        }
        if (response.status === 304 || !response.ok) {
          return null;
        }
        etag = response.headers.get("ETag");
        return response.text();
      })
      .then(function (html) {
        if (html !== null && url === here()) {
          swap(html);
          // Tagged only as shown: a region held back (a form in it in use) is not.
          tagged = { url: url, etag: held ? null : etag };
        }
      })
      .catch(function () {
        // Offline for a moment: the next event (or reconnection) refreshes again.
      })
      .then(function () {
        inFlight = false;
        if (again) {
          again = false;
          schedule();
        }
      });
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    readSkew(fresh);
    var x = window.scrollX;
    var y = window.scrollY;
    held = false;
    each("[data-live]", function (region) {
      var id = region.getAttribute("data-live");
      var next = null;
      each("[data-live]", function (candidate) {
        if (!next && candidate.getAttribute("data-live") === id) {
          next = candidate;
        }
      }, fresh);
      if (!next) {
        return;
      }
      // Unchanged: left as it is (no flicker, a selection or a click in it is not lost).
      var html = next.outerHTML;
      if (served[id] === html) {
        return;
      }
      if (editing(region)) {
        held = true;
        return;
      }
      served[id] = html;
      var node = document.importNode(next, true);
      region.replaceWith(node);
      if (window.htmx) {
        window.htmx.process(node);
      }
    });
    window.scrollTo(x, y);
    paint();
  }

  // A region with a form the person is using: focused in it, changed, or showing errors.
  function editing(region) {
    var active = document.activeElement;
    if (active && region.contains(active) && changeable(active)) {
      return true;
    }
    if (region.querySelector(".field-error, [role=alert]")) {
      return true;
    }
    var changedField = false;
    each("input, textarea, select", function (field) {
      changedField = changedField || (changeable(field) && changedFrom(field));
    }, region);
    return changedField;
  }

  function changeable(field) {
    var tag = field.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") {
      return true;
    }
    return tag === "INPUT" && ["hidden", "submit", "button", "reset", "image"].indexOf(field.type) < 0;
  }

  function changedFrom(field) {
    if (field.tagName === "SELECT") {
      return Array.prototype.some.call(field.options, function (option) {
        return option.selected !== option.defaultSelected;
      });
    }
    if (field.type === "checkbox" || field.type === "radio") {
      return field.checked !== field.defaultChecked;
    }
    return field.value !== field.defaultValue;
  }

  // Shows what the stream told directly: the step running now, a retry.
  function paint() {
    each("[data-running]", paintRunning);
    each("[data-retry]", paintRetry);
    tick();
  }

  function running(element) {
    var state = element.getAttribute("data-state");
    return state === "queued" || state === "in_progress";
  }

  function paintRunning(element) {
    if (!live || element.getAttribute("data-task") !== live.task || !running(element)) {
      return;
    }
    if (Number(element.getAttribute("data-seq") || 0) > live.seq) {
      live = null;
      return;
    }
    var what = live.kind === "tool" ? "tool " + (live.tool || "") : live.kind === "summary" ? "summary" : "model call";
    element.setAttribute("data-seq", String(live.seq));
    element.querySelector("[data-step]").textContent = String(live.seq);
    element.querySelector("[data-what]").textContent = what;
    var time = element.querySelector("time");
    time.setAttribute("datetime", live.at);
    time.setAttribute("data-since", live.at);
    element.hidden = false;
  }

  function paintRetry(element) {
    if (!retry || element.getAttribute("data-task") !== retry.task || !running(element)) {
      element.hidden = true;
      return;
    }
    var next = new Date(retry.next);
    var words = "Attempt " + retry.attempt + " of the model call failed" +
      (retry.status ? " (HTTP " + retry.status + ")" : "") + ": " +
      retry.reason.replace(/[.\s]+$/, "") + ". Next attempt at " + next.toLocaleTimeString() + ", ";
    var time = document.createElement("time");
    time.setAttribute("datetime", retry.next);
    time.setAttribute("data-until", retry.next);
    element.textContent = words;
    element.appendChild(time);
    element.appendChild(document.createTextNode("."));
    element.hidden = false;
  }

  // "12 s", "1 min 3 s", "2 h 5 min".
  function span(ms) {
    var seconds = Math.max(0, Math.floor(ms / 1000));
    if (seconds < 60) {
      return seconds + " s";
    }
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) {
      return minutes + " min " + (seconds % 60) + " s";
    }
    return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min";
  }

  function tick() {
    var now = Date.now() + skew;
    each("time[data-since]", function (time) {
      var at = Date.parse(time.getAttribute("data-since"));
      if (!isNaN(at)) {
        time.textContent = span(now - at);
      }
    });
    each("time[data-until]", function (time) {
      var at = Date.parse(time.getAttribute("data-until"));
      if (!isNaN(at)) {
        time.textContent = at > now ? "in " + span(at - now + 999) : "now";
      }
    });
  }

  // The browser's IANA time zone in the `tz` cookie, for the server to write times in
  // (`ui/zone.rs` checks the name against its zone database). The page that sets it first is
  // in UTC, labelled so; every page after is in the viewer's zone.
  function rememberZone() {
    var zone = "";
    try {
      zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (ignored) {
      return;
    }
    if (!/^[A-Za-z0-9_+\-\/]{1,64}$/.test(zone)) {
      return;
    }
    if (document.cookie.split("; ").indexOf("tz=" + zone) !== -1) {
      return;
    }
    document.cookie = "tz=" + zone + "; path=/; max-age=31536000; SameSite=Lax" +
      (location.protocol === "https:" ? "; Secure" : "");
  }

  function start() {
    rememberZone();
    connect();
    paint();
    setInterval(function () {
      // A navigation htmx made (hx-boost) may name another stream.
      connect();
      tick();
    }, 1000);
    document.addEventListener("htmx:afterSettle", function () {
      connect();
      paint();
    });
    // A region left alone while a form in it was used is refreshed once the person moves on.
    document.addEventListener("focusout", function () {
      if (held) {
        schedule();
      }
    });
    // Leaving the page gives its stream back at once (streams per user are limited).
    window.addEventListener("pagehide", function () {
      disconnect();
      sourceUrl = null;
    });
    window.addEventListener("pageshow", function (event) {
      if (event.persisted) {
        connect();
        schedule();
      }
    });
  }

  start();
})();
