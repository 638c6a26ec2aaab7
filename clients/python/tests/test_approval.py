"""The approval example against a live `acts serve` (ACTS_BIN names the binary)."""

import os
import pathlib
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from acts_client import OPERATIONS, ActsError, Client  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
APPROVAL = (ROOT / "examples" / "approval.yml").read_text()


class ApprovalTest(unittest.TestCase):
    def setUp(self):
        bin = os.environ.get("ACTS_BIN")
        self.assertTrue(bin, "ACTS_BIN names the acts binary (scripts/test-clients.sh sets it)")
        self.server = subprocess.Popen(
            [bin, "serve", "--store", "memory:", "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.addCleanup(self.stop)
        for line in self.server.stderr:
            m = re.search(r"listening on (http://[0-9.:]+)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            self.fail("acts serve ended before it listened")
        self.acts = Client(self.url)

    def stop(self):
        self.server.kill()
        self.server.wait(timeout=60)
        self.server.stderr.close()

    def test_the_approval_example_answers_its_interrupt_and_ends_with_its_outputs(self):
        model = self.acts.deploy(APPROVAL)
        self.assertEqual(model["id"], "approval")
        with self.acts.messages(type="act", key="approve", state="created") as asks:
            p = self.acts.start("approval", {"amount": 1500})
            self.assertEqual(p["model_id"], "approval")
            asked = next(m for m in asks if m["pid"] == p["pid"])
        self.assertEqual(asked["key"], "approve")
        self.assertEqual(asked["inputs"]["amount"], 1500)
        self.acts.complete(p["pid"], asked["tid"], {"approved": True})
        # The last step runs right after the answer: wait a minute at most.
        deadline = time.monotonic() + 60
        while True:
            proc = self.acts.process(p["pid"])["process"]
            if proc["state"] == "completed" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(proc["state"], "completed")
        self.assertEqual(proc["outputs"], {"amount": 1500, "decided": True, "level": "director"})

    def test_a_refusal_carries_the_servers_error_code(self):
        with self.assertRaises(ActsError) as e:
            self.acts.process("no-such-process")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        with self.assertRaises(ValueError):
            self.acts.call("no_such_operation")

    def test_every_operation_of_the_document_is_callable_by_its_id(self):
        # Read-only operations answer through `call`, by operationId.
        self.assertEqual(self.acts.call("whoami")["principal"], "local")
        self.assertEqual(self.acts.call("list_processes", query={"limit": 5})["processes"], [])
        served = self.acts.call("openapi_json")
        # The table is the served document's operations, every one.
        ids = {
            op["operationId"]
            for item in served["paths"].values()
            for op in item.values()
            if isinstance(op, dict) and "operationId" in op
        }
        self.assertEqual(set(OPERATIONS), ids)


if __name__ == "__main__":
    unittest.main()
