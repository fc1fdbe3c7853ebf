/**
 * The conformance worker (tests/clients): the client's own `Worker` at its defaults but for
 * the options the harness gives, with a handler that records what happens to each lead.
 *
 *   node dist/conformance/worker.js --url URL --session S --owner NAME --concurrency W
 *     --ttl-s T --handler-ms MS --events FILE [--token TOKEN] [--grace-s G]
 *
 * Events are JSON lines appended to FILE, each written at once: ready, start, finished,
 * aborted, stopped. SIGTERM stops the worker within the grace; it then exits 0.
 */

import { appendFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { Client, type Job, Worker } from "../index.js";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    session: { type: "string" },
    owner: { type: "string" },
    concurrency: { type: "string" },
    "ttl-s": { type: "string" },
    "handler-ms": { type: "string" },
    events: { type: "string" },
    token: { type: "string" },
    "grace-s": { type: "string", default: "5" },
  },
  strict: true,
});

function required(name: keyof typeof values): string {
  const value = values[name];
  if (typeof value !== "string") {
    console.error(`--${name} is required`);
    process.exit(2);
  }
  return value;
}

const owner = required("owner");
const events = required("events");
const handlerMs = Number(required("handler-ms"));

function write(event: Record<string, unknown>): void {
  appendFileSync(events, `${JSON.stringify({ ...event, t: Date.now() })}\n`);
}

async function handler(job: Job): Promise<unknown> {
  const payload = job.lead.payload as { ms?: number; fail?: boolean };
  const fields = { lead: job.lead.id, attempt: job.attempt, owner };
  write({ event: "start", ...fields });
  const ms = typeof payload.ms === "number" ? payload.ms : handlerMs;
  const aborted = await new Promise<boolean>((resolve) => {
    if (job.signal.aborted) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    job.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  if (aborted) {
    write({ event: "aborted", ...fields });
    throw job.signal.reason;
  }
  write({ event: "finished", ...fields });
  if (payload.fail === true) {
    throw new Error("the payload asked to fail");
  }
  return { lead: job.lead.id, by: "typescript" };
}

const client = new Client(required("url"), values.token === undefined ? {} : { token: values.token });
const worker = new Worker(client, {
  session: required("session"),
  handler,
  owner,
  concurrency: Number(required("concurrency")),
  ttlS: Number(required("ttl-s")),
  graceS: Number(values["grace-s"]),
});
const running = worker.run({ handleSignals: true });
write({ event: "ready" });
await running;
write({ event: "stopped" });
process.exit(0);
