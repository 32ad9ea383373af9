// Headwater's web console: one script, no framework, no build step. Pages are routed by the
// URL's hash; each asks /api/<name> for JSON and redraws; live views use EventSource.
"use strict";

const page = document.getElementById("page");
let timers = [];      // the current page's polls, stopped when the page changes
let sources = [];     // its EventSources, closed likewise

function stopPage() {
  timers.forEach(clearInterval); timers = [];
  sources.forEach((s) => s.close()); sources = [];
}

function every(ms, fn) { fn(); timers.push(setInterval(fn, ms)); }

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "onclick" || name === "onchange" || name === "oninput") node[name] = value;
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(name, params = {}) {
  const query = new URLSearchParams(params).toString();
  const response = await fetch(`/api/${name}${query ? "?" + query : ""}`, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

async function act(name, body) {
  const response = await fetch(`/api/${name}`, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
  return answer;
}

function confirmAction(message) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = message;
  return new Promise((resolve) => {
    dialog.onclose = () => resolve(dialog.returnValue === "ok");
    dialog.showModal();
  });
}

function errorBox(error) { return el("div", { class: "error", role: "alert" }, String(error.message || error)); }

function number(value) {
  if (value === null || value === undefined || value === "") return "—";
  return Number(value).toLocaleString("en-US");
}

function bytes(value) {
  if (value === null || value === undefined) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let n = Number(value), i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function duration(ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function idTime(id) {
  const ms = Number(String(id).split("-")[0]);
  return Number.isFinite(ms) ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "";
}

// -- charts -------------------------------------------------------------------------------

const COLORS = ["#0b6bcb", "#dc6803", "#067647", "#7a5af8"];

function chart(series) {
  const canvas = el("canvas", { class: "chart", width: 900, height: 180, "data-points": 0 });
  const legend = el("div", { class: "legend" },
    series.map((s, i) => el("span", {}, el("i", { style: `background:${COLORS[i]}` }), s.label)));
  const box = el("div", {}, canvas, legend);
  box.series = series;
  box.draw = () => drawChart(canvas, series);
  return box;
}

function drawChart(canvas, series) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 36;
  ctx.clearRect(0, 0, w, h);
  const points = series.flatMap((s) => s.points);
  canvas.dataset.points = String(Math.max(0, ...series.map((s) => s.points.length)));
  if (!points.length) return;
  const max = Math.max(1, ...points.map((p) => p[1]));
  const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(t0 + 1, ...points.map((p) => p[0]));
  ctx.strokeStyle = "#e4e7ec"; ctx.fillStyle = "#667085"; ctx.font = "11px system-ui";
  for (let i = 0; i <= 4; i++) {
    const y = pad / 2 + (h - pad) * i / 4;
    ctx.beginPath(); ctx.moveTo(pad, y); ctx.lineTo(w - 8, y); ctx.stroke();
    ctx.fillText(number(Math.round(max * (4 - i) / 4)), 2, y + 4);
  }
  series.forEach((s, i) => {
    ctx.strokeStyle = COLORS[i]; ctx.lineWidth = 2; ctx.beginPath();
    s.points.forEach(([t, v], j) => {
      const x = pad + (w - pad - 8) * (t - t0) / (t1 - t0);
      const y = pad / 2 + (h - pad) * (1 - v / max);
      if (j) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    });
    if (s.points.length === 1) { const [t, v] = s.points[0]; ctx.arc(pad, pad / 2 + (h - pad) * (1 - v / max), 2, 0, 7); }
    ctx.stroke();
  });
}

function keep(points, value, limit = 180) {
  points.push([Date.now(), Number(value) || 0]);
  if (points.length > limit) points.shift();
}

// -- pages --------------------------------------------------------------------------------

function card(label, value, name) {
  return el("div", { class: "card", "data-field": name }, el("div", { class: "label" }, label),
    el("div", { class: "value" }, value));
}

function overviewPage() {
  const ops = { label: "ops/s", points: [] };
  const graph = chart([ops]);
  const cards = el("div", { class: "cards" });
  const status = el("div");
  page.replaceChildren(el("h1", {}, "Overview"), status, cards, el("h2", {}, "Operations per second"), graph);
  every(1000, async () => {
    try {
      const o = await api("overview");
      status.replaceChildren();
      const aof = o.aof_enabled === "1"
        ? `on (${o.appendfsync || "?"}), last write ${o.aof_last_write_status}` : "off";
      cards.replaceChildren(
        card("Version", `Headwater ${o.headwater_version || ""} (Redis ${o.redis_version})`, "version"),
        card("Role", o.role, "role"),
        card("Memory used", o.used_memory_human, "memory"),
        card("Clients", number(o.connected_clients), "clients"),
        card("Ops/s", number(o.instantaneous_ops_per_sec), "ops"),
        card("Keys", number(o.keys), "keys"),
        card("AOF", aof, "aof"),
        card("Uptime", duration(Number(o.uptime_in_seconds) * 1000), "uptime"),
      );
      document.getElementById("server-line").textContent =
        `${o.role} · port ${o.tcp_port} · ${o.redis_mode}`;
      keep(ops.points, o.instantaneous_ops_per_sec);
      graph.draw();
    } catch (error) { status.replaceChildren(errorBox(error)); }
  });
}

const streamState = { pattern: "*", sort: "length", order: "desc", page: 1, size: 50 };

function streamsPage() {
  const filter = el("input", { type: "search", placeholder: "pattern, e.g. orders:*", value: streamState.pattern === "*" ? "" : streamState.pattern, "aria-label": "Filter by pattern" });
  const status = el("div");
  const table = el("table", { id: "streams" });
  const pager = el("div", { class: "pager" });
  const added = new Map();   // name -> [time, entries_added] at the previous poll, for the rate
  filter.onchange = () => { streamState.pattern = filter.value.trim() || "*"; streamState.page = 1; load(); };
  page.replaceChildren(el("h1", {}, "Streams"),
    el("div", { class: "toolbar" }, filter, el("button", { onclick: () => filter.onchange() }, "Filter")),
    status, table, pager);
  const columns = [["name", "Stream"], ["length", "Length"], ["bytes", "Bytes"],
    ["rate", "Added/s"], ["entries_added", "Entries added"], ["groups", "Groups"], ["last_id", "Last ID"]];
  async function load() {
    let data;
    try { data = await api("streams", streamState); status.replaceChildren(); }
    catch (error) { status.replaceChildren(errorBox(error)); return; }
    const now = Date.now();
    const head = el("tr", {}, columns.map(([key, label]) => {
      const sortable = key !== "rate";
      const th = el("th", { class: [sortable ? "sortable" : "", key === streamState.sort ? `sorted-${streamState.order}` : "", key === "name" || key === "last_id" ? "" : "num"].join(" "), "data-sort": key }, label);
      if (sortable) th.onclick = () => {
        streamState.order = streamState.sort === key && streamState.order === "desc" ? "asc" : "desc";
        streamState.sort = key; load();
      };
      return th;
    }));
    const rows = data.rows.map((row) => {
      const before = added.get(row.name);
      const rate = before ? (row.entries_added - before[1]) / ((now - before[0]) / 1000) : null;
      added.set(row.name, [now, row.entries_added]);
      return el("tr", { "data-stream": row.name },
        el("td", {}, el("a", { href: `#/stream/${encodeURIComponent(row.name)}` }, row.name)),
        el("td", { class: "num" }, number(row.length)), el("td", { class: "num" }, bytes(row.bytes)),
        el("td", { class: "num" }, rate === null ? "—" : rate.toFixed(1)),
        el("td", { class: "num" }, number(row.entries_added)), el("td", { class: "num" }, number(row.groups)),
        el("td", { class: "mono" }, row.last_id));
    });
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, rows));
    const pages = Math.max(1, Math.ceil(data.total / data.size));
    pager.replaceChildren(
      el("button", { disabled: streamState.page <= 1, onclick: () => { streamState.page--; load(); } }, "‹ Previous"),
      el("span", { id: "page-info" }, `Page ${data.page} of ${pages} · ${number(data.total)} streams`),
      el("button", { disabled: streamState.page >= pages, onclick: () => { streamState.page++; load(); } }, "Next ›"));
    page.dataset.loaded = "streams";
  }
  every(5000, load);
}

function streamTabs(key, current) {
  const k = encodeURIComponent(key);
  return el("div", { class: "toolbar" },
    el("a", { href: "#/streams" }, "Streams"), "›", el("strong", { class: "mono" }, key), "·",
    current === "browse" ? el("span", {}, "Entries") : el("a", { href: `#/stream/${k}` }, "Entries"),
    current === "groups" ? el("span", {}, "Groups") : el("a", { href: `#/groups/${k}` }, "Groups"),
    current === "tail" ? el("span", {}, "Live tail") : el("a", { href: `#/tail/${k}` }, "Live tail"));
}

function fieldsTable(fields) {
  return el("table", { class: "fields" }, fields.map(([f, v]) => el("tr", {}, el("td", {}, f), el("td", {}, v))));
}

function browserPage(key) {
  const status = el("div");
  const table = el("table", { id: "entries" });
  const summary = el("span", { class: "muted" });
  const when = el("input", { type: "datetime-local", step: "1", "aria-label": "Jump to time" });
  let shown = null;
  async function load(params) {
    try {
      shown = await api("stream", { key, count: 50, ...params });
      status.replaceChildren();
    } catch (error) { status.replaceChildren(errorBox(error)); return; }
    summary.textContent = `${number(shown.length)} entries · first ${shown.first_id || "—"} · last ${shown.last_id || "—"}`;
    table.replaceChildren(el("thead", {}, el("tr", {}, el("th", {}, "ID"), el("th", {}, "Time (UTC)"), el("th", {}, "Fields"))),
      el("tbody", {}, shown.entries.map((e) => el("tr", { "data-id": e.id },
        el("td", { class: "mono" }, e.id), el("td", { class: "mono" }, idTime(e.id)), el("td", {}, fieldsTable(e.fields))))));
    if (!shown.entries.length) table.append(el("tbody", {}, el("tr", {}, el("td", { colspan: 3, class: "muted" }, "No entries here."))));
    page.dataset.loaded = "stream";
  }
  const first = () => shown && shown.entries.length ? shown.entries[0].id : null;
  const last = () => shown && shown.entries.length ? shown.entries[shown.entries.length - 1].id : null;
  page.replaceChildren(el("h1", {}, "Stream browser"), streamTabs(key, "browse"),
    el("div", { class: "toolbar" },
      el("button", { onclick: () => load({ at: 0 }) }, "« Oldest"),
      el("button", { id: "older", onclick: () => first() && load({ before: first() }) }, "‹ Older"),
      el("button", { id: "newer", onclick: () => last() && load({ after: last() }) }, "Newer ›"),
      el("button", { onclick: () => load({}) }, "Newest »"),
      when, el("button", { id: "jump", onclick: () => when.value && load({ at: Date.parse(when.value + "Z") }) }, "Jump to time"),
      summary),
    status, table);
  load({});
}

function groupsPage(key) {
  const status = el("div");
  const box = el("div");
  const history = new Map();   // group -> {lag, pending} series kept while the page is open
  page.replaceChildren(el("h1", {}, "Groups and consumers"), streamTabs(key, "groups"), status, box);
  const pendingLists = new Map();
  async function load() {
    let data;
    try { data = await api("groups", { key }); status.replaceChildren(); }
    catch (error) { status.replaceChildren(errorBox(error)); return; }
    if (!data.groups.length) { box.replaceChildren(el("p", { class: "muted" }, "This stream has no consumer groups.")); return; }
    const sections = [];
    for (const g of data.groups) {
      if (!history.has(g.name)) history.set(g.name, chart([{ label: "lag", points: [] }, { label: "pending", points: [] }]));
      const graph = history.get(g.name);
      keep(graph.series[0].points, g.lag ?? 0); keep(graph.series[1].points, g.pending);
      let list = pendingLists.get(g.name);
      if (!list) { list = el("div"); pendingLists.set(g.name, list); }
      sections.push(el("section", { class: "group", "data-group": g.name },
        el("h2", {}, `Group ${g.name}`),
        el("div", { class: "cards" }, card("Lag", g.lag === null ? "unknown" : number(g.lag), "lag"),
          card("Pending", number(g.pending), "pending"), card("Consumers", number(g.consumers.length), "consumers"),
          card("Last delivered", g.last_delivered_id, "last-delivered")),
        el("h2", {}, "Lag and pending over time"), graph,
        el("h2", {}, "Consumers"), consumersTable(key, g),
        el("h2", {}, "Pending entries"), list));
    }
    box.replaceChildren(...sections);
    data.groups.forEach((g) => { history.get(g.name).draw(); loadPending(key, g, pendingLists.get(g.name)); });
    page.dataset.loaded = "groups";
  }
  groupsPage.reload = load;
  every(2000, load);
}

function consumersTable(key, g) {
  return el("table", { class: "consumers" },
    el("thead", {}, el("tr", {}, el("th", {}, "Consumer"), el("th", { class: "num" }, "Pending"),
      el("th", { class: "num" }, "Idle"), el("th", { class: "num" }, "Inactive"), el("th", {}, ""))),
    el("tbody", {}, g.consumers.map((c) => el("tr", { "data-consumer": c.name },
      el("td", {}, c.name), el("td", { class: "num" }, number(c.pending)),
      el("td", { class: "num" }, duration(c.idle_ms)), el("td", { class: "num" }, duration(c.inactive_ms)),
      el("td", {}, el("button", { class: "delete-consumer", onclick: () => deleteConsumer(key, g.name, c.name, c.pending) }, "Delete"))))));
}

async function deleteConsumer(key, group, consumer, pending) {
  if (!await confirmAction(`Delete consumer ${consumer} of group ${group}? Its ${pending} pending entries are dropped from the group's pending list.`)) return;
  await runAction(() => act("delconsumer", { key, group, consumer }));
}

async function runAction(action) {
  const status = document.getElementById("action-status") || page.insertBefore(el("div", { id: "action-status" }), page.children[2] || null);
  try {
    const result = await action();
    status.replaceChildren(el("div", { class: "notice" }, "Done: " + JSON.stringify(result)));
  } catch (error) { status.replaceChildren(errorBox(error)); }
  page.querySelectorAll("input[type=checkbox]:checked").forEach((box) => { box.checked = false; });
  if (groupsPage.reload) groupsPage.reload();
}

async function loadPending(key, g, list) {
  if (list.querySelector("input:checked")) return;  // (the user is choosing: leave the list alone)
  let data;
  try { data = await api("pending", { key, group: g.name, count: 100 }); }
  catch (error) { list.replaceChildren(errorBox(error)); return; }
  if (!data.pending.length) { list.replaceChildren(el("p", { class: "muted" }, "Nothing pending.")); return; }
  const target = el("input", { placeholder: "consumer", "aria-label": "Claim to consumer", class: "claim-to" });
  const chosen = () => [...list.querySelectorAll("input[type=checkbox]:checked")].map((box) => box.value);
  list.replaceChildren(
    el("div", { class: "toolbar" }, target,
      el("button", { class: "claim", onclick: async () => {
        const ids = chosen();
        if (!ids.length || !target.value) return;
        if (await confirmAction(`Claim ${ids.length} entries of group ${g.name} to consumer ${target.value}?`))
          await runAction(() => act("claim", { key, group: g.name, consumer: target.value, ids }));
      } }, "Claim to consumer"),
      el("button", { class: "ack", onclick: async () => {
        const ids = chosen();
        if (!ids.length) return;
        if (await confirmAction(`Acknowledge ${ids.length} entries of group ${g.name}? They leave the pending list for good.`))
          await runAction(() => act("ack", { key, group: g.name, ids }));
      } }, "Acknowledge")),
    el("table", { class: "pending" },
      el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "ID"), el("th", {}, "Consumer"),
        el("th", { class: "num" }, "Idle"), el("th", { class: "num" }, "Deliveries"))),
      el("tbody", {}, data.pending.map((p) => el("tr", { "data-id": p.id },
        el("td", {}, el("input", { type: "checkbox", value: p.id, "aria-label": `select ${p.id}` })),
        el("td", { class: "mono" }, p.id), el("td", {}, p.consumer),
        el("td", { class: "num" }, duration(p.idle_ms)), el("td", { class: "num" }, number(p.deliveries)))))));
}

