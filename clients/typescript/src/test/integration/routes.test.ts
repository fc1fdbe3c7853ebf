// Every route of the client against a real leaseq serve, with the answers the document
// describes and the errors its problems stand for.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Conflict, LeaseLost, NotFound, Unauthorized, ValidationError, verifyFence } from "../../index.js";
import { NO_SERVICE, URL, client, session } from "./service.js";

test("push, lease, renew, complete with next, release, get, wait: one lead's life", { skip: NO_SERVICE }, async () => {
  const api = client();
  const s = session();
  const pushed = await api.push(s, [{ payload: { n: 1 }, key: "a" }, { payload: { n: 2 }, priority: 5 }, { payload: { n: 3 }, key: "a" }]);
  assert.equal(pushed.created, 2);
  assert.equal(pushed.duplicates, 1);
  assert.equal(pushed.ids[2], pushed.ids[0]);
  const [lease] = await api.lease({ session: s, owner: "ts", ttlS: 30 });
  assert.ok(lease);
  assert.equal(lease.lead.id, pushed.ids[1]); // the highest priority first
  assert.equal(lease.ttl_s, 30);
  const renewal = await api.renew(lease.lead.id, lease.token, { ttlS: 60, checkpoint: { at: 1 } });
  assert.equal(renewal.ttl_s, 60);
  const [batch] = await api.renewBatch([{ lead_id: lease.lead.id, token: lease.token, ttl_s: 30 }]);
  assert.equal(batch?.ok, true);
  const { lead, leases } = await api.complete(lease.lead.id, lease.token, "done", {
    result: { ok: true },
    next: { session: s, owner: "ts", ttlS: 30 },
  });
  assert.equal(lead.status, "done");
  assert.deepEqual(lead.result, { ok: true });
  assert.equal(leases.length, 1);
  const next = leases[0];
  assert.ok(next);
  await assert.rejects(api.renew(lease.lead.id, lease.token), LeaseLost);
  const released = await api.release(next.lead.id, next.token, { delayS: 0, error: "not now" });
  assert.equal(released.status, "queued");
  const waited = await api.getLead(next.lead.id, { waitS: 0.2 });
  assert.equal(waited.status, "queued");
  await assert.rejects(api.getLead(2 ** 52), NotFound);
  const stats = await api.stats(s);
  assert.equal(stats.done, 1);
  assert.equal(stats.queued, 1);
  const all = await api.statsAll();
  assert.equal(all.sessions[s]?.done, 1);
  const report = await api.report(s);
  assert.equal(report.double_completions, 0);
  assert.equal(report.completed, 1);
});

test("a batch completes and leases in one request; a lease lost is that item's alone", { skip: NO_SERVICE }, async () => {
  const api = client();
  const s = session();
  await api.push(s, [0, 1, 2, 3].map((i) => ({ payload: { i } })));
  const leases = await api.lease({ session: s, owner: "ts", max: 2, ttlS: 30 });
  assert.equal(leases.length, 2);
  const [a, b] = leases as [(typeof leases)[0], (typeof leases)[0]];
  const answer = await api.completeBatch(
    [
      { lead_id: a.lead.id, token: a.token, result: 1 },
      { lead_id: b.lead.id, token: "not-its-token" },
    ],
    { next: { session: s, owner: "ts", max: 2, ttlS: 30 } },
  );
  assert.deepEqual(answer.results.map((r) => r.ok), [true, false]);
  assert.equal(answer.results[1]?.code, "lease_lost");
  assert.equal(answer.leases.length, 2);
  for (const lease of answer.leases) {
    if (lease.fence !== undefined) assert.ok(lease.fence.startsWith(`1.${lease.lead.id}.${lease.attempt}.`));
  }
});

test("operators: cancel, retry, sweep, settings, pause and resume, schedules", { skip: NO_SERVICE }, async () => {
  const api = client();
  const s = session();
  const { ids } = await api.push(s, [{ payload: {} }, { payload: {} }]);
  const [first, second] = ids as [number, number];
  const cancelled = await api.cancel(first);
  assert.equal(cancelled.status, "failed");
  assert.equal(cancelled.error, "cancelled");
  await assert.rejects(api.cancel(first), Conflict);
  assert.equal((await api.retry(first)).status, "queued");
  await assert.rejects(api.retry(second), Conflict);
  await api.cancel(second);
  assert.equal(await api.retryFailed(s), 1);
  const swept = await api.sweep(s);
  assert.deepEqual(swept, { requeued: 0, failed: 0 });
  assert.equal(typeof (await api.sweep()).requeued, "number");
  const settings = await api.putSettings(s, { weight: 2, max_leased: 3 });
  assert.equal(settings.weight, 2);
  assert.equal((await api.settings(s)).max_leased, 3);
  const paused = await api.pause(s, 60);
  assert.ok(paused.paused_until);
  assert.deepEqual(await api.lease({ session: s, owner: "ts" }), []);
  assert.equal((await api.resume(s)).paused_until, null);
  await assert.rejects(api.putSettings(s, { weight: -1 }), ValidationError);
  const name = `${s}-tick`;
  const schedule = await api.putSchedule(name, { session: s, cron: "*/5 * * * *", timezone: "UTC", lead: { payload: { tick: true } } });
  assert.equal(schedule.name, name);
  assert.ok((await api.schedules()).some((x) => x.name === name));
  assert.equal((await api.schedule(name)).cron, "*/5 * * * *");
  await api.deleteSchedule(name);
  await assert.rejects(api.schedule(name), NotFound);
  await assert.rejects(api.putSchedule(name, { session: s, cron: "not cron", timezone: "UTC", lead: { payload: {} } }), ValidationError);
});

test("tokens: a scoped token is shown once, listed without it, revoked", { skip: NO_SERVICE }, async () => {
  const api = client();
  const s = session();
  const made = await api.createToken("producer", `${s}*`, { name: s });
  assert.ok(made.token);
  const producer = client({ token: made.token ?? "" });
  await producer.push(s, [{ payload: {} }]);
  const listed = (await api.tokens()).find((t) => t.name === s);
  assert.ok(listed && !("token" in listed && listed.token));
  assert.equal((await producer.tokenSelf()).role, "producer");
  await api.revokeToken(s);
  await assert.rejects(producer.stats(s), Unauthorized);
  await assert.rejects(client({ token: "wrong" }).stats(s), Unauthorized);
  assert.equal(await client({ token: "wrong" }).healthz(), true);
  assert.equal(await api.readyz(), true);
  assert.match(await api.metrics(), /leaseq_/);
});

test("a lease's fence, when the service signs them, names its lead and attempt", { skip: NO_SERVICE }, async () => {
  const api = client();
  const s = session();
  await api.push(s, [{ payload: {} }]);
  const [lease] = await api.lease({ session: s, owner: "ts" });
  assert.ok(lease);
  const keys = (process.env.LEASEQ_TEST_FENCE_KEYS ?? "").split(",").filter(Boolean);
  if (lease.fence === undefined || keys.length === 0) {
    return; // a service without fences yet: nothing to verify
  }
  const fence = verifyFence(lease.fence, keys);
  assert.equal(fence.leadId, lease.lead.id);
  assert.equal(fence.attempt, lease.attempt);
  assert.ok(URL);
});
