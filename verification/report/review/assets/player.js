// replan review: the view switch and the trace player. Plain JavaScript, no library,
// no network. Everything it shows comes from the JSON records the page embeds
// (#review-data): the recordings played on the generated controller, and which SVG
// elements stand for each declared transition in each view.
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.remove("no-js");
  root.classList.add("js");
  var data = JSON.parse(document.getElementById("review-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";

  function byId(id) { return document.getElementById(id); }
  function text(id, value) { var e = byId(id); if (e) { e.textContent = value; } }

  // ---- the views: one at a time with JavaScript, all of them without ------------------
  var tabs = Array.prototype.slice.call(document.querySelectorAll("[data-show-view]"));
  function showView(name) {
    document.querySelectorAll("figure.view").forEach(function (figure) {
      figure.hidden = figure.getAttribute("data-view") !== name;
    });
    tabs.forEach(function (tab) {
      tab.setAttribute("aria-selected", String(tab.getAttribute("data-show-view") === name));
    });
    root.setAttribute("data-view", name);
    highlight();  // bands are measured in the visible view
  }
  tabs.forEach(function (tab) {
    tab.addEventListener("click", function () { showView(tab.getAttribute("data-show-view")); });
  });

  // ---- the player ---------------------------------------------------------------------
  var select = byId("player-trace");
  var traceIndex = 0;
  var position = 0;  // 0: the run before its first call; k: after step k
  var timer = null;

  function trace() { return data.traces[traceIndex]; }
  function step() { return position > 0 ? trace().steps[position - 1] : null; }

  function clearHighlight() {
    document.querySelectorAll(".fired, .current").forEach(function (e) {
      e.classList.remove("fired", "current");
    });
    document.querySelectorAll("rect.fired-band").forEach(function (band) { band.remove(); });
  }

  function band(group) {
    // A row of a state's table is text only: put a band behind it, where it is drawn.
    if (group.getAttribute("class") === "edge" || !group.getBBox) { return; }
    var box = group.getBBox();
    if (!box.width) { return; }  // in a hidden view: drawn when that view is shown
    var rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("class", "fired-band");
    rect.setAttribute("x", box.x - 3);
    rect.setAttribute("y", box.y - 1);
    rect.setAttribute("width", box.width + 6);
    rect.setAttribute("height", box.height + 2);
    group.insertBefore(rect, group.firstChild);
  }

  function highlight() {
    clearHighlight();
    if (!trace()) { return; }  // no recording to play: nothing to highlight
    var current = step();
    var state = current ? current.state_after : trace().initial.state;
    (data.states[state] || []).forEach(function (id) {
      var node = byId(id);
      if (node) { node.classList.add("current"); }
    });
    if (current && current.transition) {
      var where = data.elements[current.transition] || {};
      Object.keys(where).forEach(function (view) {
        where[view].forEach(function (id) {
          var element = byId(id);
          if (element) { element.classList.add("fired"); band(element); }
        });
      });
    }
    document.querySelectorAll("tr.step").forEach(function (row) {
      var mine = row.getAttribute("data-trace") === String(traceIndex) &&
        row.getAttribute("data-step") === String(position);
      row.classList.toggle("current", mine);
      if (mine) { row.setAttribute("aria-current", "step"); } else { row.removeAttribute("aria-current"); }
    });
  }

  function plan(pending) {
    if (!pending) { return "none"; }
    return pending.id + ": " + pending.step + " on " + pending.resource + ", revision " +
      pending.revision + ", cites " + pending.evidence_revision;
  }

  function counters(values, limits) {
    return "steps " + values.steps + " of " + limits.max_steps +
      " · proposals " + values.proposals + " of " + limits.max_proposals +
      " · no progress " + values.no_progress + " of " + limits.no_progress_limit +
      " · plan rev. " + values.plan_revision;
  }

  function evidence(values) {
    var keys = Object.keys(values);
    if (!keys.length) { return "nothing observed"; }
    return keys.map(function (key) {
      return key + " " + values[key].state + " (v" + values[key].version + ")";
    }).join(" · ");
  }

  function show() {
    var t = trace();
    var current = step();
    var limits = t.policy.limits;
    text("player-position", "step " + position + " of " + t.steps.length);
    byId("player-prev").disabled = position === 0;
    byId("player-next").disabled = position === t.steps.length;
    if (!current) {
      var run = t.initial;
      text("player-call", "(before the first call)");
      text("player-answer", "—");
      text("player-transition", "—");
      text("player-state", run.state);
      text("player-evidence-revision", String(run.evidence_revision));
      text("player-pending", plan(run.pending));
      text("player-counters", counters(run.counters, limits));
      text("player-stop-reason", run.stop_reason || "none (active)");
      text("player-evidence", evidence(run.evidence));
      text("player-note", t.title + " (" + t.source + ")");
    } else {
      text("player-call", current.call);
      text("player-answer", current.answer);
      text("player-transition", current.transition || "none: " + current.note);
      text("player-state", current.state_before === current.state_after ?
        current.state_after + " (stays)" : current.state_before + " → " + current.state_after);
      text("player-evidence-revision", String(current.evidence_revision));
      text("player-pending", plan(current.pending));
      text("player-counters", counters(current.counters, limits));
      text("player-stop-reason", current.stop_reason || "none (active)");
      text("player-evidence", evidence(current.evidence));
      text("player-note", (current.differs ? "differs from the recording: " + current.differs +
        (current.note ? "; " : "") : "") + (current.note || ""));
    }
    byId("player-note").classList.toggle("differs", Boolean(current && current.differs));
    highlight();
  }

  function inView() {
    // The fired row (or arrow) of the view on show, brought into sight if it is not.
    var view = root.getAttribute("data-view");
    var figure = byId("view-" + view);
    var fired = figure ? figure.querySelector(".fired") : null;
    if (!fired || !fired.getBoundingClientRect) { return; }
    var box = fired.getBoundingClientRect();
    var player = byId("player").getBoundingClientRect();
    if (box.top < player.bottom || box.bottom > window.innerHeight) {
      fired.scrollIntoView({block: "center", inline: "nearest"});
    }
  }

  function go(to) {
    position = Math.max(0, Math.min(trace().steps.length, to));
    show();
    if (position > 0) { inView(); }
  }
  function pause() {
    if (timer !== null) { clearInterval(timer); timer = null; }
    byId("player-play").textContent = "▶ Play";
    byId("player-play").setAttribute("aria-pressed", "false");
  }
  function play() {
    if (timer !== null) { pause(); return; }
    if (position === trace().steps.length) { go(0); }
    byId("player-play").textContent = "❚❚ Pause";
    byId("player-play").setAttribute("aria-pressed", "true");
    timer = setInterval(function () {
      if (position >= trace().steps.length) { pause(); return; }
      go(position + 1);
    }, 1200);
  }

  if (!select || !data.traces.length) { showView(tabs.length ? tabs[0].getAttribute("data-show-view") : ""); return; }
  select.addEventListener("change", function () {
    pause();
    traceIndex = Number(select.value);
    go(0);
  });
  byId("player-prev").addEventListener("click", function () { pause(); go(position - 1); });
  byId("player-next").addEventListener("click", function () { pause(); go(position + 1); });
  byId("player-play").addEventListener("click", play);
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    if (target && (target.tagName === "SELECT" || target.tagName === "INPUT" || target.tagName === "TEXTAREA")) { return; }
    var keys = {
      ArrowRight: function () { pause(); go(position + 1); },
      ArrowLeft: function () { pause(); go(position - 1); },
      Home: function () { pause(); go(0); },
      End: function () { pause(); go(trace().steps.length); },
      " ": play
    };
    var action = keys[event.key];
    if (action && !(event.key === " " && target && target.tagName === "BUTTON")) {
      event.preventDefault();
      action();
    }
  });
  showView(tabs.length ? tabs[0].getAttribute("data-show-view") : "");
  go(0);
}());