function tailPage(key) {
  const list = el("ul", { class: "tail", id: "tail" });
  const state = el("div", { class: "muted", id: "tail-state" }, "Connecting…");
  page.replaceChildren(el("h1", {}, "Live tail"), streamTabs(key, "tail"), state, list);
  const source = new EventSource(`/api/live/tail?key=${encodeURIComponent(key)}`);
  sources.push(source);
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    if (event.type === "ready") state.textContent = "Waiting for new entries (XREAD BLOCK)…";
    else if (event.type === "error") state.replaceChildren(errorBox(event));
    else if (event.type === "entry") {
      state.textContent = "Live.";
      list.prepend(el("li", { "data-id": event.id }, `${event.id}  `, event.fields.map(([f, v]) => `${f}=${v}`).join("  ")));
      while (list.children.length > 500) list.lastChild.remove();
    }
  };
  source.onerror = () => { state.textContent = "Disconnected; retrying…"; };
}

function replicationPage() {
  const status = el("div");
  const box = el("div");
  page.replaceChildren(el("h1", {}, "Replication and regions"), status, box);
  every(2000, async () => {
    let data;
    try { data = await api("replication"); status.replaceChildren(); }
    catch (error) { status.replaceChildren(errorBox(error)); return; }
    const r = data.replication;
    const parts = [el("div", { class: "cards" },
      card("Role", r.role, "role"),
      card("Replication ID", r.master_replid || "—", "replid"),
      card("Offset", number(r.master_repl_offset), "offset"),
      card("Replicas", number(r.connected_slaves || 0), "replicas"))];
    if (r.role === "slave") {
      parts.push(el("h2", {}, "Primary"), el("div", { class: "cards" },
        card("Primary", `${r.master_host}:${r.master_port}`, "primary"),
        card("Link", r.master_link_status, "link"),
        card("Last I/O", `${r.master_last_io_seconds_ago} s ago`, "last-io"),
        card("Read offset", number(r.slave_read_repl_offset), "read-offset")));
    }
    if (data.replicas.length) {
      const offset = Number(r.master_repl_offset || 0);
      parts.push(el("h2", {}, "Replicas"), el("table", { id: "replicas" },
        el("thead", {}, el("tr", {}, ["Address", "State", "Offset", "Lag (bytes)", "Lag (s)"].map((h) => el("th", {}, h)))),
        el("tbody", {}, data.replicas.map((s) => el("tr", {}, el("td", {}, `${s.ip}:${s.port}`), el("td", {}, s.state),
          el("td", { class: "num" }, number(s.offset)), el("td", { class: "num" }, number(offset - Number(s.offset))),
          el("td", { class: "num" }, s.lag))))));
    }
    const regions = Object.entries(data.regions);
    if (regions.length) {
      parts.push(el("h2", {}, "Regions (active-active)"), el("table", { id: "regions" },
        el("tbody", {}, regions.map(([name, value]) => el("tr", {}, el("td", { class: "mono" }, name), el("td", { class: "mono" }, value))))));
    } else parts.push(el("p", { class: "muted" }, "Not part of an active-active deployment."));
    box.replaceChildren(...parts);
    page.dataset.loaded = "replication";
  });
}

