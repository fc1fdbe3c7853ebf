"use strict";
// The dashboard's whole behaviour: poll dashboard/data, redraw, cancel and retry.
// The token (when the service wants one) is asked once and kept in sessionStorage.
// The location's fragment picks the view: the overview, "#lead=ID" (a lead and its
// ledger, from leads/ID/events), "#session=NAME" (its counts, retry all failed) or
// "#schedules" (each schedule with its next ticks, its last leads and its delete).
// Data is only ever written as text (textContent), never parsed as markup.
// What the token may do is asked once per token (tokens/self): the cancel and retry
// buttons are drawn only for one that may operate (an operator, or full access).
(function () {
  const TOKEN_KEY = "leaseq-token";
  // The statuses of leaseq.model, as the page names them, then the sum of the first two.
  const STATUSES = document.body.dataset.statuses.split(" ").concat(["pending"]);
  const pollMs = Number(document.body.dataset.pollMs) || 2000;
  const $ = (id) => document.getElementById(id);
  const SVG_NS = $("chart").namespaceURI;
  let timer = null;
  let search = "";
  let drawn = 0; // the number of the latest refresh: an answer to an older one is dropped
  let mayOperate = null; // what tokens/self said of the token in use; null: not asked yet
  // The service's max_queued (LEASEQ_MAX_QUEUED), from dashboard/data; undefined: not read yet.
  let maxQueuedDefault;

  function headers() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const h = { "Accept": "application/json", "X-Requested-With": "leaseq-dashboard" };
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "–" : String(text);
    if (className) td.className = className;
    return td;
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return null;
    const s = Math.max(0, Math.round(seconds));
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    return Math.round(s / 3600) + " h";
  }

  function spark(values) {
    const ns = SVG_NS;
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("viewBox", "0 0 90 18");
    const max = Math.max(1, ...values);
    const step = values.length > 1 ? 90 / (values.length - 1) : 90;
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", values.map((v, i) => (i * step).toFixed(1) + "," + (17 - (v / max) * 16).toFixed(1)).join(" "));
    svg.appendChild(line);
    const td = document.createElement("td");
    td.appendChild(svg);
    const last = values[values.length - 1];
    td.appendChild(document.createTextNode(" " + last + "/min"));
    return td;
  }

  function linked(text, fragment) {
    const a = document.createElement("a");
    a.href = fragment;
    a.textContent = String(text);
    const td = document.createElement("td");
    td.appendChild(a);
    return td;
  }

  const leadLink = (id) => linked(id, "#lead=" + id);

  // How full a session is: its queued leads against the max_queued that binds it (its own,
  // else the service's), as a bar (a meter: green below half, amber, red from 80%) and
  // "queued / max"; no bound: "–".
  function fullness(node, queued, bound) {
    node.className = "full";
    if (bound === null || bound === undefined) {
      node.replaceChildren(document.createTextNode("–"));
      delete node.dataset.bound;
      return node;
    }
    const meter = document.createElement("meter");
    meter.min = 0;
    meter.max = bound;
    meter.low = bound * 0.5;
    meter.high = bound * 0.8;
    meter.optimum = 0;
    meter.value = Math.min(queued, bound);
    meter.title = Math.round((100 * queued) / bound) + "% full";
    node.replaceChildren(meter, document.createTextNode(" " + queued + " / " + bound));
    node.dataset.queued = String(queued);
    node.dataset.bound = String(bound);
    if (queued >= bound) node.className = "full warn";
    return node;
  }

  // Its share of the workers' time: the seconds its leases that ended in the last minute
  // lasted, against every session's ("–": none ended); the seconds in its title.
  function timeShare(s) {
    const share = s.time_share;
    const td = cell(share === null || share === undefined ? null : Math.round(100 * share) + "%", "share");
    td.title = (Math.round(10 * s.lease_seconds) / 10) + " lease-seconds, last minute";
    td.dataset.leaseSeconds = String(s.lease_seconds);
    return td;
  }

  function sessionRow(s, link) {
    const tr = document.createElement("tr");
    tr.dataset.session = s.name;
    tr.appendChild(link ? linked(s.name, "#session=" + encodeURIComponent(s.name)) : cell(s.name));
    for (const status of STATUSES) tr.appendChild(cell(s[status], "n-" + status));
    tr.appendChild(cell(age(s.oldest_available_age_s), "oldest"));
    tr.appendChild(timeShare(s));
    tr.appendChild(cell(s.suggested_workers, "workers"));
    tr.appendChild(cell(s.weight, "weight"));
    const capped = s.max_leased !== null && s.leased >= s.max_leased;
    tr.appendChild(cell(s.max_leased === null ? null : s.leased + " / " + s.max_leased,
      capped ? "cap warn" : "cap"));
    tr.appendChild(fullness(document.createElement("td"), s.queued, s.queued_bound));
    tr.appendChild(cell(s.rate_per_s === null ? null
      : s.rate_per_s + "/s" + (s.burst === null ? "" : " ×" + s.burst), "rate"));
    tr.appendChild(spark(s.completed_per_minute));
    tr.appendChild(cell(s.wasted, s.wasted > 0 ? "wasted warn" : "wasted"));
    const flow = [];
    if (s.paused_until) flow.push("paused");
    if (s.max_leased_per_key !== null && s.max_leased_per_key !== undefined) flow.push(s.max_leased_per_key + " per key");
    if (s.max_runtime_s !== null && s.max_runtime_s !== undefined) flow.push("runtime " + age(s.max_runtime_s));
    tr.appendChild(cell(flow.length ? flow.join(", ") : null, s.paused_until ? "flow warn" : "flow"));
    return tr;
  }

  function button(label, action, leadId) {
    if (!mayOperate) return cell("");
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.dataset.action = action;
    b.dataset.lead = String(leadId);
    b.addEventListener("click", () => operate(action, leadId, b));
    const td = document.createElement("td");
    td.appendChild(b);
    return td;
  }

  function deleteSchedule(name) {
    if (!mayOperate) return cell("");
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = "delete";
    b.dataset.action = "delete-schedule";
    b.addEventListener("click", async () => {
      b.disabled = true;
      const response = await fetch("schedules/" + encodeURIComponent(name), { method: "DELETE", headers: headers() });
      if (!response.ok) {
        $("status").textContent = "delete of schedule " + name + " refused: " + await problem(response);
        $("status").className = "bad";
        b.disabled = false;
        return;
      }
      await refresh();
    });
    const td = document.createElement("td");
    td.appendChild(b);
    return td;
  }

  // What identifies a link or button across a redraw: a keyboard user's focus follows it.
  function identity(el) {
    return [el.tagName, el.getAttribute("href"), el.dataset.action, el.dataset.lead,
      el.closest("tr") && el.closest("tr").dataset.schedule, el.textContent].join("|");
  }

  function replace(tbody, rows, empty) {
    const focused = tbody.contains(document.activeElement) ? identity(document.activeElement) : null;
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      const td = cell(empty, "empty");
      td.colSpan = tbody.parentElement.tHead.rows[0].cells.length;
      tr.appendChild(td);
      rows = [tr];
    }
    tbody.replaceChildren(...rows);
    if (focused === null) return;
    const again = Array.from(tbody.querySelectorAll("a, button")).find((el) => identity(el) === focused);
    if (again) again.focus();
  }

  // The chart is drawn in CSS pixels (its viewBox follows its width), so it fills the
  // window at any width without stretching its labels; a resize redraws it.
  const PLOT_TOP = 18;
  const PLOT_BOTTOM = 112;
  const CHART_HEIGHT = 150;
  let lastChart = null;

  function svgNode(name, attributes, text) {
    const node = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function clock(date) {
    const pad = (n) => String(n).padStart(2, "0");
    return pad(date.getHours()) + ":" + pad(date.getMinutes());
  }

  // values[i]: completions in the minute that ended (length - 1 - i) minutes before `now`.
  function chart(values, now) {
    lastChart = [values, now];
    const svg = $("chart");
    const width = Math.max(200, svg.clientWidth);
    svg.setAttribute("viewBox", "0 0 " + width + " " + CHART_HEIGHT);
    const n = values.length;
    const slot = width / n;
    const max = Math.max(1, ...values);
    const bars = values.map((v, i) => {
      const h = (v / max) * (PLOT_BOTTOM - PLOT_TOP);
      const bar = svgNode("rect", {
        x: (i * slot + 1).toFixed(1), y: (PLOT_BOTTOM - h).toFixed(1),
        width: Math.max(1, slot - 2).toFixed(1), height: h.toFixed(1),
      });
      bar.appendChild(svgNode("title", {}, v + " completed, " + (n - 1 - i) + " min ago"));
      return bar;
    });
    // The time axis: a tick every 5 minutes, labelled "N min ago" and the database's clock time.
    const axis = svgNode("g", { class: "x-axis" });
    axis.appendChild(svgNode("line", { x1: 0, y1: PLOT_BOTTOM + 0.5, x2: width, y2: PLOT_BOTTOM + 0.5 }));
    const step = n > 10 ? 5 : 1;
    for (let ago = n; ago >= 0; ago -= step) {
      const x = (n - ago) * slot;
      const anchor = ago === n ? "start" : ago === 0 ? "end" : "middle";
      axis.append(
        svgNode("line", { x1: x, y1: PLOT_BOTTOM, x2: x, y2: PLOT_BOTTOM + 5 }),
        svgNode("text", { x, y: PLOT_BOTTOM + 18, "text-anchor": anchor, "data-minutes-ago": ago },
          ago === 0 ? "now" : ago + " min ago"),
        svgNode("text", { class: "clock", x, y: PLOT_BOTTOM + 32, "text-anchor": anchor },
          clock(new Date(now.getTime() - ago * 60000))),
      );
    }
    const label = svgNode("text", { class: "summary", x: 4, y: 12 },
      "max " + Math.max(0, ...values) + "/min, now " + values[n - 1] + "/min");
    svg.replaceChildren(...bars, axis, label);
    svg.dataset.values = values.join(",");
  }

  window.addEventListener("resize", () => { if (lastChart) chart(...lastChart); });

  function warn(messages) {
    const list = $("warnings");
    list.replaceChildren(...messages.map((m) => {
      const li = document.createElement("li");
      li.textContent = m;
      return li;
    }));
    list.hidden = messages.length === 0;
  }

  function draw(data) {
    maxQueuedDefault = data.max_queued_default;
    warn(data.warnings || []);
    replace($("sessions").tBodies[0], data.sessions.map((s) => sessionRow(s, true)),
      search ? "no session matches" : "no leads yet");
    const total = sessionRow(data.total, false);
    total.dataset.session = "";
    total.id = "total";
    $("sessions").tFoot.replaceChildren(total);
    $("hidden-sessions").textContent = data.hidden_sessions
      ? data.hidden_sessions + " more " + (search ? "matching " : "")
        + "sessions (least pending) are counted in the total only" : "";
    chart(data.total.completed_per_minute, new Date(data.now));
    replace($("expiring").tBodies[0], data.expiring.map((l) => {
      const tr = document.createElement("tr");
      tr.dataset.lead = String(l.lead_id);
      tr.append(leadLink(l.lead_id), cell(l.session), cell(l.owner), cell(l.attempt),
        cell(age(l.expires_in_s), l.expires_in_s < 30 ? "warn" : ""), button("cancel", "cancel", l.lead_id));
      return tr;
    }), "no lead is leased");
    replace($("failures").tBodies[0], data.failures.map((f) => {
      const tr = document.createElement("tr");
      tr.dataset.lead = String(f.lead_id);
      tr.append(leadLink(f.lead_id), cell(f.session), cell(f.owner), cell(f.attempts),
        cell(f.error, "error"), cell(new Date(f.at).toLocaleTimeString()), button("retry", "retry", f.lead_id));
      return tr;
    }), "no failed lead");
    replace($("schedules").tBodies[0], (data.schedules || []).map((s) => {
      const tr = document.createElement("tr");
      tr.dataset.schedule = s.name;
      // Its last leads: the session's leads keyed by its ticks (schedule:NAME:TICK).
      const leads = linked("last leads", "#session=" + encodeURIComponent(s.session)
        + "&key_prefix=" + encodeURIComponent("schedule:" + s.name + ":"));
      leads.firstChild.className = "schedule-leads";
      tr.append(cell(s.name), cell(s.session), cell(s.cron), cell(s.timezone),
        ticks(s.next_ticks || [s.next_tick]), leads, deleteSchedule(s.name));
      return tr;
    }), "no schedule");
    const scheduled = (data.schedules || []).length;
    $("schedules-link").textContent = scheduled
      ? scheduled + (scheduled === 1 ? " schedule" : " schedules") + ", with their next ticks"
      : "no schedule";
    document.body.dataset.updated = data.now;
  }

  // A schedule's next ticks, as a list of local times (each its UTC instant in a title).
  function ticks(instants) {
    const list = document.createElement("ol");
    list.className = "ticks";
    for (const at of instants) {
      const li = document.createElement("li");
      const time = document.createElement("time");
      time.dateTime = at;
      time.title = at;
      time.textContent = new Date(at).toLocaleString();
      li.appendChild(time);
      list.appendChild(li);
    }
    const td = document.createElement("td");
    td.className = "next-ticks";
    td.appendChild(list);
    return td;
  }

  function json(value) {
    return value === null || value === undefined ? "–" : JSON.stringify(value, null, 2);
  }

  function drawLead(data) {
    const lead = data.lead;
    $("lead-status").textContent = lead.status;
    const fields = [
      ["session", lead.session], ["status", lead.status], ["owner", lead.owner],
      ["attempts", lead.attempts + " of " + lead.max_attempts], ["priority", lead.priority],
      ["key", lead.key], ["created", lead.created_at], ["updated", lead.updated_at],
      ["available at", lead.available_at], ["lease expires", lead.lease_expires_at],
      ["waits on", (lead.after || []).join(", ") || "–"],
      ["waited on by", (data.dependents || []).join(", ") || "–"],
    ];
    $("lead-fields").tBodies[0].replaceChildren(...fields.map(([name, value]) => {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      th.textContent = name;
      tr.append(th, name === "session"
        ? linked(value, "#session=" + encodeURIComponent(value)) : cell(value, "f-" + name.replace(/ /g, "-")));
      return tr;
    }));
    const actions = [];
    if (lead.status === "queued" || lead.status === "leased") actions.push(button("cancel", "cancel", lead.id));
    if (lead.status === "failed") actions.push(button("retry", "retry", lead.id));
    $("lead-actions").replaceChildren(...actions.map((td) => td.firstChild).filter(Boolean));
    $("lead-payload").textContent = json(lead.payload);
    $("lead-result").textContent = json(lead.result);
    $("lead-error").textContent = lead.error === null ? "–" : lead.error;
    $("lead-checkpoint").textContent = json(lead.checkpoint);
    $("lead-earlier").textContent = data.earlier_events
      ? data.earlier_events + " earlier events are not shown" : "";
    replace($("lead-events").tBodies[0], data.events.map((e) => {
      const tr = document.createElement("tr");
      tr.dataset.event = e.event;
      tr.dataset.attempt = String(e.attempt);
      tr.append(cell(e.id), cell(e.event, "event"), cell(e.attempt, "attempt"), cell(e.owner, "owner"),
        cell(e.status, "status"), cell(e.at, "at"), cell(e.expires_at, "expires"));
      return tr;
    }), "no ledger events recorded (the ledger may be off)");
  }

  // The session's max_queued, else the service's (read once from dashboard/data when the
  // page opened on a session, before any overview was drawn).
  async function boundOf(name) {
    const own = await fetch("sessions/" + encodeURIComponent(name) + "/settings",
      { headers: headers(), cache: "no-store" });
    if (!own.ok) throw new Error(own.status + " " + await problem(own));
    const bound = (await own.json()).max_queued;
    if (bound !== null && bound !== undefined) return bound;
    if (maxQueuedDefault === undefined) {
      const all = await fetch("dashboard/data?search=" + encodeURIComponent(name),
        { headers: headers(), cache: "no-store" });
      if (!all.ok) throw new Error(all.status + " " + await problem(all));
      maxQueuedDefault = (await all.json()).max_queued_default;
    }
    return maxQueuedDefault;
  }

  function drawSession(name, counts, bound) {
    fullness($("session-full"), counts.queued, bound);
    const tr = document.createElement("tr");
    for (const status of STATUSES) tr.appendChild(cell(counts[status], "n-" + status));
    $("session-counts").tBodies[0].replaceChildren(tr);
    $("retry-failed").hidden = !mayOperate;
    $("retry-failed").disabled = counts.failed === 0;
    $("retry-failed").textContent = "retry all failed (" + counts.failed + ")";
    const paused = counts.paused_until;
    $("session-paused").textContent = paused
      ? "paused until " + (paused.startsWith("9999") ? "resumed" : new Date(paused).toLocaleString())
      : "leasing";
    $("pause-session").disabled = Boolean(paused);
    $("resume-session").disabled = !paused;
  }

  // What the fragment asks for: {kind: "overview" | "lead" | "session" | "schedules", ...}.
  function view() {
    const hash = location.hash.slice(1);
    const lead = /^lead=([1-9][0-9]{0,15})$/.exec(hash);
    if (lead) return { kind: "lead", id: lead[1] };
    if (hash === "schedules") return { kind: "schedules" };
    if (hash.startsWith("session=")) {
      try {
        // The name ends at the first "&": what follows is its leads' list (session_leads.js).
        const name = hash.slice("session=".length).split("&")[0];
        return { kind: "session", name: decodeURIComponent(name) };
      } catch (e) { /* a malformed escape: the overview */ }
    }
    return { kind: "overview" };
  }

  function show(v) {
    $("overview").hidden = v.kind !== "overview";
    $("lead-view").hidden = v.kind !== "lead";
    $("session-view").hidden = v.kind !== "session";
    $("schedules-view").hidden = v.kind !== "schedules";
    $("back").hidden = v.kind === "overview";
    if (v.kind === "lead") $("lead-id").textContent = v.id;
    if (v.kind === "session") $("session-name").textContent = v.name;
  }

  function dataUrl(v) {
    if (v.kind === "lead") return "leads/" + v.id + "/events";
    if (v.kind === "session") return "sessions/" + encodeURIComponent(v.name) + "/stats";
    return "dashboard/data" + (search ? "?search=" + encodeURIComponent(search) : "");
  }

  async function problem(response) {
    try { return (await response.json()).detail || response.statusText; } catch (e) { return response.statusText; }
  }

  function askToken(message) {
    clearTimeout(timer);
    $("main").hidden = true;
    $("forget").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("status").textContent = "this service wants an API token";
    $("token").focus();
  }

  async function refresh() {
    clearTimeout(timer);
    const v = view();
    const mine = ++drawn;
    try {
      if (mayOperate === null) {
        const self = await fetch("tokens/self", { headers: headers(), cache: "no-store" });
        if (self.ok) mayOperate = (await self.json()).operate;
      }
      const response = await fetch(dataUrl(v), { headers: headers(), cache: "no-store" });
      if (mine !== drawn) return; // another refresh began meanwhile: its answer counts
      if (response.status === 401) {
        const had = sessionStorage.getItem(TOKEN_KEY);
        sessionStorage.removeItem(TOKEN_KEY);
        mayOperate = null;
        askToken(had ? "that token was refused" : "");
        return;
      }
      const missing = v.kind === "lead" && response.status === 404;
      if (!response.ok && !missing) throw new Error(response.status + " " + await problem(response));
      const data = missing ? null : await response.json();
      const bound = v.kind === "session" ? await boundOf(v.name) : null;
      if (mine !== drawn) return;
      show(v);
      if (v.kind === "lead") {
        $("lead-missing").hidden = !missing;
        $("lead-missing").textContent = missing ? "no lead " + v.id : "";
        $("lead-found").hidden = missing;
        $("lead-status").textContent = "";
        if (data) drawLead(data);
      } else if (v.kind === "session") {
        drawSession(v.name, data, bound);
      } else {
        draw(data);
      }
      $("status").textContent = "updated " + new Date().toLocaleTimeString();
      $("status").className = "muted";
      $("login").hidden = true;
      $("main").hidden = false;
      $("forget").hidden = !sessionStorage.getItem(TOKEN_KEY);
    } catch (error) {
      if (mine !== drawn) return;
      $("status").textContent = "cannot refresh: " + error.message;
      $("status").className = "bad";
    }
    timer = setTimeout(refresh, pollMs);
  }

  async function retryFailed() {
    const v = view();
    if (v.kind !== "session") return;
    const b = $("retry-failed");
    b.disabled = true;
    const response = await fetch("sessions/" + encodeURIComponent(v.name) + "/retry-failed",
      { method: "POST", headers: headers() });
    if (!response.ok) {
      $("status").textContent = "retry of the failed leads of " + v.name + " refused: " + await problem(response);
      $("status").className = "bad";
      b.disabled = false;
      return;
    }
    const answer = await response.json();
    $("retry-failed-result").textContent = answer.requeued + " failed leads queued again";
    await refresh();
  }

  // Pause or resume the session on view (the answer is its settings, paused_until in them).
  async function pauseOrResume(action) {
    const v = view();
    if (v.kind !== "session") return;
    const b = $(action + "-session");
    b.disabled = true;
    const response = await fetch("sessions/" + encodeURIComponent(v.name) + "/" + action,
      { method: "POST", headers: headers() });
    if (!response.ok) {
      $("status").textContent = action + " of " + v.name + " refused: " + await problem(response);
      $("status").className = "bad";
      b.disabled = false;
      return;
    }
    await refresh();
  }

  async function operate(action, leadId, b) {
    b.disabled = true;
    const response = await fetch("leads/" + leadId + "/" + action, { method: "POST", headers: headers() });
    if (!response.ok) {
      const detail = await problem(response);
      $("status").textContent = action + " of lead " + leadId + " refused: " + detail;
      $("status").className = "bad";
      b.disabled = false;
      return;
    }
    await refresh();
  }

  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    mayOperate = null;
    $("token").value = "";
    refresh();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    mayOperate = null;
    askToken("");
  });
  $("find-lead").addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = "lead=" + $("find-lead-id").value.trim();
  });
  let typing = null;
  $("session-search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { search = $("session-search").value.trim(); refresh(); }, 250);
  });
  $("retry-failed").addEventListener("click", retryFailed);
  $("pause-session").addEventListener("click", () => pauseOrResume("pause"));
  $("resume-session").addEventListener("click", () => pauseOrResume("resume"));
  window.addEventListener("hashchange", () => {
    $("retry-failed-result").textContent = "";
    refresh();
  });
  refresh();
})();
