// dmkv cluster dashboard: polls the metadata service every second.
"use strict";

// Every Prometheus metric the page reads, in one place.
const METRIC = {
  requests: "dmkv_metadata_requests_total",
  durationSum: "dmkv_metadata_request_duration_seconds_sum",
  durationCount: "dmkv_metadata_request_duration_seconds_count",
};

const REFRESH_MS = 1000;
// The history is read again at most this often (the service samples every few seconds).
const HISTORY_REFRESH_MS = 5000;
// Ranges offered by the selector, when the service keeps that much.
const RANGES = [["5m", 300e3], ["15m", 900e3], ["1h", 3600e3], ["6h", 21600e3], ["24h", 86400e3]];
// Switch functions that always run (not in the mode register).
const ALWAYS_ON = ["forward"];
const history = [];

function $(id) { return document.getElementById(id); }

// The secret the page sends as a bearer token (the root token or a credential):
// given once in the page's fragment, /dashboard#credential=SECRET (a
// fragment never reaches the server or its logs), then kept for this tab only.
const CREDENTIAL = (() => {
  const m = location.hash.match(/(?:^#|&)credential=([^&]+)/);
  if (m) {
    sessionStorage.setItem("dmkv-credential", decodeURIComponent(m[1]));
    window.history.replaceState(null, "", location.pathname + location.search);
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
      '<td class="name" title="' + esc(m.name) + " · " + regions + ' region(s)">' + esc(m.name) + "</td>" +
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
    '<tr data-health="' + esc((t.health || {}).state || "healthy") + '"><td class="name" title="' + esc(t.name) + '">' + esc(t.name) + "</td><td>" + esc(t.index) + "</td><td>" +
    esc((t.memnodes || []).join(", ")) + "</td><td>" + tableHealth(t) + "</td><td>" + t.replication + "</td><td>" +
    bytes(t.value_limit) + "</td></tr>").join("");
}

function renderRoutes(samples) {
  const rows = new Map();
  for (const s of samples) {
    if (s.name === METRIC.requests) {
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
    if (s.name === METRIC.durationSum) r.sum = s.value;
    if (s.name === METRIC.durationCount) r.count = s.value;
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
  // Only the functions the switch reports as enabled (and forwarding, which always runs).
  const enabled = new Set(ALWAYS_ON.concat(a.enabled_functions || []));
  const rows = Object.keys(a.counters).filter(k => enabled.has(k.split(".")[0])).map(k =>
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
    '<div><b id="a-url" title="' + esc(a.url) + '">' + esc(a.url) + "</b><span>admin</span></div></div>" +
    '<p class="sub" id="a-functions">enabled functions: ' +
    ((a.enabled_functions || []).length ? (a.enabled_functions || []).map(esc).join(", ") : "none (forwarding only)") + "</p>" +
    '<table id="accel-counters"><thead><tr><th>counter</th><th>total</th><th>/s</th></tr></thead><tbody>' + rows + "</tbody></table>";
}


// ---- history ----

let historyRange = null;
let historyAt = 0;

// The range selector: the ranges the service keeps enough history for, and its whole span.
function rangeOptions(spanMs) {
  const sel = $("h-range");
  const opts = RANGES.filter(([, ms]) => ms <= spanMs).map(([name]) => name);
  const whole = Math.round(spanMs / 1000) + "s";
  if (!RANGES.some(([, ms]) => ms === spanMs)) opts.push(whole);
  const now = [...sel.options].map(o => o.value).join(",");
  if (now === opts.join(",")) return;
  sel.innerHTML = opts.map(o => '<option value="' + esc(o) + '">' + esc(o === whole ? "all (" + ago(spanMs) + ")" : o) + "</option>").join("");
  if (!opts.includes(historyRange)) historyRange = opts[0] || null;
  sel.value = historyRange || "";
}

// One chart: a polyline over the range, the newest value and the largest in the caption.
function chart(id, samples, value, fmt, rangeMs, nowMs) {
  const fig = $(id);
  const vals = samples.map(value);
  const max = Math.max(1, ...vals);
  const x = t => (300 * (1 - (nowMs - t) / rangeMs)).toFixed(1);
  const pts = samples.map((s, i) => x(s.at_ms) + "," + (78 - 74 * vals[i] / max).toFixed(1)).join(" ");
  fig.querySelector("polyline").setAttribute("points", pts);
  fig.dataset.points = String(samples.length);
  fig.dataset.last = String(vals.length ? vals[vals.length - 1] : "");
  fig.querySelector("b").textContent = vals.length ? fmt(vals[vals.length - 1]) + " (max " + fmt(Math.max(...vals)) + ")" : "no samples yet";
}

function renderHistory(h) {
  const panel = $("p-history");
  if (!h.span_ms) {
    $("h-note").textContent = "the service keeps no history (metadata --stats-history off)";
    panel.dataset.points = "0";
    return;
  }
  rangeOptions(h.span_ms);
  const samples = h.samples || [];
  const nowMs = samples.length ? samples[samples.length - 1].at_ms : Date.now();
  chart("c-ops", samples, s => s.ops_per_s, rate, h.range_ms, nowMs);
  chart("c-bytes", samples, s => (s.bytes_in_per_s || 0) + (s.bytes_out_per_s || 0), v => bytes(v) + "/s", h.range_ms, nowMs);
  chart("c-naks", samples, s => s.naks_per_s, rate, h.range_ms, nowMs);
  chart("c-free", samples, s => s.free_bytes, bytes, h.range_ms, nowMs);
  panel.dataset.points = String(samples.length);
  $("h-note").textContent = samples.length + " samples, one every " + (h.interval_ms / 1000) + " s; kept for " + ago(h.span_ms);
}

async function refreshHistory(force) {
  if (!force && Date.now() - historyAt < HISTORY_REFRESH_MS) return;
  historyAt = Date.now();
  const q = historyRange ? "?range=" + encodeURIComponent(historyRange) : "";
  renderHistory(await getJson("/v1/cluster/history" + q));
}

// ---- failures ----

// Down, draining and rejoined memnodes, with since when.
function renderFailures(listed) {
  const rows = [];
  const now = Date.now();
  for (const m of listed || []) {
    let state = null, since = "–", note = "";
    if (m.state === "down") {
      state = "down";
      since = since_(now - (Number(m.last_heartbeat_age_ms) || 0));
      note = "no heartbeat for " + ago(m.last_heartbeat_age_ms) + (m.persistent ? "; rejoins with its data (region file)" : "");
    } else if (m.state === "draining" || m.draining) {
      state = "draining";
      note = "takes no new memory";
    } else if ((Number(m.epoch) || 0) > 1) {
      // The registry keeps when a memnode first registered, not when it came back.
      state = "rejoined";
      note = "registered again (region generation " + m.epoch + ")" + (m.persistent ? " with its region file" : " with new memory") +
        "; first registered " + since_(m.registered_at_ms);
    }
    if (!state) continue;
    const cls = state === "down" ? "unhealthy" : state === "draining" ? "down" : "healthy";
    rows.push('<tr data-memnode="' + m.id + '" data-state="' + state + '"><td class="name" title="' + esc(m.name) + '">' + esc(m.name) + " (" + m.id + ")</td>" +
      '<td><span class="badge ' + cls + '">' + state + "</span></td><td>" + esc(since) + '</td><td class="wrap">' + esc(note) + "</td></tr>");
  }
  $("failures").querySelector("tbody").innerHTML = rows.length ? rows.join("") : '<tr><td colspan="4" class="empty">every memnode is up</td></tr>';
}

function since_(atMs) {
  return atMs ? since(atMs) : "–";
}

function renderUnhealthy(tables) {
  const rows = (tables || []).filter(t => t.health && t.health.state && t.health.state !== "healthy").map(t => {
    const lost = (t.health.lost || []).map(l => esc(l.memnode_name) + " (" + l.memnode_id + ") since " + esc(since(l.since_ms)) + ": " + esc(l.reason)).join("<br>");
    return '<tr data-table="' + esc(t.name) + '" data-health="' + esc(t.health.state) + '"><td class="name" title="' + esc(t.name) + '">' + esc(t.name) + "</td><td>" +
      tableHealth(t) + '</td><td class="wrap">' + (lost || "–") + "</td></tr>";
  });
  $("unhealthy").querySelector("tbody").innerHTML = rows.length ? rows.join("") : '<tr><td colspan="3" class="empty">every table is healthy</td></tr>';
}

// ---- re-replication (GET /v1/rereplication; the panel hides while the route is absent) ----

function pick(o, names) {
  for (const n of names) if (o && o[n] !== undefined && o[n] !== null) return o[n];
  return undefined;
}

// GET /v1/rereplication: {running: [{table, home, source, target, reason, bytes_copied,
// bytes_total, state, error}]} (memnodes by id; a few other spellings are accepted).
// A service without the route (404) is asked again at most this often.
const REREPLICATION_RETRY_MS = 30000;
let rereplicationMissingAt = null;

async function refreshRereplication(listed) {
  const panel = $("p-rereplication");
  if (rereplicationMissingAt !== null && Date.now() - rereplicationMissingAt < REREPLICATION_RETRY_MS) return;
  const r = await fetch("/v1/rereplication", { cache: "no-store", headers: authHeaders() });
  if (r.status === 404) { panel.hidden = true; rereplicationMissingAt = Date.now(); return; }
  rereplicationMissingAt = null;
  if (!r.ok) throw new Error("/v1/rereplication: HTTP " + r.status);
  const body = await r.json();
  const copies = Array.isArray(body) ? body : (pick(body, ["running", "copies", "items"]) || []);
  const byId = new Map((listed || []).map(m => [m.id, m]));
  panel.hidden = false;
  $("rereplication").querySelector("tbody").innerHTML = copies.length ? copies.map(c => {
    const done = Number(pick(c, ["bytes_copied", "copied_bytes", "copied"])) || 0;
    const total = Number(pick(c, ["bytes_total", "total_bytes", "total"])) || 0;
    const pct = total ? 100 * done / total : 0;
    const node = v => {
      if (v === undefined || v === null) return "–";
      if (typeof v === "object") return esc(v.name || v.id);
      const m = byId.get(v);
      return m ? esc(m.name) + " (" + esc(v) + ")" : esc(v);
    };
    const home = pick(c, ["home", "set", "replica_set"]);
    const reason = pick(c, ["reason"]);
    const error = pick(c, ["error"]);
    const state = pick(c, ["state", "status"]) ?? "–";
    return '<tr class="copy" data-table="' + esc(pick(c, ["table", "table_name"]) ?? "") + '" data-state="' + esc(state) + '">' +
      '<td class="name">' + esc(pick(c, ["table", "table_name"]) ?? "–") + "</td><td>" + (home === undefined ? "–" : "home " + node(home)) + "</td><td>" +
      node(pick(c, ["source", "source_memnode", "from"])) + "</td><td>" + node(pick(c, ["target", "target_memnode", "to"])) + "</td><td>" +
      bytes(done) + " / " + bytes(total) + '<span class="mini"><span style="width:' + pct.toFixed(1) + '%"></span></span></td><td class="wrap">' +
      esc(state) + (reason ? " (" + esc(reason) + ")" : "") + (error ? ": " + esc(error) : "") + "</td></tr>";
  }).join("") : '<tr><td colspan="6" class="empty">no copy running</td></tr>';
}

// ---- key lookup ----

function tableChoices(tables) {
  const sel = $("l-table");
  const names = (tables || []).map(t => t.name);
  const now = [...sel.options].map(o => o.value);
  if (now.join("\n") === names.join("\n")) return;
  const keep = sel.value;
  sel.innerHTML = names.map(n => '<option value="' + esc(n) + '">' + esc(n) + "</option>").join("");
  if (names.includes(keep)) sel.value = keep;
}

function base64Utf8(text) {
  let bin = "";
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin);
}

function renderLocation(loc, table, key) {
  const el = $("l-result");
  if (!loc.found) {
    el.className = "l-result absent";
    el.dataset.found = "false";
    el.innerHTML = "key <b>" + esc(key) + "</b> is <b>absent</b> from table <b>" + esc(table) + "</b> (" + esc(loc.index) + ")" +
      (loc.place ? ": " + esc(loc.place) : "");
    return;
  }
  const row = (k, v) => "<dt>" + k + "</dt><dd>" + v + "</dd>";
  el.className = "l-result found";
  el.dataset.found = "true";
  el.innerHTML = "<dl>" +
    row("key", "<b>" + esc(key) + "</b> in table <b>" + esc(table) + "</b>") +
    row("index", esc(loc.index)) +
    row("memnodes", esc((loc.memnodes || []).map(m => m.name + " (" + m.id + ")").join(", ") || "–")) +
    row(loc.index === "clover" ? "chain" : "bucket", esc(loc.place || "–")) +
    row("version", loc.version == null ? "–" : esc(loc.version)) +
    row("value length", esc(loc.value_len) + " B") +
    row("value", '<code class="preview" id="l-preview">' + esc(loc.value_preview || "") + "</code>" + (loc.value_truncated ? " …" : "")) +
    "</dl>";
}

function lookupKey(ev) {
  ev.preventDefault();
  return runLookup($("l-table").value, $("l-key").value);
}

// A lookup asked for in the address (?table=NAME&key=TEXT), run once the tables are known.
const PARAMS = new URLSearchParams(location.search);
let pendingLookup = PARAMS.has("key") ? { table: PARAMS.get("table") || "", key: PARAMS.get("key") } : null;

async function runLookup(table, key) {
  const el = $("l-result");
  el.className = "l-result";
  el.textContent = "looking up…";
  try {
    const r = await fetch("/v1/tables/" + encodeURIComponent(table) + "/location?key=" + encodeURIComponent(base64Utf8(key)), { cache: "no-store", headers: authHeaders() });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
    renderLocation(body, table, key);
  } catch (e) {
    el.className = "l-result failed";
    el.dataset.found = "";
    el.textContent = "lookup failed: " + e.message;
  }
}

// ---- layout self-check ----

// With ?layout=check the page writes its own layout into <body data-layout> after each
// refresh (what the browser tests assert: nothing wider than the window, every panel
// inside it, no two panels overlapping).
const LAYOUT_CHECK = PARAMS.get("layout") === "check";

function reportLayout() {
  const panels = [...document.querySelectorAll(".panel")].filter(p => !p.hidden).map(p => {
    const r = p.getBoundingClientRect();
    return { id: p.id, left: r.left, right: r.right, top: r.top + scrollY, bottom: r.bottom + scrollY };
  });
  document.body.dataset.layout = JSON.stringify({
    innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth, panels,
  });
}

$("lookup").addEventListener("submit", lookupKey);
$("h-range").addEventListener("change", e => { historyRange = e.target.value; refreshHistory(true).catch(() => {}); });

async function refresh() {
  try {
    const [stats, memnodes, tables, metrics] = await Promise.all([
      getJson("/v1/cluster/stats"), getJson("/v1/memnodes"), getJson("/v1/tables"), getText("/metrics"),
    ]);
    renderTiles(stats);
    renderMemnodes(stats, memnodes.memnodes);
    renderTables(tables.tables);
    renderAlerts(memnodes.memnodes, tables.tables);
    renderFailures(memnodes.memnodes);
    renderUnhealthy(tables.tables);
    tableChoices(tables.tables);
    if (pendingLookup) {
      const p = pendingLookup;
      pendingLookup = null;
      $("l-table").value = p.table;
      $("l-key").value = p.key;
      await runLookup(p.table, p.key);
    }
    renderRoutes(parseMetrics(metrics));
    renderAccel(stats.accelerator);
    await Promise.all([refreshHistory(false), refreshRereplication(memnodes.memnodes)]);
    if (LAYOUT_CHECK) reportLayout();
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
