// The sessions sidebar: search, open, rename, pin, delete; titles refresh live.

import { api, get, has } from "./api.js";
import { h } from "./dom.js";
import { onLangChange, t } from "./i18n.js";

const list = document.getElementById("session-list");
const search = document.getElementById("session-search");
let sessions = [];
let activeId = null;
let handlers = { open: () => {}, deleted: () => {}, refreshed: () => {} };
let loadToken = 0;

export function setHandlers(next) { handlers = { ...handlers, ...next }; }

// Titles of chats the sidebar does not list (task sessions): learnt when one is opened or
// listed in its chat's Tasks, so the header and the "task of" link still name them.
const otherTitles = new Map();

/** Note the title of a chat the sidebar may not list. */
export function remember(id, title) { if (id && typeof title === "string") otherTitles.set(id, title); }

export function titleOf(id) {
  const found = sessions.find((s) => s.id === id);
  return found ? found.title : otherTitles.get(id) ?? "";
}

export function setActive(id) {
  activeId = id;
  for (const li of list.children) li.classList.toggle("active", li.dataset.id === id);
  for (const b of list.querySelectorAll(".open")) {
    if (b.closest("li").dataset.id === id) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
}

export async function refresh() {
  const token = ++loadToken;
  const q = search.value.trim();
  // tasks=false: the server leaves task sessions out before cutting the page, so a chat
  // with many tasks cannot push the user's own chats off it (see draw()).
  const url = `/api/sessions?limit=200&tasks=false${q ? `&q=${encodeURIComponent(q)}` : ""}`;
  const data = await get(url);
  if (token !== loadToken) return;
  sessions = data.sessions;
  draw();
  handlers.refreshed();
}

function row(s) {
  const li = h("li", { class: `session${s.id === activeId ? " active" : ""}${s.pinned ? " pinned" : ""}`, dataset: { id: s.id } });
  const openBtn = h("button", {
    type: "button", class: "open", title: s.title, "aria-current": s.id === activeId ? "page" : null,
    onclick: () => handlers.open(s.id),
  }, s.pinned ? h("span", { class: "pin-mark", "aria-hidden": "true", text: "📌 " }) : null,
  h("span", { class: "title", text: s.title || t("untitled") }),
  s.live ? h("span", { class: "badge live", text: t("live") }) : null);
  const renameBtn = h("button", { type: "button", class: "btn small", text: t("rename"), "aria-label": `${t("rename")}: ${s.title}`, onclick: () => startRename(li, s) });
  const pinBtn = h("button", {
    type: "button", class: "btn small", text: s.pinned ? t("unpin") : t("pin"), "aria-pressed": String(s.pinned),
    "aria-label": `${s.pinned ? t("unpin") : t("pin")}: ${s.title}`,
    onclick: async () => { await api("PATCH", `/api/sessions/${s.id}`, { pinned: !s.pinned }); await refresh(); },
  });
  const delBtn = h("button", { type: "button", class: "btn small danger", text: t("delete"), "aria-label": `${t("delete")}: ${s.title}` });
  delBtn.addEventListener("click", async () => {
    if (delBtn.dataset.armed !== "1") {
      delBtn.dataset.armed = "1";
      delBtn.textContent = t("confirm_delete");
      return;
    }
    await api("DELETE", `/api/sessions/${s.id}`);
    handlers.deleted(s.id);
    await refresh();
  });
  delBtn.addEventListener("blur", () => { delBtn.dataset.armed = ""; delBtn.textContent = t("delete"); });
  li.append(openBtn, h("span", { class: "row-actions" }, renameBtn, pinBtn, delBtn));
  return li;
}

function startRename(li, s) {
  const id = `rename-${s.id}`;
  const field = h("input", { id, type: "text", value: s.title, maxlength: 200, "aria-label": t("rename") });
  const form = h("form", { class: "rename" }, field,
    h("button", { type: "submit", class: "btn small primary", text: t("save") }),
    h("button", { type: "button", class: "btn small", text: t("cancel"), onclick: () => draw() }));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const title = field.value.trim();
    if (title && title !== s.title) await api("PATCH", `/api/sessions/${s.id}`, { title });
    await refresh();
  });
  field.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.stopPropagation(); draw(); } });
  li.replaceChildren(form);
  field.focus();
  field.select();
}

// Task sessions (a subagent's run, parent_id set) are reached from their chat's Tasks list,
// not listed here: one chat can spawn many, and they would bury the user's own chats. The
// request asks for none; the filter stays for a server that predates ?tasks=false.
function draw() {
  list.replaceChildren(...sessions.filter((s) => !s.parent_id).map(row));
}

let searchTimer = null;
search.addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => refresh(), 150);
});

onLangChange(draw);

const lifecycleListeners = new Set();

/** `listener(name, data)` for each lifecycle event the page receives (one EventSource for
 * the whole page: the Tasks list follows the same bus as the sidebar). */
export function onLifecycle(listener) { lifecycleListeners.add(listener); }

/** Titles and live badges follow the server's lifecycle bus when it has one. */
export function listen() {
  if (!has("/api/events")) return;
  const source = new EventSource("/api/events");
  for (const name of ["session_created", "session_retitled", "run_started", "run_finished"]) {
    source.addEventListener(name, (e) => {
      refresh();
      let data = null;
      try { data = JSON.parse(e.data); } catch { /* a frame without JSON data */ }
      for (const l of lifecycleListeners) l(name, data);
    });
  }
}
