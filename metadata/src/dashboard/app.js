// dmkv cluster dashboard: polls the metadata service every second.
"use strict";

const REFRESH_MS = 1000;
const history = [];

function $(id) { return document.getElementById(id); }

// The credential the page sends as a bearer token (the root token or a `dmkv_`
// credential): given once in the page's fragment, /dashboard#credential=SECRET (a
// fragment never reaches the server or its logs), then kept for this tab only.
const CREDENTIAL = (() => {
  const m = location.hash.match(/(?:^#|&)credential=([^&]+)/);
  if (m) {
    sessionStorage.setItem("dmkv-credential", decodeURIComponent(m[1]));
    window.history.replaceState(null, "", location.pathname);
  }
  return sessionStorage.getItem("dmkv-credential");
})();

function authHeaders() { return CREDENTIAL ? { Authorization: "Bearer " + CREDENTIAL } : {}; }

function httpError(path, r) {
  const hint = r.status === 401 ? " (open /dashboard#credential=SECRET with the root token or a credential)" : "";
  return new Error(path + ": HTTP " + r.status + hint);
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n) || 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}

function rate(v) {
  v = Number(v) || 0;
  if (v >= 1e6) return (v / 1e6).toFixed(2) + "M";
  if (v >= 1e4) return (v / 1e3).toFixed(1) + "k";
  return v.toFixed(1);
}

function count(v) { return (Number(v) || 0).toLocaleString("en-US"); }

function ms(v) {
  if (v === null || v === undefined) return "–";
  return v < 1 ? (v * 1000).toFixed(0) + " µs" : v.toFixed(2) + " ms";
}

function sum(obj) { return Object.values(obj || {}).reduce((a, b) => a + b, 0); }

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store", headers: authHeaders() });
  if (!r.ok) throw httpError(path, r);
  return r.json();
}

async function getText(path) {
  const r = await fetch(path, { cache: "no-store", headers: authHeaders() });
  if (!r.ok) throw httpError(path, r);
  return r.text();
}

// Prometheus text → [{name, labels, value}] (enough for the service's own metrics).
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/);
    if (!m) continue;
    const labels = {};
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
    let l;
    while ((l = re.exec(m[2] || "")) !== null) labels[l[1]] = l[2].replace(/\\(.)/g, "$1");
    out.push({ name: m[1], labels, value: parseFloat(m[3]) });
  }
  return out;
}

function renderTiles(stats) {
  const t = stats.totals;
  $("t-healthy").textContent = t.healthy + " / " + t.memnodes;
  $("t-capacity").textContent = bytes(t.capacity_bytes);
  const pct = t.capacity_bytes ? (100 * t.leased_bytes / t.capacity_bytes) : 0;
  $("t-alloc-bar").style.width = pct.toFixed(1) + "%";
  $("t-alloc").textContent = bytes(t.leased_bytes) + " allocated (" + pct.toFixed(1) + "%), " + bytes(t.free_bytes) + " free";
  $("t-dgrams").textContent = rate(t.datagrams_in_per_s);
  $("t-msgs").textContent = rate(t.messages_per_s);
  $("t-naks").textContent = rate(t.naks_per_s) + " · " + rate(t.dropped_per_s);
  const m = stats.metadata;
  $("t-meta").textContent = rate(m.requests_per_s);
  $("t-meta-lat").textContent = "mean " + ms(m.latency_mean_ms) + ", p99 ≤ " + ms(m.latency_p99_ms);
  history.push(t.messages_per_s);
  while (history.length > 60) history.shift();
  const max = Math.max(1, ...history);
  const pts = history.map((v, i) => (i * 120 / 59).toFixed(1) + "," + (27 - 26 * v / max).toFixed(1)).join(" ");
  $("spark").querySelector("polyline").setAttribute("points", pts);
}

function ago(msAgo) {
  const s = Math.max(0, Math.round((Number(msAgo) || 0) / 1000));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return Math.round(s / 3600) + " h";
}

function since(atMs) {
  return new Date(Number(atMs) || 0).toLocaleString();
}

