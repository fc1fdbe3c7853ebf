// The client on the wire, with no service: what is retried and how, the error of each
// answer, and the Idempotency-Key that makes a retry one effect. The answers are
// scripted; the service's own behaviour is the integration tests' (test_typescript.py).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Client,
  Conflict,
  LeaseLost,
  LeaseqError,
  NotFound,
  QuotaExceeded,
  Unavailable,
  ValidationError,
} from "../index.js";
import { pushChunks } from "../wire.js";
import { errorOf } from "../errors.js";

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

type Answer = Response | Error;

/** A fetch that answers from a script and records what was sent. */
function scripted(...answers: Answer[]): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const fetchFn = async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const headers = Object.fromEntries(Object.entries((init?.headers ?? {}) as Record<string, string>));
    const body = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
    sent.push({ method: init?.method ?? "GET", url: String(url), headers, body });
    const answer = answers.shift();
    if (answer === undefined) throw new Error("the script ran out");
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { fetch: fetchFn as typeof fetch, sent };
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  const type = status >= 400 ? "application/problem+json" : "application/json";
  return new Response(JSON.stringify(body), { status, headers: { "content-type": type, ...headers } });
}

function problem(status: number, code: string, headers: Record<string, string> = {}): Response {
  return json(status, { type: `urn:leaseq:problem:${code}`, title: code, status, detail: `said ${code}`, code }, headers);
}

const LEAD = { id: 7, status: "leased", payload: {}, max_attempts: 5 };
const LEASE = { lead: LEAD, token: "t", attempt: 1, owner: "w", expires_at: "2030-01-01T00:00:00Z", ttl_s: 30 };
const fast = { attempts: 6, baseS: 0.001, maxS: 0.002 };
const connectionLost = (): Error => new TypeError("fetch failed", { cause: new Error("other side closed") });

test("a 503 and a lost connection are retried; the call answers as its last try did", async () => {
  const { fetch, sent } = scripted(problem(503, "unavailable", { "retry-after": "0" }), connectionLost(), json(200, { leases: [LEASE] }));
  const client = new Client("http://service.test/", { fetch, retry: fast });
  const leases = await client.lease({ session: "s", owner: "w" });
  assert.equal(leases[0]?.token, "t");
  assert.equal(sent.length, 3);
  assert.equal(sent[0]?.url, "http://service.test/lease");
});

test("a lease, its retries and a completion with next repeat one Idempotency-Key each", async () => {
  const { fetch, sent } = scripted(
    connectionLost(),
    json(200, { leases: [LEASE] }),
    json(200, { leases: [] }),
    connectionLost(),
    problem(502, "bad_gateway"),
    json(200, { results: [{ lead_id: 7, ok: true }], leases: [LEASE] }),
  );
  const client = new Client("http://service.test", { fetch, retry: fast });
  await client.lease({ session: "s", owner: "w" });
  await client.lease({ session: "s", owner: "w" });
  const { leases } = await client.completeBatch([{ lead_id: 7, token: "t" }], { next: { session: "s", owner: "w", max: 2 } });
  assert.equal(leases.length, 1);
  const keys = sent.map((s) => s.headers["Idempotency-Key"]);
  assert.ok(keys.every((k) => typeof k === "string" && k.length > 0));
  assert.equal(keys[0], keys[1]); // the first lease and its retry
  assert.notEqual(keys[1], keys[2]); // another lease, another key
  assert.equal(keys[3], keys[4]);
  assert.equal(keys[4], keys[5]); // the completion and both of its retries
  assert.deepEqual(sent[5]?.body, {
    items: [{ lead_id: 7, token: "t", status: "done", result: null, error: null }],
    next: { owner: "w", max: 2, wait_s: 0, session: "s" },
  });
});

test("a completion without next, a renewal and a release carry no key: a repeat is safe as it is", async () => {
  const { fetch, sent } = scripted(
    json(200, { lead: LEAD, leases: [] }),
    json(200, { expires_at: "2030-01-01T00:00:00Z", ttl_s: 30 }),
    json(200, { lead: LEAD }),
  );
  const client = new Client("http://service.test", { fetch });
  await client.complete(7, "t");
  await client.renew(7, "t", { ttlS: 30 });
  await client.release(7, "t", { delayS: 2, error: "busy" });
  assert.ok(sent.every((s) => s.headers["Idempotency-Key"] === undefined));
  assert.deepEqual(sent[1]?.body, { lead_id: 7, token: "t", ttl_s: 30 });
  assert.deepEqual(sent[2]?.body, { lead_id: 7, token: "t", delay_s: 2, error: "busy" });
});

