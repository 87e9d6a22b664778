// Settings and the first-run setup page: the model endpoint, model, key; test, then save
// (/api/config). Keys are write-only: the server shows only whether one is set.

import { api, get, post, server } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

function field(id, label, attrs = {}) {
  const input = attrs.options
    ? h("select", { id, name: id }, attrs.options.map((o) => h("option", { value: o, text: o })))
    : h("input", { id, name: id, type: attrs.type || "text", placeholder: attrs.placeholder || null, autocomplete: "off" });
  return [h("label", { for: id, text: label }), input];
}

function profileBody(form) {
  const value = (id) => form.querySelector(`#${id}`).value.trim();
  const body = { model: value("cfg-model"), flavor: value("cfg-flavor") };
  if (value("cfg-name")) body.name = value("cfg-name");
  if (value("cfg-base-url")) body.base_url = value("cfg-base-url");
  if (value("cfg-key")) body.api_key = value("cfg-key");
  return body;
}

export async function load(root) {
  const config = await get("/api/config");
  const setup = server.info && server.info.configured === false;
  const models = config.models || [];
  const status = h("p", { class: "hint", role: "status", id: "cfg-status" });
  const form = h("form", { class: "form", id: "model-form" },
    ...field("cfg-name", t("name"), { placeholder: "my model" }),
    ...field("cfg-base-url", t("base_url"), { placeholder: "http(s)://host/v1" }),
    ...field("cfg-model", t("model"), { placeholder: "gpt-4o-mini" }),
    ...field("cfg-flavor", t("flavor"), { options: ["openai", "anthropic"] }),
    ...field("cfg-key", t("api_key"), { type: "password" }),
    h("div", { class: "row" },
      h("button", { type: "button", class: "btn", id: "cfg-test", text: t("test") }),
      h("button", { type: "submit", class: "btn primary", id: "cfg-save", text: t("save") })),
    status);
  form.querySelector("#cfg-test").addEventListener("click", async () => {
    status.textContent = t("testing");
    try {
      const result = await post("/api/config/test", profileBody(form));
      const ok = result.ok ?? result.reachable ?? true;
      status.textContent = ok ? t("test_ok") : t("test_failed", { message: result.message ?? result.detail ?? "" });
    } catch (err) {
      status.textContent = t("test_failed", { message: err.message });
    }
  });
  const saveBtn = form.querySelector("#cfg-save");
  let sending = false;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    // One POST at a time: a double click or a second Enter before the answer added the
    // same model twice. A flag as well as `disabled`: Enter in a field submits regardless.
    if (sending) return;
    const body = profileBody(form);
    if (!body.model) { form.querySelector("#cfg-model").focus(); return; }
    sending = true;
    saveBtn.disabled = true;
    try {
      await post("/api/config/models", body);
    } catch (err) {
      status.textContent = err.message;
      sending = false; // corrected, it may be sent again
      saveBtn.disabled = false;
      return;
    }
    // Still disabled after a save: the view is rebuilt (or left, in setup) with a new form.
    status.textContent = t("saved");
    try {
      if (setup) {
        server.info = await get("/api/info");
        document.dispatchEvent(new Event("lovia:configured"));
      } else {
        await load(root);
      }
    } catch (err) {
      status.textContent = err.message; // saved, but the page could not follow
    }
  });
  const list = models.length ? h("table", { class: "list" }, h("tbody", {}, models.map((m) => h("tr", {},
    h("td", { text: m.name ?? m.id }), h("td", {}, h("code", { text: m.model })), h("td", { text: m.base_url ?? "" }),
    h("td", { text: m.api_key && m.api_key.set ? t("key_set", { hint: m.api_key.hint ?? "" }) : "" }),
    h("td", {}, h("button", { type: "button", class: "btn small danger", text: t("delete"), "aria-label": `${t("delete")}: ${m.name ?? m.id}`, onclick: async () => {
      try { await api("DELETE", `/api/config/models/${encodeURIComponent(m.id)}`); } catch (err) { status.textContent = err.message; return; }
      await load(root);
    } })))))) : null;
  // replaceChildren would print a null as "null": only the parts this page has.
  root.replaceChildren(...[
    h("h2", { text: setup ? t("setup_title") : t("settings_title") }),
    setup ? h("p", { text: t("setup_description") }) : null,
    list ? h("h3", { text: t("models") }) : null, list,
    list ? h("h3", { text: t("add_model") }) : null, form,
  ].filter(Boolean));
  if (setup) form.querySelector("#cfg-base-url").focus();
}
