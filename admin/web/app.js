// sluice dashboard: polls the admin API and draws everything by hand (SVG),
// so it needs no network beyond this listener.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const WINDOW_MS = 5 * 60 * 1000;
const GAP_MS = 2500; // samples are 1 s apart; further apart, none were taken
const SECTIONS = ["apiGroups", "authorityRules", "flowRules", "paramRules", "degradeRules", "routes"];
const $ = (sel) => document.querySelector(sel);

// el builds an element; strings become text nodes, never HTML.
function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") n.className = v; else n.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) n.append(k instanceof Node ? k : String(k));
  return n;
}
function svg(tag, attrs) {
  const n = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
  return n;
}
function fmt(v) {
  if (v == null || isNaN(v)) return "–";
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
}
function when(t) { return t ? new Date(t).toLocaleString() : "never"; }
// single makes a poll skip a round while its last one still runs: a poll
// slower than its interval (a Redis that does not answer: 2 s a read) must
// not queue a new round of requests every interval, without end.
function single(f) {
  let busy = false;
  return async (...args) => {
    if (busy) return;
    busy = true;
    try { return await f(...args); } finally { busy = false; }
  };
}
// A read that takes longer than READ_MS fails: a gateway that accepts
// connections but does not answer (stopped with SIGSTOP, hung) is
// unreachable too, and the page says so rather than wait without end.
const READ_MS = 5000;
// tokenHeaders sends the admin token typed in: with every write, and with
// the reads that show a credential (a param rule's values, origins, the
// rules that name keys) only to a reader with it.
function tokenHeaders() {
  const tok = $("#token").value.trim();
  return tok ? { Authorization: "Bearer " + tok } : {};
}

async function getJSON(url, headers) {
  const r = await fetch(url, { cache: "no-store", signal: AbortSignal.timeout(READ_MS), headers: headers || {} });
  if (!r.ok) throw new Error(url + ": " + r.status);
  return r.json();
}

// ---- resources: cards with numbers and a pass/block chart ----

const cards = new Map(); // resource -> {root, stats, chart, legend, detail}
const STATS = [["passQps", "pass/s", "pass"], ["blockQps", "block/s", "block"], ["successQps", "success/s"],
  ["errorQps", "error/s"], ["avgRtMs", "avg rt ms"], ["concurrency", "in flight"]];

function card(name) {
  let c = cards.get(name);
  if (c) return c;
  const stats = el("div", { class: "stats" });
  const values = {};
  for (const [k, label, cls] of STATS) {
    values[k] = el("span", { class: "v" }, "–");
    stats.append(el("div", { class: "stat " + (cls || ""), "data-k": k }, el("span", { class: "k" }, label), values[k]));
  }
  const chart = svg("svg", { class: "chart", viewBox: "0 0 600 170", preserveAspectRatio: "none", role: "img",
    "aria-label": "pass and block per second for " + name });
  const legPass = el("b", { "data-series": "pass" }, "0"), legBlock = el("b", { "data-series": "block" }, "0");
  const legend = el("div", { class: "chart-legend" },
    el("span", { class: "pass" }, "pass/s ", legPass), el("span", { class: "block" }, "block/s ", legBlock),
    el("span", { class: "span" }, "peak ", el("b", { "data-series": "peak" }, "0")));
  const detail = el("div");
  const kind = el("span", { class: "hint", "data-kind": "" }, "");
  const details = el("details", null, el("summary", null, "per origin and entrance"), detail);
  const root = el("section", { class: "card", "data-resource": name },
    el("h3", null, name, kind), stats, chart, legend, details);
  const grid = $("#resources");
  grid.querySelector(".empty")?.remove();
  // Keep cards sorted by name.
  const after = [...grid.children].find((n) => n.dataset.resource > name);
  grid.insertBefore(root, after || null);
  c = { root, values, chart, legPass, legBlock, legend, detail, details, kind, drawn: false, filled: false, last: null };
  details.addEventListener("toggle", () => fillCard(c));
  cards.set(name, c);
  inView.observe(root);
  return c;
}

// A card's chart and numbers are redrawn each second only while the card is
// on screen and the page is visible, and its origin and entrance tables
// only while they are open: 60 charts of 300 samples and 60 tables rebuilt
// every second kept the renderer's main thread 2.4 times as busy for a page
// that shows a few of them. A card coming into view, or the page coming
// back, is drawn at once from the figures held (a card is always drawn
// once, when it first has figures, even in a hidden tab).
const onScreen = new Set(); // resource names whose card is in view
const inView = new IntersectionObserver((entries) => {
  for (const e of entries) {
    const name = e.target.dataset.resource;
    if (!e.isIntersecting) { onScreen.delete(name); continue; }
    onScreen.add(name);
    drawOne(name);
  }
}, { rootMargin: "200px" });
let drawnAt = 0; // the server time (ms) of the history last received
function drawOne(name) {
  const c = cards.get(name), h = history.get(name);
  if (!c || document.hidden) return;
  fillCard(c);
  if (h && drawnAt) drawChart(c, h, drawnAt);
}
document.addEventListener("visibilitychange", () => { for (const name of onScreen) drawOne(name); });

