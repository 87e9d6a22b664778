// Building DOM from data. Text is always set as text; the only HTML the page assigns is the
// server's sanitised markdown (see setSafeHtml).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Assign HTML that came from POST /api/render (markdown-it + Pygments + nh3 on the server). */
export function setSafeHtml(el, sanitisedHtml) {
  el.innerHTML = sanitisedHtml;
  for (const a of el.querySelectorAll("a[href]")) {
    a.target = "_blank";
  }
}

export function clear(el) { el.replaceChildren(); }

export function show(el, visible) { el.hidden = !visible; }
