// A lease's time on the worker's clock: from its send, with the ttl granted.
import assert from "node:assert/strict";
import { test } from "node:test";

import type { Lease } from "../index.js";
import { Held, killGrace, renewBackoff, safetyMargin } from "../worker/held.js";

const lease = { lead: { id: 1 }, token: "t", attempt: 1, ttl_s: 30 } as unknown as Lease;

test("a lease sent at S with ttl T: valid until S + T, renewed at S + T/3, stopped a grace and a margin before its end", () => {
  const held = new Held(lease, 100, 30, 100.2);
  assert.equal(held.validUntil, 130);
  assert.equal(held.renewAt, 110);
  assert.equal(held.killGraceS, 2);
  assert.equal(held.margin, 1);
  assert.equal(held.stopAt, 127);
  assert.equal(held.confirmed, true);
  assert.equal(held.due(126.9, undefined), undefined);
  assert.equal(held.due(127, undefined), "expired");
});

test("a renewal counts from its own send, however late its answer came", () => {
  const held = new Held(lease, 100, 30, 100.2);
  held.renewed(110, 30);
  assert.equal(held.validUntil, 140);
  assert.equal(held.renewAt, 120);
  held.renewed(105, 30); // an older renewal's answer never shortens it
  assert.equal(held.validUntil, 140);
});

test("a lease whose answer came after its first renewal was due waits for a renewal to run", () => {
  const held = new Held(lease, 100, 30, 115);
  assert.equal(held.confirmed, false);
  assert.equal(held.phase, "confirming");
  assert.equal(held.due(144.9, undefined), undefined);
  assert.equal(held.due(145, undefined), "expired"); // its receipt plus the ttl
  held.renewed(116, 30);
  assert.equal(held.confirmed, true);
});

test("a failed renewal is tried again 0.1 s later, doubling to a twentieth of the ttl (at most 2 s)", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6].map((n) => renewBackoff(n, 30)), [0.1, 0.2, 0.4, 0.8, 1.5, 1.5]);
  assert.equal(renewBackoff(9, 3600), 2);
  assert.equal(renewBackoff(9, 1), 0.1);
});

test("the kill grace and margin leave at least half the ttl for renewals", () => {
  const near = (a: number, b: number): void => assert.ok(Math.abs(a - b) < 1e-9, `${a} ≉ ${b}`);
  near(safetyMargin(3), 0.3);
  near(killGrace(3), 0.3); // a tenth of a short ttl
  assert.equal(killGrace(300), 2);
  near(killGrace(4, 10), 2 - safetyMargin(4)); // asked for more than half the ttl leaves
});

test("the maximum runtime counts from the handler's start, only while it runs", () => {
  const held = new Held(lease, 100, 30, 100);
  held.started = 101;
  assert.equal(held.due(106, 5), undefined); // waiting: not running yet
  held.phase = "running";
  assert.equal(held.due(106, 5), "max_runtime");
  assert.equal(held.deadline(5), 106);
});
