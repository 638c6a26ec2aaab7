// Fails when the committed generated types differ from what the OpenAPI
// document gives now (run `npm run generate` and commit).
import { readFileSync } from "node:fs";
const [committed, fresh] = process.argv.slice(2);
if (readFileSync(committed, "utf8") !== readFileSync(fresh, "utf8")) {
  console.error(`${committed} is not what docs/openapi.json gives: run \`npm run generate\` in clients/typescript and commit it`);
  process.exit(1);
}
