/* Labels on the dashboard: the label kinds as schemas/label_kinds.py declares them (api/label-kinds,
   read once for each target), storing one label (POST api/labels), and one row of label buttons, which
   the interaction page and the conversation view both draw. */
import { el, status } from "./dom.js";
import { ApiError, api } from "./state.js";

const kindsByTarget = new Map();

/* The label kinds asked about on a target ("" the interaction, "conversation"), read once each. */
export function labelKinds(on = "") {
  if (!kindsByTarget.has(on)) {
    const read = api("label-kinds", on ? new URLSearchParams({ on }) : undefined).then((kinds) =>
      kinds.map((k) => ({
        kind: k.kind,
        title: k.question,
        yes: k.keys ? k.keys[0] : null, // a custom evaluator past the fourth has buttons only
        no: k.keys ? k.keys[1] : null,
        yesText: k.yes_text,
        noText: k.no_text,
      })),
    );
    read.catch(() => kindsByTarget.delete(on)); // read again next time
    kindsByTarget.set(on, read);
  }
  return kindsByTarget.get(on);
}

/* Store one label, asking once for the reviewer's name when none is known; true when it was saved. */
export async function sendLabel(id, kind, value, note = null) {
  let reviewer = localStorage.getItem("groundwatch_reviewer") || "";
  const send = () => api("labels", undefined, { interaction_id: id, kind, value, note, reviewer: reviewer || null });
  try {
    try {
      await send();
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 400 && !reviewer)) throw error;
      reviewer = (window.prompt("Your name, recorded with your labels:") || "").trim();
      if (!reviewer) return false;
      localStorage.setItem("groundwatch_reviewer", reviewer);
      await send();
    }
  } catch (error) {
    status(`label not saved: ${error.message}`, true);
    return false;
  }
  status(`labeled ${kind} = ${value}`);
  return true;
}

/* One kind's question, its yes and no buttons (with their keys when `keys`), and the labels given. */
export function labelRow(k, labels, onLabel, keys = false) {
  const mine = labels.filter((l) => l.kind === k.kind);
  const given = mine.length
    ? mine.map((l) => `${l.reviewer}: ${l.value ? k.yesText : k.noText}`).join(", ")
    : "not labeled";
  const button = (cls, value, key, text) =>
    el(
      "button",
      {
        type: "button",
        class: cls,
        "data-kind": k.kind,
        "data-value": String(value),
        onclick: () => onLabel(k.kind, value),
      },
      keys && key ? `${text} [${key}]` : text,
    );
  return el(
    "p",
    { class: "label-row" },
    el("span", { class: "label-title" }, `${k.title} `),
    button("label-yes", 1, k.yes, k.yesText),
    button("label-no", 0, k.no, k.noText),
    el("span", { class: "label-given" }, ` ${given}`),
  );
}
