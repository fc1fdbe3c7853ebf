// The client's types, generated from the service's OpenAPI document with openapi-typescript's
// defaults into src/openapi.ts.
//
//   node scripts/generate.mjs URL_OR_FILE           write src/openapi.ts
//   node scripts/generate.mjs URL_OR_FILE --check   exit 1 when src/openapi.ts differs
//
// URL_OR_FILE: a running service's /openapi.json (http://127.0.0.1:8000/openapi.json) or a
// saved copy of it. The check is what keeps the committed file in step with the service.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath, pathToFileURL } from "node:url";

import openapiTS, { astToString } from "openapi-typescript";

const HEADER = `/**
 * The leaseq REST API's types, generated from the service's OpenAPI document
 * (GET /openapi.json) by openapi-typescript. Do not edit: run
 * \`npm run generate -- http://127.0.0.1:8000/openapi.json\` against a service instead.
 */

`;

const [source, flag] = process.argv.slice(2);
if (!source || (flag !== undefined && flag !== "--check")) {
  console.error("usage: node scripts/generate.mjs URL_OR_FILE [--check]");
  process.exit(2);
}
const target = fileURLToPath(new URL("../src/openapi.ts", import.meta.url));
const where = /^https?:/.test(source) ? new URL(source) : pathToFileURL(source);
const text = HEADER + astToString(await openapiTS(where));
if (flag === "--check") {
  const committed = await readFile(target, "utf8").catch(() => "");
  if (committed !== text) {
    console.error(`src/openapi.ts is not what ${source} generates: run npm run generate -- ${source}`);
    process.exit(1);
  }
  console.log(`src/openapi.ts is what ${source} generates`);
} else {
  await writeFile(target, text);
  console.log(`wrote src/openapi.ts from ${source}`);
}