// Memnodes that are down and tables that lost data, loudly, above everything else.
function renderAlerts(listed, tables) {
  const lines = [];
  for (const m of listed || []) {
    if (m.state === "down") {
      lines.push('<li class="alert-memnode" data-memnode="' + m.id + '">memnode <b>' + esc(m.name) + "</b> (" + m.id +
        ") is <b>down</b>: no heartbeat for " + ago(m.last_heartbeat_age_ms) +
        (m.persistent ? " (it keeps a region file and rejoins with its data when it restarts)" : "") + "</li>");
    } else if (m.state === "draining") {
      lines.push('<li class="alert-memnode warn" data-memnode="' + m.id + '">memnode <b>' + esc(m.name) + "</b> (" + m.id +
        ") is draining: it takes no new memory</li>");
    }
  }
  for (const t of tables || []) {
    const h = t.health || {};
    if (!h.state || h.state === "healthy") continue;
    const where = (h.lost || []).map(l => esc(l.memnode_name) + " since " + esc(since(l.since_ms)) + " (" + esc(l.reason) + ")").join("; ");
    lines.push('<li class="alert-table" data-table="' + esc(t.name) + '">table <b>' + esc(t.name) + "</b> is <b>" +
      esc(h.state) + "</b>: lost on " + where + "</li>");
  }
  const el = $("alerts");
  el.hidden = lines.length === 0;
  el.innerHTML = lines.length ? "<ul>" + lines.join("") + "</ul>" : "";
  const lost = (tables || []).filter(t => t.health && t.health.state === "lost").length;
  const degraded = (tables || []).filter(t => t.health && t.health.state === "degraded").length;
  $("t-tables").textContent = lost + " · " + degraded;
}

function renderMemnodes(stats, listed) {
  const body = $("memnodes").querySelector("tbody");
  const byId = new Map((listed || []).map(m => [m.id, m]));
  if (!stats.memnodes.length) {
    body.innerHTML = '<tr><td colspan="18" class="empty">no memnodes registered</td></tr>';
    return;
  }
  body.innerHTML = stats.memnodes.map(m => {
    const info = byId.get(m.id) || {};
    const health = info.state === "down"
      ? '<span class="badge unhealthy" title="no heartbeat for ' + ago(info.last_heartbeat_age_ms) + '">down · ' + ago(info.last_heartbeat_age_ms) + "</span>"
      : !m.up ? '<span class="badge down" title="' + esc(m.error || "") + '">unreachable</span>'
      : info.state === "draining" ? '<span class="badge down">draining</span>'
      : m.healthy ? '<span class="badge healthy">healthy</span>' : '<span class="badge unhealthy">unhealthy</span>';
    const pct = m.capacity_bytes ? 100 * m.leased_bytes / m.capacity_bytes : 0;
    const v = m.messages_per_s || {};
    const regions = (info.regions || []).length;
    return '<tr id="mn-' + m.id + '" data-health="' + (m.healthy ? "healthy" : "unhealthy") + '" data-state="' + esc(info.state || "") + '">' +
      "<td>" + m.id + "</td>" +
      '<td class="name" title="' + regions + ' region(s)">' + esc(m.name) + "</td>" +
      "<td>" + esc(m.data_addr) + "</td>" +
      "<td>" + health + "</td>" +
      '<td class="capacity">' + bytes(m.capacity_bytes) + "</td>" +
      '<td>' + bytes(m.leased_bytes) + '<span class="mini"><span style="width:' + pct.toFixed(1) + '%"></span></span></td>' +
      "<td>" + bytes(m.free_bytes) + "</td>" +
      "<td>" + count(m.qps) + "</td>" +
      '<td class="rx" data-v="' + m.datagrams_in_per_s + '">' + rate(m.datagrams_in_per_s) + "</td>" +
      "<td>" + rate(m.datagrams_out_per_s) + "</td>" +
      '<td class="reads">' + rate(v.read) + "</td>" +
      '<td class="writes">' + rate(v.write) + "</td>" +
      "<td>" + rate(v.cas) + "</td>" +
      "<td>" + rate(v.faa) + "</td>" +
      '<td title="' + esc(JSON.stringify(m.naks_total)) + '">' + count(sum(m.naks_total)) + "</td>" +
      '<td title="' + esc(JSON.stringify(m.dropped_total)) + '">' + count(sum(m.dropped_total)) + "</td>" +
      "<td>" + count(m.retransmissions_total) + "</td>" +
      '<td class="lat" data-v="' + (m.batch_latency_p99_us ?? "") + '">' +
      (m.batch_latency_mean_us == null ? "–" : ms(m.batch_latency_mean_us / 1000) + " · " + ms(m.batch_latency_p99_us / 1000)) +
      "</td>" +
      "</tr>";
  }).join("");
}

function tableHealth(t) {
  const h = t.health || { state: "healthy", lost: [] };
  const cls = h.state === "healthy" ? "healthy" : h.state === "degraded" ? "down" : "unhealthy";
  const title = (h.lost || []).map(l => "lost on " + l.memnode_name + " since " + since(l.since_ms) + ": " + l.reason).join("\n");
  return '<span class="badge ' + cls + '" title="' + esc(title) + '">' + esc(h.state) + "</span>";
}

