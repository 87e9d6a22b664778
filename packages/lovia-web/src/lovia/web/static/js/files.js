// The workspace panel beside the chat: browse (read-only), view a file or an image, upload,
// and the open chat's background processes. Shown only when the server has a workspace.

import { get, has, post } from "./api.js";
import { h, show } from "./dom.js";
import { onLangChange, t } from "./i18n.js";

const panel = document.getElementById("panel");
const toggle = document.getElementById("panel-toggle");
let dir = "";
let sessionId = null;

const listOf = (data) => (Array.isArray(data) ? data : data.entries || data.files || data.items || []);
const isDir = (e) => Boolean(e.is_dir ?? (e.type === "dir" || e.type === "directory" || e.kind === "dir"));
const pathOf = (e) => e.path ?? (dir ? `${dir}/${e.name}` : e.name);
const IMAGE = /\.(png|jpe?g|gif|webp|avif)$/i;

async function openFile(path) {
  const viewer = panel.querySelector(".file-viewer");
  viewer.replaceChildren(h("h4", { text: path }));
  if (IMAGE.test(path) && has("/api/workspace/raw")) {
    viewer.append(h("img", { src: `/api/workspace/raw?path=${encodeURIComponent(path)}`, alt: path, class: "preview" }));
    return;
  }
  const data = await get(`/api/workspace/file?path=${encodeURIComponent(path)}`);
  const body = data.binary ? "(binary)" : (data.content ?? data.text ?? "");
  viewer.append(h("pre", { class: "file-view", tabindex: 0, text: body }));
}

async function drawFiles() {
  const list = panel.querySelector(".file-list");
  const data = await get(`/api/workspace/files${dir ? `?path=${encodeURIComponent(dir)}` : ""}`);
  const entries = listOf(data);
  const rows = [];
  if (dir) {
    rows.push(h("li", {}, h("button", { type: "button", text: `↑ ${t("up")}`, onclick: () => { dir = dir.split("/").slice(0, -1).join("/"); drawFiles(); } })));
  }
  for (const e of entries) {
    const path = pathOf(e);
    rows.push(h("li", {}, h("button", {
      type: "button", dataset: { path }, text: `${isDir(e) ? "📁" : "📄"} ${e.name ?? path}`,
      onclick: () => (isDir(e) ? ((dir = path), drawFiles()) : openFile(path)),
    })));
  }
  if (!rows.length) rows.push(h("li", { class: "hint", text: t("no_files") }));
  list.replaceChildren(...rows);
}

async function drawProcesses() {
  const box = panel.querySelector(".processes");
  if (!sessionId || !has("/api/sessions/{}/processes")) { show(box, false); return; }
  const data = await get(`/api/sessions/${encodeURIComponent(sessionId)}/processes`);
  const procs = listOf(data.processes ? data.processes : data);
  show(box, procs.length > 0);
  box.replaceChildren(h("h3", { text: t("processes") }), h("ul", {}, procs.map((p) => {
    const id = p.process_id ?? p.id;
    const state = p.state ?? p.status ?? "running";
    return h("li", {},
      h("code", { text: p.description || p.command || id }), " ",
      h("span", { class: `badge proc-state ${state}`, text: `${t(`proc_${state}`)}${p.exit_code != null ? ` (${p.exit_code})` : ""}` }), " ",
      state === "running" ? h("button", {
        type: "button", class: "btn small danger", text: t("kill"), "aria-label": `${t("kill")}: ${p.command ?? id}`,
        onclick: async () => { await post(`/api/sessions/${encodeURIComponent(sessionId)}/processes/${encodeURIComponent(id)}/kill`); drawProcesses(); },
      }) : null);
  })));
}

function build() {
  const input = h("input", { type: "file", id: "upload-input", class: "visually-hidden" });
  const status = h("p", { class: "hint", role: "status" });
  input.addEventListener("change", async () => {
    if (!input.files.length) return;
    const form = new FormData();
    form.append("file", input.files[0]);
    try {
      const result = await post("/api/workspace/upload", form);
      status.textContent = t("uploaded", { name: result.path ?? result.name ?? input.files[0].name });
      await drawFiles();
    } catch (err) {
      status.textContent = err.message;
    }
    input.value = "";
  });
  const upload = has("/api/workspace/upload")
    ? h("div", { class: "row" }, input, h("label", { for: "upload-input", class: "btn", text: t("upload") }), status)
    : null;
  panel.replaceChildren(h("h2", { text: t("files") }), upload,
    h("ul", { class: "file-list", "aria-label": t("files") }), h("div", { class: "file-viewer" }),
    h("div", { class: "processes", hidden: true }));
}

export function init({ onChat }) {
  toggle.hidden = false;
  toggle.addEventListener("click", async () => {
    const open = panel.hidden;
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) { build(); await drawFiles(); await drawProcesses(); }
  });
  onChat((id) => { sessionId = id; if (!panel.hidden) { drawFiles(); drawProcesses(); } });
  // The panel's texts are built in the current language: rebuild it in the new one.
  onLangChange(() => { if (!panel.hidden) { build(); drawFiles(); drawProcesses(); } });
}

export async function load() {}