test("a push goes in calls of 1,000 leads, keyed key, key.1, …, ids in order", async () => {
  const leads = Array.from({ length: 2500 }, (_, i) => ({ payload: { i } }));
  const answers = [1000, 1000, 500].map((n, c) => json(201, { ids: Array.from({ length: n }, (_, i) => c * 1000 + i + 1), created: n, duplicates: 0 }));
  const { fetch, sent } = scripted(...answers);
  const client = new Client("http://service.test", { fetch });
  const pushed = await client.push("a/b", leads, { idempotencyKey: "k" });
  assert.equal(pushed.ids.length, 2500);
  assert.equal(pushed.ids[2499], 2500);
  assert.deepEqual(sent.map((s) => s.headers["Idempotency-Key"]), ["k", "k.1", "k.2"]);
  assert.equal(sent[0]?.url, "http://service.test/sessions/a%2Fb/leads");
});

test("a push is cut under the body limit too; a lead too large for any body goes alone", () => {
  const big = { payload: { text: "x".repeat(600 * 1024) } };
  const chunks = pushChunks([big, big, { payload: {} }, { payload: { text: "y".repeat(2 * 1024 * 1024) } }]);
  assert.deepEqual(chunks.map((c) => c.length), [1, 2, 1]);
});

test("a 4xx is never retried, and each code is its class with status, code, detail", async () => {
  const cases: [Response, new (...args: never[]) => LeaseqError, string][] = [
    [problem(409, "lease_lost"), LeaseLost, "lease_lost"],
    [problem(404, "not_found"), NotFound, "not_found"],
    [problem(422, "validation_error"), ValidationError, "validation_error"],
    [problem(409, "conflict"), Conflict, "conflict"],
  ];
  for (const [answer, cls, code] of cases) {
    const { fetch, sent } = scripted(answer);
    const client = new Client("http://service.test", { fetch, retry: fast });
    const error = await client.renew(7, "t").catch((e: unknown) => e);
    assert.ok(error instanceof cls, code);
    assert.ok(error instanceof LeaseqError);
    assert.equal(error.code, code);
    assert.equal(error.detail, `said ${code}`);
    assert.equal(sent.length, 1);
  }
});

test("429 quota_exceeded carries its Retry-After, and nothing is retried", async () => {
  const { fetch, sent } = scripted(problem(429, "quota_exceeded", { "retry-after": "7" }));
  const client = new Client("http://service.test", { fetch, retry: fast });
  const error = await client.push("s", [{ payload: {} }]).catch((e: unknown) => e);
  assert.ok(error instanceof QuotaExceeded);
  assert.equal(error.status, 429);
  assert.equal(error.retryAfterS, 7);
  assert.equal(sent.length, 1);
});

test("out of tries: Unavailable naming the URL, or the last answer's error", async () => {
  const down = scripted(...Array.from({ length: 3 }, connectionLost));
  const client = new Client("http://service.test", { fetch: down.fetch, retry: { ...fast, attempts: 3 } });
  const error = await client.stats("s").catch((e: unknown) => e);
  assert.ok(error instanceof Unavailable);
  assert.equal(error.status, undefined);
  assert.match(error.detail, /GET http:\/\/service\.test\/sessions\/s\/stats: fetch failed: other side closed/);
  const busy = scripted(problem(503, "unavailable", { "retry-after": "0" }), problem(503, "unavailable", { "retry-after": "0" }));
  const again = new Client("http://service.test", { fetch: busy.fetch, retry: { ...fast, attempts: 2 } });
  const last = await again.stats("s").catch((e: unknown) => e);
  assert.ok(last instanceof Unavailable && last.status === 503 && last.retryAfterS === 0);
});

test("an answer that is not a problem is the class of its status, its text the detail", () => {
  const page = errorOf(502, "<html>bad gateway</html>");
  assert.ok(page instanceof Unavailable);
  assert.equal(page.detail, "<html>bad gateway</html>");
  const teapot = errorOf(418, { code: "teapot", detail: "short and stout" });
  assert.equal(teapot.code, "teapot");
  assert.equal(teapot.name, "ApiError");
  assert.equal(errorOf(400, null).code, "http_400");
});

test("each try has its timeout: a hung answer is a connection error, retried", async () => {
  let calls = 0;
  const hang = (async (_url: string | URL | Request, init?: RequestInit) => {
    calls += 1;
    if (calls === 1) {
      return new Promise<Response>((_, reject) => init?.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
    }
    return json(200, { queued: 0 });
  }) as typeof fetch;
  const client = new Client("http://service.test", { fetch: hang, retry: fast, timeoutS: 0.05 });
  assert.deepEqual(await client.stats("s"), { queued: 0 });
  assert.equal(calls, 2);
});

test("getPush asks by session and key, percent-encoded: the stored push, or null on 404", async () => {
  const stored = { ids: [3, 4], created: 2, duplicates: 0 };
  const { fetch, sent } = scripted(json(200, stored), problem(404, "not_found"));
  const client = new Client("http://service.test", { fetch, retry: fast });
  assert.deepEqual(await client.getPush("s 1", "order/7"), stored);
  assert.equal(await client.getPush("s 1", "never"), null);
  assert.deepEqual(
    sent.map((s) => [s.method, s.url]),
    [
      ["GET", "http://service.test/sessions/s%201/pushes/order%2F7"],
      ["GET", "http://service.test/sessions/s%201/pushes/never"],
    ],
  );
});
