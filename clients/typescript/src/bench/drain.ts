/**
 * The TypeScript contender of `python -m bench` (bench/users.py): one `Worker` at its
 * defaults with a no-op handler, until the queue is empty; what it did, as JSON.
 *
 *   node dist/bench/drain.js URL SESSION CONCURRENCY WAIT_S
 */

import { Client, Worker } from "../index.js";

const [url, session, concurrency, waitS] = process.argv.slice(2);
if (!url || !session || !concurrency || !waitS) {
  console.error("usage: node dist/bench/drain.js URL SESSION CONCURRENCY WAIT_S");
  process.exit(2);
}
const worker = new Worker(new Client(url), {
  session,
  concurrency: Number(concurrency),
  waitS: Number(waitS), // only how soon it exits once the queue is empty
  untilEmpty: true,
  handler: () => null,
});
console.log(JSON.stringify(await worker.run()));
