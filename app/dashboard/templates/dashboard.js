"use strict";
// The dashboard's whole behaviour: poll dashboard/data, redraw, cancel and retry.
// The token (when the service wants one) is asked once and kept in sessionStorage.
(function () {
  const TOKEN_KEY = "leaseq-token";
  // The statuses of leaseq.model, as the page names them, then the sum of the first two.
  const STATUSES = document.body.dataset.statuses.split(" ").concat(["pending"]);
  const pollMs = Number(document.body.dataset.pollMs) || 2000;
  const $ = (id) => document.getElementById(id);
  let timer = null;

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
    const ns = "http://www.w3.org/2000/svg";
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

  function sessionRow(s) {
    const tr = document.createElement("tr");
    tr.dataset.session = s.name;
    tr.appendChild(cell(s.name));
    for (const status of STATUSES) tr.appendChild(cell(s[status], "n-" + status));
    tr.appendChild(cell(age(s.oldest_available_age_s), "oldest"));
    tr.appendChild(cell(s.weight, "weight"));
    const capped = s.max_leased !== null && s.leased >= s.max_leased;
    tr.appendChild(cell(s.max_leased === null ? null : s.leased + " / " + s.max_leased,
      capped ? "cap warn" : "cap"));
    tr.appendChild(cell(s.rate_per_s === null ? null
      : s.rate_per_s + "/s" + (s.burst === null ? "" : " ×" + s.burst), "rate"));
    tr.appendChild(spark(s.completed_per_minute));
    tr.appendChild(cell(s.wasted, s.wasted > 0 ? "wasted warn" : "wasted"));
    return tr;
  }

  function button(label, action, leadId) {
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

  function replace(tbody, rows, empty) {
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      const td = cell(empty, "empty");
      td.colSpan = tbody.parentElement.tHead.rows[0].cells.length;
      tr.appendChild(td);
      rows = [tr];
    }
    tbody.replaceChildren(...rows);
  }

  // The chart is drawn in CSS pixels (its viewBox follows its width), so it fills the
  // window at any width without stretching its labels; a resize redraws it.
  const SVG_NS = "http://www.w3.org/2000/svg";
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
    warn(data.warnings || []);
    replace($("sessions").tBodies[0], data.sessions.map(sessionRow), "no leads yet");
    const total = sessionRow(data.total);
    total.dataset.session = "";
    total.id = "total";
    $("sessions").tFoot.replaceChildren(total);
    $("hidden-sessions").textContent = data.hidden_sessions
      ? data.hidden_sessions + " more sessions (least pending) are counted in the total only" : "";
    chart(data.total.completed_per_minute, new Date(data.now));
    replace($("expiring").tBodies[0], data.expiring.map((l) => {
      const tr = document.createElement("tr");
      tr.dataset.lead = String(l.lead_id);
      tr.append(cell(l.lead_id), cell(l.session), cell(l.owner), cell(l.attempt),
        cell(age(l.expires_in_s), l.expires_in_s < 30 ? "warn" : ""), button("cancel", "cancel", l.lead_id));
      return tr;
    }), "no lead is leased");
    replace($("failures").tBodies[0], data.failures.map((f) => {
      const tr = document.createElement("tr");
      tr.dataset.lead = String(f.lead_id);
      tr.append(cell(f.lead_id), cell(f.session), cell(f.owner), cell(f.attempts),
        cell(f.error, "error"), cell(new Date(f.at).toLocaleTimeString()), button("retry", "retry", f.lead_id));
      return tr;
    }), "no failed lead");
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
    $("status").className = "muted";
    document.body.dataset.updated = data.now;
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
    try {
      const response = await fetch("dashboard/data", { headers: headers(), cache: "no-store" });
      if (response.status === 401) {
        const had = sessionStorage.getItem(TOKEN_KEY);
        sessionStorage.removeItem(TOKEN_KEY);
        askToken(had ? "that token was refused" : "");
        return;
      }
      if (!response.ok) throw new Error(response.status + " " + response.statusText);
      draw(await response.json());
      $("login").hidden = true;
      $("main").hidden = false;
      $("forget").hidden = !sessionStorage.getItem(TOKEN_KEY);
    } catch (error) {
      $("status").textContent = "cannot refresh: " + error.message;
      $("status").className = "bad";
    }
    timer = setTimeout(refresh, pollMs);
  }

  async function operate(action, leadId, b) {
    b.disabled = true;
    const response = await fetch("leads/" + leadId + "/" + action, { method: "POST", headers: headers() });
    if (!response.ok) {
      let detail = response.statusText;
      try { detail = (await response.json()).detail || detail; } catch (e) { /* not JSON */ }
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
    $("token").value = "";
    refresh();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    askToken("");
  });
  refresh();
})();
