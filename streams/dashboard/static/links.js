/* Links between the dashboard's views. */
import { el } from "./dom.js";
import { go } from "./router.js";

/* A link to one conversation's view, from its first page of turns. */
export function conversationLink(app, model, id, text) {
  return el(
    "a",
    {
      href: "#",
      class: "conversation-link",
      onclick: (e) => {
        e.preventDefault();
        go({ view: "conversation", app_c: app, model_c: model, cid: id, turn: null });
      },
    },
    text || id,
  );
}
