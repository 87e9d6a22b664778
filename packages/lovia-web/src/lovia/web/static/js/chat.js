// The chat view: messages from the client state, the composer, and the stream controller
// (send, steer, attach, resume after a drop with the last event id, cancel, approve, answer).

import { ApiError, api, get, has, post, readStream, render } from "./api.js";
import { clear, h, setSafeHtml, show } from "./dom.js";
import { onLangChange, t } from "./i18n.js";
import { chat } from "./state.js";

const $ = (id) => document.getElementById(id);
const messages = $("messages");
const empty = $("empty");
const input = $("composer-input");
const sendBtn = $("send-btn");
const stopBtn = $("stop-btn");
const statusEl = $("conn-status");
const todosEl = $("todos");

const nodes = new Map(); // item id -> element
const hooks = { onSession: () => {}, onRunEnd: () => {} };

export function setHooks(next) { Object.assign(hooks, next); }

// ---- markdown: rendered on the server, incrementally while streaming ----

const STREAM_RENDER_MS = 90;

/** The part of a streaming text that will not change its rendering: up to the last blank
 * line outside a code fence. The rest is shown as plain text until it is stable. */
export function stablePrefix(text) {
  let cut = -1;
  let fence = false;
  let pos = 0;
  for (const line of text.split("\n")) {
    if (/^\s{0,3}(```|~~~)/.test(line)) fence = !fence;
    pos += line.length + 1;
    if (!fence && line.trim() === "" && pos <= text.length) cut = pos;
  }
  return cut > 0 ? text.slice(0, cut) : "";
}

class Markdown {
  constructor(body, tail) {
    this.body = body;
    this.tail = tail;
    this.rendered = null; // the text the body shows
    this.latest = "";
    this.streaming = false;
    this.inflight = false;
    this.cost = 0;
    this.timer = null;
    this.version = 0;
    this.applied = 0;
  }

  update(text, streaming) {
    this.latest = text;
    this.streaming = streaming;
    if (!streaming) {
      clearTimeout(this.timer);
      this.timer = null;
      this.renderNow(text, "");
      return;
    }
    const prefix = stablePrefix(text);
    if (prefix === this.rendered || this.inflight) {
      this.tail.textContent = text.slice((this.rendered || "").length);
      return;
    }
    this.tail.textContent = text.slice((this.rendered || "").length);
    this.schedule();
  }

  // One render in flight at a time, and never more often than the last one took (x2):
  // a long answer costs a bounded number of renders, not one per delta.
  schedule() {
    if (this.timer || this.inflight) return;
    const wait = Math.max(STREAM_RENDER_MS, 2 * (this.cost || 0));
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.streaming) return;
      const prefix = stablePrefix(this.latest);
      if (prefix !== this.rendered) this.renderNow(prefix, null);
    }, wait);
  }

  async renderNow(text, tail) {
    const version = ++this.version;
    if (text === this.rendered) {
      if (tail !== null) this.tail.textContent = tail;
      this.applied = version;
      return;
    }
    let html;
    const started = performance.now();
    this.inflight = true;
    try {
      [html] = text ? await render([text]) : [""];
    } catch {
      return; // the text stays as it was; the final render retries
    } finally {
      this.inflight = false;
      this.cost = performance.now() - started;
    }
    if (version < this.applied) return; // a later render already landed
    this.applied = version;
    // Never let the block shrink while it streams: no jumping.
    this.body.parentElement.style.minHeight = `${this.body.parentElement.offsetHeight}px`;
    setSafeHtml(this.body, html);
    decorate(this.body);
    this.rendered = text;
    if (tail !== null) {
      this.tail.textContent = tail;
      this.body.parentElement.style.minHeight = "";
    } else {
      this.tail.textContent = this.latest.slice(text.length);
      if (this.streaming && stablePrefix(this.latest) !== text) this.schedule();
    }
  }
}

function decorate(root) {
  for (const pre of root.querySelectorAll("pre")) {
    if (pre.querySelector(".copy")) continue;
    const code = pre.querySelector("code");
    if (code && code.classList.contains("language-mermaid")) {
      pre.before(h("div", { class: "diagram-note", text: t("diagram_note") }));
    }
    const btn = h("button", { type: "button", class: "copy btn small", text: t("copy"), "aria-label": t("copy") });
    btn.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(code ? code.textContent : pre.textContent); btn.textContent = t("copied"); } catch { /* no clipboard */ }
    });
    pre.append(btn);
  }
}

// ---- rendering items ----

function pretty(args) {
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch { return String(args ?? ""); }
}

// A subagent's report reaches its parent chat as an input message (lovia.plugins.subagents'
// SubagentReport.render); shown as the user's own words it would misattribute them.
const REPORT = /^<subagent-report id="([^"]*)" agent="([^"]*)" status="([^"]*)">\n([\s\S]*)\n<\/subagent-report>$/;
const REPORT_STATUS = { completed: "task_done", failed: "task_failed", cancelled: "task_cancelled" };

function reportNode(item, [, id, agent, status, body]) {
  return h("article", { class: "msg report", dataset: { item: item.id } },
    h("div", { class: "who" }, t("report_from", { id, agent }), " ",
      h("span", { class: `badge task-status status-${status === "completed" ? "done" : status}`, text: t(REPORT_STATUS[status] || "task_failed") })),
    h("div", { class: "text", text: body }));
}

function userNode(item) {
  const report = typeof item.text === "string" ? item.text.match(REPORT) : null;
  if (report) return reportNode(item, report);
  const badge = item.queued ? t("queued") : item.injected ? t("delivered") : null;
  const el = h("article", { class: "msg user", dataset: { item: item.id } },
    h("div", { class: "who", text: t("you") }),
    h("div", { class: "text", text: item.text }),
    badge ? h("span", { class: "badge", text: badge }) : null);
  return el;
}

function assistantNode(item) {
  const reasoning = h("details", { class: "reasoning", hidden: !item.reasoning },
    h("summary", { text: t("reasoning") }), h("div", { class: "reasoning-text" }));
  const body = h("div", { class: "md" });
  const tail = h("span", { class: "tail" });
  const content = h("div", { class: "content" }, body, tail);
  const el = h("article", { class: "msg assistant", dataset: { item: item.id } },
    h("div", { class: "who", text: t("assistant") }), reasoning, content);
  el.md = new Markdown(body, tail);
  return el;
}

function updateAssistant(el, item) {
  const reasoning = el.querySelector(".reasoning");
  reasoning.hidden = !item.reasoning;
  reasoning.querySelector(".reasoning-text").textContent = item.reasoning;
  el.classList.toggle("streaming", item.streaming);
  if (item.history && el.md.rendered === null) return; // renderHistory renders them in one call
  el.md.update(item.text, item.streaming);
}

function statusText(item) {
  if (item.status === "done") return item.isError ? t("failed") : t("done");
  if (item.status === "approval") return t("approval_needed");
  if (item.status === "question") return t("question");
  if (item.status === "pending") return t("pending");
  return t("running");
}

function approvalBox(item) {
  const decide = async (decision) => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    try {
      await post("/api/chat/approve", { session_id: chat.sessionId, call_id: item.callId, decision });
      item.decision = decision;
      if (item.status === "approval") item.status = "running"; // unless its result came first
      chat.update(item);
    } catch (err) {
      box.append(h("p", { class: "error", text: err.message }));
    }
  };
  const box = h("div", { class: "approval", role: "group", "aria-label": t("approval_needed") },
    h("strong", { text: t("approval_needed") }),
    h("button", { type: "button", class: "btn primary", onclick: () => decide("approve"), text: t("approve") }),
    h("button", { type: "button", class: "btn danger", onclick: () => decide("deny"), text: t("deny") }));
  return box;
}

function questionBox(item) {
  let args = {};
  try { args = JSON.parse(item.args); } catch { /* shown raw below */ }
  const box = h("div", { class: "question", role: "group", "aria-label": t("question") },
    h("p", { class: "question-text", text: args.question || item.args }));
  if (!has("/api/chat/answer")) {
    box.append(h("p", { class: "hint", text: t("answer_unavailable") }));
    return box;
  }
  const send = async (answer) => {
    for (const b of box.querySelectorAll("button, input, textarea")) b.disabled = true;
    try {
      await post("/api/chat/answer", { session_id: chat.sessionId, answer });
      if (item.status === "question") item.status = "running";
      item.answered = answer;
      chat.update(item);
    } catch (err) {
      box.append(h("p", { class: "error", text: err.message }));
    }
  };
  const options = Array.isArray(args.options) ? args.options : [];
  if (options.length && args.multi_select) {
    const picks = options.map((o, i) => h("label", { class: "option" },
      h("input", { type: "checkbox", value: o.label, id: `q${item.id}-${i}` }), ` ${o.label}`,
      o.description ? h("small", { text: ` — ${o.description}` }) : null));
    box.append(...picks, h("button", {
      type: "button", class: "btn primary", text: t("send_answer"),
      onclick: () => send(picks.map((p) => p.querySelector("input")).filter((c) => c.checked).map((c) => c.value).join(", ")),
    }));
  } else if (options.length) {
    for (const o of options) {
      box.append(h("button", { type: "button", class: "btn option", title: o.description || null, onclick: () => send(o.label), text: o.label }));
    }
  } else {
    const id = `answer-${item.id}`;
    const field = h("textarea", { id, rows: 2 });
    box.append(h("label", { for: id, text: t("answer_label") }), field,
      h("button", { type: "button", class: "btn primary", text: t("send_answer"), onclick: () => field.value.trim() && send(field.value.trim()) }));
  }
  return box;
}

function toolNode(item) {
  return h("article", { class: "msg tool", dataset: { item: item.id } });
}

function updateTool(el, item) {
  const wasOpen = el.querySelector("details.tool-details")?.open ?? false;
  const summary = h("summary", {},
    h("span", { class: "tool-name", text: item.name }),
    h("span", { class: `badge status-${item.status}${item.isError ? " is-error" : ""}`, text: statusText(item) }),
    item.decision ? h("span", { class: "badge", text: t(item.decision === "approve" ? "approved" : "denied") }) : null);
  const output = item.output ?? "";
  const details = h("details", { class: "tool-details", open: wasOpen },
    summary,
    h("div", { class: "tool-body" },
      h("h4", { text: t("arguments") }),
      h("pre", { class: "args", tabindex: 0, text: pretty(item.args) }),
      item.status === "done" ? h("h4", { text: t("result") }) : null,
      item.status === "done" ? h("pre", { class: `output${item.isError ? " is-error" : ""}`, tabindex: 0, text: output }) : null));
  const parts = [details];
  if (item.status === "approval") parts.push(approvalBox(item));
  if (item.status === "question") parts.push(questionBox(item));
  el.replaceChildren(...parts);
}

function noticeNode(item) {
  let text = "";
  const d = item.data || {};
  // Live and stored notices both carry token counts (entry counts only come live).
  if (item.notice === "compacted") text = t("compacted", { before: d.tokens_before ?? "?", after: d.tokens_after ?? "?" });
  else if (item.notice === "handoff") text = t("handoff", { from: d.from, to: d.to });
  else if (item.notice === "error") text = d.type === "RunCancelled" ? t("cancelled") : t("error", { message: d.message || d.type });
  const summary = item.notice === "compacted" && d.summary
    ? h("details", { class: "notice-summary" }, h("summary", { text: t("compaction_summary") }), h("p", { text: d.summary }))
    : null;
  return h("div", { class: `notice ${item.level}${item.notice ? ` notice-${item.notice}` : ""}`, role: item.level === "error" ? "alert" : "status", dataset: { item: item.id } }, text, summary);
}

function nodeFor(item) {
  if (item.kind === "user") return userNode(item);
  if (item.kind === "assistant") return assistantNode(item);
  if (item.kind === "tool") return toolNode(item);
  return noticeNode(item);
}

function refresh(el, item) {
  if (item.kind === "assistant") updateAssistant(el, item);
  else if (item.kind === "tool") updateTool(el, item);
  else if (item.kind === "user") {
    const fresh = userNode(item);
    el.replaceWith(fresh);
    nodes.set(item.id, fresh);
  }
}

function nearBottom() {
  return messages.scrollHeight - messages.scrollTop - messages.clientHeight < 80;
}

let stick = true;
messages.addEventListener("scroll", () => { stick = nearBottom(); });

function scrollDown() {
  if (stick) requestAnimationFrame(() => { messages.scrollTop = messages.scrollHeight; });
}

function renderTodos() {
  const todos = chat.todos || [];
  show(todosEl, todos.length > 0);
  clear(todosEl);
  if (!todos.length) return;
  todosEl.append(h("h3", { text: t("todos") }), h("ul", {}, todos.map((todo) =>
    h("li", { class: `todo ${todo.status}` },
      h("span", { class: "mark", "aria-hidden": "true", text: todo.status === "completed" ? "☑" : todo.status === "in_progress" ? "◐" : "☐" }),
      ` ${todo.status === "in_progress" && todo.active_form ? todo.active_form : todo.content}`))));
}

function renderRun() {
  show(stopBtn, chat.running);
  sendBtn.textContent = chat.running ? t("steer") : t("send");
  input.placeholder = chat.running ? t("steer_placeholder") : t("message_placeholder");
}

chat.on(({ kind, item }) => {
  if (kind === "reset") {
    nodes.clear();
    messages.replaceChildren(empty);
    show(empty, true);
    renderTodos();
    renderRun();
    return;
  }
  if (kind === "run") { renderRun(); return; }
  if (kind === "todos") { renderTodos(); return; }
  if (kind === "add") {
    show(empty, false);
    const el = nodeFor(item);
    nodes.set(item.id, el);
    messages.append(el);
    refresh(el, item);
  } else if (kind === "update") {
    const el = nodes.get(item.id);
    if (el) refresh(el, item);
  } else if (kind === "remove") {
    nodes.get(item.id)?.remove();
    nodes.delete(item.id);
  }
  scrollDown();
});

onLangChange(() => {
  for (const item of chat.items) {
    const el = nodes.get(item.id);
    if (!el) continue;
    if (item.kind === "notice") { const fresh = noticeNode(item); el.replaceWith(fresh); nodes.set(item.id, fresh); continue; }
    if (item.kind === "tool") updateTool(el, item);
    if (item.kind === "user") { const fresh = userNode(item); el.replaceWith(fresh); nodes.set(item.id, fresh); continue; }
    el.querySelector(".who") && (el.querySelector(".who").textContent = t("assistant"));
    el.querySelector(".reasoning summary") && (el.querySelector(".reasoning summary").textContent = t("reasoning"));
  }
  renderRun();
  renderTodos();
});

// ---- the stream ----

let generation = 0; // bumps when the page switches chat: older loops stop
let current = null; // {abort, intended}

function setStatus(key) { statusEl.textContent = key ? t(key) : ""; }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function remember(sessionId, runId, text) {
  try { sessionStorage.setItem(`lovia:input:${sessionId}`, JSON.stringify({ runId, text })); } catch { /* private mode */ }
}

function recalled(sessionId) {
  try { return JSON.parse(sessionStorage.getItem(`lovia:input:${sessionId}`) || "null"); } catch { return null; }
}

/** Follow a stream until its `done`, re-attaching after a drop with the last event id. */
async function follow(first, { message = null } = {}) {
  const mine = ++generation;
  let request = first;
  let backoff = 250;
  for (;;) {
    const abort = new AbortController();
    current = { abort, intended: false };
    let done = null;
    try {
      const response = await request(abort.signal);
      setStatus(null);
      backoff = 250;
      await readStream(response, ({ event, id, data }) => {
        if (mine !== generation) return;
        const fresh = event === "session" && data.session_id !== chat.sessionId;
        chat.apply(event, data, id === null ? null : Number(id));
        if (event === "session") {
          if (message !== null) { remember(data.session_id, data.run_id, message); message = null; }
          hooks.onSession(data, fresh);
        }
        if (event === "done") done = data;
      }, abort.signal);
    } catch (err) {
      if (mine !== generation || current.intended) return;
      if (err instanceof ApiError) {
        if (err.status === 404 || err.status === 409 || err.status === 422 || err.status === 429) {
          chat.add({ kind: "notice", level: "error", notice: "error", data: { message: err.message } });
          chat.setRunning(false);
          hooks.onRunEnd();
          return;
        }
      }
      setStatus("offline");
    }
    if (mine !== generation || current.intended) return;
    if (done) {
      hooks.onRunEnd();
      if (!done.next_run_id) return;
      const sessionId = chat.sessionId;
      request = (signal) => fetch(`/api/chat/stream?session_id=${encodeURIComponent(sessionId)}`, { signal });
      continue;
    }
    // The stream ended without `done`: a drop or a server restart. Resume after the last id.
    if (!chat.sessionId || !chat.runId) return;
    setStatus("reconnecting");
    await sleep(backoff);
    backoff = Math.min(backoff * 2, 5000);
    if (mine !== generation) return;
    const q = new URLSearchParams({ session_id: chat.sessionId, run_id: chat.runId, last_event_id: String(chat.lastSeq) });
    request = (signal) => fetch(`/api/chat/stream?${q}`, { signal });
  }
}

/** Stop following the current stream (switching chat); the run goes on on the server. */
export function detach() {
  generation += 1;
  if (current) { current.intended = true; current.abort.abort(); }
}

/** For tests and the network panel: cut the stream as a network drop would. */
export function dropStream() {
  if (current) current.abort.abort();
}

export async function send(text) {
  const message = text.trim();
  if (!message) return;
  if (chat.running && chat.sessionId) {
    const item = chat.add({ kind: "user", text: message, queued: true });
    try {
      const { id } = await post("/api/chat/inject", { session_id: chat.sessionId, message });
      item.token = id;
    } catch (err) {
      chat.remove(item);
      chat.add({ kind: "notice", level: "error", notice: "error", data: { message: err.message } });
    }
    return;
  }
  chat.add({ kind: "user", text: message });
  chat.setRunning(true);
  performance.mark("lovia:send");
  const first = chat.on(({ kind, item }) => {
    if (kind === "update" && item.kind === "assistant" && item.text) { performance.mark("lovia:first-token"); first(); }
  });
  const body = { message };
  if (chat.sessionId) body.session_id = chat.sessionId;
  follow((signal) => fetch("/api/chat/stream", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal,
  }), { message });
}

export async function stop() {
  if (!chat.running || !chat.sessionId) return;
  try {
    await api("POST", `/api/chat/cancel?session_id=${encodeURIComponent(chat.sessionId)}`);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
  }
}

/** Open a chat: its stored transcript, then (if a run is live or interrupted) the run
 * replayed from its first event and followed live, a pending approval included. */
export async function open(sessionId) {
  detach();
  chat.reset(sessionId);
  if (!sessionId) return null;
  const detail = await get(`/api/sessions/${encodeURIComponent(sessionId)}`);
  if (chat.sessionId !== sessionId) return detail;
  chat.loadEntries(detail.entries);
  // The stored record keeps every entry; only the newest compaction notice is kept beside it,
  // so it is shown after the history: what the model sees from here on is compacted.
  if (detail.compaction) chat.add({ kind: "notice", level: "info", notice: "compacted", data: detail.compaction, history: true });
  await renderHistory();
  if (detail.live || detail.active_run_id) {
    const pending = recalled(sessionId);
    if (pending && pending.runId === detail.active_run_id) chat.add({ kind: "user", text: pending.text });
    chat.setRunning(true);
    follow((signal) => fetch(`/api/chat/stream?session_id=${encodeURIComponent(sessionId)}`, { signal }));
  }
  return detail;
}

async function renderHistory() {
  const items = chat.items.filter((i) => i.kind === "assistant" && i.text);
  if (!items.length) return;
  const html = await render(items.map((i) => i.text));
  items.forEach((item, n) => {
    const el = nodes.get(item.id);
    if (!el) return;
    const body = el.querySelector(".md");
    setSafeHtml(body, html[n]);
    decorate(body);
    el.md.rendered = item.text;
  });
}

// ---- the composer ----

function grow() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = input.value;
  if (!text.trim()) return;
  input.value = "";
  grow();
  send(text);
});

input.addEventListener("input", grow);
input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});

stopBtn.addEventListener("click", () => stop());

renderRun();
