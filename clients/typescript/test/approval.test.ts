// The approval example against a live `acts serve` (ACTS_BIN names the
// binary): deploy, stream the interrupt, start, answer it, read the outputs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { ActsClient, ActsError, type Message } from "../src/index.js";

const here = new URL(".", import.meta.url);
const approval = readFileSync(new URL("../../../../examples/approval.yml", here), "utf8");

/** Starts `acts serve` on a free port; the child and its URL. */
async function serve(): Promise<{ child: ChildProcess; url: string }> {
  const bin = process.env.ACTS_BIN;
  assert.ok(bin, "ACTS_BIN names the acts binary (scripts/test-clients.sh sets it)");
  const child = spawn(bin, ["serve", "--store", "memory:", "--listen", "127.0.0.1:0"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const lines = createInterface({ input: child.stderr! });
  for await (const line of lines) {
    const m = /listening on (http:\/\/[0-9.:]+)/.exec(line);
    if (m) {
      lines.on("line", () => {});
      return { child, url: m[1] };
    }
  }
  throw new Error("acts serve ended before it listened");
}

test("the approval example: stream the interrupt, answer it, read the outputs", { timeout: 120_000 }, async () => {
  const { child, url } = await serve();
  try {
    const acts = new ActsClient({ baseUrl: url });
    const model = await acts.deploy(approval);
    assert.equal(model.id, "approval");

    const stop = new AbortController();
    const stream = await acts.messages({ type: "act", key: "approve", state: "created" }, stop.signal);
    const p = await acts.start("approval", { amount: 1500 });
    assert.equal(p.model_id, "approval");

    let asked: Message | undefined;
    for await (const m of stream) {
      if (m.pid === p.pid) {
        asked = m;
        break;
      }
    }
    stop.abort();
    assert.ok(asked, "the interrupt was announced");
    assert.equal(asked.key, "approve");
    assert.equal((asked.inputs as { amount?: number }).amount, 1500);

    await acts.complete(p.pid, asked.tid, { approved: true });

    // The last step runs right after the answer; wait (a minute at most).
    let detail = await acts.process(p.pid);
    for (let i = 0; i < 1200 && detail.process.state !== "completed"; i++) {
      await new Promise((r) => setTimeout(r, 50));
      detail = await acts.process(p.pid);
    }
    assert.equal(detail.process.state, "completed");
    assert.deepEqual(detail.process.outputs, { amount: 1500, decided: true, level: "director" });

    // Refusals carry the server's error code.
    await assert.rejects(acts.process("no-such-process"), (e: unknown) => {
      assert.ok(e instanceof ActsError);
      assert.equal(e.status, 404);
      assert.equal(e.code, "not_found");
      return true;
    });
  } finally {
    child.kill("SIGKILL");
  }
});

test("every route is typed: the document's paths are callable through api", async () => {
  // A compile-time property, checked at run time too: an unknown path is a
  // type error, and a known one answers.
  const { child, url } = await serve();
  try {
    const acts = new ActsClient({ baseUrl: url });
    const { data, response } = await acts.api.GET("/api/v1/me");
    assert.equal(response.status, 200);
    assert.equal(data?.principal, "local");
  } finally {
    child.kill("SIGKILL");
  }
});
