// skillwire console: see and drive an A2A agent from the browser.
//
// One file, no framework, no build step. It talks to the agent only through its public A2A endpoints
// (JSON-RPC, v1.0 or v0.3), with the credentials typed in the page, which it keeps in memory only.
// Everything an agent sends (card, skills, messages, artifacts) is put in the page as text: the DOM is
// built with createElement and textContent, never from HTML strings, so agent text cannot become markup.
//
// config.json says where the card is: on the agent itself ("served", `skillwire serve`), or through the
// local relay of `skillwire console URL` ("relay"), which forwards the page's calls to the agent's origin.

"use strict";

const TERMINAL = new Set(["completed", "failed", "canceled", "rejected"]);
const INTERRUPTED = new Set(["input-required", "auth-required"]);
const STATES = ["submitted", "working", "input-required", "auth-required", "completed", "failed", "canceled", "rejected"];
const SCHEMAS_URI = "https://skillwire.dev/extensions/skill-schemas/v1";
const RECONNECT_DELAYS = [250, 500, 1000, 2000, 4000, 8000, 8000, 8000];

const METHODS = {
  "1.0": {
    send: "SendMessage", stream: "SendStreamingMessage", get: "GetTask", list: "ListTasks",
    cancel: "CancelTask", subscribe: "SubscribeToTask", extended: "GetExtendedAgentCard",
  },
  "0.3": {
    send: "message/send", stream: "message/stream", get: "tasks/get", list: null,
    cancel: "tasks/cancel", subscribe: "tasks/resubscribe", extended: "agent/getAuthenticatedExtendedCard",
  },
};

const state = {
  config: null,
  card: null,
  extended: false,
  iface: null,        // {url, version, tenant} of the JSON-RPC interface the console calls
  credentials: { kind: "none" },
  tasks: new Map(),   // task id -> LiveTask
  nextId: 1,
};

// ---------------------------------------------------------------------------------------------------
// DOM helpers: every string goes in as text.

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// A link only to http(s) addresses: an agent's "javascript:" URL stays text.
function safeLink(url, label) {
  let parsed = null;
  try { parsed = new URL(url, location.href); } catch { parsed = null; }
  if (!parsed || (parsed.protocol !== "https:" && parsed.protocol !== "http:")) return h("code", { text: String(url) });
  return h("a", { href: parsed.href, rel: "noopener noreferrer", target: "_blank", text: label || String(url) });
}

function time(stamp) {
  if (!stamp) return "";
  const date = new Date(stamp);
  return Number.isNaN(date.getTime()) ? String(stamp) : date.toLocaleTimeString();
}

function announce(text) {
  const live = document.getElementById("live");
  if (live) live.textContent = text;
}

function showError(where, error) {
  clear(where);
  const lines = [error.message || String(error)];
  if (error.details) lines.push(JSON.stringify(error.details, null, 2));
  where.append(h("div", { class: "error", role: "alert" }, h("pre", { text: lines.join("\n") })));
}

// ---------------------------------------------------------------------------------------------------
// The protocol: one JSON-RPC client for v1.0 and v0.3, results brought to one (v1.0-like) shape.

class RpcError extends Error {
  constructor(error, status, challenge) {
    const reason = error?.data && Array.isArray(error.data)
      ? error.data.map((d) => d?.reason).filter(Boolean)[0] : undefined;
    let text = `${error?.message || "error"} (code ${error?.code ?? "?"}${reason ? `, ${reason}` : ""})`;
    if (status === 401) text += challenge ? `: sign in (${challenge})` : ": credentials needed";
    super(text);
    this.code = error?.code;
    this.status = status;
    this.details = error?.data;
  }
}

function credentialHeaders() {
  const c = state.credentials;
  if (c.kind === "bearer" && c.token) return { Authorization: `Bearer ${c.token}` };
  if (c.kind === "basic" && c.user) {
    const bytes = new TextEncoder().encode(`${c.user}:${c.password || ""}`);
    return { Authorization: `Basic ${btoa(String.fromCharCode(...bytes))}` };
  }
  if (c.kind === "apikey" && c.value && c.where !== "query") return { [c.name || "X-API-Key"]: c.value };
  return {};
}

function endpointUrl() {
  const url = new URL(state.iface.url);
  const c = state.credentials;
  if (c.kind === "apikey" && c.where === "query" && c.value) url.searchParams.set(c.name || "api_key", c.value);
  return url.href;
}

function headers(accept) {
  const out = { "Content-Type": "application/json", Accept: accept, "X-Skillwire-Console": "1" };
  if (state.iface.version === "1.0") out["A2A-Version"] = "1.0";
  return Object.assign(out, credentialHeaders());
}

function envelope(method, params) {
  if (state.iface.tenant && state.iface.version === "1.0") params = { tenant: state.iface.tenant, ...params };
  return JSON.stringify({ jsonrpc: "2.0", id: state.nextId++, method, params });
}

function method(name) {
  const found = METHODS[state.iface.version][name];
  if (!found) throw new Error(`This agent speaks A2A ${state.iface.version}, which has no ${name} operation.`);
  return found;
}

async function rpc(name, params) {
  let response;
  try {
    response = await fetch(endpointUrl(), { method: "POST", headers: headers("application/json"), body: envelope(method(name), params) });
  } catch (error) {
    throw new Error(`The agent could not be reached (${error.message}).`);
  }
  const body = await readJson(response);
  if (body.error) throw new RpcError(body.error, response.status, response.headers.get("WWW-Authenticate"));
  return body.result;
}

async function readJson(response) {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`HTTP ${response.status}: the answer is not JSON (${text.slice(0, 200)})`);
  }
}

// A streaming call: yields each result of the SSE stream. `signal` aborts it.
async function* rpcStream(name, params, signal) {
  let response;
  try {
    response = await fetch(endpointUrl(), {
      method: "POST", headers: headers("text/event-stream"), body: envelope(method(name), params), signal,
    });
  } catch (error) {
    if (signal?.aborted) return;
    throw new StreamDropped(error.message);
  }
  const type = response.headers.get("Content-Type") || "";
  if (!type.startsWith("text/event-stream")) {
    const body = await readJson(response);
    if (body.error) throw new RpcError(body.error, response.status, response.headers.get("WWW-Authenticate"));
    yield body.result;
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (error) {
      if (signal?.aborted) return;
      throw new StreamDropped(error.message);
    }
    if (chunk.done) return;
    buffer = (buffer + chunk.value).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
      if (!data.length) continue;  // a keepalive comment
      const message = JSON.parse(data.join("\n"));
      if (message.error) throw new RpcError(message.error, response.status);
      yield message.result;
    }
  }
}

class StreamDropped extends Error {}

function normState(value) {
  if (!value) return "unknown";
  return String(value).toLowerCase().replace(/^task_state_/, "").replace(/_/g, "-").replace("cancelled", "canceled");
}

function stateName(value) {
  return `TASK_STATE_${value.toUpperCase().replace(/-/g, "_")}`;
}

function normPart(part) {
  if (!part || typeof part !== "object") return { text: String(part) };
  if (part.kind === "text") return { text: part.text ?? "" };
  if (part.kind === "data") return { data: part.data };
  if (part.kind === "file") {
    const file = part.file || {};
    const base = { filename: file.name || "", mediaType: file.mimeType || "" };
    return file.bytes !== undefined ? { ...base, raw: file.bytes } : { ...base, url: file.uri || "" };
  }
  return part;
}

function normMessage(message) {
  if (!message) return null;
  const role = String(message.role || "").toLowerCase().replace(/^role_/, "");
  return { ...message, role, parts: (message.parts || []).map(normPart) };
}

function normArtifact(artifact) {
  return { ...artifact, parts: (artifact.parts || []).map(normPart) };
}

function normStatus(status) {
  return { state: normState(status?.state), message: normMessage(status?.message), timestamp: status?.timestamp };
}

function normTask(task) {
  return {
    id: task.id, contextId: task.contextId, status: normStatus(task.status),
    artifacts: (task.artifacts || []).map(normArtifact), history: (task.history || []).map(normMessage),
    metadata: task.metadata,
  };
}

