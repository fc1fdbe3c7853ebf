// verifyFence against the vectors every client checks (the fence format's definition).
import assert from "node:assert/strict";
import { test } from "node:test";

import { FenceInvalid, verifyFence } from "../index.js";

const VECTORS = [
  ["k-2026-a", 42, 3, 1796611200123, "1.42.3.1796611200123.-ukt_rUUIf6mjuGLPostt3_dMcVDUVxu0x7Bv1qbsLo"],
  ["k-2026-b", 42, 3, 1796611200123, "1.42.3.1796611200123.MsSP4KhXx7uAOYAgfFTDhA1YwONTxY4FHA2xowy7iUQ"],
  ["k-2026-a", 7, 1, 1796611260000, "1.7.1.1796611260000.JPhhvCbmsjdAufw1McrWEHBIoXOegoBkt9qo-qnMsHQ"],
] as const;

test("each vector verifies under its key and names its lead, attempt and expiry", () => {
  for (const [key, lead, attempt, expires, fence] of VECTORS) {
    const named = verifyFence(fence, [key]);
    assert.deepEqual(named, { leadId: lead, attempt, expiresAt: new Date(expires) });
  }
});

test("every key verifies: the second of two signs a fence", () => {
  const fence = VECTORS[1][4];
  assert.equal(verifyFence(fence, ["k-2026-a", "k-2026-b"]).leadId, 42);
  assert.throws(() => verifyFence(fence, ["k-2026-a"]), FenceInvalid);
});

test("a fence whose body was altered keeps no signature", () => {
  const altered = VECTORS[0][4].replace("1.42.3.", "1.42.4.");
  assert.throws(() => verifyFence(altered, ["k-2026-a"]), FenceInvalid);
});

test("a malformed fence, another version or no key is refused with FenceInvalid", () => {
  const good = VECTORS[0][4];
  const bad = [
    "",
    "1.42.3.1796611200123",
    `2${good.slice(1)}`,
    good.replace(".42.", ".042."),
    good.replace(".42.", ".-42."),
    good.replace(".42.", ".4x."),
    `${good}=`,
    `${good}.x`,
    good.slice(0, -1),
  ];
  for (const fence of bad) {
    assert.throws(() => verifyFence(fence, ["k-2026-a"]), FenceInvalid, fence);
  }
  assert.throws(() => verifyFence(good, []), FenceInvalid);
  const refused = (() => {
    try {
      verifyFence(`2${good.slice(1)}`, ["k-2026-a"]);
    } catch (error) {
      return error;
    }
    return undefined;
  })();
  assert.ok(refused instanceof FenceInvalid && refused.code === "fence_invalid");
});

test("an expired fence still verifies: the expiry is the caller's to compare", () => {
  const { expiresAt } = verifyFence(VECTORS[2][4], ["k-2026-a"]);
  assert.ok(expiresAt.getTime() === 1796611260000);
});
