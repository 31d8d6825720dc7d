// Pages the server renders with JSON in <pre data-json-tree> (the compare pages, the fork form):
// each becomes a tree (static/js/json_tree.js); without JavaScript it stays readable text.
import { upgradeAll } from "./json_tree.js";

upgradeAll(document);
