/* DOM helpers: an element by id, and a small element builder. Text from the data becomes text nodes. */

export function $(id) {
  return document.getElementById(id);
}

/* el("tr", { class: "bad", "data-id": id, onclick }, child, "text", ...): attributes "class" and "data-*"
   as attributes, anything else as the node's property (onclick, colSpan, selected ...). */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return node;
}

export function status(text, error) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", !!error);
}