// One stream or send result as {kind, value}: kind task | message | status | artifact.
function normEvent(result) {
  if (!result || typeof result !== "object") return null;
  if (result.kind) {  // v0.3
    if (result.kind === "task") return { kind: "task", value: normTask(result) };
    if (result.kind === "message") return { kind: "message", value: normMessage(result) };
    if (result.kind === "status-update") return { kind: "status", value: { taskId: result.taskId, contextId: result.contextId, status: normStatus(result.status) } };
    if (result.kind === "artifact-update") return { kind: "artifact", value: { ...result, artifact: normArtifact(result.artifact) } };
    return null;
  }
  if (result.task) return { kind: "task", value: normTask(result.task) };
  if (result.message) return { kind: "message", value: normMessage(result.message) };
  if (result.statusUpdate) {
    const u = result.statusUpdate;
    return { kind: "status", value: { taskId: u.taskId, contextId: u.contextId, status: normStatus(u.status) } };
  }
  if (result.artifactUpdate) return { kind: "artifact", value: { ...result.artifactUpdate, artifact: normArtifact(result.artifactUpdate.artifact) } };
  if (result.id && result.status) return { kind: "task", value: normTask(result) };  // a bare Task (GetTask, CancelTask)
  return null;
}

function outgoing(parts, { skillId, taskId, contextId } = {}) {
  const v03 = state.iface.version === "0.3";
  const message = {
    messageId: crypto.randomUUID(),
    role: v03 ? "user" : "ROLE_USER",
    parts: parts.map((p) => {
      if (!v03) return p.data !== undefined ? { data: p.data, mediaType: "application/json" } : { text: p.text };
      return p.data !== undefined ? { kind: "data", data: p.data } : { kind: "text", text: p.text };
    }),
  };
  if (v03) message.kind = "message";
  if (skillId) message.metadata = { skillId };
  if (taskId) message.taskId = taskId;
  if (contextId) message.contextId = contextId;
  return { message };
}

// The skill a task runs: the one the agent recorded (metadata.skillId), else the one its first message
// named, else the agent's only skill.
function taskSkill(task) {
  const recorded = task.metadata?.skillId;
  if (typeof recorded === "string") return recorded;
  const named = (task.history || []).map((m) => m?.metadata?.skillId).find((id) => typeof id === "string");
  if (named) return named;
  const skills = state.card?.skills || [];
  return skills.length === 1 ? String(skills[0].id) : "";
}

function streaming() {
  return Boolean(state.card?.capabilities?.streaming);
}

// ---------------------------------------------------------------------------------------------------
// A task followed live: its state, timeline and artifacts, updated by events; views listen to it.

class LiveTask {
  constructor(id) {
    this.id = id;
    this.task = null;
    this.timeline = [];
    this.artifacts = new Map();  // artifact id -> {name, description, parts, last}
    this.listeners = new Set();
    this.link = "idle";          // idle | live | reconnecting | lost | ended
    this.abort = null;
    this.error = null;
  }

  get state() { return this.task?.status?.state || "unknown"; }

  notify(change) { for (const listener of this.listeners) listener(change); }

  setLink(link, error) {
    this.link = link;
    this.error = error || null;
    this.notify({ kind: "link" });
  }

  snapshot(task) {
    const first = this.task === null;
    this.task = task;
    if (first || !this.timeline.length || this.timeline.at(-1).state !== task.status.state) this.timeline.push(task.status);
    this.artifacts = new Map(task.artifacts.map((a) => [a.artifactId, { ...a, parts: [...a.parts] }]));
    this.notify({ kind: "snapshot" });
  }

  apply(event) {
    if (event.kind === "task") return this.snapshot(event.value);
    if (!this.task) this.task = { id: this.id, contextId: event.value.contextId, status: { state: "submitted" }, artifacts: [], history: [] };
    if (event.kind === "status") {
      this.task.status = event.value.status;
      this.timeline.push(event.value.status);
      this.notify({ kind: "status", status: event.value.status });
    } else if (event.kind === "artifact") {
      const { artifact, append: more, lastChunk } = event.value;
      const known = this.artifacts.get(artifact.artifactId);
      if (more && known) {
        known.parts.push(...artifact.parts);
        known.last = Boolean(lastChunk);
        this.notify({ kind: "chunk", id: artifact.artifactId, parts: artifact.parts });
      } else {
        this.artifacts.set(artifact.artifactId, { ...artifact, parts: [...artifact.parts], last: Boolean(lastChunk) });
        this.notify({ kind: "artifact", id: artifact.artifactId });
      }
    }
  }

  // Read a stream of events into the task; when it drops before the task settles, resubscribe.
  async follow(makeStream) {
    this.stop();
    const controller = new AbortController();
    this.abort = controller;
    let attempt = 0;
    let stream = makeStream(controller.signal);
    for (;;) {
      try {
        if (attempt === 0) this.setLink("live");
        for await (const result of stream) {
          if (this.link !== "live") this.setLink("live");  // (re)connected: the first event is here
          attempt = 0;
          const event = normEvent(result);
          if (event) this.apply(event);
        }
        if (controller.signal.aborted) return;
        if (TERMINAL.has(this.state) || INTERRUPTED.has(this.state)) return this.setLink("ended");
        throw new StreamDropped("the stream ended before the task did");
      } catch (error) {
        if (controller.signal.aborted) return;
        if (error instanceof RpcError && attempt > 0) {
          // The task settled while we were away (a settled task has no subscription): read it as it is.
          try {
            this.snapshot(normTask(await rpc("get", { id: this.id, historyLength: 50 })));
            if (TERMINAL.has(this.state) || INTERRUPTED.has(this.state)) return this.setLink("ended");
          } catch (again) {
            error = again instanceof RpcError ? again : new StreamDropped(again.message);
          }
        }
        if (!(error instanceof StreamDropped) || attempt >= RECONNECT_DELAYS.length) return this.setLink("lost", error);
        this.setLink("reconnecting", error);
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_DELAYS[attempt++]));
        if (controller.signal.aborted) return;
        // The subscription starts with the task as it is now, so nothing sent while away is missed.
        stream = rpcStream("subscribe", { id: this.id }, controller.signal);
      }
    }
  }

  stop() {
    if (this.abort) this.abort.abort();
    this.abort = null;
  }
}

function liveTask(id) {
  let task = state.tasks.get(id);
  if (!task) {
    task = new LiveTask(id);
    state.tasks.set(id, task);
  }
  return task;
}

// Send a message and follow what it starts. Resolves with {taskId} or {message} (a reply without a task).
async function sendMessage(params) {
  if (!streaming()) {
    const event = normEvent(await rpc("send", params));
    if (!event) throw new Error("The agent's answer is neither a task nor a message.");
    if (event.kind === "message") return { message: event.value };
    liveTask(event.value.id).apply(event);
    if (!TERMINAL.has(event.value.status.state) && !INTERRUPTED.has(event.value.status.state)) poll(liveTask(event.value.id));
    return { taskId: event.value.id };
  }
  const controller = new AbortController();
  const stream = rpcStream("stream", params, controller.signal);
  const first = await stream.next();
  if (first.done) throw new Error("The agent's stream ended at once.");
  const event = normEvent(first.value);
  if (!event) throw new Error("The agent's first event is neither a task nor a message.");
  if (event.kind === "message") {
    controller.abort();
    return { message: event.value };
  }
  const id = event.kind === "task" ? event.value.id : event.value.taskId;
  const live = liveTask(id);
  live.apply(event);
  live.follow(() => stream).catch(() => {});
  live.abort = controller;
  return { taskId: id };
}

