"use strict";
// The page of `loop serve`: every loop, and one loop's own view (#/loops/ID), kept up to date
// by the server's stream of changes. What a loop's files say (an agent's words among them) is
// only ever written as text, never as markup. Every decision is a POST with the token in the
// X-Loop-CSRF header, which the server requires of anything that changes something.

(function () {
  const csrf = document.querySelector('meta[name="loop-csrf"]').content;
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  const flash = document.getElementById("flash");
  const loops = new Map();
  // What the loop's own view shows now, to update it in place.
  let shown = { id: null, gates: null, report: null, logTo: null, logBusy: false, logAgain: false };

  // An element with attributes and children; a child that is not a node becomes text.
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  function ago(iso) {
    if (!iso) return "-";
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }

  function when(iso) {
    return iso ? new Date(iso).toLocaleString() : "";
  }

  function money(usd) {
    return "$" + (usd || 0).toFixed(2);
  }

  function stepLine(l) {
    if (!l.steps.length) return l.status === "RUNNING" ? "planning" : "no plan yet";
    const text = l.step_text ? ": " + l.step_text : "";
    return "step " + l.step + "/" + l.steps.length + text;
  }

  function badge(status) {
    return el("span", { class: "badge s-" + status.toLowerCase() }, status);
  }

  function say(text, kind) {
    flash.textContent = text;
    flash.className = "flash " + kind;
    flash.hidden = false;
    clearTimeout(say.timer);
    say.timer = setTimeout(() => { flash.hidden = true; }, 10000);
  }

  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ credentials: "same-origin" }, opts || {}));
    let body = null;
    try { body = await r.json(); } catch (_) { body = null; }
    return { status: r.status, body: body };
  }

  async function post(path, body) {
    return api(path, {
      method: "POST",
      headers: { "X-Loop-CSRF": csrf, "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    });
  }

  // What the server said of a POST, for the person who clicked.
  function told(r) {
    const b = r.body || {};
    const text = b.message || b.error || ("the server answered " + r.status);
    say(text, r.status === 200 ? "ok" : r.status === 409 ? "warn" : "bad");
    flash.dataset.status = String(r.status);
  }

  function route() {
    const m = location.hash.match(/^#\/loops\/([0-9a-f]+)$/);
    return m ? m[1] : null;
  }

  function render() {
    const id = route();
    if (id) renderLoop(id); else renderList();
  }

  // ---- every loop ----

  function renderList() {
    shown = { id: null, gates: null, report: null, logTo: null, logBusy: false, logAgain: false };
    document.title = "loops";
    const all = [...loops.values()].sort((a, b) =>
      (Date.parse(b.last_activity || 0) || 0) - (Date.parse(a.last_activity || 0) || 0));
    const waiting = all.reduce((n, l) => n + l.pending_gates, 0);
    const head = el("p", { class: "summary" },
      all.length + (all.length === 1 ? " loop" : " loops"),
      waiting ? ", " + waiting + (waiting === 1 ? " gate waits" : " gates wait") + " for you" : "");
    const list = el("ul", { class: "loops" }, all.map(card));
    const empty = all.length ? null :
      el("p", { class: "muted" }, "No loop has run as this user here yet: `loop start \"GOAL\"` begins one.");
    main.replaceChildren(head, list, empty || "");
  }

  function card(l) {
    const gates = l.gates.filter((g) => g.state === "PENDING");
    return el("li", { class: "card", "data-loop": l.id },
      el("div", { class: "line" }, badge(l.status),
        el("a", { href: "#/loops/" + l.id, class: "goal" }, l.goal || l.error || l.file)),
      el("div", { class: "facts" },
        el("span", { title: l.file }, l.project),
        el("span", null, stepLine(l)),
        el("span", null, money(l.cost_usd)),
        el("span", { title: when(l.last_activity) }, ago(l.last_activity))),
      gates.map((g) => el("div", { class: "waits" }, "⚑ " + g.id + " " + g.kind + ": " + g.about)));
  }

  // ---- one loop ----

  function renderLoop(id) {
    const l = loops.get(id);
    if (!l) {
      main.replaceChildren(el("p", { class: "muted" }, "No such loop (any more). "),
        el("a", { href: "#/" }, "Every loop"));
      return;
    }
    if (shown.id !== id) {
      shown = { id: id, gates: null, report: null, logTo: null, logBusy: false, logAgain: false };
      main.replaceChildren(
        el("section", { id: "d-head" }),
        el("section", { id: "d-actions", class: "actions" }),
        el("section", { id: "d-gates" }),
        el("section", { id: "d-steps" }),
        el("section", { class: "log" }, el("h2", null, "Log"), el("pre", { id: "d-log" })),
        el("section", { id: "d-report" }));
      loadLog(id);
    }
    document.title = l.status + " · " + l.goal;
    document.getElementById("d-head").replaceChildren(
      el("p", { class: "back" }, el("a", { href: "#/" }, "← every loop")),
      el("h1", null, l.goal || l.file),
      el("p", { class: "line", "data-status": l.status }, badge(l.status), " ", stepLine(l)),
      el("dl", { class: "facts" },
        fact("project", l.project), fact("file", l.file),
        fact("cost", money(l.cost_usd) + (l.tokens ? " · " + l.tokens + " tokens" : "")),
        fact("started", when(l.started_at)), fact("active", ago(l.last_activity)),
        fact("runner", l.runner_pid ? "pid " + l.runner_pid : "none"),
        fact("last", l.last_action), fact("next", l.next_action), fact("error", l.error)));
    document.getElementById("d-actions").replaceChildren(...actions(l));
    const gatesKey = JSON.stringify(l.gates);
    if (gatesKey !== shown.gates) {
      shown.gates = gatesKey;
      document.getElementById("d-gates").replaceChildren(...gates(l));
    }
    document.getElementById("d-steps").replaceChildren(steps(l));
    const reportKey = l.status + "/" + l.steps_done + "/" + l.gates.length;
    if (reportKey !== shown.report) {
      shown.report = reportKey;
      const src = "/loops/" + l.id + "/report";
      document.getElementById("d-report").replaceChildren(
        el("h2", null, "Report ", el("a", { href: src, target: "_blank", rel: "noopener" }, "open")),
        el("iframe", { src: src, title: "the loop's report", sandbox: true, class: "report" }));
    }
  }

  function fact(name, value) {
    if (!value) return "";
    return el("div", null, el("dt", null, name), el("dd", null, value));
  }

  function actions(l) {
    const driven = !!l.runner_pid;
    const skip = l.gates.some((g) => g.state === "PENDING" && g.options.includes("skip"));
    const out = [];
    const button = (verb, help) => out.push(el("button", {
      type: "button", "data-action": verb, title: help,
      onclick: (e) => act(l, verb, e.target),
    }, verb));
    if (l.status === "RUNNING" && driven) button("stop", "end the step; the loop waits");
    if (!driven && (l.status === "WAITING" || l.status === "IDLE" || l.status === "RUNNING"))
      button("resume", "carry the loop on");
    if (!driven && (l.status === "FAILED" || l.status === "WAITING"))
      button("retry", "run the failed or waiting step again, with a fresh budget");
    if (skip) button("skip", "leave the step SKIPPED and go on with the next");
    return out;
  }

  async function act(l, verb, button) {
    button.disabled = true;
    try {
      told(await post("/api/loops/" + l.id + "/" + verb, {}));
    } catch (e) {
      say("not sent: " + e, "bad");
    } finally {
      button.disabled = false;
    }
  }

  function gates(l) {
    if (!l.gates.length) return [];
    return [el("h2", null, "Gates"), el("ul", { class: "gates" }, l.gates.map((g) => gate(l, g)))];
  }

  function gate(l, g) {
    if (g.state !== "PENDING") {
      return el("li", { class: "gate decided", "data-gate": g.id },
        el("b", null, g.id + " " + g.kind), ": " + g.about,
        el("div", { class: "muted" },
          "decided: " + (g.choice || "?") + (g.by ? " by " + g.by : "") + (g.at ? " at " + when(g.at) : "")));
    }
    const box = el("li", { class: "gate pending", "data-gate": g.id },
      el("div", null, el("b", null, g.id + " " + g.kind), ": " + g.about));
    if (g.tools && g.tools.length) box.append(el("div", { class: "muted" }, "tools: " + g.tools.join(", ")));
    const buttons = el("div", { class: "choices" }, g.options.map((o, i) => el("button", {
      type: "button", "data-gate": g.id, "data-choice": o, title: g.option_help[i] || "",
      onclick: () => decide(l, g, o, box),
    }, o)));
    box.append(buttons);
    if (g.free_text) {
      const input = el("input", { type: "text", name: "answer", placeholder: "your answer", "aria-label": "answer to " + g.id });
      box.append(el("form", {
        class: "answer",
        onsubmit: (e) => {
          e.preventDefault();
          if (input.value.trim()) decide(l, g, input.value, box);
        },
      }, input, el("button", { type: "submit", "data-gate": g.id }, "answer")));
    }
    return box;
  }

  async function decide(l, g, choice, box) {
    const controls = box.querySelectorAll("button, input");
    controls.forEach((c) => { c.disabled = true; });
    try {
      told(await post("/api/loops/" + l.id + "/gates/" + encodeURIComponent(g.id),
        { choice: choice, shown: g.shown }));
    } catch (e) {
      say("not sent: " + e, "bad");
    } finally {
      controls.forEach((c) => { c.disabled = false; });
    }
  }

  function steps(l) {
    if (!l.steps.length) return el("p", { class: "muted" }, "No plan yet.");
    return el("table", { class: "steps" },
      el("thead", null, el("tr", null, el("th", null, "#"), el("th", null, "state"), el("th", null, "step"))),
      el("tbody", null, l.steps.map((s) => el("tr", { class: s.n === l.step && l.status === "RUNNING" ? "current" : "" },
        el("td", null, s.n), el("td", null, badge(s.state)), el("td", null, s.text)))));
  }

  // The loop's log, as it grows: its end at first, then what is appended.
  async function loadLog(id) {
    if (shown.logBusy) { shown.logAgain = true; return; }
    shown.logBusy = true;
    try {
      do {
        shown.logAgain = false;
        const from = shown.logTo === null ? "" : "?from=" + shown.logTo;
        const r = await api("/api/loops/" + id + "/log" + from);
        if (shown.id !== id || r.status !== 200) return;
        const pre = document.getElementById("d-log");
        const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
        if (shown.logTo === null) pre.textContent = r.body.text;
        else if (r.body.text) pre.append(document.createTextNode(r.body.text));
        shown.logTo = r.body.to;
        if (atEnd) pre.scrollTop = pre.scrollHeight;
      } while (shown.logAgain);
    } finally {
      shown.logBusy = false;
    }
  }

  // ---- the live stream ----

  async function loadAll() {
    const r = await api("/api/loops");
    if (r.status !== 200) {
      say((r.body && r.body.error) || "the server answered " + r.status, "bad");
      return;
    }
    loops.clear();
    for (const l of r.body.loops) loops.set(l.id, l);
    render();
    if (route()) loadLog(route());
  }

  function connect() {
    const es = new EventSource("/api/events");
    es.onopen = () => {
      live.textContent = "live";
      live.className = "live on";
      // What changed while it was away.
      loadAll();
    };
    es.onerror = () => {
      live.className = "live off";
      // A server that went away comes back with a new token: this page's is no more.
      live.textContent = es.readyState === EventSource.CLOSED
        ? "disconnected: open the address `loop serve` printed"
        : "reconnecting…";
    };
    es.addEventListener("loop", (e) => {
      const l = JSON.parse(e.data);
      loops.set(l.id, l);
      const id = route();
      if (id === l.id) { renderLoop(id); loadLog(id); } else if (!id) renderList();
    });
    es.addEventListener("gone", (e) => {
      loops.delete(JSON.parse(e.data).id);
      render();
    });
  }

  window.addEventListener("hashchange", render);
  // "5m ago" moves on by itself (in the browser: the server is not woken for it).
  setInterval(render, 30000);
  connect();
  loadAll();
})();
