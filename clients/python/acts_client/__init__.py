"""A thin Python client of the acts HTTP API (`acts serve`), standard library only.

Every operation of the server's OpenAPI 3.1 document (docs/openapi.json) is
callable by its operationId through `Client.call` (the table in
`_operations.py` is generated from the document, and a test keeps it so);
the calls an application makes most are named methods, and the live
message stream is an iterator.

    from acts_client import Client

    acts = Client("http://127.0.0.1:7878")
    acts.deploy(open("examples/approval.yml").read())
    with acts.messages(type="act", key="approve", state="created") as asks:
        p = acts.start("approval", {"amount": 1500})
        for m in asks:
            if m["pid"] == p["pid"]:
                acts.complete(m["pid"], m["tid"], {"approved": True})
                break
    print(acts.process(p["pid"])["process"]["outputs"])
"""

import json
import urllib.error
import urllib.parse
import urllib.request

from ._operations import API_VERSION, OPERATIONS

__all__ = ["API_VERSION", "OPERATIONS", "ActsError", "Client", "MessageStream"]

# The largest answer or SSE event read (the server's are far smaller).
MAX_BYTES = 64 * 1024 * 1024


class ActsError(Exception):
    """The server refused a call: its HTTP status and `{"error": {code, message}}`."""

    def __init__(self, status, code, message):
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status = status
        self.code = code
        self.message = message


class Client:
    """Calls `acts serve` at `base_url`, with a bearer `token` if the server has tokens."""

    def __init__(self, base_url, token=None, timeout=60.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- every operation ---------------------------------------------------

    def call(self, operation, path=None, query=None, body=None, content_type=None):
        """Calls operation `operation` (its operationId in the OpenAPI document).

        `path` fills the path parameters, `query` the query parameters (None
        values left out), `body` is sent as JSON (a str as it is, with
        `content_type`). Returns the decoded JSON answer (None for 204, text
        for a text answer); raises ActsError when the server refuses.
        """
        op = OPERATIONS.get(operation)
        if op is None:
            raise ValueError(f"no operation {operation!r} in the API (see acts_client.OPERATIONS)")
        path = dict(path or {})
        missing = [p for p in op["path_params"] if p not in path]
        if missing:
            raise ValueError(f"{operation} needs the path parameters {missing}")
        url = self.base_url + op["path"].format(
            **{k: urllib.parse.quote(str(v), safe="") for k, v in path.items()}
        )
        query = {k: v for k, v in (query or {}).items() if v is not None}
        unknown = sorted(set(query) - set(op["query_params"]))
        if unknown:
            raise ValueError(f"{operation} takes no query parameters {unknown}")
        if query:
            url += "?" + urllib.parse.urlencode(
                {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in query.items()}
            )
        data = None
        headers = self._headers()
        if body is not None:
            if isinstance(body, str):
                data = body.encode()
                headers["content-type"] = content_type or "application/json"
            else:
                data = json.dumps(body).encode()
                headers["content-type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=op["method"], headers=headers)
        with self._open(req) as resp:
            raw = resp.read(MAX_BYTES + 1)
            if len(raw) > MAX_BYTES:
                raise ActsError(resp.status, "too_large", f"the answer is over {MAX_BYTES} bytes")
            if resp.status == 204 or not raw:
                return None
            if resp.headers.get_content_type() == "application/json":
                return json.loads(raw)
            return raw.decode()

    # -- what applications call most ---------------------------------------

    def deploy(self, text):
        """Deploys a model from its YAML (or JSON) text; its info."""
        return self.call("deploy_model", body=text, content_type="application/yaml")

    def start(self, model, vars=None, rev=None):
        """Starts a process of `model` with start `vars` (a `pid` var names it)."""
        body = {"model": model, "vars": vars or {}}
        if rev is not None:
            body["rev"] = rev
        return self.call("start_process", body=body)

    def process(self, pid):
        """`{"process": ..., "tasks": [...]}`: a process with its outputs and tasks."""
        return self.call("get_process", path={"pid": pid})

    def act(self, pid, tid, action, options=None):
        """Applies `action` (complete, submit, back, abort, error, ...) to task `tid`."""
        self.call("act", path={"pid": pid, "tid": tid, "action": action}, body=options or {})

    def complete(self, pid, tid, vars=None):
        """Completes task `tid` (answers an interrupt) with `vars`."""
        self.act(pid, tid, "complete", vars)

    def messages(self, type=None, state=None, key=None, uses=None, model=None):
        """The live message stream (filters are globs); the subscription exists
        once this returns, so a process started after it cannot be missed.
        Iterate it for messages; close it (or use `with`) to unsubscribe."""
        op = OPERATIONS["messages"]
        query = {
            k: v
            for k, v in dict(type=type, state=state, key=key, uses=uses, model=model).items()
            if v is not None
        }
        url = self.base_url + op["path"] + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = self._headers()
        headers["accept"] = "text/event-stream"
        req = urllib.request.Request(url, headers=headers)
        return MessageStream(self._open(req))

    # -- plumbing -----------------------------------------------------------

    def _headers(self):
        h = {"accept": "application/json"}
        if self.token:
            h["authorization"] = f"Bearer {self.token}"
        return h

    def _open(self, req):
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            raw = e.read(MAX_BYTES)
            try:
                err = json.loads(raw)["error"]
                code, message = err.get("code", "unknown"), err.get("message", "")
            except (ValueError, KeyError, TypeError):
                code, message = "unknown", raw.decode(errors="replace")[:500]
            raise ActsError(e.code, code, message) from None


class MessageStream:
    """The messages of a Server-Sent Events answer, as dicts."""

    def __init__(self, resp):
        self._resp = resp

    def __iter__(self):
        event, data, size = "message", [], 0
        for raw in self._resp:
            size += len(raw)
            if size > MAX_BYTES:
                raise ActsError(200, "too_large", f"an event is over {MAX_BYTES} bytes")
            line = raw.decode().rstrip("\r\n")
            if line == "":
                if event == "lagged":
                    raise ActsError(200, "lagged", "the stream fell behind and was cut off: reconnect")
                if data:
                    yield json.loads("\n".join(data))
                event, data, size = "message", [], 0
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))

    def close(self):
        self._resp.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