function nodeTable(title, rows) {
  if (!rows || !rows.length) return null;
  const t = el("table", null, el("tr", null, ...[title, "pass/s", "block/s", "success/s", "error/s", "rt ms", "in flight"].map((h) => el("th", null, h))));
  for (const r of rows) t.append(el("tr", null, el("td", null, r.name), el("td", null, fmt(r.passQps)), el("td", null, fmt(r.blockQps)),
    el("td", null, fmt(r.successQps)), el("td", null, fmt(r.errorQps)), el("td", null, fmt(r.avgRtMs)), el("td", null, r.concurrency)));
  return t;
}

// MAX_CARDS is how many resources the page draws: with more (a document of
// thousands of routes), the most active ones, so that the page stays a page
// and each poll stays small.
const MAX_CARDS = 60;

function showResources(data) {
  // A resource dropped from the configuration (or, with more than
  // MAX_CARDS, gone quiet) disappears from the page.
  const live = new Set(data.resources.map((r) => r.resource));
  for (const [name, c] of cards) if (!live.has(name)) { inView.unobserve(c.root); onScreen.delete(name); c.root.remove(); cards.delete(name); }
  const more = $("#resources-more");
  const total = data.resourcesTotal || data.resources.length;
  more.hidden = total <= data.resources.length;
  more.textContent = more.hidden ? "" : "Showing the " + data.resources.length + " most active of " + total +
    " resources; GET /api/resources lists them all.";
  if (!data.resources.length && !$("#resources").children.length) $("#resources").append(el("p", { class: "empty" }, "No resources yet."));
  // An API group's card says so: it counts the requests of several routes.
  const groups = new Set((((rulesState || {}).config || {}).apiGroups || []).map((g) => g.name));
  for (const r of data.resources) {
    const c = card(r.resource);
    c.kind.textContent = groups.has(r.resource) ? "API group" : "";
    c.last = r;
    if (!c.filled || (onScreen.has(r.resource) && !document.hidden)) fillCard(c);
  }
}

