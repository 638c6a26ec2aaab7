/**
 * A thin TypeScript client of the acts HTTP API (`acts serve`).
 *
 * Every route is typed from the server's OpenAPI 3.1 document
 * (`docs/openapi.json`, turned into `schema.d.ts` by openapi-typescript) and
 * called through openapi-fetch: `client.api.POST("/api/v1/processes", ...)`
 * checks paths, parameters, bodies and answers at compile time. Beside it,
 * the few calls an application makes most, named, and the live message
 * stream (Server-Sent Events) as an async iterator.
 */
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

/** The engine's JSON types, as the OpenAPI document names them. */
export type Schemas = components["schemas"];
export type Message = Schemas["Message"];
export type ProcInfo = Schemas["ProcInfo"];
export type ModelInfo = Schemas["ModelInfo"];
export type ProcessDetail = Schemas["ProcessDetail"];
export type TaskInfo = Schemas["TaskInfo"];
export type Vars = { [key: string]: unknown };

/** What the server said when it refused a call: `{"error": {code, message}}`. */
export class ActsError extends Error {
  constructor(
    /** The HTTP status. */
    public readonly status: number,
    /** The error code (`not_found`, `bad_request`, `conflict`, ...). */
    public readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message} (HTTP ${status})`);
    this.name = "ActsError";
  }
}

export interface ClientOptions {
  /** Where `acts serve` listens, e.g. `http://127.0.0.1:7878`. */
  baseUrl: string;
  /** A bearer token (`acts token new`); none for a server without tokens. */
  token?: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

/** The message stream's filters (globs, as a channel's options). */
export interface MessageFilter {
  type?: string;
  state?: string;
  key?: string;
  uses?: string;
  model?: string;
}

/** The task actions (`push` takes an act, the others vars). */
export type Action =
  | "complete"
  | "submit"
  | "back"
  | "cancel"
  | "abort"
  | "skip"
  | "error"
  | "push"
  | "remove"
  | "set_vars";

/** The largest SSE event the stream reader holds (the server's events are far smaller). */
const MAX_EVENT_BYTES = 8 * 1024 * 1024;

export class ActsClient {
  /** Every route of the API, typed from the OpenAPI document. */
  readonly api: Client<paths>;
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly fetchFn: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.headers = options.token ? { authorization: `Bearer ${options.token}` } : {};
    this.fetchFn = options.fetch ?? globalThis.fetch;
    this.api = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: this.headers,
      fetch: this.fetchFn,
    });
  }

  /** Deploys a model from its YAML (or JSON) text. */
  async deploy(text: string): Promise<ModelInfo> {
    const { data, error, response } = await this.api.POST("/api/v1/models", {
      body: text as never,
      bodySerializer: (b: unknown) => b as string,
      headers: { "content-type": "application/yaml" },
    });
    return ok(data, error, response);
  }

  /** Starts a process of model `model` with start variables `vars` (a `pid` var names it). */
  async start(model: string, vars: Vars = {}, rev?: number): Promise<ProcInfo> {
    const { data, error, response } = await this.api.POST("/api/v1/processes", {
      body: { model, vars, ...(rev === undefined ? {} : { rev }) },
    });
    return ok(data, error, response);
  }

  /** A process with its outputs and every task. */
  async process(pid: string): Promise<ProcessDetail> {
    const { data, error, response } = await this.api.GET("/api/v1/processes/{pid}", {
      params: { path: { pid } },
    });
    return ok(data, error, response);
  }

  /** Applies `action` to task `tid` of process `pid` with `options` (an answer's vars, `to` for back, ...). */
  async act(pid: string, tid: string, action: Action, options: Vars = {}): Promise<void> {
    const { error, response } = await this.api.POST(
      "/api/v1/processes/{pid}/tasks/{tid}/{action}",
      { params: { path: { pid, tid, action } }, body: options },
    );
    if (!response.ok) {
      ok(undefined, error, response);
    }
  }

  /** Completes task `tid` (an interrupt's answer) with `vars`. */
  complete(pid: string, tid: string, vars: Vars = {}): Promise<void> {
    return this.act(pid, tid, "complete", vars);
  }

  /**
   * The live message stream: yields each message as the server sends it,
   * until `signal` aborts (or the server ends the stream: a client that fell
   * behind gets `lagged` and should reconnect). The subscription exists once
   * the returned promise resolves, so a process started after it cannot be
   * missed.
   */
  async messages(filter: MessageFilter = {}, signal?: AbortSignal): Promise<AsyncIterable<Message>> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(filter)) {
      if (v !== undefined) query.set(k, v);
    }
    const response = await this.fetchFn(`${this.baseUrl}/api/v1/messages?${query}`, {
      headers: { ...this.headers, accept: "text/event-stream" },
      signal,
    });
    if (!response.ok || response.body === null) {
      const body = await response.json().catch(() => undefined);
      ok(undefined, body, response);
    }
    return events(response.body as ReadableStream<Uint8Array>);
  }
}

/**
 * The messages of an SSE body (events other than messages are skipped;
 * `lagged` ends it with an error). Leaving the loop closes the stream, and
 * with it the subscription.
 */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<Message> {
  const decoder = new TextDecoder();
  let buffer = "";
  // A reader, not `for await` (not every browser iterates a stream).
  const reader = body.getReader();
  try {
    for (;;) {
      const { value: chunk, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(chunk, { stream: true });
      if (buffer.length > MAX_EVENT_BYTES) {
        throw new Error(`an event of the message stream is larger than ${MAX_EVENT_BYTES} bytes`);
      }
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = "message";
        const data: string[] = [];
        for (const line of raw.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (event === "lagged") {
          throw new Error("the message stream fell behind and was cut off (lagged): reconnect");
        }
        if (data.length > 0) {
          yield JSON.parse(data.join("\n")) as Message;
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** `data`, or the server's error as an `ActsError`. */
function ok<T>(data: T | undefined, error: unknown, response: Response): T {
  if (response.ok && data !== undefined) return data;
  const e = (error as { error?: { code?: string; message?: string } } | undefined)?.error;
  throw new ActsError(response.status, e?.code ?? "unknown", e?.message ?? response.statusText);
}
