// The client state of the open chat, and the one place server events are applied to it.
// Views subscribe with `chat.on(listener)`; each change names what changed: {kind, item}.
// kinds: "reset", "add", "update", "remove", "run", "todos".

function parseArgs(text) {
  if (typeof text !== "string") return text || {};
  try { return JSON.parse(text); } catch { return {}; }
}

function inputText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p.type === "text" ? p.text : `[${p.type}]`)).join("\n");
  }
  return "";
}

export class ChatState {
  constructor() {
    this.listeners = new Set();
    this.reset(null);
  }

  on(listener) { this.listeners.add(listener); return () => this.listeners.delete(listener); }

  emit(kind, item = null) { for (const l of this.listeners) l({ kind, item }); }

  reset(sessionId) {
    this.sessionId = sessionId;
    this.runId = null;
    this.lastSeq = 0;
    this.running = false;
    this.items = [];
    this.byCall = new Map();
    this.current = null; // the assistant item of the turn being streamed
    this.turn = 0;
    this.todos = null;
    this.nextId = 1;
    this.emit("reset");
  }

  add(item) {
    item.id = this.nextId++;
    this.items.push(item);
    this.emit("add", item);
    return item;
  }

  update(item) { this.emit("update", item); }

  remove(item) {
    const at = this.items.indexOf(item);
    if (at >= 0) this.items.splice(at, 1);
    this.emit("remove", item);
  }

  setRunning(running) {
    if (this.running === running) return;
    this.running = running;
    this.emit("run");
  }

  /** The stored transcript of completed runs. */
  loadEntries(entries) {
    let reasoning = "";
    for (const entry of entries) {
      if (entry.type === "input" && entry.role === "user") {
        this.add({ kind: "user", text: inputText(entry.content) });
      } else if (entry.type === "reasoning") {
        reasoning += entry.content;
      } else if (entry.type === "assistant_text") {
        this.add({ kind: "assistant", text: entry.content, reasoning, streaming: false, history: true });
        reasoning = "";
      } else if (entry.type === "tool_call") {
        this.toolItem(entry.call_id, entry.name, entry.arguments, "done");
      } else if (entry.type === "tool_result") {
        const item = this.byCall.get(entry.call_id);
        if (item) {
          item.output = entry.output;
          item.isError = Boolean(entry.is_error);
          item.status = "done";
          this.noteTodos(item);
          this.update(item);
        }
      }
    }
    if (reasoning) this.add({ kind: "assistant", text: "", reasoning, streaming: false });
  }

  toolItem(callId, name, args, status) {
    let item = this.byCall.get(callId);
    if (!item) {
      item = this.add({
        kind: "tool", callId, name, args: typeof args === "string" ? args : JSON.stringify(args || {}),
        status, output: null, isError: false, result: undefined, turn: this.turn,
      });
      this.byCall.set(callId, item);
    }
    return item;
  }

  noteTodos(item) {
    if (item.name !== "todo_write" || item.isError) return;
    const todos = parseArgs(item.args).todos;
    if (Array.isArray(todos)) { this.todos = todos; this.emit("todos"); }
  }

  assistant() {
    if (!this.current) {
      this.current = this.add({ kind: "assistant", text: "", reasoning: "", streaming: true, turn: this.turn });
    }
    return this.current;
  }

  /** Apply one frame of the chat stream. Returns false for a frame already applied. */
  apply(event, data, seq) {
    if (event === "session") {
      if (this.runId !== data.run_id) this.lastSeq = seq || 0;
      this.sessionId = data.session_id;
      this.runId = data.run_id;
      this.setRunning(true);
      return true;
    }
    if (seq !== null && seq <= this.lastSeq) return false; // a duplicate after a resume
    if (seq !== null) this.lastSeq = seq;
    switch (event) {
      case "turn_started":
        this.turn = data.turn;
        this.current = null;
        break;
      case "text_delta": {
        const item = this.assistant();
        item.text += data.delta;
        this.update(item);
        break;
      }
      case "reasoning_delta": {
        const item = this.assistant();
        item.reasoning += data.delta;
        this.update(item);
        break;
      }
      case "output_discarded":
        if (this.current) { this.remove(this.current); this.current = null; }
        break;
      case "message_completed": {
        let text = null;
        let reasoning = "";
        for (const entry of data.entries || []) {
          if (entry.type === "assistant_text") text = (text || "") + entry.content;
          else if (entry.type === "reasoning") reasoning += entry.content;
          else if (entry.type === "tool_call") this.toolItem(entry.call_id, entry.name, entry.arguments, "pending");
        }
        if (text !== null || reasoning) {
          const item = this.current || this.assistant();
          if (text !== null) item.text = text;
          if (reasoning) item.reasoning = reasoning;
          item.streaming = false;
          this.update(item);
        } else if (this.current) {
          this.current.streaming = false;
          if (!this.current.text && !this.current.reasoning) this.remove(this.current);
          else this.update(this.current);
        }
        this.current = null;
        break;
      }
      case "tool_call": {
        const item = this.toolItem(data.call_id, data.name, data.arguments, "running");
        if (item.status !== "done") item.status = "running";
        if (data.name === "ask_human" && item.status !== "done") item.status = "question";
        this.update(item);
        break;
      }
      case "approval_required": {
        const item = this.toolItem(data.call_id, data.name, data.arguments, "approval");
        if (item.status !== "done") item.status = "approval";
        this.update(item);
        break;
      }
      case "tool_result": {
        const item = this.toolItem(data.call_id, data.name, data.arguments, "done");
        Object.assign(item, { status: "done", output: data.output, isError: Boolean(data.is_error), result: data.result });
        this.noteTodos(item);
        this.update(item);
        break;
      }
      case "user_injected": {
        const text = inputText(data.content);
        const queued = this.items.find((i) => i.kind === "user" && i.queued && i.text === text);
        if (queued) { queued.queued = false; queued.injected = true; this.update(queued); }
        else this.add({ kind: "user", text, injected: true });
        break;
      }
      case "context_compacted":
        this.add({ kind: "notice", level: "info", notice: "compacted", data });
        break;
      case "handoff":
        this.add({ kind: "notice", level: "info", notice: "handoff", data });
        break;
      case "error":
        if (this.current) { this.current.streaming = false; this.update(this.current); this.current = null; }
        this.add({ kind: "notice", level: data.type === "RunCancelled" ? "info" : "error", notice: "error", data });
        break;
      case "done":
        if (this.current) { this.current.streaming = false; this.update(this.current); this.current = null; }
        for (const item of this.byCall.values()) {
          if (item.status === "approval" || item.status === "question") { item.status = "done"; this.update(item); }
        }
        for (const item of this.items) {
          if (item.kind === "user" && item.queued) { item.queued = false; item.chained = Boolean(data.next_run_id); item.dropped = !data.next_run_id; this.update(item); }
        }
        this.setRunning(false);
        break;
      default:
        break;
    }
    return true;
  }
}

export const chat = new ChatState();
