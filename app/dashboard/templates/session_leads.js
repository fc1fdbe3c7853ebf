"use strict";
// A session's page, its leads: status tabs, a search by error text, key prefix and owner,
// newest or oldest first, a page at a time (GET sessions/NAME/leads), and the leads selected
// retried or cancelled at once (POST sessions/NAME/leads/retry|cancel, by ids), or every lead
// the tab and search select (by the same filter, call after call while the answer says
// "more", each call bounded by the service), with the count of what changed.
// Everything the list shows is in the location's fragment, so a view is a URL to share:
// "#session=NAME&status=failed&error=disk&order=oldest&cursor=…". The list is read when the
// fragment changes and after an action, not on every poll, so a selection stays put.
// Data is only ever written as text (textContent), never parsed as markup.
(function () {
  const TOKEN_KEY = "leaseq-token";
  const FIELDS = ["status", "error", "key_prefix", "owner", "order", "cursor"];
  const INPUTS = { error: "filter-error", key_prefix: "filter-key", owner: "filter-owner" };
  const LIMIT = 50;
  // Calls of one "all matching" action at most (each changes 10,000 leads at most): past
  // them the page says that more may be left, and the operator acts again.
  const MAX_CALLS = 100;
  const $ = (id) => document.getElementById(id);
  let mayOperate = null;
  let shown = 0; // the number of the latest read: an answer to an older one is dropped

  function headers(json) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const h = { "Accept": "application/json", "X-Requested-With": "leaseq-dashboard" };
    if (json) h["Content-Type"] = "application/json";
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  // The session on view and its list's query, from the fragment; null off a session's page.
  function query() {
    const hash = location.hash.slice(1);
    if (!hash.startsWith("session=")) return null;
    const parts = hash.split("&");
    try {
      const q = { session: decodeURIComponent(parts[0].slice("session=".length)) };
      for (const part of parts.slice(1)) {
        const at = part.indexOf("=");
        const name = at < 0 ? part : part.slice(0, at);
        if (FIELDS.includes(name)) q[name] = decodeURIComponent(part.slice(at + 1));
      }
      return q;
    } catch (e) {
      return null;
    }
  }

  function fragment(q) {
    let hash = "session=" + encodeURIComponent(q.session);
    for (const name of FIELDS) {
      if (q[name]) hash += "&" + name + "=" + encodeURIComponent(q[name]);
    }
    return "#" + hash;
  }

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "–" : String(text);
    if (className) td.className = className;
    return td;
  }

  function selected() {
    return Array.from(document.querySelectorAll("#session-leads tbody input:checked"))
      .map((box) => Number(box.value));
  }

  function selectionChanged() {
    const ids = selected();
    for (const box of document.querySelectorAll("#session-leads tbody input[type=checkbox]")) {
      box.closest("tr").classList.toggle("selected", box.checked);
    }
    const boxes = document.querySelectorAll("#session-leads tbody input[type=checkbox]");
    $("select-page").checked = boxes.length > 0 && ids.length === boxes.length;
    for (const verb of ["retry", "cancel"]) {
      $(verb + "-selected").disabled = ids.length === 0;
      $(verb + "-selected").textContent = verb + " selected" + (ids.length ? " (" + ids.length + ")" : "");
    }
  }

  function row(lead) {
    const tr = document.createElement("tr");
    tr.dataset.lead = String(lead.id);
    tr.dataset.status = lead.status;
    const pick = document.createElement("td");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = String(lead.id);
    box.setAttribute("aria-label", "select lead " + lead.id);
    box.addEventListener("change", selectionChanged);
    pick.appendChild(box);
    const link = document.createElement("td");
    const a = document.createElement("a");
    a.href = "#lead=" + lead.id;
    a.textContent = String(lead.id);
    link.appendChild(a);
    const error = lead.error === null ? null : lead.error.split("\n")[0].slice(0, 200);
    tr.append(pick, link, cell(lead.status, "status"), cell(lead.key, "key"), cell(lead.owner, "owner"),
      cell(lead.attempts + " / " + lead.max_attempts, "attempts"),
      cell(new Date(lead.updated_at).toLocaleString(), "updated"), cell(error, "error"));
    return tr;
  }

  function drawControls(q) {
    for (const tab of document.querySelectorAll("#lead-tabs button")) {
      tab.setAttribute("aria-pressed", String((q.status || "") === tab.dataset.status));
    }
    for (const [name, id] of Object.entries(INPUTS)) {
      if (document.activeElement !== $(id)) $(id).value = q[name] || "";
    }
    $("filter-order").value = q.order || "newest";
    $("leads-first").hidden = !q.cursor;
    $("leads-first").href = fragment({ ...q, cursor: "" });
    $("lead-bulk").hidden = !mayOperate;
    $("select-page").hidden = !mayOperate;
  }

  async function load() {
    const q = query();
    if (!q) return;
    const mine = ++shown;
    if (mayOperate === null) {
      const self = await fetch("tokens/self", { headers: headers(), cache: "no-store" });
      if (self.ok) mayOperate = (await self.json()).operate;
    }
    drawControls(q);
    const params = new URLSearchParams({ limit: String(LIMIT) });
    for (const name of FIELDS) if (q[name]) params.set(name, q[name]);
    const response = await fetch("sessions/" + encodeURIComponent(q.session) + "/leads?" + params,
      { headers: headers(), cache: "no-store" });
    if (mine !== shown) return;
    const tbody = $("session-leads").tBodies[0];
    if (!response.ok) {
      tbody.replaceChildren();
      $("bulk-result").textContent = "cannot list the leads: " + await detail(response);
      $("bulk-result").className = "bad";
      return;
    }
    const page = await response.json();
    if (mine !== shown) return;
    const rows = page.leads.map(row);
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      const td = cell("no lead matches", "empty");
      td.colSpan = 8;
      tr.appendChild(td);
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    for (const box of tbody.querySelectorAll("input[type=checkbox]")) box.hidden = !mayOperate;
    $("leads-next").hidden = !page.next_cursor;
    $("leads-next").href = page.next_cursor ? fragment({ ...q, cursor: page.next_cursor }) : "#";
    $("session-leads").dataset.loaded = String(mine);
    selectionChanged();
  }

  async function detail(response) {
    try { return (await response.json()).detail || response.statusText; } catch (e) { return response.statusText; }
  }

  // A new filter starts from the first page.
  function go(changes) {
    const q = query();
    if (!q) return;
    location.hash = fragment({ ...q, ...changes, cursor: "" });
  }

  async function act(verb) {
    const q = query();
    const ids = selected();
    if (!q || ids.length === 0) return;
    $(verb + "-selected").disabled = true;
    const response = await fetch("sessions/" + encodeURIComponent(q.session) + "/leads/" + verb,
      { method: "POST", headers: headers(true), body: JSON.stringify({ ids }) });
    if (!response.ok) {
      $("bulk-result").textContent = verb + " refused: " + await detail(response);
      $("bulk-result").className = "bad";
      selectionChanged();
      return;
    }
    const answer = await response.json();
    const done = verb === "retry" ? "queued again" : "cancelled";
    $("bulk-result").textContent = answer.changed + " of " + ids.length + " leads " + done;
    $("bulk-result").className = "muted";
    await load();
  }

  // The list's filter as the bulk verbs take it: the tab's status and the search.
  function filterOf(q) {
    const filter = {};
    if (q.status) filter.status = [q.status];
    for (const name of Object.keys(INPUTS)) if (q[name]) filter[name] = q[name];
    return filter;
  }

  async function actOnMatching(verb) {
    const q = query();
    if (!q) return;
    const which = verb === "retry" ? "failed" : "queued or leased";
    if (!window.confirm(verb + " every " + which + " lead of " + q.session
      + " that this tab and search select, on every page?")) return;
    const buttons = [$("retry-matching"), $("cancel-matching")];
    for (const b of buttons) b.disabled = true;
    const done = verb === "retry" ? "queued again" : "cancelled";
    const body = JSON.stringify({ filter: filterOf(q) });
    let changed = 0;
    let more = true;
    let calls = 0;
    try {
      while (more && calls < MAX_CALLS) {
        const response = await fetch("sessions/" + encodeURIComponent(q.session) + "/leads/" + verb,
          { method: "POST", headers: headers(true), body });
        calls += 1;
        if (!response.ok) {
          $("bulk-result").textContent = verb + " refused after " + changed + " leads " + done + ": "
            + await detail(response);
          $("bulk-result").className = "bad";
          return;
        }
        const answer = await response.json();
        changed += answer.changed;
        more = answer.more;
        $("bulk-result").textContent = changed + " leads " + done + (more ? " so far…" : "");
      }
      $("bulk-result").textContent = changed + " matching leads " + done
        + (more ? " (more may be left: act again)" : "");
      $("bulk-result").className = "muted";
    } finally {
      for (const b of buttons) b.disabled = false;
    }
    await load();
  }

  for (const tab of document.querySelectorAll("#lead-tabs button")) {
    tab.addEventListener("click", () => go({ status: tab.dataset.status }));
  }
  $("lead-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    const changes = { order: $("filter-order").value === "oldest" ? "oldest" : "" };
    for (const [name, id] of Object.entries(INPUTS)) changes[name] = $(id).value.trim();
    go(changes);
  });
  $("filter-order").addEventListener("change", () => $("lead-filter").requestSubmit());
  $("select-page").addEventListener("change", () => {
    for (const box of document.querySelectorAll("#session-leads tbody input[type=checkbox]")) {
      box.checked = $("select-page").checked;
    }
    selectionChanged();
  });
  $("retry-selected").addEventListener("click", () => act("retry"));
  $("cancel-selected").addEventListener("click", () => act("cancel"));
  $("retry-matching").addEventListener("click", () => actOnMatching("retry"));
  $("cancel-matching").addEventListener("click", () => actOnMatching("cancel"));
  // A token given or forgotten on the page: ask again what it may do, and read the list.
  $("login").addEventListener("submit", () => { mayOperate = null; setTimeout(load, 0); });
  $("forget").addEventListener("click", () => { mayOperate = null; });
  window.addEventListener("hashchange", () => {
    $("bulk-result").textContent = "";
    load();
  });
  load();
})();
