// The agent's hot memory notes: read, edit, save, and tidy up (dream).

import { api, get, has, post } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

export async function load(root) {
  // The view is rebuilt on a language switch and on coming back to it: an edit not yet
  // saved (the editor differs from what it was loaded or saved with) is carried over
  // rather than replaced by the server's notes.
  const old = root.querySelector("#memory-editor");
  const draft = old && old.value !== old.dataset.saved ? old.value : null;
  const data = await get("/api/memory");
  const editor = h("textarea", { id: "memory-editor", class: "memory-editor" });
  editor.value = data.content ?? "";
  editor.dataset.saved = editor.value;
  if (draft !== null) editor.value = draft;
  const meter = h("p", { class: "hint memory-meter" });
  const measure = (notes) => { meter.textContent = t("memory_used", { used: notes.used ?? editor.value.length, budget: notes.budget ?? "?" }); };
  measure(data);
  const status = h("p", { class: "hint", role: "status" });
  const save = h("button", { type: "button", class: "btn primary", text: t("save"), onclick: async () => {
    try { const saved = await api("PUT", "/api/memory", { content: editor.value }); editor.value = saved.content ?? editor.value; editor.dataset.saved = editor.value; measure(saved); status.textContent = t("saved"); } catch (err) { status.textContent = err.message; }
  } });
  const dream = has("/api/memory/dream") ? h("button", { type: "button", class: "btn", text: t("dream"), onclick: async () => {
    try { await post("/api/memory/dream"); await load(root); } catch (err) { status.textContent = err.message; }
  } }) : null;
  root.replaceChildren(h("h2", { text: t("memory_title") }), meter,
    h("label", { for: "memory-editor", class: "visually-hidden", text: t("memory_title") }), editor,
    h("div", { class: "row" }, save, dream), status);
}
