"use strict";
// A session's page, its settings: weight, caps, cap per key, rate and burst, maximum
// runtime and the most it may hold queued, read (GET sessions/NAME/settings) when the page
// opens and saved whole (PUT: a field left blank is none, or the service's default); and a
// pause for a number of minutes (POST sessions/NAME/pause with for_s). Only a token that may
// operate is offered the form's buttons. Data is only ever written as form values.
(function () {
  const TOKEN_KEY = "leaseq-token";
  const FIELDS = ["weight", "max_leased", "max_leased_per_key", "rate_per_s", "burst",
    "max_runtime_s", "max_queued"];
  const INTEGERS = new Set(["max_leased", "max_leased_per_key", "burst", "max_runtime_s", "max_queued"]);
  const $ = (id) => document.getElementById(id);
  const form = $("settings-form");
  let mayOperate = null;
  let shownFor = null; // the session whose settings the form holds

  function headers(json) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const h = { "Accept": "application/json", "X-Requested-With": "leaseq-dashboard" };
    if (json) h["Content-Type"] = "application/json";
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  function session() {
    const hash = location.hash.slice(1);
    if (!hash.startsWith("session=")) return null;
    try { return decodeURIComponent(hash.slice("session=".length).split("&")[0]); } catch (e) { return null; }
  }

  async function detail(response) {
    try { return (await response.json()).detail || response.statusText; } catch (e) { return response.statusText; }
  }

  function say(text, bad) {
    $("settings-result").textContent = text;
    $("settings-result").className = bad ? "bad" : "muted";
  }

  async function load() {
    const name = session();
    if (name === null) { shownFor = null; return; }
    if (name === shownFor) return; // a change of the list's filter: the form stays as edited
    if (mayOperate === null) {
      const self = await fetch("tokens/self", { headers: headers(), cache: "no-store" });
      if (self.ok) mayOperate = (await self.json()).operate;
    }
    const response = await fetch("sessions/" + encodeURIComponent(name) + "/settings",
      { headers: headers(), cache: "no-store" });
    if (!response.ok) { say("cannot read the settings: " + await detail(response), true); return; }
    const settings = await response.json();
    for (const field of FIELDS) {
      const value = settings[field];
      form.elements[field].value = value === null || value === undefined ? "" : String(value);
      form.elements[field].disabled = !mayOperate;
    }
    for (const b of document.querySelectorAll("#settings-form button, #pause-for-form button")) b.hidden = !mayOperate;
    $("pause-for-form").hidden = !mayOperate;
    shownFor = name;
    form.dataset.session = name;
    say("");
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = session();
    if (name === null) return;
    const body = {};
    for (const field of FIELDS) {
      const text = form.elements[field].value.trim();
      if (text === "") { if (field !== "weight") body[field] = null; continue; }
      body[field] = INTEGERS.has(field) ? parseInt(text, 10) : Number(text);
    }
    const response = await fetch("sessions/" + encodeURIComponent(name) + "/settings",
      { method: "PUT", headers: headers(true), body: JSON.stringify(body) });
    if (!response.ok) { say("not saved: " + await detail(response), true); return; }
    shownFor = null;
    await load();
    say("saved");
  });

  $("pause-for-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = session();
    const minutes = Number($("pause-minutes").value);
    if (name === null || !(minutes > 0)) return;
    const response = await fetch("sessions/" + encodeURIComponent(name) + "/pause",
      { method: "POST", headers: headers(true), body: JSON.stringify({ for_s: minutes * 60 }) });
    if (!response.ok) { say("pause refused: " + await detail(response), true); return; }
    say("paused for " + minutes + " min");
  });

  $("login").addEventListener("submit", () => { mayOperate = null; shownFor = null; setTimeout(load, 0); });
  $("forget").addEventListener("click", () => { mayOperate = null; shownFor = null; });
  window.addEventListener("hashchange", load);
  load();
})();
