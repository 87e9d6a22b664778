// The context inspector: for a turn, the record's size by part against the window, what is
// known of the view the model saw, approvals, and what the server does not keep.

import { get } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";
import { chat } from "./state.js";

const dialog = document.getElementById("inspector");
const button = document.getElementById("inspect-btn");
const PARTS = ["system", "history", "tool_results", "reminders", "tool_schemas"];

function close() {
  dialog.hidden = true;
  button.focus();
}

async function show(turn) {
  const base = `/api/sessions/${encodeURIComponent(chat.sessionId)}`;
  const q = chat.runId ? `?run_id=${chat.runId}` : "";
  const data = await get(`${base}/turns/${turn}/context${q}`);
  const total = data.window || Math.max(data.record_tokens, 1);
  const meter = h("div", { class: "meter", role: "img", "aria-label": `${data.record_tokens} / ${data.window ?? "?"}` },
    data.parts.map((p, i) => {
      const bar = h("span", { class: `p${i}`, title: `${t(`part_${p.name}`)}: ${p.tokens ?? "?"}` });
      bar.style.width = `${Math.min(100, ((p.tokens || 0) / total) * 100)}%`;
      return bar;
    }));
  const select = h("select", { id: "inspector-turn", "aria-label": t("turn") },
    data.turns.map((n) => h("option", { value: n, text: `${t("turn")} ${n}`, selected: n === data.turn })));
  select.addEventListener("change", () => show(Number(select.value)));
  const rows = data.parts.map((p, i) => h("tr", {},
    h("td", {}, h("span", { class: `swatch p${i}`, "aria-hidden": "true" }), t(`part_${p.name}`)),
    h("td", { text: p.tokens === null ? "—" : String(p.tokens) }),
    h("td", { text: p.entries ? String(p.entries) : "" })));
  const list = (items, render) => (items.length ? h("ul", {}, items.map(render)) : h("p", { class: "hint", text: t("nothing") }));
  dialog.replaceChildren(
    h("div", { class: "row" },
      h("h2", { id: "inspector-title", text: t("inspector_title") }), select,
      h("button", { type: "button", class: "btn", text: t("close"), onclick: close })),
    h("p", { text: `${data.record_tokens} / ${data.window ?? "?"} ${t("window")}${data.seen_tokens !== null ? ` · ${data.seen_tokens} after compaction` : ""}` }),
    meter,
    h("h3", { text: t("by_part") }),
    h("table", { class: "list" }, h("tbody", {}, rows)),
    data.usage ? h("p", { text: `${t("input_tokens")}: ${data.usage.input_tokens} · ${t("output_tokens")}: ${data.usage.output_tokens} (run)` }) : null,
    h("h3", { text: t("cleared") }),
    list(data.compactions, (c) => h("li", { text: `${c.reason}: ${c.tokens_before} → ${c.tokens_after} tokens; ${c.detail.join("; ")}` })),
    h("h3", { text: t("permissions") }),
    list(data.approvals, (a) => h("li", {}, h("code", { text: `${a.name}(${a.arguments})` }), ` ${t(a.decision === "approved" ? "approved" : a.decision === "denied" ? "denied" : "pending")}`)),
    h("h3", { text: t("tool") }),
    list(data.tool_calls, (c) => h("li", {}, h("code", { text: c.name }), ` ${c.output_tokens ?? "?"} tokens${c.is_error ? " (error)" : ""}`)),
    h("h3", { text: t("missing", { what: "" }) }),
    h("ul", {}, data.missing.map((m) => h("li", { class: "hint", text: m }))));
  dialog.hidden = false;
  select.focus();
}

export function init({ onChat }) {
  onChat((id) => { button.hidden = !id; });
  button.addEventListener("click", () => show(Math.max(chat.turn, 1)));
  dialog.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.stopPropagation(); close(); } });
}
