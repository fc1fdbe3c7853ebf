/**
 * Fences: a lease named and signed by the service, verified offline.
 *
 *     body  = "1." + lead_id + "." + attempt + "." + expires_at_unix_ms
 *     fence = body + "." + base64url(HMAC-SHA256(key, body)) without padding
 *
 * A worker passes its lease's `fence` to the systems it writes to; they call
 * `verifyFence(fence, keys)` with the service's `LEASEQ_FENCE_KEYS` (every key
 * verifies, so a rotation keeps the old key in the list until its last lease has
 * expired) and keep the highest attempt they have seen per lead. An expired fence
 * still verifies: comparing `expiresAt` with a clock is the caller's choice.
 */

import { createHmac, timingSafeEqual } from "node:crypto";

import { FenceInvalid } from "./errors.js";

/** What a valid fence names: the lead, the lease's attempt and its expiry when signed. */
export interface Fence {
  leadId: number;
  attempt: number;
  expiresAt: Date;
}

const VERSION = "1";
const DECIMAL = /^(0|[1-9][0-9]{0,15})$/;
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/; // 32 bytes, base64url without padding

/** The signature of `body` under `key`, as a fence carries it. */
export function signFence(body: string, key: string): string {
  return createHmac("sha256", Buffer.from(key, "utf8")).update(body, "utf8").digest("base64url");
}

/**
 * The lead, attempt and expiry a fence names, when one of `keys` signed it.
 * Throws `FenceInvalid` for a malformed fence, an unknown version, or a signature
 * no key matches. Signatures are compared in constant time.
 */
export function verifyFence(fence: string, keys: readonly string[]): Fence {
  const parts = typeof fence === "string" ? fence.split(".") : [];
  if (parts.length !== 5) {
    throw new FenceInvalid("a fence is five parts separated by dots");
  }
  const [version, lead, attempt, expires, signature] = parts as [string, string, string, string, string];
  if (version !== VERSION) {
    throw new FenceInvalid(`unknown fence version ${JSON.stringify(version.slice(0, 20))}`);
  }
  if (![lead, attempt, expires].every((part) => DECIMAL.test(part)) || !SIGNATURE.test(signature)) {
    throw new FenceInvalid("a fence's lead, attempt and expiry are decimal integers, its signature base64url");
  }
  const leadId = Number(lead);
  const attemptN = Number(attempt);
  const expiresMs = Number(expires);
  if (![leadId, attemptN, expiresMs].every(Number.isSafeInteger)) {
    throw new FenceInvalid("a fence's numbers are beyond what it may name");
  }
  if (keys.length === 0) {
    throw new FenceInvalid("no key to verify the fence with");
  }
  const body = `${version}.${lead}.${attempt}.${expires}`;
  const given = Buffer.from(signature, "base64url");
  let matched = false;
  for (const key of keys) {
    // Every key is tried, matched or not: the time taken does not say which one matched.
    const expected = Buffer.from(signFence(body, key), "base64url");
    matched = (expected.length === given.length && timingSafeEqual(expected, given)) || matched;
  }
  if (!matched) {
    throw new FenceInvalid("the fence's signature matches none of the keys");
  }
  return { leadId, attempt: attemptN, expiresAt: new Date(expiresMs) };
}