function diagnosticsPage() {
  const status = el("div");
  const slow = el("div"), latency = el("div");
  const events = el("ul", { class: "tail", id: "events" });
  const eventState = el("div", { class: "muted", id: "events-state" });
  page.replaceChildren(el("h1", {}, "Slowlog, latency and keyspace events"), status,
    el("h2", {}, "SLOWLOG"), slow, el("h2", {}, "LATENCY LATEST"), latency,
    el("h2", {}, "Keyspace events (live)"), eventState, events);
  every(3000, async () => {
    let d;
    try { d = await api("diagnostics"); status.replaceChildren(); }
    catch (error) { status.replaceChildren(errorBox(error)); return; }
    slow.replaceChildren(d.slowlog_error ? errorBox(d.slowlog_error) : !d.slowlog.length
      ? el("p", { class: "muted" }, "The slow log is empty.")
      : el("table", { id: "slowlog" }, el("thead", {}, el("tr", {}, ["ID", "When", "Duration", "Command", "Client"].map((h) => el("th", {}, h)))),
        el("tbody", {}, d.slowlog.map((e) => el("tr", {}, el("td", {}, e.id), el("td", {}, new Date(e.at * 1000).toISOString()),
          el("td", { class: "num" }, `${number(e.duration_us)} µs`), el("td", { class: "mono" }, e.argv.join(" ")), el("td", {}, `${e.client} ${e.name}`))))));
    latency.replaceChildren(d.latency_error ? errorBox(d.latency_error) : !d.latency.length
      ? el("p", { class: "muted" }, "No latency events (latency-monitor-threshold may be 0).")
      : el("table", { id: "latency" }, el("thead", {}, el("tr", {}, ["Event", "When", "Latest", "Max"].map((h) => el("th", {}, h)))),
        el("tbody", {}, d.latency.map((e) => el("tr", {}, el("td", {}, e.event), el("td", {}, new Date(e.at * 1000).toISOString()),
          el("td", { class: "num" }, `${e.latest_ms} ms`), el("td", { class: "num" }, `${e.max_ms} ms`))))));
    eventState.textContent = d.notify_keyspace_events
      ? `notify-keyspace-events is "${d.notify_keyspace_events}": events appear below as they happen.`
      : "notify-keyspace-events is empty: the server sends no keyspace events (CONFIG SET notify-keyspace-events KEA to see them).";
    page.dataset.loaded = "diagnostics";
  });
  const source = new EventSource("/api/live/events");
  sources.push(source);
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    if (event.type === "event") {
      events.prepend(el("li", {}, `${new Date().toISOString().slice(11, 23)}  ${event.channel}  ${event.message}`));
      while (events.children.length > 200) events.lastChild.remove();
    } else if (event.type === "error") events.replaceChildren(el("li", {}, errorBox(event)));
  };
}

// -- routing ------------------------------------------------------------------------------

const ROUTES = [
  [/^#?\/?$/, overviewPage, "overview"],
  [/^#\/streams$/, streamsPage, "streams"],
  [/^#\/stream\/(.+)$/, browserPage, "streams"],
  [/^#\/groups\/(.+)$/, groupsPage, "streams"],
  [/^#\/tail\/(.+)$/, tailPage, "streams"],
  [/^#\/replication$/, replicationPage, "replication"],
  [/^#\/diagnostics$/, diagnosticsPage, "diagnostics"],
];

function route() {
  stopPage();
  groupsPage.reload = null;
  delete page.dataset.loaded;
  const hash = location.hash || "#/";
  for (const [pattern, render, tab] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === tab));
    render(...match.slice(1).map(decodeURIComponent));
    return;
  }
  page.replaceChildren(el("h1", {}, "Not found"), el("p", {}, el("a", { href: "#/" }, "Back to the overview")));
}

window.addEventListener("hashchange", route);
route();
