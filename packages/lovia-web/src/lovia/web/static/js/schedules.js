// Scheduled runs: create, list, run now, pause or resume, delete.

import { api, get, post } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

const EXAMPLES = { every: "1h", cron: "0 9 * * 1-5", at: "2030-01-01T09:00:00Z" };

function createForm(root, status) {
  const instruction = h("input", { id: "sched-instruction", type: "text", required: true, maxlength: 4000, autocomplete: "off" });
  const kind = h("select", { id: "sched-kind" }, ["every", "cron", "at"].map((k) => h("option", { value: k, text: t(`trigger_${k}`) })));
  const expr = h("input", { id: "sched-expr", type: "text", required: true, maxlength: 200, placeholder: EXAMPLES.every, autocomplete: "off" });
  kind.addEventListener("change", () => { expr.placeholder = EXAMPLES[kind.value]; });
  const form = h("form", { class: "form schedule-form", id: "schedule-form" },
    h("label", { for: "sched-instruction", text: t("schedule_instruction") }), instruction,
    h("label", { for: "sched-kind", text: t("schedule_trigger") }), kind,
    h("label", { for: "sched-expr", text: t("schedule_when") }), expr,
    h("div", { class: "row" }, h("button", { type: "submit", class: "btn primary", text: t("schedule_create") })));
  const submit = form.querySelector("button[type=submit]");
  let sending = false;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    // One POST at a time: a double click or a second Enter before the answer would create
    // the same schedule twice. The flag, not only `disabled`, because Enter in a field
    // submits the form whatever state its button is in.
    if (sending) return;
    sending = true;
    submit.disabled = true;
    try {
      await post("/api/schedules", { instruction: instruction.value.trim(), trigger_kind: kind.value, trigger_expr: expr.value.trim() });
    } catch (err) {
      status.textContent = err.message; // the server's reason (a bad cron, a past time)
      sending = false; // corrected, it may be sent again
      submit.disabled = false;
      return;
    }
    // Still disabled while the list reloads: load() replaces the form with an empty one.
    await load(root, t("schedule_created"));
  });
  return form;
}

export async function load(root, message = "") {
  const data = await get("/api/schedules");
  const items = Array.isArray(data) ? data : data.schedules || [];
  const status = h("p", { class: "hint", role: "status", id: "sched-status", text: message });
  // A row's action: its button stays disabled until the view is rebuilt, so a double click
  // sends one request (a second "Run now" started another run, or met a 409).
  const act = (fn) => async (e) => {
    const button = e && e.currentTarget;
    if (button) { if (button.disabled) return; button.disabled = true; }
    try { await fn(); } catch (err) { await load(root, err.message); return; }
    await load(root);
  };
  const rows = items.map((s) => {
    const active = s.active ?? !s.paused;
    const name = s.instruction ?? s.id;
    const del = h("button", { type: "button", class: "btn small danger", text: t("delete"), "aria-label": `${t("delete")}: ${name}` });
    // Two steps, as in the sidebar: a schedule deleted by a stray click is gone for good.
    del.addEventListener("click", () => {
      if (del.dataset.armed !== "1") { del.dataset.armed = "1"; del.textContent = t("confirm_delete"); return; }
      act(() => api("DELETE", `/api/schedules/${encodeURIComponent(s.id)}`))({ currentTarget: del });
    });
    del.addEventListener("blur", () => { del.dataset.armed = ""; del.textContent = t("delete"); });
    return h("tr", { dataset: { id: s.id } },
      h("td", { text: name }),
      h("td", {}, h("code", { text: `${s.trigger_kind ?? ""} ${s.trigger_expr ?? ""}` })),
      h("td", { text: s.status ? t(`sched_${s.status}`) : "" }),
      h("td", { text: s.next_fire_at ? new Date(s.next_fire_at * 1000).toLocaleString() : "" }),
      h("td", { class: "row" },
        h("button", { type: "button", class: "btn small", text: t("run_now"), "aria-label": `${t("run_now")}: ${name}`, onclick: act(() => post(`/api/schedules/${encodeURIComponent(s.id)}/run`)) }),
        h("button", { type: "button", class: "btn small", text: active ? t("pause") : t("resume"), "aria-label": `${active ? t("pause") : t("resume")}: ${name}`, onclick: act(() => api("PATCH", `/api/schedules/${encodeURIComponent(s.id)}`, { active: !active })) }),
        del));
  });
  const head = h("thead", {}, h("tr", {}, ["schedule_instruction", "schedule_trigger", "schedule_status", "schedule_next"].map((k) => h("th", { scope: "col", text: t(k) })), h("th", { scope: "col", text: "" })));
  root.replaceChildren(h("h2", { text: t("schedules_title") }),
    rows.length ? h("table", { class: "list", "aria-label": t("schedules_title") }, head, h("tbody", {}, rows)) : h("p", { class: "hint", text: t("no_schedules") }),
    h("h3", { text: t("schedule_new") }), createForm(root, status), status);
}