function renderTables(tables) {
  const body = $("tables").querySelector("tbody");
  if (!tables.length) {
    body.innerHTML = '<tr><td colspan="6" class="empty">no tables</td></tr>';
    return;
  }
  body.innerHTML = tables.map(t =>
    '<tr data-health="' + esc((t.health || {}).state || "healthy") + '"><td>' + esc(t.name) + "</td><td>" + esc(t.index) + "</td><td>" +
    esc((t.memnodes || []).join(", ")) + "</td><td>" + tableHealth(t) + "</td><td>" + t.replication + "</td><td>" +
    bytes(t.value_limit) + "</td></tr>").join("");
}

function renderRoutes(samples) {
  const rows = new Map();
  for (const s of samples) {
    if (s.name === "dmkv_metadata_requests_total") {
      const k = s.labels.route + " " + s.labels.method;
      const r = rows.get(k) || { route: s.labels.route, method: s.labels.method, n: 0, sum: 0, count: 0 };
      r.n += s.value;
      rows.set(k, r);
    }
  }
  for (const s of samples) {
    const k = s.labels.route + " " + s.labels.method;
    const r = rows.get(k);
    if (!r) continue;
    if (s.name === "dmkv_metadata_request_duration_seconds_sum") r.sum = s.value;
    if (s.name === "dmkv_metadata_request_duration_seconds_count") r.count = s.value;
  }
  const list = [...rows.values()].sort((a, b) => b.n - a.n).slice(0, 8);
  $("routes").querySelector("tbody").innerHTML = list.map(r =>
    "<tr><td>" + esc(r.route) + "</td><td>" + esc(r.method) + "</td><td>" + count(r.n) + "</td><td>" +
    (r.count ? ms(1000 * r.sum / r.count) : "–") + "</td></tr>").join("");
}

function renderAccel(a) {
  const el = $("accel");
  if (!a) return;
  if (!a.up) {
    el.innerHTML = '<p class="empty">accelerator ' + esc(a.url) + " unreachable: " + esc(a.error || "") + "</p>";
    return;
  }
  // Every value carries its raw number in data-v (for tests and scrapers of the page).
  const tile = (id, v, text, label) =>
    '<div><b id="' + id + '" data-v="' + (Number(v) || 0) + '">' + text + "</b><span>" + label + "</span></div>";
  const rows = Object.keys(a.counters).map(k =>
    '<tr id="ac-' + esc(k) + '"><td>' + esc(k) + '</td><td class="tot" data-v="' + (Number(a.counters[k]) || 0) + '">' +
    count(a.counters[k]) + '</td><td class="rate" data-v="' + (Number(a.counters_per_s[k]) || 0) + '">' +
    rate(a.counters_per_s[k]) + "</td></tr>").join("");
  el.innerHTML =
    '<div class="kv">' +
    tile("a-rx", a.datagrams_in_per_s, rate(a.datagrams_in_per_s), "datagrams in /s") +
    tile("a-hits", a.steering_hits_total, count(a.steering_hits_total), "steering hits") +
    tile("a-misses", a.steering_misses_total, count(a.steering_misses_total), "steering misses") +
    tile("a-tx", a.datagrams_out_per_s, rate(a.datagrams_out_per_s), "datagrams out /s") +
    tile("a-routes", a.routes, count(a.routes), "connections") +
    '<div><b id="a-url">' + esc(a.url) + "</b><span>admin</span></div></div>" +
    '<table id="accel-counters"><thead><tr><th>counter</th><th>total</th><th>/s</th></tr></thead><tbody>' + rows + "</tbody></table>";
}

async function refresh() {
  try {
    const [stats, memnodes, tables, metrics] = await Promise.all([
      getJson("/v1/cluster/stats"), getJson("/v1/memnodes"), getJson("/v1/tables"), getText("/metrics"),
    ]);
    renderTiles(stats);
    renderMemnodes(stats, memnodes.memnodes);
    renderTables(tables.tables);
    renderAlerts(memnodes.memnodes, tables.tables);
    renderRoutes(parseMetrics(metrics));
    renderAccel(stats.accelerator);
    const st = $("status");
    st.className = "status";
    st.textContent = "updated " + new Date(stats.at_ms).toLocaleTimeString() + " · rates over " +
      (stats.interval_ms / 1000).toFixed(1) + " s · metadata up " + stats.metadata.uptime_seconds + " s · " +
      stats.metadata.leases_active + " leases";
  } catch (e) {
    const st = $("status");
    st.className = "status stale";
    st.textContent = "refresh failed: " + e.message;
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
