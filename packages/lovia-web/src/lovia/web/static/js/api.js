// The server, as the page sees it: JSON calls, feature checks and the SSE chat stream.

const boot = JSON.parse(document.getElementById("boot").textContent);
const paths = new Set(boot.paths);

export const server = { title: boot.title, version: boot.version, info: null };

/** Whether the server has this API path (path parameters written `{}`). */
export function has(path) {
  return paths.has(path);
}

/** A feature is usable when its endpoint exists and /api/info does not switch it off. */
export function feature(name, path) {
  const flags = server.info && server.info.features;
  if (flags && name in flags && !flags[name]) return false;
  return path ? has(path) : Boolean(flags && flags[name]);
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.detail) || `HTTP ${status}`);
    this.status = status;
    this.hint = body && body.hint;
  }
}

export async function api(method, url, body) {
  const init = { method, headers: {} };
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) throw new ApiError(response.status, typeof data === "object" ? data : null);
  return data;
}

export const get = (url) => api("GET", url);
export const post = (url, body) => api("POST", url, body);

/**
 * Read an SSE response frame by frame. `onFrame({event, id, data})` gets each frame;
 * resolves when the stream ends (normally or not), rejects only on a network error
 * that is not our own abort.
 */
export async function readStream(response, onFrame, signal) {
  if (!response.ok) {
    let body = null;
    try { body = await response.json(); } catch { /* not JSON */ }
    throw new ApiError(response.status, body);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const frame = { event: "message", id: null, data: "" };
        const data = [];
        for (const line of block.split("\n")) {
          if (!line || line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? "" : line.slice(colon + 1);
          if (val.startsWith(" ")) val = val.slice(1);
          if (field === "event") frame.event = val;
          else if (field === "id") frame.id = val;
          else if (field === "data") data.push(val);
        }
        if (!data.length) continue;
        frame.data = JSON.parse(data.join("\n"));
        onFrame(frame);
      }
    }
  } catch (err) {
    if (signal && signal.aborted) return;
    throw err;
  }
}

// POST /api/render's limits (docs/ui.md): texts per call, characters per text and per call.
const RENDER_TEXTS = 200;
const RENDER_TEXT_CHARS = 400000;
const RENDER_CHARS = 1000000;

/** Markdown to sanitised HTML on the server, in as few calls as its limits allow. A text
 * longer than one call takes is rendered cut at that length. */
export async function render(texts) {
  const html = [];
  let batch = [];
  let chars = 0;
  const flush = async () => {
    if (!batch.length) return;
    const result = await post("/api/render", {
      texts: batch,
      workspace_images: has("/api/workspace/raw"),
    });
    html.push(...result.html);
    batch = [];
    chars = 0;
  };
  for (const full of texts) {
    const text = full.length > RENDER_TEXT_CHARS ? full.slice(0, RENDER_TEXT_CHARS) : full;
    if (batch.length === RENDER_TEXTS || chars + text.length > RENDER_CHARS) await flush();
    batch.push(text);
    chars += text.length;
  }
  await flush();
  return html;
}
