/* groundwatch dashboard: reads the JSON API beside it (api/...), draws with uPlot, keeps its state in
   the address bar so a link shows the same view. The page's one entry point: each page is a module
   whose load function is registered here under its view name. */
import { loadAlerts } from "./alerts.js";
import { loadCompare, wireCompare } from "./compare.js";
import { loadConversation, loadConversations } from "./conversations.js";
import { loadDocuments } from "./documents.js";
import { renderFilters, wireFilters } from "./filters.js";
import { labelKeys, loadBucket, loadInteraction } from "./interaction.js";
import { loadOverview } from "./overview.js";
import { loadQuality, loadReview } from "./quality.js";
import { go, onOptions, registerView, route } from "./router.js";
import { upgradeSliceAddress } from "./slices.js";
import { state } from "./state.js";
import { loadTopics } from "./topics.js";

window.groundwatch = state; // read by the browser tests

registerView("overview", loadOverview);
registerView("bucket", loadBucket);
registerView("interaction", loadInteraction);
registerView("alerts", loadAlerts);
registerView("quality", loadQuality);
registerView("review", loadReview);
registerView("documents", loadDocuments);
registerView("topics", loadTopics);
registerView("conversations", loadConversations);
registerView("conversation", loadConversation);
registerView("compare", loadCompare);
onOptions(renderFilters);

for (const a of document.querySelectorAll("[data-view]")) {
  a.addEventListener("click", (e) => {
    e.preventDefault();
    go({ view: a.dataset.view });
  });
}
for (const id of ["interaction-back", "conversation-back"]) {
  document.getElementById(id).addEventListener("click", (e) => {
    e.preventDefault();
    history.back();
  });
}
document.addEventListener("keydown", labelKeys);
wireFilters();
wireCompare();

// a module runs once the document is parsed
upgradeSliceAddress();
route();