// fillCard writes a card's numbers from its resource's last figures, and
// its origin and entrance tables while they are open.
function fillCard(c) {
  const r = c.last;
  if (!r) return;
  c.filled = true;
  for (const [k] of STATS) c.values[k].textContent = k === "concurrency" ? r[k] : fmt(r[k]);
  if (!c.details.open) return;
  const more = r.originsTotal > (r.origins || []).length ?
    el("p", { class: "empty" }, "the " + r.origins.length + " most active of " + r.originsTotal + " origins") : "";
  c.detail.replaceChildren(nodeTable("origin", r.origins) || "", more, nodeTable("entrance", r.entrances) || "");
  if (!c.detail.children.length) c.detail.append(el("p", { class: "empty" }, "no origins or entrances recorded"));
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function drawChart(c, s, now) {
  const W = 600, H = 170, L = 40, R = 8, T = 8, B = 20;
  const peak = niceMax(Math.max(0, ...s.passQps, ...s.blockQps));
  const x = (t) => L + (W - L - R) * (1 - (now - t) / WINDOW_MS);
  const y = (v) => T + (H - T - B) * (1 - v / peak);
  const g = svg("g", { class: "grid" });
  const parts = [g];
  for (let i = 0; i <= 4; i++) {
    const v = (peak * i) / 4, yy = y(v);
    g.append(svg("line", { x1: L, x2: W - R, y1: yy, y2: yy }));
    const lbl = svg("text", { x: L - 6, y: yy + 3, "text-anchor": "end" });
    lbl.textContent = fmt(v);
    parts.push(lbl);
  }
  for (const [i, label] of [[0, "-5m"], [1, "-4m"], [2, "-3m"], [3, "-2m"], [4, "-1m"], [5, "now"]]) {
    const t = svg("text", { x: x(now - WINDOW_MS + i * 60000), y: H - 5, "text-anchor": i === 5 ? "end" : "middle" });
    t.textContent = label;
    parts.push(t);
  }
  // Samples further apart than GAP_MS (the gateway was down or
  // restarted) are drawn apart: a line across the outage would read as
  // traffic that was never measured.
  const runs = [];
  for (let i = 0; i < s.t.length; i++) {
    if (i === 0 || s.t[i] - s.t[i - 1] > GAP_MS) runs.push([]);
    runs[runs.length - 1].push(i);
  }
  for (const [key, cls] of [["passQps", "pass"], ["blockQps", "block"]]) {
    for (const run of runs) {
      const pts = run.map((i) => x(s.t[i]).toFixed(1) + "," + y(s[key][i]).toFixed(1));
      if (pts.length > 1) {
        const base = y(0).toFixed(1);
        parts.push(svg("polygon", { class: cls + "-area", points: x(s.t[run[0]]).toFixed(1) + "," + base + " " + pts.join(" ") + " " + x(s.t[run[run.length - 1]]).toFixed(1) + "," + base }));
      }
      parts.push(svg("polyline", { class: cls, points: pts.join(" "), "data-points": pts.length }));
    }
  }
  c.drawn = true;
  c.chart.replaceChildren(...parts);
  c.chart.setAttribute("data-runs", runs.length);
  const last = s.t.length - 1;
  c.chart.setAttribute("data-last-t", last >= 0 ? s.t[last] : 0);
  c.legPass.textContent = last >= 0 ? fmt(s.passQps[last]) : "0";
  c.legBlock.textContent = last >= 0 ? fmt(s.blockQps[last]) : "0";
  c.legend.querySelector('[data-series="peak"]').textContent = fmt(Math.max(0, ...s.passQps, ...s.blockQps));
}

// history holds the last 5 minutes of each resource drawn; after the first
// fetch only newer samples are asked for (?since=), for the resources drawn
// only (&resource=).
const history = new Map();
const SERIES = ["t", "passQps", "blockQps", "successQps", "errorQps", "avgRtMs"];

// historyURL asks for what the cards of names lack: samples newer than the
// oldest last sample among them (0 for a card without history: its 5
// minutes).
function historyURL(names) {
  let since = Infinity;
  for (const n of names) since = Math.min(since, history.has(n) ? history.get(n).last : 0);
  return "/api/history?since=" + since + names.map((n) => "&resource=" + encodeURIComponent(n)).join("");
}

function showHistory(data) {
  const listed = new Set();
  for (const s of data.resources) {
    listed.add(s.resource);
    let h = history.get(s.resource);
    if (!h || data.at < h.last) { // new, or the server clock went back
      h = Object.fromEntries(SERIES.map((k) => [k, []]));
      h.last = 0;
      history.set(s.resource, h);
    }
    for (let i = 0; i < s.t.length; i++) {
      if (s.t[i] <= h.last) continue; // held already (asked for since an older sample, or two polls crossed)
      for (const k of SERIES) h[k].push(s[k][i]);
      h.last = s.t[i];
    }
    const old = h.t.findIndex((t) => t > data.at - WINDOW_MS);
    if (old > 0) for (const k of SERIES) h[k].splice(0, old);
  }
  for (const name of [...history.keys()]) if (!listed.has(name)) history.delete(name);
  drawnAt = data.at;
  for (const [name, h] of history) {
    const c = cards.get(name);
    if (c && (!c.drawn || (onScreen.has(name) && !document.hidden))) drawChart(c, h, data.at);
  }
}

// ---- upstreams: one card per upstream, one row per target ----

// targetState names what balancing does with a target: up (takes traffic),
// ejected (passive: failures in a row), down (active health checks).
function targetState(t) {
  if (t.ejectedUntil) return ["ejected", "ejected until " + new Date(t.ejectedUntil).toLocaleTimeString()];
  if (!t.healthy) return ["down", "down · health checks fail"];
  return ["up", "up"];
}

function showUpstreams(data) {
  const box = $("#upstreams");
  const ups = data.upstreams || [];
  if (!ups.length) { box.replaceChildren(el("p", { class: "empty" }, "No upstreams.")); return; }
  box.replaceChildren(...ups.map((u) => {
    const t = el("table", null, el("tr", null, ...["target", "weight", "state", "in flight", "req/s", "err/s", "retries/s"].map((h) => el("th", null, h))));
    for (const tg of u.targets || []) {
      const [st, label] = targetState(tg);
      t.append(el("tr", { "data-target": tg.url, "data-state": st },
        el("td", null, tg.url), el("td", null, tg.weight), el("td", { class: "state " + st }, label),
        el("td", null, tg.inFlight), el("td", null, fmt(tg.requestsPerSecond)), el("td", null, fmt(tg.errorsPerSecond)),
        el("td", null, fmt(tg.retriesPerSecond))));
    }
    const up = (u.targets || []).filter((tg) => tg.available).length;
    const title = el("h3", null, el("span", null, u.name, el("span", { class: "badge" }, u.balance),
      u.panic ? el("span", { class: "badge panic", "data-panic": "1" }, "panic mode: no target available, all get traffic") : ""),
      el("span", { class: "hint" }, up + " of " + (u.targets || []).length + " available"));
    return el("section", { class: "card", "data-upstream": u.name }, title, t);
  }));
}

// ---- who is limited now: per param rule, the values with the most blocks ----

// A value is shown as text, never as HTML, and lifted by its exact bytes
// (valueBase64): a value that is not UTF-8 reads as U+FFFD in JSON.
function pctBytes(b64) {
  const bin = atob(b64);
  let out = "";
  for (let i = 0; i < bin.length; i++) out += "%" + bin.charCodeAt(i).toString(16).padStart(2, "0");
  return out;
}

// paramResources is the resources whose param rules the panel asks for
// (list) of all that have some (total): all of them up to MAX_CARDS; past
// that, those the page draws (the most active), not thousands of requests
// every 2 seconds.
function paramResources() {
  const rules = ((rulesState || {}).config || {}).paramRules || [];
  const all = [...new Set(rules.map((r) => r.resource))].sort();
  const list = all.length <= MAX_CARDS ? all : all.filter((r) => cards.has(r)).slice(0, MAX_CARDS);
  return { list, total: all.length };
}

// isQuota: a calendar quota (window day or month), whose count is per
// calendar period and whose "next token" is the period's reset.
function isQuota(c) { return c.window === "day" || c.window === "month"; }

// span reads a number of seconds as the largest units that say it.
function span(sec) {
  if (!(sec >= 60)) return fmt(sec) + " s";
  const m = Math.floor(sec / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (d) return d + " d " + (h % 24) + " h";
  if (h) return h + " h " + (m % 60) + " min";
  return m + " min " + Math.floor(sec % 60) + " s";
}

function ruleTitle(r) {
  const c = r.config || {};
  const rate = c.grade === "concurrency" ? c.count + " in flight"
    : isQuota(c) ? c.count + " per " + c.window + (c.timezone ? " (" + c.timezone + ")" : "")
    : c.count + " per " + c.durationSec + "s";
  return "rule " + r.rule + " · " + cell(c.param) + " · " + rate + (c.controlBehavior === "throttle" ? " (queue)" : "") +
    (c.clusterMode ? " · cluster" : "") + (c.dryRun ? " · dryRun" : "");
}

function showParams(answers) {
  const box = $("#params");
  const cardsOut = [];
  for (const a of answers) {
    for (const r of a.rules || []) {
      const quota = isQuota(r.config || {});
      const t = el("table", null, el("tr", null, ...["value", "blocks/min", "passes/min", quota ? "left this " + r.config.window : "tokens left",
        quota ? "resets in" : "next token in", ""].map((h) => el("th", null, h))));
      for (const v of r.values || []) {
        const lift = el("button", { type: "button", class: "lift", "data-resource": a.resource, "data-value-b64": v.valueBase64 }, "Lift");
        if (v.digest && (r.config || {}).clusterMode) {
          lift.title = "kept as a digest: this lifts it on this gateway; the cluster's window only by its whole value (DELETE /api/params)";
        }
        // A credential's value (an API key) is sent only to a reader who
        // could lift it: here, with the admin token typed in.
        let shown = el("td", { class: "value", title: v.utf8 ? "" : "not UTF-8: bytes shown as \ufffd" }, v.value);
        if (r.masked) {
          lift.disabled = true;
          lift.title = "type the admin token to see and lift this rule's values";
          shown = el("td", { class: "value masked", title: "this rule reads a credential: its values are shown to a reader with the admin token; pk is the partition key of the client's RateLimit-Policy" },
            (v.value ? v.value + " " : "") + (v.pk ? "pk " + v.pk : ""));
        }
        t.append(el("tr", { "data-value-b64": v.valueBase64 || ("pk:" + v.pk) },
          shown,
          el("td", { class: "blocks" }, String(v.blocks)), el("td", null, String(v.passes)),
          el("td", { class: "remaining" }, String(v.remaining)), el("td", { class: "next" }, v.nextTokenSec > 0 ? span(v.nextTokenSec) : "–"),
          el("td", null, lift)));
      }
      const body = (r.values || []).length ? t : el("p", { class: "empty" }, "nobody blocked in the last minute");
      cardsOut.push(el("section", { class: "card", "data-param-resource": a.resource, "data-rule": r.rule },
        el("h3", null, a.resource, el("span", { class: "hint" }, ruleTitle(r) + " · " + r.tracked + " values tracked" +
          (r.masked ? " · a credential: values shown with the admin token" : ""))), body));
    }
  }
  // Updated in place: a Lift button being clicked (or focused) when the
  // panel refreshes stays the same button, so the click is not lost.
  morphChildren(box, cardsOut.length ? cardsOut : [el("p", { class: "empty" }, "No param rules.")]);
}

// morph makes old look like neu, keeping every node whose place and kind
// stay the same (so its focus, and a press on it, survive).
function morph(old, neu) {
  if (old.nodeType !== neu.nodeType || old.nodeName !== neu.nodeName) { old.replaceWith(neu); return; }
  if (old.nodeType !== Node.ELEMENT_NODE) { if (old.nodeValue !== neu.nodeValue) old.nodeValue = neu.nodeValue; return; }
  for (const a of [...old.attributes]) if (!neu.hasAttribute(a.name)) old.removeAttribute(a.name);
  for (const a of [...neu.attributes]) if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
  morphChildren(old, [...neu.childNodes]);
}

function morphChildren(box, kids) {
  const old = [...box.childNodes];
  kids.forEach((n, i) => (i < old.length ? morph(old[i], n) : box.append(n)));
  for (let i = kids.length; i < old.length; i++) old[i].remove();
}

const refreshParams = single(async () => {
  const { list, total } = paramResources();
  const more = $("#params-more");
  more.hidden = list.length >= total;
  more.textContent = more.hidden ? "" : "Showing the param rules of " + list.length + " of the " + total +
    " resources that have some: those drawn above, the most active; GET /api/params?resource=R shows another.";
  if (!list.length) { showParams([]); return; }
  // One resource that does not answer (dropped by a reload a moment ago)
  // leaves the others shown; if none answers, the panel stays as it was.
  const got = await Promise.allSettled(list.map((r) => getJSON("/api/params?resource=" + encodeURIComponent(r), tokenHeaders())));
  const ok = got.filter((g) => g.status === "fulfilled").map((g) => g.value);
  if (ok.length) showParams(ok);
});

async function liftValue(btn) {
  const res = btn.dataset.resource, b64 = btn.dataset.valueB64;
  const headers = tokenHeaders();
  const banner = $("#params-result");
  banner.hidden = false;
  let resp, body;
  try {
    resp = await fetch("/api/params?resource=" + encodeURIComponent(res) + "&value=" + pctBytes(b64), { method: "DELETE", headers });
    body = await resp.json().catch(() => ({}));
  } catch (e) {
    banner.className = "banner bad";
    banner.replaceChildren("Lift failed: " + e.message);
    return;
  }
  banner.className = "banner " + (resp.ok ? "ok" : "bad");
  const value = atob(b64);
  if (resp.ok) banner.replaceChildren(el("strong", null, "Lifted"), " ", el("code", null, body.value != null ? body.value : value), " on " + res + " (" + body.rules + " rules tracked it).");
  else if (resp.status === 401) banner.replaceChildren("401 · the admin token is missing or wrong: enter it in the rule editor's Admin token field.");
  else banner.replaceChildren(resp.status + " · " + (body.error || "error"));
  refreshParams();
}

// ---- rules in force and the last reload ----

const RULE_COLS = {
  routes: ["path", "methods", "upstream", "resource", "acquireCount", "prioritized", "occupyTimeoutMs"],
  apiGroups: ["name", "match"],
  authorityRules: ["resource", "strategy", "limitApp", "ips"],
  flowRules: ["resource", "limitApp", "grade", "count", "strategy", "controlBehavior", "burstCount", "statIntervalMs", "dryRun", "clusterMode"],
  paramRules: ["resource", "param", "grade", "count", "durationSec", "window", "burstCount", "controlBehavior", "countOn", "dryRun", "clusterMode"],
  degradeRules: ["resource", "strategy", "threshold", "maxAllowedRtMs", "statIntervalMs", "minRequestAmount", "retryTimeoutMs", "errorStatuses", "probeNum"],
};
let rulesState = null;

function cell(v) {
  if (v == null || v === "") return "";
  if (typeof v === "object") {
    if ("Kind" in v) return v.Kind + (v.Name ? ":" + v.Name : "");
    return JSON.stringify(v);
  }
  return String(v);
}

function showRules(st) {
  rulesState = st;
  const pill = $("#status");
  if (!staleSince) { // while the numbers are stale, the pill says that
    pill.textContent = st.ready ? (st.lastError ? "serving last good rules" : "ready") : "not ready";
    pill.className = "pill " + (st.ready && !st.lastError ? "ok" : "bad");
  }
  const banner = $("#reload");
  if (st.lastError) {
    banner.className = "banner bad";
    banner.replaceChildren(el("strong", null, "Last reload failed"), " at " + when(st.lastReload) + "; rules loaded " + when(st.loadedAt) + " stay in force.",
      el("pre", null, st.lastError));
  } else {
    banner.className = "banner ok";
    const src = st.source ? [" and version " + st.source.version + " of ", el("code", null, st.source.name)] : [];
    banner.replaceChildren(el("strong", null, "Rules loaded"), " from ", el("code", null, st.path || "?"), ...src, " at " + when(st.loadedAt) + " · last reload " + when(st.lastReload) + " ok");
  }
  // Start-only settings a reload changed: the old values stay in force.
  const pending = st.pendingRestart || [];
  if (pending.length) {
    banner.append(el("div", { class: "pending", id: "pending-restart" },
      el("strong", null, "Waiting for a restart:"), " the file changes " + pending.length + (pending.length === 1 ? " setting" : " settings") + " that apply only at start; the values in force stay until then.",
      el("ul", null, ...pending.map((p) => el("li", { "data-setting": p.setting },
        el("code", null, p.setting), " ", el("code", null, p.old === "" ? '""' : p.old), " → ", el("code", null, p.new === "" ? '""' : p.new))))));
  }
  // The tables are drawn again only when other rules came into force: a
  // document of thousands of rules is not redrawn every 5 seconds.
  const drawn = JSON.stringify([st.ready, st.path, st.loadedAt, st.source && st.source.version]);
  if (drawn !== rulesDrawn) { rulesDrawn = drawn; drawRules(st); }
  $("#token-row").hidden = !st.tokenRequired;
  $("#editor-off").hidden = st.editable;
  $("#editor").hidden = !st.editable;
  showCluster(st.cluster);
}

let rulesDrawn = "";

function drawRules(st) {
  const box = $("#rules");
  box.replaceChildren();
  const cfg = st.config || {};
  for (const sec of SECTIONS) {
    const rules = cfg[sec] || [];
    box.append(el("h3", null, sec + " (" + rules.length + ")"));
    if (!rules.length) { box.append(el("p", { class: "empty" }, "none")); continue; }
    const cols = RULE_COLS[sec];
    const t = el("table", null, el("tr", null, ...cols.map((c) => el("th", null, c))));
    for (const r of rules) t.append(el("tr", null, ...cols.map((c) => el("td", null, cell(r[c])))));
    box.append(t);
  }
}

// showCluster shows the Redis that cluster rules count in: its form, the
// master node(s) in use, and whether cluster rules are counted there or
// have fallen back to local limits (as during a failover).
function showCluster(c) {
  const pill = $("#redis");
  if (!c) { pill.hidden = true; return; }
  const masters = c.masters || [];
  const up = masters.filter((m) => m.up).length;
  const where = c.form === "cluster" ? up + "/" + masters.length + " shard masters up"
    : "master " + ((masters[0] && masters[0].addr) || "not found yet");
  pill.hidden = false;
  pill.textContent = "Redis " + c.form + " · " + where + (c.up ? " · counting in Redis" : " · unreachable: cluster rules local");
  pill.title = c.redis;
  pill.className = "pill " + (c.up ? "ok" : "bad");
}

// ---- rule editor: edits the file's rules by index, with the file's ETag ----

let raw = null; // {path, etag, text, sections}
let fileTried = false; // the page asked for the file by itself already

async function loadFile(keepSelection) {
  const prev = $("#rule-select").value;
  raw = await getJSON("/api/rules/raw", tokenHeaders());
  $("#editor-path").textContent = raw.path;
  // A fleet's document is versioned 1, 2, ...; a file by its hash.
  $("#etag").textContent = raw.version ? "document version " + raw.version : "file version " + raw.etag.replaceAll('"', "").slice(0, 8);
  $("#save").textContent = raw.version ? "Save as the next version" : "Save to rules.yaml";
  const sel = $("#rule-select");
  sel.replaceChildren();
  for (const sec of SECTIONS) {
    const rules = (raw.sections || {})[sec] || [];
    if (!rules.length) continue;
    const og = el("optgroup", { label: sec });
    rules.forEach((r, i) => og.append(el("option", { value: sec + "/" + i },
      sec + "[" + i + "] " + (r.resource || r.name || r.path || "?") + (r.limitApp ? " (" + r.limitApp + ")" : "") +
      (r.count != null ? " · count " + r.count : r.threshold != null ? " · threshold " + r.threshold : ""))));
    sel.append(og);
  }
  if (keepSelection && [...sel.options].some((o) => o.value === prev)) sel.value = prev;
  showFields();
}

// FIELDS is every field of a rule, by section, with the input it takes
// (docs/rules.md): the editor offers those a rule does not set yet, empty,
// so a field can be added. TestEditorFieldsAreConfigs keeps it in step with
// config's rule types.
const FIELDS = {
  routes: {
    path: "string", hosts: "json", methods: "json", upstream: "string", resource: "string", entrance: "string",
    stripPrefix: "string", acquireCount: "number", forwarder: "string", maxBodyBytes: "number", blockResponse: "json",
    prioritized: "string", occupyTimeoutMs: "number", keepCostHeaders: "bool",
  },
  apiGroups: { name: "string", match: "json" },
  authorityRules: { resource: "string", strategy: "string", limitApp: "string", ips: "json" },
  flowRules: {
    resource: "string", limitApp: "string", grade: "string", count: "number", strategy: "string", refResource: "string",
    controlBehavior: "string", warmUpPeriodSec: "number", coldFactor: "number", maxQueueingTimeMs: "number",
    burstCount: "number", statIntervalMs: "number", dryRun: "bool", clusterMode: "bool", clusterConfig: "json",
  },
  paramRules: {
    resource: "string", param: "string", match: "json", grade: "string", count: "number", durationSec: "number", burstCount: "number",
    controlBehavior: "string", maxQueueingTimeMs: "number", maxTrackedValues: "number", dryRun: "bool",
    window: "string", timezone: "string", clusterMode: "bool", clusterConfig: "json", countOn: "string", failureStatuses: "json", items: "json",
  },
  degradeRules: {
    resource: "string", strategy: "string", maxAllowedRtMs: "number", threshold: "number", statIntervalMs: "number",
    minRequestAmount: "number", retryTimeoutMs: "number", errorStatuses: "json", probeNum: "number",
  },
};

function currentRule() {
  const [sec, i] = $("#rule-select").value.split("/");
  return { sec, i: Number(i), rule: ((raw.sections || {})[sec] || [])[Number(i)] };
}

function showFields() {
  const box = $("#editor-fields");
  box.replaceChildren();
  const { sec, rule } = raw && $("#rule-select").value ? currentRule() : {};
  if (!rule) { box.append(el("p", { class: "empty" }, raw && raw.parseError ? "rules file is not valid YAML: " + raw.parseError : "no rules in the file")); return; }
  // The fields users change most come first, then the rest the rule sets,
  // in name order, then the fields it does not set yet (empty: add one by
  // filling it in).
  const known = FIELDS[sec] || {};
  const first = ["resource", "name", "match", "limitApp", "param", "count", "threshold", "grade", "strategy", "controlBehavior"];
  const rank = (k) => (first.includes(k) ? first.indexOf(k) : first.length) + (k in rule ? 0 : first.length + 1);
  const keys = [...new Set([...Object.keys(rule), ...Object.keys(known)])].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  for (const k of keys) {
    const set = k in rule, v = rule[k];
    let type = known[k] || "string";
    if (set) {
      if (typeof v === "boolean") type = "bool";
      else if (typeof v === "number") type = "number";
      else if (v !== null && typeof v === "object") type = "json";
      else type = "string";
    }
    let input;
    if (type === "bool") input = el("input", { type: "checkbox", name: k, "data-type": "bool" });
    else if (type === "number") input = el("input", { type: "number", step: "any", name: k, "data-type": "number" });
    else if (type === "json") input = el("textarea", { name: k, rows: "2", "data-type": "json" });
    else input = el("input", { type: "text", name: k, "data-type": "string" });
    if (!set) {
      input.dataset.unset = "1";
      if (type !== "bool") input.placeholder = "not set";
    } else if (type === "bool") input.checked = v;
    else input.value = type === "json" ? JSON.stringify(v) : v;
    box.append(el("label", { class: set ? "row" : "row unset" }, k, input));
  }
}

// changedFields returns only the fields the user changed, so the server keeps
// the rest of the rule exactly as written.
function changedFields() {
  const { rule } = currentRule();
  const out = {};
  for (const input of $("#editor-fields").querySelectorAll("[name]")) {
    const k = input.name, t = input.dataset.type;
    // A field the rule does not set is added only when filled in.
    if (input.dataset.unset && (t === "bool" ? !input.checked : input.value.trim() === "")) continue;
    let v;
    if (t === "bool") v = input.checked;
    else if (t === "number") v = input.value === "" ? null : Number(input.value);
    else if (t === "json") v = JSON.parse(input.value);
    else v = input.value;
    if (JSON.stringify(v) !== JSON.stringify(rule[k])) out[k] = v;
  }
  return out;
}

function showResult(ok, title, lines) {
  const r = $("#result");
  r.hidden = false;
  r.className = ok ? "ok" : "err";
  r.replaceChildren(el("strong", null, title), lines && lines.length ? el("pre", null, lines.join("\n")) : "");
}

async function save(ev) {
  ev.preventDefault();
  if (!raw) { showResult(false, "The rules file is not loaded yet: press Re-read."); return; }
  const { sec, i } = currentRule();
  let fields;
  try { fields = changedFields(); } catch (e) { showResult(false, "A field is not valid JSON: " + e.message); return; }
  if (!Object.keys(fields).length) { showResult(true, "Nothing changed."); return; }
  const headers = { "Content-Type": "application/json", "If-Match": raw.etag, ...tokenHeaders() };
  let resp, body;
  try {
    resp = await fetch("/api/rules/" + sec + "/" + i, { method: "PUT", headers, body: JSON.stringify(fields) });
    body = await resp.json().catch(() => ({}));
  } catch (e) { showResult(false, "Request failed: " + e.message); return; }
  const what = raw.version ? "the rules document" : "rules.yaml";
  const msg = { 401: "401 · the admin token is missing or wrong.",
    409: raw.version ? "409 · another writer stored a newer version of the rules document. Re-read it and edit again." : "409 · rules.yaml changed on disk since you loaded it. Re-read the file and edit again.",
    422: "422 · " + what + " would not be valid with this edit; nothing was written. Every error of the whole file is listed: one this edit does not touch must be mended in the file itself." }[resp.status];
  if (resp.ok) {
    showResult(true, resp.status + " · saved " + sec + "[" + i + "] (" + Object.keys(fields).join(", ") + "); reload requested. New version " + String(body.etag).replaceAll('"', "").slice(0, 8));
    await loadFile(true);
    setTimeout(refreshRules, 300);
  } else {
    showResult(false, msg || resp.status + " · " + (body.error || "error"), body.lines || (msg ? [body.error] : []));
  }
}

// ---- polling ----

const refreshRules = single(async () => {
  try { showRules(await getJSON("/api/rules", tokenHeaders())); } catch (e) { return; /* shown by tick */ }
  // The page may have opened while the gateway restarted: the editor gets
  // its file as soon as the rules say there is one (once: after a failure,
  // Re-read tries again, and the message stays).
  if (!raw && !fileTried && rulesState && rulesState.editable) {
    fileTried = true;
    loadFile(false).catch((e) => showResult(false, "Cannot read the rules file: " + e.message + ". Re-read tries again."));
  }
});

// The Redis can fail over at any moment: its pill is refreshed every second.
const refreshCluster = single(async () => {
  if (!rulesState || !rulesState.cluster) return;
  try { showCluster((await getJSON("/api/rules?config=false")).cluster); } catch (e) { /* shown by tick */ }
});

// staleSince is when the admin API stopped answering (0: it answers).
// Until it answers again, the numbers on the page are the last ones read,
// and the page says so: greyed out, with the time they stopped.
let staleSince = 0;
function markStale(stale) {
  document.body.classList.toggle("stale", stale);
  if (stale) {
    if (!staleSince) staleSince = Date.now();
    const pill = $("#status");
    pill.textContent = "admin API unreachable since " + new Date(staleSince).toLocaleTimeString() + " · the numbers below are stale";
    pill.className = "pill bad";
  } else if (staleSince) {
    staleSince = 0;
    const pill = $("#status");
    pill.textContent = "admin API answers again";
    pill.className = "pill";
    refreshRules(); // the pill says what the rules say again now, not at the next 5 s poll
  }
}

const tick = single(async () => {
  try {
    const res = await getJSON("/api/resources?top=" + MAX_CARDS, tokenHeaders());
    markStale(false);
    showResources(res);
    // Cards drawn already ask for their new samples, new cards for their 5
    // minutes: apart, so that a card coming in does not fetch every card's.
    const names = res.resources.map((r) => r.resource);
    const lists = [names.filter((n) => history.has(n)), names.filter((n) => !history.has(n))].filter((l) => l.length);
    const parts = await Promise.all(lists.map((l) => getJSON(historyURL(l))));
    showHistory({ at: Math.max(res.at, ...parts.map((p) => p.at)), resources: parts.flatMap((p) => p.resources) });
  } catch (e) {
    markStale(true);
  }
  try { showUpstreams(await getJSON("/api/upstreams")); } catch (e) { /* shown above */ }
});

document.addEventListener("DOMContentLoaded", async () => {
  $("#editor").addEventListener("submit", save);
  $("#rule-select").addEventListener("change", showFields);
  $("#params").addEventListener("click", (ev) => {
    const b = ev.target.closest("button.lift");
    if (b && !b.disabled) liftValue(b);
  });
  $("#refresh-file").addEventListener("click", () => loadFile(true).then(() => showResult(true, "Re-read " + raw.path + "."),
    (e) => showResult(false, "Cannot read the rules file: " + e.message)));
  const tok = sessionStorage.getItem("sluiceToken");
  if (tok) $("#token").value = tok;
  $("#token").addEventListener("change", () => sessionStorage.setItem("sluiceToken", $("#token").value));
  await refreshRules();
  tick();
  setInterval(tick, 1000);
  setInterval(refreshRules, 5000);
  setInterval(refreshCluster, 1000);
  refreshParams();
  setInterval(refreshParams, 2000);
});
