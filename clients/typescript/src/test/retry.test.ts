// The backoff: jittered, growing to its cap; a Retry-After says how long instead.
import assert from "node:assert/strict";
import { test } from "node:test";

import { DEFAULT_RETRY, backoffS } from "../index.js";
import { MAX_RETRY_AFTER_S, retryAfterOf } from "../retry.js";

test("the n-th retry waits half to all of min(max, base * 2^n)", () => {
  for (let retry = 0; retry < 8; retry += 1) {
    const cap = Math.min(2, 0.1 * 2 ** retry);
    assert.equal(backoffS(DEFAULT_RETRY, retry, undefined, () => 0), cap / 2);
    assert.equal(backoffS(DEFAULT_RETRY, retry, undefined, () => 1), cap);
    const any = backoffS(DEFAULT_RETRY, retry);
    assert.ok(any >= cap / 2 && any <= cap, `${retry}: ${any}`);
  }
});

test("a Retry-After is how long, sooner or later than the backoff, plus a fifth at most", () => {
  assert.equal(backoffS(DEFAULT_RETRY, 0, 1, () => 0), 1);
  assert.equal(backoffS(DEFAULT_RETRY, 0, 1, () => 1), 1.2);
  assert.equal(backoffS(DEFAULT_RETRY, 7, 0, () => 1), 0);
  assert.equal(backoffS(DEFAULT_RETRY, 0, 3600, () => 0), MAX_RETRY_AFTER_S);
  assert.equal(backoffS(DEFAULT_RETRY, 0, -5, () => 0), 0);
});

test("Retry-After is read as seconds or as an HTTP date", () => {
  assert.equal(retryAfterOf("1"), 1);
  assert.equal(retryAfterOf(" 30 "), 30);
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(retryAfterOf("Thu, 01 Jan 2026 00:00:05 GMT", now), 5);
  assert.equal(retryAfterOf("Wed, 31 Dec 2025 23:00:00 GMT", now), 0);
  assert.equal(retryAfterOf("soon"), undefined);
  assert.equal(retryAfterOf(null), undefined);
  assert.equal(retryAfterOf("-1"), undefined);
});
