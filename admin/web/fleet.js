// sluice dashboard, the fleet: every gateway that applies the shared rules
// document, from their heartbeats (GET /api/fleet). Loaded after app.js,
// whose helpers ($, el, fmt, getJSON, single) it uses.
"use strict";

function ago(t, now) {
  const s = Math.max(0, (now - new Date(t).getTime()) / 1000);
  return s < 1 ? "now" : s.toFixed(0) + " s ago";
}

function showFleet(data) {
  const panel = $("#fleet-panel");
  panel.hidden = false;
  const src = data.source || {};
  const newest = Math.max(0, ...data.gateways.map((g) => g.version));
  $("#fleet-source").textContent = src.name || "";
  const tot = data.totals || {};
  $("#fleet-totals").replaceChildren(
    ...[["gateways", tot.gateways, ""], ["pass/s", fmt(tot.passQps), "pass"], ["block/s", fmt(tot.blockQps), "block"],
      ["newest version", newest || "–", ""]].map(([k, v, cls]) =>
      el("div", { class: "stat " + cls, "data-total": k }, el("span", { class: "k" }, k), el("span", { class: "v" }, v))));
  const t = el("table", { id: "fleet-table" },
    el("tr", null, ...["gateway", "listen", "version", "pass/s", "block/s", "last seen"].map((h) => el("th", null, h))));
  const now = Date.now();
  for (const g of data.gateways) {
    const behind = g.version < newest;
    t.append(el("tr", { "data-gateway": g.id, class: behind ? "behind" : "" },
      el("td", null, g.id), el("td", null, g.listen), el("td", { "data-k": "version" }, "v" + g.version + (behind ? " (behind)" : "")),
      el("td", { "data-k": "passQps" }, fmt(g.passQps)), el("td", { "data-k": "blockQps" }, fmt(g.blockQps)),
      el("td", null, ago(g.lastSeen, now))));
  }
  if (!data.gateways.length) t.append(el("tr", null, el("td", { colspan: "6", class: "empty" }, "no gateway heard from in the last 3 s")));
  $("#fleet-gateways").replaceChildren(t);
  const banner = $("#fleet-state");
  if (src.fromCache) {
    banner.className = "banner bad";
    banner.textContent = "This gateway serves the last good rules (version " + src.version + ") from " + src.cache + ": the rules source has not been reached since it started.";
  } else if (!src.up) {
    banner.className = "banner bad";
    banner.textContent = "The rules source is unreachable; version " + src.version + " stays in force.";
  } else {
    banner.className = "banner ok";
    banner.textContent = "This gateway applies version " + src.version + " of " + src.name + ".";
  }
}

// One read at a time: with the rules source's Redis down each read waits
// out its 2 s, longer than the 1 s between reads.
const fleetTick = single(async () => {
  if (!rulesState || !rulesState.source) return;
  try { showFleet(await getJSON("/api/fleet")); } catch (e) {
    const banner = $("#fleet-state");
    banner.className = "banner bad";
    banner.textContent = "Cannot read the fleet: " + e.message;
  }
});

document.addEventListener("DOMContentLoaded", () => {
  setInterval(fleetTick, 1000);
  setTimeout(fleetTick, 300);
});
