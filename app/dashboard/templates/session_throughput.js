"use strict";
// A session's page, its throughput over time: leads finished and failed per minute over the
// last hour (GET sessions/NAME/throughput), drawn as stacked bars in an inline SVG (no
// library: the page works offline). Read when the page opens, then every REREAD_MS while it
// stays open: the hour moves slowly, and each read is one routed statement.
// Data is only ever written as text (textContent), never parsed as markup.
(function () {
  const TOKEN_KEY = "leaseq-token";
  const REREAD_MS = 10000;
  const $ = (id) => document.getElementById(id);
  const SVG_NS = $("session-throughput").namespaceURI;
  const TOP = 14;
  const BOTTOM = 90;
  const HEIGHT = 110;
  let timer = null;
  let current = null; // the session whose chart is read, null off a session's page
  let read = 0; // the number of the latest read: an answer to an older one is dropped

  function headers() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const h = { "Accept": "application/json", "X-Requested-With": "leaseq-dashboard" };
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  function node(name, attributes, text) {
    const n = document.createElementNS(SVG_NS, name);
    for (const [key, value] of Object.entries(attributes)) n.setAttribute(key, String(value));
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // The session on view, from the fragment ("#session=NAME&…"); null off a session's page.
  function session() {
    const hash = location.hash.slice(1);
    if (!hash.startsWith("session=")) return null;
    try { return decodeURIComponent(hash.slice("session=".length).split("&")[0]); } catch (e) { return null; }
  }

  const sum = (values) => values.reduce((a, b) => a + b, 0);

  function draw(name, data) {
    const svg = $("session-throughput");
    const width = Math.max(200, svg.clientWidth);
    svg.setAttribute("viewBox", "0 0 " + width + " " + HEIGHT);
    const n = data.completed.length;
    const slot = width / n;
    const max = Math.max(1, ...data.completed.map((c, i) => c + data.failed[i]));
    const scale = (v) => (v / max) * (BOTTOM - TOP);
    const bars = [];
    data.completed.forEach((done, i) => {
      const failed = data.failed[i];
      const ago = n - 1 - i;
      const x = (i * slot + 0.5).toFixed(1);
      const w = Math.max(1, slot - 1).toFixed(1);
      const g = node("g", { "data-minutes-ago": ago });
      g.appendChild(node("title", {}, done + " finished, " + failed + " failed, " + ago + " min ago"));
      const doneH = scale(done);
      const failedH = scale(failed);
      if (done) g.appendChild(node("rect", { class: "done", x, width: w, y: (BOTTOM - doneH).toFixed(1), height: doneH.toFixed(1) }));
      if (failed) g.appendChild(node("rect", { class: "failed", x, width: w, y: (BOTTOM - doneH - failedH).toFixed(1), height: failedH.toFixed(1) }));
      bars.push(g);
    });
    const axis = node("g", { class: "x-axis" });
    axis.appendChild(node("line", { x1: 0, y1: BOTTOM + 0.5, x2: width, y2: BOTTOM + 0.5 }));
    for (let ago = n; ago >= 0; ago -= 15) {
      const x = (n - ago) * slot;
      const anchor = ago === n ? "start" : ago === 0 ? "end" : "middle";
      axis.appendChild(node("text", { x, y: BOTTOM + 15, "text-anchor": anchor }, ago === 0 ? "now" : ago + " min ago"));
    }
    const label = node("text", { class: "summary", x: 4, y: 11 }, "max " + Math.max(0, ...data.completed.map((c, i) => c + data.failed[i])) + "/min");
    svg.replaceChildren(...bars, axis, label);
    svg.dataset.completed = data.completed.join(",");
    svg.dataset.failed = data.failed.join(",");
    svg.dataset.session = name;
    $("session-throughput-summary").textContent = "last hour: " + sum(data.completed) + " finished, "
      + sum(data.failed) + " failed (" + Math.round(sum(data.completed) / n * 10) / 10 + " finished a minute)";
    svg.dataset.loaded = String(read);
  }

  async function load() {
    clearTimeout(timer);
    const name = session();
    current = name;
    if (name === null) return;
    const mine = ++read;
    try {
      const response = await fetch("sessions/" + encodeURIComponent(name) + "/throughput",
        { headers: headers(), cache: "no-store" });
      if (mine !== read) return;
      if (response.ok) {
        const data = await response.json();
        if (mine !== read) return;
        draw(name, data);
      } else if (response.status !== 401) {
        $("session-throughput-summary").textContent = "cannot read the throughput: " + response.status;
      }
    } catch (error) {
      if (mine === read) $("session-throughput-summary").textContent = "cannot read the throughput: " + error.message;
    }
    if (mine === read) timer = setTimeout(load, REREAD_MS);
  }

  // A token given on the page: read again with it.
  $("login").addEventListener("submit", () => setTimeout(load, 0));
  window.addEventListener("hashchange", () => {
    // Paging or filtering the list keeps the session: its chart stays as drawn.
    if (session() !== current) load();
  });
  load();
})();
