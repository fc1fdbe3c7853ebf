// The Worker against a real leaseq serve: completions coalesced with the next leases,
// prefetch, a lost lease stopping exactly its handler, the maximum runtime, errors and
// retries, a stop that gives back what is held.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Cached, type Job, Worker, type WorkerOptions } from "../../index.js";
import { NO_SERVICE, client, gate, recording, session, stoppedBy, until } from "./service.js";

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

function worker(options: WorkerOptions & { fetch?: typeof fetch }): Worker {
  const { fetch, ...rest } = options;
  return new Worker(client(fetch ? { fetch } : {}), { logger: quiet, ...rest });
}

test("handlers that finish together are completed in one batch that leases as many", { skip: NO_SERVICE }, async () => {
  const s = session();
  await client().push(s, Array.from({ length: 8 }, (_, i) => ({ payload: { i } })));
  const { fetch, seen } = recording();
  const together = gate();
  let started = 0;
  const w = worker({
    session: s,
    concurrency: 4,
    prefetch: 0,
    untilEmpty: true,
    waitS: 0.5,
    fetch,
    handler: async (job: Job) => {
      started += 1;
      if (started === 4) together.open();
      await together.opened;
      return { id: job.lead.id };
    },
  });
  const stats = await w.run();
  assert.equal(stats.done, 8);
  assert.equal(seen.filter((r) => r.path === "/complete").length, 0);
  const batches = seen.filter((r) => r.path === "/complete/batch");
  const first = batches[0];
  assert.ok(first?.body);
  assert.equal((first.body.items as unknown[]).length, 4);
  assert.deepEqual((first.body.next as { max: number }).max, 4); // the four slots it frees
  assert.ok(first.headers["Idempotency-Key"]);
  assert.equal(new Set(batches.map((b) => b.headers["Idempotency-Key"])).size, batches.length);
  const leases = seen.filter((r) => r.path === "/lease");
  assert.ok(leases.every((r) => (r.body?.max as number) <= 4));
  const report = await client().report(s);
  assert.equal(report.double_completions, 0);
});

test("a lead is prefetched while a handler runs, timed and renewed like any other", { skip: NO_SERVICE }, async () => {
  const s = session();
  const api = client();
  await api.push(s, [0, 1, 2].map((i) => ({ payload: { i } })));
  const release = gate();
  const w = worker({
    session: s,
    concurrency: 1,
    prefetch: 1,
    ttlS: 3,
    untilEmpty: true,
    waitS: 0.5,
    handler: async () => {
      await release.opened;
      return null;
    },
  });
  const running = w.run();
  await until(async () => (await api.stats(s)).leased === 2, 30, "a lead running and one prefetched");
  // Past its ttl: the prefetched lease is renewed while it waits, so it is still valid.
  const before = await api.report(s);
  await until(async () => (await api.stats(s)).leased === 2 && Date.now() > 0, 1, "still held");
  release.open();
  const stats = await running;
  assert.equal(stats.done, 3);
  assert.equal(stats.lost, 0);
  const after = await api.report(s);
  assert.equal(after.expired, 0);
  assert.equal(before.double_completions + after.double_completions, 0);
});

test("a lease lost stops exactly its handler; the other goes on and completes", { skip: NO_SERVICE }, async () => {
  const s = session();
  const api = client();
  const { ids } = await api.push(s, [{ payload: {} }, { payload: {} }]);
  const [victim, other] = ids as [number, number];
  const finish = gate();
  const stopped: string[] = [];
  let started = 0;
  const w = worker({
    session: s,
    concurrency: 2,
    prefetch: 0,
    ttlS: 3,
    handler: async (job: Job) => {
      started += 1;
      await Promise.race([finish.opened, stoppedBy(job, stopped, true)]);
      return "ok";
    },
  });
  const running = w.run();
  await until(() => started === 2, 30, "both handlers to start");
  await api.cancel(victim);
  await until(() => stopped.length > 0, 30, "the cancelled lead's handler to stop");
  assert.deepEqual(stopped, [`${victim}:lost`]);
  finish.open();
  await until(async () => (await api.getLead(other)).status === "done", 30, "the other to complete");
  w.stop();
  const stats = await running;
  assert.equal(stats.lost, 1);
  assert.equal(stats.done, 1);
  assert.equal((await api.getLead(victim)).error, "cancelled");
});

test("past its maximum runtime a handler is stopped: its lead retried later, or failed on its last attempt", { skip: NO_SERVICE }, async () => {
  const s = session();
  const api = client();
  const { ids } = await api.push(s, [{ payload: {} }, { payload: {}, max_attempts: 1 }]);
  const [again, last] = ids as [number, number];
  const reasons: string[] = [];
  const w = worker({
    session: s,
    concurrency: 2,
    maxRuntimeS: 0.2,
    retryDelayS: () => 600,
    handler: (job: Job) => stoppedBy(job, reasons),
  });
  const running = w.run();
  const settled = async (): Promise<boolean> => {
    const [a, b] = [await api.getLead(again), await api.getLead(last)];
    return a.status === "queued" && a.attempts === 1 && b.status === "failed";
  };
  await until(settled, 30, "one lead given back, the other failed");
  w.stop();
  const stats = await running;
  assert.deepEqual(reasons, ["max_runtime", "max_runtime"]);
  assert.deepEqual([stats.errors, stats.released, stats.failed], [2, 1, 1]);
  assert.equal((await api.getLead(last)).error, "max runtime (0.2s)");
});

