// The page: boot, views, theme, language, keyboard shortcuts, the URL (#/c/<session id>).

import { feature, get, has, server } from "./api.js";
import * as chatView from "./chat.js";
import { show } from "./dom.js";
import { applyI18n, currentLang, onLangChange, setLang, t } from "./i18n.js";
import * as sessions from "./sessions.js";
import { chat } from "./state.js";

const $ = (id) => document.getElementById(id);
const views = ["chat", "schedules", "memory", "settings"];
const loaders = {};
let setupMode = false;

// ---- theme: the system's unless chosen ----

function applyTheme(choice) {
  if (choice === "light" || choice === "dark") document.documentElement.dataset.theme = choice;
  else delete document.documentElement.dataset.theme;
}

const themeSelect = $("theme-select");
themeSelect.value = localStorage.getItem("lovia:theme") || "system";
applyTheme(themeSelect.value);
themeSelect.addEventListener("change", () => {
  localStorage.setItem("lovia:theme", themeSelect.value);
  applyTheme(themeSelect.value);
});

const langSelect = $("lang-select");
langSelect.value = currentLang();
langSelect.addEventListener("change", () => setLang(langSelect.value));
applyI18n(document);

// ---- views ----

export async function showView(name) {
  for (const v of views) show($(`view-${v}`), v === name);
  for (const b of document.querySelectorAll("[data-view]")) {
    if (b.dataset.view === name) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
  closeMenu();
  if (loaders[name]) await loaders[name]();
}

// The optional views are built in the current language: the open one is rebuilt in the new.
onLangChange(() => {
  const open = views.find((v) => v !== "chat" && !$(`view-${v}`).hidden);
  if (open && loaders[open]) loaders[open]();
});

for (const b of document.querySelectorAll("[data-view]")) {
  b.addEventListener("click", () => {
    if (b.dataset.view === "chat") location.hash = chat.sessionId ? `#/c/${chat.sessionId}` : "#/";
    else location.hash = `#/${b.dataset.view}`;
  });
}

// ---- phone layout: the sidebar slides in ----

const menuToggle = $("menu-toggle");
function closeMenu() {
  document.body.classList.remove("menu-open");
  menuToggle.setAttribute("aria-expanded", "false");
}
menuToggle.addEventListener("click", () => {
  const open = !document.body.classList.contains("menu-open");
  document.body.classList.toggle("menu-open", open);
  menuToggle.setAttribute("aria-expanded", String(open));
  if (open) $("session-search").focus();
});

// ---- chats ----

function setTitle() {
  const title = chat.sessionId ? sessions.titleOf(chat.sessionId) : "";
  $("chat-title").textContent = title || t("untitled");
  document.title = title ? `${title} · ${server.title}` : server.title;
}

async function openChat(id) {
  await showView("chat");
  if (id === chat.sessionId && chat.items.length) return;
  sessions.setActive(id);
  let detail;
  try {
    detail = await chatView.open(id);
  } catch (err) {
    location.hash = "#/";
    return;
  }
  if (detail) sessions.remember(id, detail.title); // a task session is not in the sidebar
  setTitle();
  for (const hook of chatHooks) hook(id, detail);
}

const chatHooks = [];
/** Called with the session id whenever the open chat changes (panels refresh); when the
 * chat was just opened, also with its detail (GET /api/sessions/{id}). */
export function onChat(hook) { chatHooks.push(hook); }

chatView.setHooks({
  onSession: async (data, fresh) => {
    if (fresh || location.hash !== `#/c/${data.session_id}`) {
      history.replaceState(null, "", `#/c/${data.session_id}`);
    }
    sessions.setActive(data.session_id);
    await sessions.refresh();
    setTitle();
    if (fresh) for (const hook of chatHooks) hook(data.session_id);
  },
  onRunEnd: async () => {
    await sessions.refresh();
    setTitle();
    for (const hook of chatHooks) hook(chat.sessionId);
  },
});

sessions.setHandlers({
  open: (id) => { closeMenu(); location.hash = `#/c/${id}`; },
  deleted: (id) => { if (id === chat.sessionId) newChat(); },
  refreshed: () => setTitle(), // a title the model wrote, or a rename elsewhere
});

function newChat() {
  chatView.detach();
  chat.reset(null);
  sessions.setActive(null);
  if (location.hash !== "#/") history.pushState(null, "", "#/");
  showView("chat");
  setTitle();
  for (const hook of chatHooks) hook(null);
  $("composer-input").focus();
}

$("new-chat").addEventListener("click", newChat);

async function route() {
  const hash = location.hash || "#/";
  if (setupMode && hash !== "#/settings") { location.hash = "#/settings"; return; }
  const m = hash.match(/^#\/c\/([A-Za-z0-9_-]{1,64})$/);
  if (m) return openChat(m[1]);
  const view = hash.slice(2);
  if (views.includes(view) && view !== "chat" && !$(`view-${view}`).dataset.off) return showView(view);
  if (chat.sessionId) { chatView.detach(); chat.reset(null); sessions.setActive(null); setTitle(); }
  return showView("chat");
}

window.addEventListener("hashchange", route);

// ---- keyboard ----

document.addEventListener("keydown", (e) => {
  const mod = e.ctrlKey || e.metaKey;
  if (mod && e.shiftKey && (e.key === "O" || e.key === "o")) { e.preventDefault(); newChat(); return; }
  if (mod && (e.key === "k" || e.key === "K")) { e.preventDefault(); $("session-search").focus(); return; }
  if (e.key === "Escape" && chat.running && !$("view-chat").hidden) { e.preventDefault(); chatView.stop(); return; }
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName || "");
  if (e.key === "/" && !typing) { e.preventDefault(); $("composer-input").focus(); }
});

// ---- optional views: only where the server has the endpoints ----

async function optional(name, path, flag, load) {
  const button = document.querySelector(`[data-view="${name}"]`);
  if (!feature(flag, path)) { $(`view-${name}`).dataset.off = "1"; return; }
  button.hidden = false;
  const module = await load();
  loaders[name] = () => module.load($(`view-${name}`));
  if (module.init) module.init({ onChat });
}

async function boot() {
  try { server.info = await get("/api/info"); } catch { server.info = null; }
  await Promise.all([
    optional("schedules", "/api/schedules", "scheduling", () => import("./schedules.js")),
    optional("memory", "/api/memory", "memory", () => import("./memory.js")),
    optional("settings", "/api/config", "model_config", () => import("./settings.js")),
  ]);
  if (feature("workspace", "/api/workspace/files")) (await import("./files.js")).init({ onChat });
  if (has("/api/sessions/{}/export")) (await import("./export.js")).init({ onChat });
  if (has("/api/sessions/{}/turns/{}/context")) (await import("./inspector.js")).init({ onChat });
  if (has("/api/sessions/{}/todos")) (await import("./todos.js")).init({ onChat });
  if (has("/api/sessions/{}/tasks")) (await import("./tasks.js")).init({ onChat });
  setupMode = Boolean(server.info && server.info.configured === false && has("/api/config"));
  document.body.classList.toggle("setup", setupMode);
  await sessions.refresh();
  sessions.listen();
  await route();
  document.body.dataset.ready = "1";
  performance.mark("lovia:ready");
}

// Settings announces the first saved model: leave setup mode.
document.addEventListener("lovia:configured", () => {
  setupMode = false;
  document.body.classList.remove("setup");
  location.hash = "#/";
});

window.__lovia = { chat, dropStream: chatView.dropStream };

boot();
