// Scheduled runs: list, run now, pause or resume, delete.

import { api, get, post } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

export async function load(root) {
  const data = await get("/api/schedules");
  const items = Array.isArray(data) ? data : data.schedules || [];
  const act = (fn) => async () => { try { await fn(); } finally { await load(root); } };
  const rows = items.map((s) => {
    const active = s.active ?? !s.paused;
    return h("tr", {},
      h("td", { text: s.instruction ?? s.id }),
      h("td", {}, h("code", { text: `${s.trigger_kind ?? ""} ${s.trigger_expr ?? ""}` })),
      h("td", { text: s.next_fire_at ? new Date(s.next_fire_at * 1000).toLocaleString() : "" }),
      h("td", { class: "row" },
        h("button", { type: "button", class: "btn small", text: t("run_now"), onclick: act(() => post(`/api/schedules/${s.id}/run`)) }),
        h("button", { type: "button", class: "btn small", text: active ? t("pause") : t("resume"), onclick: act(() => api("PATCH", `/api/schedules/${s.id}`, { active: !active })) }),
        h("button", { type: "button", class: "btn small danger", text: t("delete"), onclick: act(() => api("DELETE", `/api/schedules/${s.id}`)) })));
  });
  root.replaceChildren(h("h2", { text: t("schedules_title") }),
    rows.length ? h("table", { class: "list" }, h("tbody", {}, rows)) : h("p", { class: "hint", text: t("no_schedules") }));
}
