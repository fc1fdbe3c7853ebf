// The lease a worker asks for: its own short ttl unless told otherwise, so a worker killed
// outright strands its leads for seconds, not the service's default of minutes.
import assert from "node:assert/strict";
import { test } from "node:test";

import { DEFAULT_WORKER_TTL_S, workerTtlS } from "../worker/options.js";

test("a worker given no ttl asks for 30 s, longer only to fit its kill grace", () => {
  assert.equal(DEFAULT_WORKER_TTL_S, 30);
  assert.equal(workerTtlS({}), 30);
  assert.equal(workerTtlS({ ttlS: 7 }), 7);
  assert.equal(workerTtlS({ killGraceS: 2 }), 30);
  assert.equal(workerTtlS({ killGraceS: 20 }), 42); // half the ttl left for renewals
  assert.equal(workerTtlS({ killGraceS: 3000 }), 3600);
});