// Without streaming, a task page refreshes itself with GetTask until the task settles.
async function poll(live) {
  for (let i = 0; i < 600 && !TERMINAL.has(live.state) && !INTERRUPTED.has(live.state); i++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    try {
      live.snapshot(normTask(await rpc("get", { id: live.id, historyLength: 50 })));
    } catch (error) {
      return live.setLink("lost", error);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Content: parts as text, JSON, downloads and image previews.

function base64Bytes(text) {
  const binary = atob(String(text).replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function renderPart(part) {
  if (part.text !== undefined) return h("pre", { class: "text", text: part.text });
  if (part.data !== undefined) return h("pre", { class: "json", text: JSON.stringify(part.data, null, 2) });
  const name = part.filename || "file";
  const type = part.mediaType || "application/octet-stream";
  if (part.raw !== undefined) {
    let blob;
    try { blob = new Blob([base64Bytes(part.raw)], { type }); } catch { return h("p", { class: "error", text: `${name}: not base64` }); }
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: name, text: `Download ${name} (${type}, ${blob.size} bytes)` });
    const image = /^image\/(png|jpeg|gif|webp|avif)$/.test(type) ? h("img", { src: url, alt: name, class: "preview" }) : null;
    return h("div", { class: "file" }, image, link);
  }
  if (part.url !== undefined) return h("div", { class: "file" }, safeLink(part.url, `${name} (${type})`));
  return h("pre", { class: "json", text: JSON.stringify(part, null, 2) });
}

// Parts in a container: consecutive text parts grow one block, as a streamed artifact's chunks do.
function appendParts(container, parts) {
  for (const part of parts) {
    const last = container.lastElementChild;
    if (part.text !== undefined && last?.classList.contains("text")) last.append(document.createTextNode(part.text));
    else container.append(renderPart(part));
  }
  return container;
}

function messageText(message) {
  if (!message) return "";
  return message.parts.map((p) => (p.text !== undefined ? p.text : p.data !== undefined ? JSON.stringify(p.data) : `[${p.filename || "file"}]`)).join("\n");
}

// ---------------------------------------------------------------------------------------------------
// Forms from JSON Schema. Each field is {el, get(), set(value)}; get() is undefined for "left empty".
//
// A schema is read as a skill's types make it: `$ref` into `$defs` (and any local JSON pointer) is
// followed, `allOf` merged, `anyOf`/`oneOf` with `null` made an optional field and other alternatives a
// choice of forms, `type` lists likewise; objects are fieldsets, maps (`additionalProperties`) rows of
// key and value, arrays and tuples (`prefixItems`) lists, enums a select, numbers and strings inputs with
// their bounds. What has no form (`not`, `if`, a schema nested deeper than FORM_DEPTH) is a JSON box.

const FORM_DEPTH = 12;

function pointerTarget(root, ref) {
  if (typeof ref !== "string" || !ref.startsWith("#")) return undefined;
  let node = root;
  for (const raw of ref.slice(1).split("/").slice(1)) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object" || !(key in node)) return undefined;
    node = node[key];
  }
  return node;
}

// The schema with its $refs followed (the referring schema's own keys win: a default, a description)
// and a lone or all-object allOf merged. Undefined when a $ref points nowhere.
function resolved(schema, root) {
  if (schema === true || schema === undefined || schema === null) return {};
  if (typeof schema !== "object") return undefined;
  for (let hops = 0; schema.$ref !== undefined; hops++) {
    const target = pointerTarget(root, schema.$ref);
    if (hops > 32 || target === undefined || target === null || typeof target !== "object") return undefined;
    const { $ref, ...own } = schema;
    schema = { ...target, ...own };
  }
  if (Array.isArray(schema.allOf)) {
    const parts = schema.allOf.map((s) => resolved(s, root));
    if (parts.every((p) => p && (parts.length === 1 || p.type === "object" || p.properties))) {
      const { allOf, ...own } = schema;
      let merged = {};
      for (const part of parts) {
        merged = { ...merged, ...part, properties: { ...merged.properties, ...part.properties }, required: [...(merged.required || []), ...(part.required || [])] };
      }
      schema = { ...merged, ...own };
      if (!Object.keys(schema.properties).length && !parts.some((p) => p.properties)) delete schema.properties;
      if (!schema.required.length) delete schema.required;
    }
  }
  return schema;
}

function isNull(schema) {
  return schema && (schema.type === "null" || (schema.const === null && Object.keys(schema).length === 1));
}

// anyOf/oneOf/type lists as alternatives: {alternatives, nullable}.
function alternativesOf(schema) {
  let list = null;
  if (Array.isArray(schema.anyOf)) list = schema.anyOf;
  else if (Array.isArray(schema.oneOf)) list = schema.oneOf;
  else if (Array.isArray(schema.type)) list = schema.type.map((type) => ({ type }));
  if (!list) return null;
  const { anyOf, oneOf, discriminator, ...own } = schema;
  if (Array.isArray(schema.type)) delete own.type;
  const rest = list.filter((alt) => !isNull(alt));
  return { alternatives: rest.map((alt) => ({ ...own, ...alt })), nullable: rest.length < list.length };
}

function constraintHint(schema, type) {
  const out = [];
  const n = (v) => String(v);
  if (type === "number" || type === "integer") {
    if (schema.minimum !== undefined) out.push(`at least ${n(schema.minimum)}`);
    if (schema.exclusiveMinimum !== undefined) out.push(`more than ${n(schema.exclusiveMinimum)}`);
    if (schema.maximum !== undefined) out.push(`at most ${n(schema.maximum)}`);
    if (schema.exclusiveMaximum !== undefined) out.push(`less than ${n(schema.exclusiveMaximum)}`);
    if (schema.multipleOf !== undefined) out.push(`a multiple of ${n(schema.multipleOf)}`);
    if (type === "integer") out.unshift("a whole number");
  } else if (type === "string") {
    if (schema.minLength !== undefined && schema.maxLength !== undefined) out.push(`${schema.minLength} to ${schema.maxLength} characters`);
    else if (schema.minLength !== undefined) out.push(`at least ${schema.minLength} characters`);
    else if (schema.maxLength !== undefined) out.push(`at most ${schema.maxLength} characters`);
    if (schema.pattern !== undefined) out.push(`matching ${schema.pattern}`);
  } else if (type === "array") {
    if (schema.minItems !== undefined) out.push(`at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined) out.push(`at most ${schema.maxItems} items`);
    if (schema.uniqueItems) out.push("no item twice");
  }
  return out.join(", ");
}

function schemaField(schema, label, required, path, root, depth = 0) {
  root = root === undefined ? schema : root;
  const target = resolved(schema, root);
  const id = `f-${path.replace(/[^a-zA-Z0-9_-]/g, "-")}-${state.nextId++}`;
  if (target === undefined || depth > FORM_DEPTH) return jsonField(schema && typeof schema === "object" ? schema : {}, label, required, path, id);
  // a field is named by its own title, else its property name: a $ref'd type's title ("Address") names
  // the type, not the field
  const referred = schema && typeof schema === "object" && schema.$ref !== undefined;
  const ownTitle = schema?.title;  // before the $ref is followed: the referring schema's own
  schema = target;
  const title = (referred ? ownTitle : schema.title) || label || schema.title;
  const bounds = constraintHint(schema, schema.type);
  const hintText = [schema.description, bounds && `(${bounds})`].filter(Boolean).join(" ");
  const hint = hintText ? h("small", { class: "hint", id: `${id}-hint`, text: hintText }) : null;
  const describedBy = hint ? `${id}-hint` : undefined;
  const labelEl = (forId) => h("label", { for: forId }, title, required ? h("span", { class: "required", "aria-hidden": "true", text: " *" }) : null);
  const type = schema.type;
  const choice = alternativesOf(schema);
  const opaque = schema.not || schema.if || schema.allOf;

  if (choice && !Array.isArray(schema.enum)) {
    if (choice.alternatives.length === 0) return jsonField(schema, label, required, path, id);
    if (choice.alternatives.length === 1) return nullableField(choice.alternatives[0], label, required, path, root, depth, choice.nullable);
    return choiceField(schema, choice, title, required, path, root, depth, id, hint);
  }
  if (opaque) return jsonField(schema, label, required, path, id, hint);

  if (Array.isArray(schema.enum) || schema.const !== undefined) {
    const options = schema.enum || [schema.const];
    const select = h("select", { id, name: path, "aria-describedby": describedBy, required: required || undefined },
      required && options.length ? null : h("option", { value: "", text: "(none)" }),
      options.map((value, i) => h("option", { value: String(i), text: typeof value === "string" ? value : JSON.stringify(value) })));
    const field = {
      el: h("div", { class: "field" }, labelEl(id), select, hint),
      get: () => (select.value === "" ? undefined : options[Number(select.value)]),
      set: (value) => {
        const i = options.findIndex((o) => JSON.stringify(o) === JSON.stringify(value));
        select.value = i >= 0 ? String(i) : (required && options.length ? "0" : "");
      },
    };
    if (schema.default !== undefined) field.set(schema.default);
    return field;
  }

  if (type === "object" && schema.properties) return objectField(schema, title, required, path, root, depth, hint);
  if (type === "object" && schema.additionalProperties && typeof schema.additionalProperties === "object") {
    return mapField(schema, title, required, path, root, depth, hint);
  }
  if (type === "object" && !schema.additionalProperties && !schema.patternProperties) return objectField(schema, title, required, path, root, depth, hint);
  if (type === "array" && Array.isArray(schema.prefixItems)) return tupleField(schema, title, required, path, root, depth, hint);
  if (type === "array") return arrayField(schema, title, required, path, root, depth, hint);

  if (type === "boolean") {
    const box = h("input", { id, name: path, type: "checkbox", "aria-describedby": describedBy });
    let touched = false;
    box.addEventListener("change", () => { touched = true; });
    const field = {
      el: h("div", { class: "field check" }, box, labelEl(id), hint),
      get: () => (touched || required || schema.default !== undefined ? box.checked : undefined),
      set: (value) => { box.checked = value === true; touched = value !== undefined; },
    };
    if (schema.default !== undefined) field.set(schema.default);
    return field;
  }

  if (type === "string" || type === "number" || type === "integer") {
    const formats = { date: "date", "date-time": "datetime-local", email: "email", uri: "url", url: "url", time: "time" };
    const inputType = type === "string" ? formats[schema.format] || "text" : "number";
    const long = type === "string" && inputType === "text" && schema.maxLength > 200;
    const attrs = { id, name: path, "aria-describedby": describedBy, required: required || undefined };
    if (type !== "string") {
      Object.assign(attrs, {
        step: schema.multipleOf !== undefined ? String(schema.multipleOf) : type === "integer" ? "1" : "any",
        min: schema.minimum ?? schema.exclusiveMinimum, max: schema.maximum ?? schema.exclusiveMaximum,
      });
    } else Object.assign(attrs, { minlength: schema.minLength, maxlength: schema.maxLength, placeholder: schema.examples?.[0] });
    const input = long ? h("textarea", { ...attrs, rows: 2 }) : h("input", { ...attrs, type: inputType });
    const field = {
      el: h("div", { class: "field" }, labelEl(id), input, hint),
      get: () => {
        const raw = input.value;
        if (raw === "") return undefined;
        if (type !== "string") return Number(raw);
        if (inputType === "datetime-local") return new Date(raw).toISOString();
        if (inputType === "time") return raw.length === 5 ? `${raw}:00Z` : raw;
        return raw;
      },
      set: (value) => {
        if (value === undefined || value === null) input.value = "";
        else if (inputType === "datetime-local") {
          const d = new Date(value);
          input.value = Number.isNaN(d.getTime()) ? "" : new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
        } else input.value = String(value);
      },
    };
    if (schema.default !== undefined) field.set(schema.default);
    return field;
  }

  // Any JSON value (an empty schema), or what a form cannot express: a JSON editor for this value.
  return jsonField(schema, label, required, path, id, hint);
}

function objectField(schema, title, required, path, root, depth, hint) {
  const needed = new Set(schema.required || []);
  const children = Object.entries(schema.properties || {}).map(([name, sub]) =>
    [name, schemaField(sub, name, needed.has(name), `${path}.${name}`, root, depth + 1)]);
  const top = path === "input";
  const field = {
    el: h("fieldset", { class: top ? "object root" : "object" }, top ? null : h("legend", { text: title }), hint, children.map(([, c]) => c.el)),
    get: () => {
      const out = {};
      for (const [name, child] of children) {
        const value = child.get();
        if (value !== undefined) out[name] = value;
      }
      return Object.keys(out).length || required || top ? out : undefined;
    },
    set: (value) => {
      for (const [name, child] of children) child.set(value && typeof value === "object" ? value[name] : undefined);
    },
  };
  if (schema.default !== undefined) field.set(schema.default);
  return field;
}

// A list of fields added and removed by buttons; `make(index)` makes the field of one entry.
function listField(title, hint, cssClass, make, wrap) {
  const list = h("ol", { class: "items" });
  const entries = [];
  const add = (value) => {
    const child = make(entries.length);
    if (value !== undefined) child.set(value);
    const entry = { child, el: null };
    entry.el = h("li", {}, child.el, h("button", {
      type: "button", class: "secondary", "aria-label": `Remove this ${title} item`,
      onclick: () => { entries.splice(entries.indexOf(entry), 1); entry.el.remove(); },
    }, "Remove"));
    entries.push(entry);
    list.append(entry.el);
  };
  const el = h("fieldset", { class: cssClass }, h("legend", { text: title }), hint, list,
    h("button", { type: "button", class: "secondary", onclick: () => add(undefined) }, `Add ${title} item`));
  return { el, entries, add, clearAll: () => entries.splice(0).forEach((e) => e.el.remove()), wrap };
}

function arrayField(schema, title, required, path, root, depth, hint) {
  const items = schema.items === undefined || schema.items === true ? {} : schema.items;
  const list = listField(title, hint, "array", (i) => schemaField(items, `${title} item`, true, `${path}[${i}]`, root, depth + 1));
  const field = {
    el: list.el,
    get: () => {
      const values = list.entries.map((e) => e.child.get()).filter((v) => v !== undefined);
      return values.length || required ? values : undefined;
    },
    set: (value) => {
      list.clearAll();
      if (Array.isArray(value)) value.forEach(list.add);
    },
  };
  field.set(schema.default);
  for (let i = list.entries.length; i < (schema.minItems || 0); i++) list.add(undefined);
  return field;
}

function tupleField(schema, title, required, path, root, depth, hint) {
  const children = schema.prefixItems.map((sub, i) => schemaField(sub, `${title} ${i + 1}`, true, `${path}[${i}]`, root, depth + 1));
  const field = {
    el: h("fieldset", { class: "tuple" }, h("legend", { text: title }), hint, children.map((c) => c.el)),
    get: () => {
      const values = children.map((c) => c.get());
      return values.every((v) => v === undefined) && !required ? undefined : values;
    },
    set: (value) => children.forEach((c, i) => c.set(Array.isArray(value) ? value[i] : undefined)),
  };
  if (schema.default !== undefined) field.set(schema.default);
  return field;
}

// A map ({name: value} under additionalProperties): rows of a key and a value field.
function mapField(schema, title, required, path, root, depth, hint) {
  const list = listField(title, hint, "map", (i) => {
    const keyId = `f-${path.replace(/[^a-zA-Z0-9_-]/g, "-")}-key-${state.nextId++}`;
    const key = h("input", { id: keyId, type: "text", name: `${path}{${i}}`, required: true });
    const value = schemaField(schema.additionalProperties, `${title} value`, true, `${path}{${i}}`, root, depth + 1);
    return {
      el: h("div", { class: "entry" }, h("div", { class: "field" }, h("label", { for: keyId, text: `${title} key` }), key), value.el),
      get: () => (key.value === "" ? undefined : [key.value, value.get()]),
      set: (pair) => { key.value = pair?.[0] ?? ""; value.set(pair?.[1]); },
    };
  });
  const field = {
    el: list.el,
    get: () => {
      const pairs = list.entries.map((e) => e.child.get()).filter((p) => p !== undefined && p[1] !== undefined);
      return pairs.length || required ? Object.fromEntries(pairs) : undefined;
    },
    set: (value) => {
      list.clearAll();
      if (value && typeof value === "object" && !Array.isArray(value)) Object.entries(value).forEach(list.add);
    },
  };
  field.set(schema.default);
  return field;
}

// One alternative, which may be null (Optional[...]): required and left empty, it is sent as null.
function nullableField(schema, label, required, path, root, depth, nullable) {
  const inner = schemaField(schema, label, required && !nullable, path, root, depth + 1);
  if (!nullable) return inner;
  return {
    el: inner.el,
    get: () => {
      const value = inner.get();
      return value === undefined && required ? null : value;
    },
    set: (value) => inner.set(value === null ? undefined : value),
  };
}

function alternativeLabel(alt, root, i, discriminator) {
  const shown = resolved(alt, root) || {};
  const key = discriminator?.propertyName;
  const tag = key && shown.properties?.[key] ? resolved(shown.properties[key], root) : null;
  if (tag && tag.const !== undefined) return String(tag.const);
  if (tag && Array.isArray(tag.enum) && tag.enum.length === 1) return String(tag.enum[0]);
  return shown.title || (typeof shown.type === "string" ? shown.type : `option ${i + 1}`);
}

// Two or more alternatives (anyOf/oneOf, a type list): a select, then the chosen one's form (made when
// chosen, so that a recursive schema is drawn only as deep as it is filled in).
function choiceField(schema, choice, title, required, path, root, depth, id, hint) {
  const alternatives = choice.alternatives;
  const labels = alternatives.map((alt, i) => alternativeLabel(alt, root, i, schema.discriminator));
  const select = h("select", { id, name: `${path}#choice`, "aria-describedby": hint ? `${id}-hint` : undefined },
    choice.nullable || !required ? h("option", { value: "", text: choice.nullable ? "(null)" : "(none)" }) : null,
    labels.map((text, i) => h("option", { value: String(i), text })));
  const slot = h("div", { class: "chosen" });
  let current = null;
  const choose = (value) => {
    clear(slot);
    current = select.value === "" ? null : schemaField(alternatives[Number(select.value)], title, true, `${path}<${select.value}>`, root, depth + 1);
    if (current) {
      if (value !== undefined) current.set(value);
      slot.append(current.el);
    }
  };
  select.addEventListener("change", () => choose(undefined));
  const matches = (alt, value) => {
    const shown = resolved(alt, root) || {};
    const key = schema.discriminator?.propertyName;
    if (key && value && typeof value === "object" && shown.properties?.[key]) {
      const tag = resolved(shown.properties[key], root) || {};
      return tag.const === value[key] || (Array.isArray(tag.enum) && tag.enum.includes(value[key]));
    }
    const kind = value === null ? "null" : Array.isArray(value) ? "array" : Number.isInteger(value) ? "integer" : typeof value;
    const types = [].concat(shown.type || []);
    return types.includes(kind) || (kind === "integer" && types.includes("number")) || (kind === "object" && Boolean(shown.properties));
  };
  const field = {
    el: h("fieldset", { class: "choice" }, h("legend", {}, h("label", { for: id, text: title }),
      required ? h("span", { class: "required", "aria-hidden": "true", text: " *" }) : null), hint, select, slot),
    get: () => {
      if (current) return current.get();
      return choice.nullable && required ? null : undefined;
    },
    set: (value) => {
      const i = value === undefined || value === null ? -1 : alternatives.findIndex((alt) => matches(alt, value));
      select.value = i >= 0 ? String(i) : (choice.nullable || !required ? "" : "0");
      choose(i >= 0 ? value : undefined);
    },
  };
  field.set(schema.default);
  return field;
}

function jsonField(schema, label, required, path, id, hint) {
  const title = schema.title || label;
  const area = h("textarea", { id, name: path, rows: 3, class: "code", spellcheck: "false", "aria-describedby": hint ? `${id}-hint` : undefined, placeholder: "JSON" });
  const open = Object.keys(schema).filter((k) => !["title", "description", "default", "examples"].includes(k)).length === 0;
  const field = {
    el: h("div", { class: "field" }, h("label", { for: id }, title, required ? h("span", { class: "required", "aria-hidden": "true", text: " *" }) : null), area,
      h("small", { class: "hint", text: open ? "Any JSON value" : "JSON (this part of the schema has no form)" }), hint),
    get: () => {
      if (area.value.trim() === "") return undefined;
      try { return JSON.parse(area.value); } catch { throw new Error(`${title}: not valid JSON`); }
    },
    set: (value) => { area.value = value === undefined ? "" : JSON.stringify(value, null, 2); },
  };
  if (schema.default !== undefined) field.set(schema.default);
  return field;
}

// ---------------------------------------------------------------------------------------------------
// The agent page: the card, and each skill with its form.

function describeScheme(scheme) {
  if (!scheme || typeof scheme !== "object") return "?";
  if (scheme.apiKeySecurityScheme) return `API key in ${scheme.apiKeySecurityScheme.location} "${scheme.apiKeySecurityScheme.name}"`;
  if (scheme.httpAuthSecurityScheme) return `HTTP ${scheme.httpAuthSecurityScheme.scheme}${scheme.httpAuthSecurityScheme.bearerFormat ? ` (${scheme.httpAuthSecurityScheme.bearerFormat})` : ""}`;
  if (scheme.oauth2SecurityScheme) return `OAuth 2.0 (${Object.keys(scheme.oauth2SecurityScheme.flows || {}).join(", ") || "flows"})`;
  if (scheme.openIdConnectSecurityScheme) return `OpenID Connect (${scheme.openIdConnectSecurityScheme.openIdConnectUrl})`;
  if (scheme.mtlsSecurityScheme) return "mutual TLS";
  if (scheme.type === "apiKey") return `API key in ${scheme.in} "${scheme.name}"`;
  if (scheme.type === "http") return `HTTP ${scheme.scheme}`;
  if (scheme.type === "oauth2") return "OAuth 2.0";
  if (scheme.type === "openIdConnect") return `OpenID Connect (${scheme.openIdConnectUrl})`;
  if (scheme.type === "mutualTLS") return "mutual TLS";
  return JSON.stringify(scheme);
}

function requirements(card) {
  if (Array.isArray(card.securityRequirements)) {
    return card.securityRequirements.map((r) => Object.entries(r.schemes || {}).map(([name, s]) => `${name}${s?.list?.length ? ` [${s.list.join(" ")}]` : ""}`).join(" + "));
  }
  if (Array.isArray(card.security)) return card.security.map((r) => Object.entries(r).map(([name, scopes]) => `${name}${scopes?.length ? ` [${scopes.join(" ")}]` : ""}`).join(" + "));
  return [];
}

function signatureRows(card) {
  return (card.signatures || []).map((sig) => {
    let header = {};
    try { header = JSON.parse(new TextDecoder().decode(base64Bytes(sig.protected))); } catch { header = {}; }
    return `${header.alg || "?"}, key ${header.kid || "?"}${header.jku ? `, keys at ${header.jku}` : ""}`;
  });
}

function definitionList(rows) {
  return h("dl", {}, rows.filter(([, v]) => v !== undefined && v !== null && v !== "").map(([k, v]) => [h("dt", { text: k }), h("dd", {}, v)]));
}

function cardView(card) {
  const caps = card.capabilities || {};
  const interfaces = card.supportedInterfaces?.length ? card.supportedInterfaces.map((i) => [i.protocolBinding, i.protocolVersion || "", i.url, i.tenant || ""])
    : [[card.preferredTransport || "JSONRPC", card.protocolVersion || "0.3", card.url || "", ""], ...(card.additionalInterfaces || []).map((i) => [i.transport, card.protocolVersion || "0.3", i.url, ""])];
  const schemes = Object.entries(card.securitySchemes || {});
  const extensions = caps.extensions || [];
  const signatures = signatureRows(card);
  const chosen = state.iface ? `JSON-RPC, A2A ${state.iface.version}, at ${state.iface.url}` : "none: this console speaks JSON-RPC only";
  const section = h("section", { class: "card", "aria-labelledby": "card-details-title" },
    h("h2", { id: "card-details-title", text: "About this agent" }),
    definitionList([
      ["Version", card.version],
      ["Provider", card.provider ? `${card.provider.organization || ""} ${card.provider.url || ""}`.trim() : undefined],
      ["Documentation", card.documentationUrl ? safeLink(card.documentationUrl) : undefined],
      ["Console calls", chosen],
      ["Input modes", (card.defaultInputModes || []).join(", ")],
      ["Output modes", (card.defaultOutputModes || []).join(", ")],
    ]),
    h("h2", { text: "Interfaces" }),
    h("div", { class: "scroll" }, h("table", {}, h("thead", {}, h("tr", {}, ["Binding", "Version", "URL", "Tenant"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, interfaces.map((row) => h("tr", {}, row.map((cell) => h("td", { text: cell }))))))),
    h("h2", { text: "Capabilities" }),
    h("ul", { class: "flags" }, [["streaming", caps.streaming], ["push notifications", caps.pushNotifications], ["extended card", caps.extendedAgentCard ?? card.supportsAuthenticatedExtendedCard], ["state history", caps.stateTransitionHistory]]
      .map(([name, on]) => h("li", { class: on ? "on" : "off", text: `${name}: ${on ? "yes" : "no"}` }))),
    h("h2", { text: "Security" }),
    schemes.length ? h("ul", {}, schemes.map(([name, s]) => h("li", {}, h("strong", { text: name }), `: ${describeScheme(s)}`)), requirements(card).map((r) => h("li", { text: `required: ${r}` })))
      : h("p", { text: "No security schemes: anyone may call." }),
    h("h2", { text: "Extensions" }),
    extensions.length ? h("ul", {}, extensions.map((e) => h("li", {}, h("code", { text: e.uri }), e.required ? " (required)" : "", e.description ? ` ${e.description}` : "")))
      : h("p", { text: "None." }),
    h("h2", { text: "Signature" }),
    h("p", { class: "signature", text: signatures.length
      ? `Signed (${signatures.length}): ${signatures.join("; ")}. The console shows the signature; it does not verify it.`
      : "Not signed." }),
    (caps.extendedAgentCard || card.supportsAuthenticatedExtendedCard) && !state.extended
      ? h("button", { type: "button", class: "secondary", onclick: loadExtended }, "Load the extended card") : null,
    h("div", { id: "extended-error" }),
    h("details", {}, h("summary", { text: "The card as JSON" }), h("pre", { class: "json", text: JSON.stringify(card, null, 2) })),
  );
  return section;
}

async function loadExtended() {
  try {
    const card = await rpc("extended", {});
    state.card = card;
    state.extended = true;
    render();
  } catch (error) {
    showError(document.getElementById("extended-error"), error);
  }
}

function skillSchemas(card) {
  const ext = (card.capabilities?.extensions || []).find((e) => e.uri === SCHEMAS_URI);
  return ext?.params || {};
}

function skillView(skill, schemas) {
  const schema = schemas[skill.id]?.input;
  const slug = String(skill.id).replace(/[^a-zA-Z0-9_-]/g, "-");
  const result = h("div", { class: "result", "aria-live": "polite" });
  const form = schema ? schemaField(schema, "input", true, "input") : null;
  const raw = h("textarea", { class: "code", rows: 6, spellcheck: "false", id: `raw-${slug}`, "aria-label": `${skill.name || skill.id} input as JSON` });
  const text = h("textarea", { rows: 3, id: `text-${slug}`, "aria-label": `Message to ${skill.name || skill.id}` });
  let mode = schema ? "form" : "text";
  const panes = {
    form: form ? h("div", { class: "pane" }, form.el) : null,
    json: schema ? h("div", { class: "pane", hidden: true }, h("label", { for: `raw-${slug}`, text: "Input as JSON" }), raw) : null,
    text: h("div", { class: "pane", hidden: schema ? true : undefined }, h("label", { for: `text-${slug}`, text: "Message" }), text),
  };
  const tabs = schema ? h("div", { class: "tabs", role: "group", "aria-label": "How to write the input" },
    [["form", "Form"], ["json", "JSON"], ["text", "Text"]].map(([key, label]) => h("button", {
      type: "button", class: "tab", "aria-pressed": String(key === mode), dataset: { mode: key }, onclick: () => switchTo(key),
    }, label))) : null;

  function switchTo(next) {
    if (next === mode) return;
    if (mode === "form" && next === "json") raw.value = JSON.stringify(form.get() ?? {}, null, 2);
    if (mode === "json" && next === "form") {
      try { form.set(JSON.parse(raw.value || "{}")); } catch { showError(result, new Error("The JSON does not parse: fix it or clear it first.")); return; }
    }
    mode = next;
    for (const [key, pane] of Object.entries(panes)) if (pane) pane.hidden = key !== mode;
    for (const tab of tabs?.querySelectorAll("button") || []) tab.setAttribute("aria-pressed", String(tab.dataset.mode === mode));
  }

  function useExample(example) {
    let parsed;
    try { parsed = JSON.parse(example); } catch { parsed = undefined; }
    if (schema && parsed && typeof parsed === "object") {
      switchTo("form");
      form.set(parsed);
      raw.value = JSON.stringify(parsed, null, 2);
    } else {
      switchTo("text");
      text.value = example;
    }
  }

  async function submit(event) {
    event.preventDefault();
    clear(result);
    let parts;
    try {
      if (mode === "form") parts = [{ data: form.get() ?? {} }];
      else if (mode === "json") parts = [{ data: JSON.parse(raw.value) }];
      else {
        if (!text.value.trim()) throw new Error("Write a message first.");
        parts = [{ text: text.value }];
      }
    } catch (error) {
      return showError(result, error);
    }
    const button = event.submitter || formEl.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const sent = await sendMessage(outgoing(parts, { skillId: (state.card.skills || []).length > 1 || schema ? skill.id : undefined }));
      if (sent.message) result.append(h("div", { class: "reply" }, h("h4", { text: "Reply" }), appendParts(h("div", { class: "parts" }), sent.message.parts)));
      else location.hash = `#/task/${encodeURIComponent(sent.taskId)}`;
    } catch (error) {
      showError(result, error);
    } finally {
      button.disabled = false;
    }
  }

  const formEl = h("form", { class: "send", onsubmit: submit, novalidate: true }, tabs, panes.form, panes.json, panes.text,
    h("button", { type: "submit" }, `Send to ${skill.name || skill.id}`));
  return h("article", { class: "skill", id: `skill-${slug}`, "aria-labelledby": `skill-title-${slug}` },
    h("h3", { id: `skill-title-${slug}` }, skill.name || skill.id, " ", h("code", { class: "muted", text: skill.id })),
    skill.description ? h("p", { text: skill.description }) : null,
    skill.tags?.length ? h("ul", { class: "tags", "aria-label": "Tags" }, skill.tags.map((t) => h("li", { text: t }))) : null,
    skill.examples?.length ? h("div", { class: "examples" }, h("span", { text: "Examples: " }),
      skill.examples.map((example) => h("button", { type: "button", class: "example", onclick: () => useExample(example) }, example))) : null,
    formEl, result);
}

// The agent's name and what it does, then its skills (the first screen), then the rest of its card.
function agentPage(view) {
  const card = state.card;
  const schemas = skillSchemas(card);
  const skills = card.skills || [];
  append(view, [
    h("header", { class: "agent", "aria-labelledby": "card-title" },
      h("h1", { id: "card-title" }, card.name || "(unnamed agent)", state.extended ? h("span", { class: "badge", text: "extended card" }) : null),
      card.description ? h("p", { class: "description", text: card.description }) : null,
      skills.length ? h("nav", { class: "skill-index", "aria-label": "Skills" }, h("ul", {}, skills.map((s) => h("li", {},
        h("a", { href: `#skill-${String(s.id).replace(/[^a-zA-Z0-9_-]/g, "-")}`, text: s.name || s.id, onclick: (e) => {
          e.preventDefault();
          document.getElementById(`skill-${String(s.id).replace(/[^a-zA-Z0-9_-]/g, "-")}`)?.scrollIntoView();
        } }))))) : null),
    h("section", { class: "skills", "aria-labelledby": "skills-title" },
      h("h2", { id: "skills-title", text: `Skills (${skills.length})` }),
      skills.length ? skills.map((s) => skillView(s, schemas)) : h("p", { text: "This agent lists no skills." }),
      skills.length ? null : skillView({ id: "message", name: "the agent", description: "A free text message." }, {})),
    cardView(card),
  ]);
}

// ---------------------------------------------------------------------------------------------------
// The task page: status timeline, artifacts growing in place, prompts, cancel, history.

function taskPage(view, id) {
  const live = liveTask(id);
  const title = h("h1", {}, "Task ", h("code", { text: id }));
  const badge = h("span", { class: "state", id: "task-state" });
  const link = h("p", { class: "link", id: "task-link", "aria-live": "polite" });
  const errors = h("div", {});
  const timeline = h("ol", { class: "timeline", id: "timeline", "aria-label": "Status timeline" });
  const artifacts = h("div", { class: "artifacts", id: "artifacts" });
  const prompt = h("section", { class: "prompt", id: "prompt", hidden: true, "aria-labelledby": "prompt-title" });
  const history = h("section", { class: "history", id: "history" });
  const cancel = h("button", { type: "button", class: "danger", id: "cancel", onclick: doCancel }, "Cancel task");
  const refresh = h("button", { type: "button", class: "secondary", onclick: () => load(true) }, "Refresh");
  const context = h("p", { class: "muted" });
  const artifactEls = new Map();

  append(view, [
    h("section", { "aria-labelledby": "task-title" }, h("div", { id: "task-title" }, title), context,
      h("p", {}, "State: ", badge), link, h("div", { class: "actions" }, cancel, refresh), errors),
    prompt,
    h("section", { "aria-labelledby": "timeline-title" }, h("h2", { id: "timeline-title", text: "Timeline" }), timeline),
    h("section", { "aria-labelledby": "artifacts-title" }, h("h2", { id: "artifacts-title", text: "Artifacts" }), artifacts),
    history,
  ]);

  function renderState() {
    const s = live.state;
    badge.textContent = s;
    badge.className = `state state-${s}`;
    cancel.hidden = TERMINAL.has(s) || s === "unknown";
    const skill = live.task ? taskSkill(live.task) : "";
    context.textContent = [skill ? `Skill ${skill}` : "", live.task?.contextId ? `Context ${live.task.contextId}` : ""].filter(Boolean).join(" \u00b7 ");
    const links = { live: "Live.", reconnecting: "Connection lost: reconnecting...", lost: `Disconnected${live.error ? ` (${live.error.message})` : ""}.`, ended: "", idle: "" };
    clear(link).append(links[live.link] || "");
    if (live.link === "lost" && !TERMINAL.has(s)) link.append(" ", h("button", { type: "button", class: "secondary", onclick: () => subscribe() }, "Reconnect"));
    renderPrompt();
  }

  function renderTimeline() {
    clear(timeline);
    for (const status of live.timeline) timeline.append(timelineItem(status));
  }

  function timelineItem(status) {
    return h("li", { class: `state-${status.state}` }, h("span", { class: "when", text: time(status.timestamp) }), " ",
      h("strong", { text: status.state }), status.message ? h("pre", { class: "text", text: messageText(status.message) }) : null);
  }

  function artifactEl(id) {
    const artifact = live.artifacts.get(id);
    const body = h("div", { class: "parts" });
    appendParts(body, artifact.parts);
    const el = h("article", { class: "artifact", dataset: { artifactId: id } },
      h("h3", { text: artifact.name || id }), artifact.description ? h("p", { class: "muted", text: artifact.description }) : null, body);
    artifactEls.set(id, { el, body });
    return el;
  }

  function renderArtifacts() {
    clear(artifacts);
    artifactEls.clear();
    for (const id of live.artifacts.keys()) artifacts.append(artifactEl(id));
    if (!live.artifacts.size) artifacts.append(h("p", { class: "muted", text: "None yet." }));
  }

  function renderPrompt() {
    const s = live.state;
    if (!INTERRUPTED.has(s)) { prompt.hidden = true; clear(prompt); return; }
    if (!prompt.hidden && prompt.dataset.for === String(live.timeline.length)) return;
    prompt.dataset.for = String(live.timeline.length);
    prompt.hidden = false;
    clear(prompt);
    const question = messageText(live.task.status.message) || (s === "auth-required" ? "The agent needs authorization." : "The agent needs more input.");
    const answer = h("textarea", { id: "answer", rows: 3 });
    const result = h("div", {});
    const form = h("form", { onsubmit: async (event) => {
      event.preventDefault();
      if (!answer.value.trim()) return showError(result, new Error("Write an answer first."));
      try {
        await sendMessage(outgoing([{ text: answer.value }], { taskId: id, contextId: live.task.contextId }));
        answer.value = "";
      } catch (error) {
        showError(result, error);
      }
    } }, h("label", { for: "answer", text: "Your answer" }), answer, h("button", { type: "submit" }, "Send answer"));
    append(prompt, [
      h("h2", { id: "prompt-title", text: s === "auth-required" ? "Authorization required" : "Input required" }),
      h("pre", { class: "text question", text: question }),
      s === "auth-required" ? h("p", { class: "muted", text: "Set credentials (top right) if the agent asks for them, then answer to continue." }) : null,
      form, result,
    ]);
  }

  async function renderHistory() {
    clear(history);
    const messages = live.task?.history || [];
    if (!messages.length) return;
    append(history, [h("h2", { text: "History" }), h("ol", { class: "messages" }, messages.map((m) =>
      h("li", { class: `role-${m.role}` }, h("strong", { text: m.role }), appendParts(h("div", { class: "parts" }), m.parts))))]);
  }

  function onChange(change) {
    if (!view.isConnected) return live.listeners.delete(onChange);
    if (change.kind === "snapshot") { renderTimeline(); renderArtifacts(); renderHistory(); }
    if (change.kind === "status") { timeline.append(timelineItem(change.status)); announce(`Task ${change.status.state}`); }
    if (change.kind === "artifact") {
      const known = artifactEls.get(change.id);
      if (known) known.el.replaceWith(artifactEl(change.id));
      else { if (!artifactEls.size) clear(artifacts); artifacts.append(artifactEl(change.id)); }
    }
    if (change.kind === "chunk") {
      const known = artifactEls.get(change.id);
      if (known) appendParts(known.body, change.parts);
    }
    renderState();
  }

  async function doCancel() {
    cancel.disabled = true;
    try {
      const event = normEvent(await rpc("cancel", { id }));
      if (event) live.apply(event);
    } catch (error) {
      showError(errors, error);
    } finally {
      cancel.disabled = false;
    }
  }

  function subscribe() {
    if (!streaming() || TERMINAL.has(live.state) || INTERRUPTED.has(live.state)) return;
    live.follow((signal) => rpcStream("subscribe", { id }, signal)).catch(() => {});
  }

  async function load(again) {
    clear(errors);
    try {
      live.snapshot(normTask(await rpc("get", { id, historyLength: 50 })));
    } catch (error) {
      return showError(errors, error);
    }
    if (again || live.link !== "live") subscribe();
  }

  live.listeners.add(onChange);
  renderTimeline();
  renderArtifacts();
  renderHistory();
  renderState();
  if (live.link !== "live" && live.link !== "reconnecting") load(false);
}

// ---------------------------------------------------------------------------------------------------
// The task list: ListTasks with filters and paging.

const listing = { status: "", contextId: "", pageSize: 20, tokens: [""], page: 0 };

function tasksPage(view) {
  const table = h("tbody", {});
  const summary = h("p", { class: "muted", id: "tasks-summary", "aria-live": "polite" });
  const errors = h("div", {});
  const status = h("select", { id: "filter-state" }, h("option", { value: "", text: "any" }), STATES.map((s) => h("option", { value: s, text: s })));
  const context = h("input", { id: "filter-context", type: "text", autocomplete: "off" });
  const size = h("select", { id: "filter-size" }, [5, 10, 20, 50, 100].map((n) => h("option", { value: String(n), text: String(n) })));
  status.value = listing.status;
  context.value = listing.contextId;
  size.value = String(listing.pageSize);
  const previous = h("button", { type: "button", class: "secondary", id: "page-previous", onclick: () => { listing.page -= 1; fetchPage(); } }, "Previous page");
  const next = h("button", { type: "button", class: "secondary", id: "page-next", onclick: () => { listing.page += 1; fetchPage(); } }, "Next page");

  const filters = h("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    Object.assign(listing, { status: status.value, contextId: context.value.trim(), pageSize: Number(size.value), tokens: [""], page: 0 });
    fetchPage();
  } },
  h("div", { class: "field" }, h("label", { for: "filter-state", text: "State" }), status),
  h("div", { class: "field" }, h("label", { for: "filter-context", text: "Context id" }), context),
  h("div", { class: "field" }, h("label", { for: "filter-size", text: "Per page" }), size),
  h("button", { type: "submit" }, "Show tasks"));

  append(view, [h("h1", { text: "Tasks" }), filters, errors, summary,
    h("div", { class: "scroll" }, h("table", { class: "tasks" },
      h("thead", {}, h("tr", {}, ["Task", "Skill", "State", "Updated", "Context", "Artifacts"].map((t) => h("th", { scope: "col", text: t })))), table)),
    h("nav", { class: "pager", "aria-label": "Pages" }, previous, next)]);

  async function fetchPage() {
    clear(errors);
    // the artifacts are asked for, to count them (without them a task lists none)
    const params = { pageSize: listing.pageSize, includeArtifacts: true };
    if (listing.tokens[listing.page]) params.pageToken = listing.tokens[listing.page];
    if (listing.status) params.status = stateName(listing.status);
    if (listing.contextId) params.contextId = listing.contextId;
    let answer;
    try {
      answer = await rpc("list", params);
    } catch (error) {
      clear(table);
      return showError(errors, error);
    }
    const tasks = (answer.tasks || []).map(normTask);
    if (answer.nextPageToken) listing.tokens[listing.page + 1] = answer.nextPageToken;
    clear(table);
    for (const task of tasks) {
      table.append(h("tr", {},
        h("td", {}, h("a", { href: `#/task/${encodeURIComponent(task.id)}`, text: task.id })),
        h("td", { class: "skill-id" }, h("code", { text: taskSkill(task) })),
        h("td", {}, h("span", { class: `state state-${task.status.state}`, text: task.status.state })),
        h("td", { text: time(task.status.timestamp) }),
        h("td", {}, h("code", { text: task.contextId || "" })),
        h("td", { text: String(task.artifacts.length) })));
    }
    const first = listing.page * listing.pageSize;
    summary.textContent = tasks.length
      ? `Tasks ${first + 1}-${first + tasks.length}${answer.totalSize !== undefined ? ` of ${answer.totalSize}` : ""} (page ${listing.page + 1})`
      : "No tasks.";
    previous.disabled = listing.page === 0;
    next.disabled = !answer.nextPageToken;
  }

  fetchPage();
}

// ---------------------------------------------------------------------------------------------------
// Credentials: typed in the page, kept in this page's memory only, sent on every A2A call.

function credentialsPanel() {
  const schemes = Object.values(state.card?.securitySchemes || {});
  const apiKey = schemes.map((s) => s.apiKeySecurityScheme || (s.type === "apiKey" ? { location: s.in, name: s.name } : null)).find(Boolean);
  const c = state.credentials;
  const kind = h("select", { id: "cred-kind" }, [["none", "None"], ["bearer", "Bearer token"], ["apikey", "API key"], ["basic", "Username and password"]]
    .map(([v, t]) => h("option", { value: v, text: t })));
  kind.value = c.kind;
  const token = h("input", { id: "cred-token", type: "password", autocomplete: "off", value: c.token || "" });
  const keyName = h("input", { id: "cred-key-name", type: "text", value: c.name || apiKey?.name || "X-API-Key" });
  const keyWhere = h("select", { id: "cred-key-where" }, h("option", { value: "header", text: "header" }), h("option", { value: "query", text: "query" }));
  keyWhere.value = c.where || (apiKey?.location === "query" ? "query" : "header");
  const keyValue = h("input", { id: "cred-key", type: "password", autocomplete: "off", value: c.value || "" });
  const user = h("input", { id: "cred-user", type: "text", autocomplete: "username", value: c.user || "" });
  const password = h("input", { id: "cred-password", type: "password", autocomplete: "current-password", value: c.password || "" });
  const groups = {
    bearer: h("div", { class: "field" }, h("label", { for: "cred-token", text: "Token" }), token),
    apikey: h("div", {}, h("div", { class: "field" }, h("label", { for: "cred-key-name", text: "Name" }), keyName),
      h("div", { class: "field" }, h("label", { for: "cred-key-where", text: "Sent in" }), keyWhere),
      h("div", { class: "field" }, h("label", { for: "cred-key", text: "Key" }), keyValue)),
    basic: h("div", {}, h("div", { class: "field" }, h("label", { for: "cred-user", text: "Username" }), user),
      h("div", { class: "field" }, h("label", { for: "cred-password", text: "Password" }), password)),
  };
  const show = () => { for (const [k, g] of Object.entries(groups)) g.hidden = k !== kind.value; };
  kind.addEventListener("change", show);
  show();
  const saved = h("p", { class: "muted", "aria-live": "polite" });
  return h("form", { class: "credentials", id: "credentials", onsubmit: (event) => {
    event.preventDefault();
    state.credentials = { kind: kind.value, token: token.value, name: keyName.value.trim(), where: keyWhere.value, value: keyValue.value, user: user.value, password: password.value };
    saved.textContent = state.credentials.kind === "none" ? "Calls go without credentials." : "Used on every call from now on (kept in this page only).";
  } },
  h("h2", { text: "Credentials" }),
  schemes.length ? h("p", { class: "muted", text: `The agent accepts: ${schemes.map(describeScheme).join("; ")}.` }) : null,
  h("div", { class: "field" }, h("label", { for: "cred-kind", text: "Kind" }), kind), groups.bearer, groups.apikey, groups.basic,
  h("button", { type: "submit" }, "Use these credentials"), saved);
}

// ---------------------------------------------------------------------------------------------------
// Start-up and routing (#/, #/tasks, #/task/ID).

function chooseInterface(card) {
  const toLocal = (url) => {
    let parsed;
    try { parsed = new URL(url, location.href); } catch { return null; }
    if (state.config.mode === "relay") {
      if (parsed.origin !== new URL(state.config.agent).origin) return null;
    }
    return `${location.origin}${parsed.pathname}${parsed.search}`;
  };
  for (const i of card.supportedInterfaces || []) {
    if (i.protocolBinding === "JSONRPC" && (!i.protocolVersion || i.protocolVersion.startsWith("1."))) {
      const url = toLocal(i.url);
      if (url) return { url, version: "1.0", tenant: i.tenant || "" };
    }
  }
  const v03 = [];
  if (card.url && (card.preferredTransport || "JSONRPC") === "JSONRPC") v03.push(card.url);
  for (const i of card.additionalInterfaces || []) if (i.transport === "JSONRPC") v03.push(i.url);
  for (const candidate of v03) {
    const url = toLocal(candidate);
    if (url) return { url, version: "0.3", tenant: "" };
  }
  return null;
}

function render() {
  const view = clear(document.getElementById("view"));
  const route = location.hash.replace(/^#\/?/, "");
  for (const a of document.querySelectorAll("nav.main a")) a.removeAttribute("aria-current");
  if (!state.iface && route) {
    view.append(h("p", { class: "error", text: "This agent offers no JSON-RPC interface the console can call." }));
    return;
  }
  if (route.startsWith("task/")) {
    taskPage(view, decodeURIComponent(route.slice(5)));
  } else if (route === "tasks") {
    document.getElementById("nav-tasks").setAttribute("aria-current", "page");
    tasksPage(view);
  } else {
    document.getElementById("nav-agent").setAttribute("aria-current", "page");
    agentPage(view);
  }
  document.title = `${state.card.name || "Agent"} - skillwire console`;
  const heading = view.querySelector("h1");
  if (heading && document.activeElement === document.body) heading.setAttribute("tabindex", "-1");
}

function shell() {
  const app = clear(document.getElementById("app"));
  const panel = h("div", { id: "cred-panel", hidden: true });
  const toggle = h("button", { type: "button", class: "secondary", id: "cred-toggle", "aria-expanded": "false", "aria-controls": "cred-panel", onclick: () => {
    const open = panel.hidden;
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) { clear(panel).append(credentialsPanel()); panel.querySelector("select")?.focus(); }
  } }, "Credentials");
  append(app, [
    h("a", { class: "skip", href: "#view", onclick: (e) => { e.preventDefault(); document.getElementById("view").focus(); } }, "Skip to content"),
    h("header", { class: "top" },
      h("span", { class: "brand", text: "skillwire console" }),
      h("nav", { class: "main", "aria-label": "Console" },
        h("a", { href: "#/", id: "nav-agent", text: "Agent" }), h("a", { href: "#/tasks", id: "nav-tasks", text: "Tasks" })),
      toggle),
    panel,
    h("main", { id: "view", tabindex: "-1" }),
    h("div", { id: "live", class: "visually-hidden", "aria-live": "polite" }),
  ]);
}

async function start() {
  performance.mark("console-start");
  shell();
  const view = document.getElementById("view");
  try {
    const config = await fetch("config.json", { headers: { "X-Skillwire-Console": "1" } });
    state.config = await readJson(config);
    const response = await fetch(state.config.card, { headers: { "X-Skillwire-Console": "1", Accept: "application/json" } });
    if (!response.ok) throw new Error(`The agent card could not be read: HTTP ${response.status}`);
    state.card = await readJson(response);
  } catch (error) {
    showError(view, error);
    document.body.dataset.ready = "error";
    return;
  }
  state.iface = chooseInterface(state.card);
  window.addEventListener("hashchange", render);
  render();
  document.body.dataset.ready = "true";
  performance.mark("console-ready");
}

start();
