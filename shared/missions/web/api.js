// The public HTTP API, and nothing else: JSON calls with the session's bearer token, and the two
// streams (a mission's events, a chat reply), read with fetch() since EventSource cannot send an
// Authorization header. config.api is the API's base URL, config.stream the streaming function's
// ("" locally: the same origin serves both).

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.message || (body.error && body.error.message))) || `the API answered ${status}`);
    this.status = status;
    this.body = body;
  }
}

export class Api {
  constructor(config, session) {
    // without a trailing slash: a function URL ends with one, and the paths below begin with one
    this.base = (config.api || "").replace(/\/+$/, "");
    this.streamBase = (config.stream || config.api || "").replace(/\/+$/, "");
    this.session = session;
  }

  headers(extra = {}) {
    const headers = { Accept: "application/json", ...extra };
    if (this.session.token) headers.Authorization = `Bearer ${this.session.token}`;
    return headers;
  }

  async call(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(this.base + path, init);
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = { message: text };
    }
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }

  get(path) {
    return this.call("GET", path);
  }

  post(path, body) {
    return this.call("POST", path, body ?? {});
  }

  put(path, body) {
    return this.call("PUT", path, body);
  }

  del(path) {
    return this.call("DELETE", path);
  }

  /** A streaming request to the stream function; the caller reads response.body. */
  async stream(method, path, { body, headers = {}, signal } = {}) {
    const init = { method, headers: this.headers({ Accept: "text/event-stream", ...headers }), signal };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(this.streamBase + path, init);
    if (!response.ok) {
      let data = null;
      try {
        data = await response.json();
      } catch {
        data = null;
      }
      throw new ApiError(response.status, data);
    }
    return response;
  }
}

/**
 * A Server-Sent Events parser (the WHATWG event-stream rules): feed it text as it arrives, it
 * returns the events completed so far. Comments (": keep-alive") are skipped; `id` is remembered
 * even by an event without data, as EventSource does.
 */
export class SSEParser {
  constructor() {
    this.buffer = "";
    this.data = [];
    this.event = "";
    this.lastId = null;
  }

  feed(text) {
    this.buffer += text;
    const events = [];
    let match;
    const line = /\r\n|\r|\n/;
    while ((match = line.exec(this.buffer)) !== null) {
      // a lone \r at the end may be the first half of \r\n: wait for more
      if (match[0] === "\r" && match.index === this.buffer.length - 1) break;
      const raw = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      if (raw === "") {
        if (this.data.length) events.push({ id: this.lastId, event: this.event || "message", data: this.data.join("\n") });
        this.data = [];
        this.event = "";
        continue;
      }
      if (raw.startsWith(":")) continue;
      const colon = raw.indexOf(":");
      const field = colon < 0 ? raw : raw.slice(0, colon);
      let value = colon < 0 ? "" : raw.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") this.data.push(value);
      else if (field === "event") this.event = value;
      else if (field === "id" && !value.includes("\0")) this.lastId = value;
    }
    return events;
  }
}

/** Every SSE event of a response's body, as it arrives. */
export async function* readEvents(response, parser = new SSEParser()) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield* parser.feed(value);
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Follow a mission's events until its `end` event: reconnects after a dropped connection (or the
 * server's own time limit) with `Last-Event-ID` set to the last id seen, so nothing comes twice.
 * Returns { stop() }.
 */
export function followMission(api, missionId, { onEvent, onEnd, onError, onState, retryMs = 1000 }) {
  const controller = new AbortController();
  let lastId = null;
  let stopped = false;
  (async () => {
    while (!stopped) {
      try {
        onState?.("live");
        const headers = lastId ? { "Last-Event-ID": lastId } : {};
        const response = await api.stream("GET", `/missions/${encodeURIComponent(missionId)}/events/stream`, {
          headers,
          signal: controller.signal,
        });
        for await (const message of readEvents(response)) {
          if (message.id) lastId = message.id;
          if (message.event === "end") {
            stopped = true;
            onEnd?.(JSON.parse(message.data));
            return;
          }
          onEvent(JSON.parse(message.data), message.id);
        }
      } catch (error) {
        if (stopped || controller.signal.aborted) return;
        if (error.status && error.status < 500) {
          onError?.(error);
          return; // 404 (not yours), 400 (bad id): trying again will not help
        }
        onState?.("reconnecting");
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  })();
  return {
    stop() {
      stopped = true;
      controller.abort();
    },
  };
}

/**
 * One chat turn, streamed: onProgress(text) for each piece of `reasoning_content`, onContent(text)
 * for each piece of the answer; resolves to { conversationId, missionId, status } when [DONE].
 */
export async function chatTurn(api, { model, messages, conversationId, context, onProgress, onContent, signal }) {
  const body = { model, messages, stream: true };
  if (context) body.context = context;
  const headers = conversationId ? { "X-Conversation-Id": conversationId } : {};
  const response = await api.stream("POST", "/v1/chat/completions", { body, headers, signal });
  const about = {
    conversationId: response.headers.get("X-Conversation-Id") || conversationId || null,
    missionId: response.headers.get("X-Mission-Id") || null,
    status: null,
  };
  for await (const message of readEvents(response)) {
    if (message.data === "[DONE]") break;
    const chunk = JSON.parse(message.data);
    if (chunk.conversation_id) about.conversationId = chunk.conversation_id;
    if (chunk.mission_id) about.missionId = chunk.mission_id;
    if (chunk.mission_status) about.status = chunk.mission_status;
    for (const choice of chunk.choices || []) {
      const delta = choice.delta || {};
      if (delta.reasoning_content) onProgress?.(delta.reasoning_content);
      if (delta.content) onContent?.(delta.content);
    }
  }
  return about;
}
