// Export the open chat (Markdown, JSON or text) as a download.

import { h } from "./dom.js";
import { chat } from "./state.js";

const menu = document.getElementById("export-menu");

export function init({ onChat }) {
  onChat((id) => { menu.hidden = !id; });
  document.getElementById("export-btn").addEventListener("click", () => {
    if (!chat.sessionId) return;
    const format = document.getElementById("export-format").value;
    const link = h("a", { href: `/api/sessions/${encodeURIComponent(chat.sessionId)}/export?format=${format}`, download: `chat.${format}` });
    document.body.append(link);
    link.click();
    link.remove();
  });
}
