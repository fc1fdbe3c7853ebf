"use strict";
// A lead's page, its dependencies as a small graph: the leads it waits on (its `after`) and
// theirs above it, the leads that wait on it (its dependents) and theirs below, two steps
// each way, each node a link to its own page, coloured by its status. Each node is read
// from leads/ID/events (the lead and its dependents); at most MAX_PER_LEVEL per level.
// Read when the fragment names a lead. Data is only ever written as text.
(function () {
  const TOKEN_KEY = "leaseq-token";
  const STEPS = 2;
  const MAX_PER_LEVEL = 12;
  const NODE_W = 118;
  const NODE_H = 30;
  const ROW_H = 62;
  const $ = (id) => document.getElementById(id);
  const svg = $("lead-graph");
  const NS = svg.namespaceURI;
  let drawn = 0;

  function headers() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const h = { "Accept": "application/json", "X-Requested-With": "leaseq-dashboard" };
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  function leadOnView() {
    const found = /^lead=([1-9][0-9]{0,15})$/.exec(location.hash.slice(1));
    return found ? Number(found[1]) : null;
  }

  async function read(id) {
    const response = await fetch("leads/" + id + "/events", { headers: headers(), cache: "no-store" });
    if (!response.ok) return null;
    const data = await response.json();
    return { id, status: data.lead.status, after: data.lead.after || [], dependents: data.dependents || [] };
  }

  function node(name, attributes, text) {
    const n = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attributes)) n.setAttribute(key, String(value));
    if (text !== undefined) n.textContent = text;
    return n;
  }

  async function load() {
    const center = leadOnView();
    if (center === null) return;
    const mine = ++drawn;
    const nodes = new Map(); // id -> {id, status, after, dependents, level}
    const first = await read(center);
    if (mine !== drawn) return;
    if (!first) { svg.replaceChildren(); svg.dataset.lead = ""; return; }
    first.level = 0;
    nodes.set(center, first);
    // Breadth first, up by `after` and down by `dependents`, each step's reads at once.
    for (const [direction, next] of [[-1, (n) => n.after], [1, (n) => n.dependents]]) {
      let frontier = [first];
      for (let step = 1; step <= STEPS && frontier.length; step++) {
        const ids = [];
        for (const n of frontier) for (const id of next(n)) if (!nodes.has(id) && !ids.includes(id)) ids.push(id);
        const found = (await Promise.all(ids.slice(0, MAX_PER_LEVEL).map(read))).filter(Boolean);
        if (mine !== drawn) return;
        for (const n of found) { n.level = direction * step; nodes.set(n.id, n); }
        frontier = found;
      }
    }
    draw(center, nodes);
  }

  function draw(center, nodes) {
    const levels = new Map();
    for (const n of nodes.values()) {
      if (!levels.has(n.level)) levels.set(n.level, []);
      levels.get(n.level).push(n);
    }
    const order = Array.from(levels.keys()).sort((a, b) => a - b);
    const widest = Math.max(...order.map((l) => levels.get(l).length));
    const width = Math.max(600, widest * (NODE_W + 16) + 16);
    const height = order.length * ROW_H + 8;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.style.height = height + "px";
    const at = new Map();
    order.forEach((level, row) => {
      const here = levels.get(level).sort((a, b) => a.id - b.id);
      const slot = width / here.length;
      here.forEach((n, i) => at.set(n.id, { x: slot * i + slot / 2, y: row * ROW_H + 8 + NODE_H / 2 }));
    });
    const edges = [];
    for (const n of nodes.values()) {
      for (const parent of n.after) {
        if (!at.has(parent)) continue;
        const a = at.get(parent);
        const b = at.get(n.id);
        edges.push(node("line", { x1: a.x, y1: a.y + NODE_H / 2, x2: b.x, y2: b.y - NODE_H / 2,
          "data-from": parent, "data-to": n.id }));
      }
    }
    const boxes = Array.from(nodes.values()).map((n) => {
      const p = at.get(n.id);
      const g = node("g", { class: n.status + (n.id === center ? " center" : ""), "data-lead": n.id, "data-status": n.status });
      const link = node("a", { href: "#lead=" + n.id });
      link.append(
        node("rect", { x: p.x - NODE_W / 2, y: p.y - NODE_H / 2, width: NODE_W, height: NODE_H }),
        node("text", { x: p.x, y: p.y + 4, "text-anchor": "middle" }, n.id + " " + n.status),
      );
      link.appendChild(node("title", {}, "lead " + n.id + ": " + n.status));
      g.appendChild(link);
      return g;
    });
    svg.replaceChildren(...edges, ...boxes);
    svg.dataset.lead = String(center);
  }

  window.addEventListener("hashchange", load);
  $("login").addEventListener("submit", () => setTimeout(load, 0));
  load();
})();