test("a handler that throws is retried; on its last attempt the lead fails with the error", { skip: NO_SERVICE }, async () => {
  const s = session();
  const api = client();
  const { ids } = await api.push(s, [{ payload: { flaky: true } }, { payload: { doomed: true }, max_attempts: 1 }, { payload: { cached: true } }]);
  const [flaky, doomed, cached] = ids as [number, number, number];
  const w = worker({
    session: s,
    untilEmpty: true,
    waitS: 0.5,
    retryDelayS: () => 0,
    handler: (job: Job) => {
      const payload = job.lead.payload as Record<string, boolean>;
      if (payload.doomed || (payload.flaky && job.attempt === 1)) throw new Error(`attempt ${job.attempt} broke`);
      return payload.cached ? new Cached({ from: "elsewhere" }) : { attempt: job.attempt };
    },
  });
  const stats = await w.run();
  assert.deepEqual([stats.done, stats.failed, stats.cached, stats.errors], [1, 1, 1, 2]);
  assert.deepEqual((await api.getLead(flaky)).result, { attempt: 2 });
  const failed = await api.getLead(doomed);
  assert.equal(failed.status, "failed");
  assert.equal(failed.error, "Error: attempt 1 broke");
  assert.deepEqual((await api.getLead(cached)).result, { from: "elsewhere" });
});

test("stop() gives back what is held: running handlers after the grace, the rest at once", { skip: NO_SERVICE }, async () => {
  const s = session();
  const api = client();
  await api.push(s, Array.from({ length: 3 }, () => ({ payload: {} })));
  let started = 0;
  const w = worker({
    session: s,
    concurrency: 2,
    prefetch: 1,
    graceS: 0.2,
    handler: (job: Job) => {
      started += 1;
      return stoppedBy(job);
    },
  });
  const running = w.run();
  await until(async () => started === 2 && (await api.stats(s)).leased === 3, 30, "two running, one prefetched");
  w.stop();
  const stats = await running;
  assert.equal(stats.released, 3);
  const counts = await api.stats(s);
  assert.deepEqual([counts.queued, counts.leased], [3, 0]);
});

test("options out of range are refused before anything is leased", () => {
  const handler = (): null => null;
  const api = client();
  assert.throws(() => new Worker(api, { session: "s", handler, concurrency: 0 }), RangeError);
  assert.throws(() => new Worker(api, { session: "s", handler, ttlS: 0.5 }), RangeError);
  assert.throws(() => new Worker(api, { session: "s", handler, waitS: 31 }), RangeError);
  assert.throws(() => new Worker(api, { session: "s", handler, ttlS: 4, killGraceS: 3 }), RangeError);
  assert.throws(() => new Worker(api, { session: [], handler }), TypeError);
  assert.throws(() => new Worker(api, { session: "s", handler: 5 as unknown as typeof handler }), TypeError);
});

test("stop() gives a prefetched lead back unstarted: on its one attempt it stays queued", { skip: NO_SERVICE }, async () => {
  const s = session();
  const api = client();
  const pushed = await api.push(s, [0, 1].map((i) => ({ payload: { i }, max_attempts: 1 })));
  const started: number[] = [];
  const { fetch, seen } = recording();
  const w = worker({
    session: s,
    concurrency: 1,
    prefetch: 1,
    graceS: 0.2,
    fetch,
    handler: (job: Job) => {
      started.push(job.lead.id);
      return stoppedBy(job);
    },
  });
  const running = w.run();
  await until(async () => started.length === 1 && (await api.stats(s)).leased === 2, 30, "one running, one prefetched");
  w.stop();
  const stats = await running;
  assert.equal(stats.released, 2);
  assert.equal(started.length, 1);
  const ran = started[0];
  const [prefetched] = pushed.ids.filter((id) => id !== ran);
  assert.ok(ran !== undefined && prefetched !== undefined);
  const unstarted = (id: number) => seen.find((r) => r.path === "/release" && r.body?.lead_id === id)?.body?.unstarted;
  assert.equal(unstarted(prefetched), true);
  assert.equal(unstarted(ran), undefined); // it was started: a plain release
  assert.equal((await api.getLead(ran)).status, "failed"); // its one attempt is spent
  const lead = await api.getLead(prefetched);
  assert.equal(lead.status, "queued");
  assert.equal(lead.attempts, 1); // the lease it was prefetched on, and no failure
  assert.equal(lead.error ?? null, null);
});
