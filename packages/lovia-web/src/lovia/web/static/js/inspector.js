// The context inspector: for a turn, the view the model was sent (as the server recorded
// it), its tokens by part against the window, the provider's reported usage, cleared
// results with their recall handles, permission decisions with their rules, approvals.
// A run recorded before the recorder existed shows the record's estimate instead.

import { get } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";
import { chat } from "./state.js";

const dialog = document.getElementById("inspector");
const button = document.getElementById("inspect-btn");
const PREVIEW = 160;

function close() {
  dialog.hidden = true;
  button.focus();
}

/** The text an entry carries, for its preview (tool calls show name and arguments). */
function entryText(entry) {
  if (!entry) return t("not_in_record");
  if (entry.type === "tool_call") return `${entry.name}(${entry.arguments})`;
  const body = entry.type === "tool_result" ? entry.output : entry.content ?? entry.text ?? entry.summary;
  if (typeof body === "string") return body;
  if (Array.isArray(body)) return body.map((p) => (p.type === "text" ? p.text : `[${p.type}]`)).join("\n");
  return JSON.stringify(entry);
}

function entryLabel(entry) {
  if (!entry) return "?";
  if (entry.type === "input") return entry.role;
  if (entry.type === "tool_result") return `result ${entry.call_id}`;
  if (entry.type === "tool_call") return `call ${entry.call_id}`;
  return entry.type;
}

function viewRow(item, position) {
  const text = entryText(item.entry);
  const summary = h("summary", {},
    h("span", { class: `badge src src-${item.source}`, text: t(`src_${item.source}`) }),
    h("span", { class: "view-label", text: ` ${position + 1}. ${entryLabel(item.entry)}` }),
    h("span", { class: "hint", text: ` · ${item.tokens ?? "?"} tok` }),
    item.recall ? h("code", { class: "recall", text: ` recall_tool_result("${item.recall}")` }) : null,
    h("span", { class: "view-preview", text: ` ${text.slice(0, PREVIEW).replace(/\s+/g, " ")}` }));
  return h("li", { class: `view-item src-${item.source}` },
    h("details", {}, summary, h("pre", { class: "view-text", text })));
}

function list(items, render) {
  return items.length ? h("ul", {}, items.map(render)) : h("p", { class: "hint", text: t("nothing") });
}

/** The panel with what the server answered instead of a turn (its detail and hint, as
 * text): a click that failed must say so, not leave the button looking dead. */
function showError(err) {
  const closer = h("button", { type: "button", class: "btn", text: t("close"), onclick: close });
  dialog.replaceChildren(
    h("div", { class: "row" }, h("h2", { id: "inspector-title", text: t("inspector_title") }), closer),
    h("p", { class: "inspector-error", role: "alert", text: err.message }),
    err.hint ? h("p", { class: "hint", text: err.hint }) : null);
  dialog.hidden = false;
  closer.focus(); // in the panel, so Escape closes it as it does a turn's
}

let asked = 0; // the latest show() call: an earlier one answered late is dropped

async function show(turn) {
  const mine = ++asked;
  const base = `/api/sessions/${encodeURIComponent(chat.sessionId)}`;
  const q = chat.runId ? `?run_id=${chat.runId}` : "";
  let data;
  try {
    data = await get(`${base}/turns/${turn}/context${q}`);
  } catch (err) {
    if (mine === asked) showError(err);
    return;
  }
  if (mine !== asked) return; // the user chose another turn meanwhile: that one is shown
  const recorded = data.source === "recorded";
  const size = recorded ? data.seen_tokens : data.record_tokens;
  const total = data.window || Math.max(size || 0, 1);
  const meter = h("div", { class: "meter", role: "img", "aria-label": `${size} / ${data.window ?? "?"} ${t("window")}` },
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
  const u = data.call_usage;
  const usage = u
    ? h("p", { class: "usage" },
      `${t("provider_usage")}: ${t("input_tokens")} ${u.input_tokens} · ${t("cached_tokens")} ${u.cache_read_tokens}`
      + ` · ${t("output_tokens")} ${u.output_tokens}`)
    : data.usage
      ? h("p", { class: "usage" }, `${t("run_usage")}: ${t("input_tokens")} ${data.usage.input_tokens} · ${t("output_tokens")} ${data.usage.output_tokens}`)
      : null;
  const cleared = list(data.cleared, (c) => h("li", {},
    h("span", { class: `badge src src-${c.kind}`, text: t(`src_${c.kind}`) }), " ",
    h("code", { text: c.call_id }),
    ` ${c.original_tokens ?? "?"} → ${c.tokens ?? "?"} tok`,
    c.recall ? h("code", { class: "recall", text: ` recall_tool_result("${c.recall}")` }) : null));
  const permissions = list(data.permissions, (p) => h("li", {},
    h("span", { class: `badge decision-${p.decision}`, text: t(`decision_${p.decision}`) }), " ",
    h("code", { text: p.subject }), ` ${p.op} · ${t("rule")}: `,
    h("code", { text: p.pattern ? `${p.rule} ${p.pattern}` : p.rule }),
    p.enforced ? "" : ` (${t("checked")})`));
  const shown = [
    h("div", { class: "row" },
      h("h2", { id: "inspector-title", text: t("inspector_title") }), select,
      h("button", { type: "button", class: "btn", text: t("close"), onclick: close })),
    h("p", { class: "inspector-source hint", text: recorded ? t("source_recorded", { model: data.model ?? "?" }) : t("source_estimated") }),
    h("p", { class: "inspector-size", text: `${size ?? "?"} / ${data.window ?? "?"} ${t("window")}` }),
    meter,
    usage,
    data.attempts > 1 ? h("p", { class: "hint", text: t("attempts", { n: data.attempts }) }) : null,
    data.side_calls ? h("p", { class: "hint", text: t("side_calls", { n: data.side_calls }) }) : null,
    h("h3", { text: t("by_part") }),
    h("table", { class: "list inspector-parts" }, h("tbody", {}, rows)),
    data.response_format
      ? h("details", { class: "response-format" },
        h("summary", { text: t("response_format") }),
        h("pre", { class: "view-text", text: JSON.stringify(data.response_format, null, 2) }))
      : null,
    recorded ? h("h3", { text: t("view_sent", { n: data.view.length }) }) : null,
    recorded ? h("ol", { class: "view-list" }, data.view.map(viewRow)) : null,
    h("h3", { text: t("cleared") }),
    cleared,
    h("h3", { text: t("permissions") }),
    permissions,
    h("h3", { text: t("approvals") }),
    list(data.approvals, (a) => h("li", {}, h("code", { text: `${a.name}(${a.arguments})` }), ` ${t(a.decision)}`)),
    h("h3", { text: t("compactions") }),
    list(data.compactions, (c) => h("li", { text: `${c.reason}: ${c.tokens_before} → ${c.tokens_after}; ${c.detail.join("; ")}` })),
    data.missing.length ? h("h3", { text: t("not_known") }) : null,
    data.missing.length ? h("ul", {}, data.missing.map((m) => h("li", { class: "hint", text: m }))) : null,
  ];
  dialog.replaceChildren(...shown.filter((node) => node !== null));
  dialog.hidden = false;
  select.focus();
}

export function init({ onChat }) {
  onChat((id) => { button.hidden = !id; });
  button.addEventListener("click", () => show(Math.max(chat.turn, 1)));
  dialog.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.stopPropagation(); close(); } });
}
