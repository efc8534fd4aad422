// Live: appends each new guard decision from /ui/live/feed, keeps the
// totals current, filters by kind, model and session, and sends
// "not a loop" reports. Items are rendered by the server; this module only
// inserts them, in batches at most every FLUSH_MS (a busy feed costs a few
// layouts a second, not one per event or per frame), and keeps MAX_ITEMS.
import { csrf } from "./console.js";

const MAX_ITEMS = 500;
const FLUSH_MS = 200;
// Models and sessions a filter offers at most (later ones are not added).
const MAX_OPTIONS = 100;
const timeline = document.getElementById("timeline");
const state = document.getElementById("feed-state");
const filters = document.querySelector("form.filters");
let pending = [];
let scheduled = false;

function current() {
  const f = new FormData(filters);
  return { kind: f.get("kind") || "", model: f.get("model") || "", session: f.get("session") || "" };
}

function admits(node, f) {
  return (!f.kind || node.dataset.kind === f.kind) &&
    (!f.model || node.dataset.model === f.model) &&
    (!f.session || node.dataset.session === f.session);
}

function ensureOption(name, value) {
  if (!value) return;
  const select = filters.querySelector(`select[name="${name}"]`);
  if (select.options.length > MAX_OPTIONS) return;
  if ([...select.options].some((o) => o.value === value)) return;
  const o = document.createElement("option");
  o.value = value;
  o.textContent = value;
  select.append(o);
}

function setTotals(totals) {
  for (const [k, v] of Object.entries(totals)) {
    const dd = document.querySelector(`[data-total="${k}"]`);
    if (dd) dd.textContent = String(v);
  }
}

function flush() {
  scheduled = false;
  const items = pending;
  pending = [];
  if (!items.length) return;
  const f = current();
  const frag = document.createDocumentFragment();
  const tpl = document.createElement("template");
  // Newest first: the last received goes on top.
  for (let i = items.length - 1; i >= 0 && i >= items.length - MAX_ITEMS; i--) {
    tpl.innerHTML = items[i].html;
    const node = tpl.content.firstElementChild;
    if (!node) continue;
    node.hidden = !admits(node, f);
    frag.append(node);
    ensureOption("model", items[i].model);
    ensureOption("session", items[i].session);
  }
  timeline.prepend(frag);
  while (timeline.childElementCount > MAX_ITEMS) timeline.lastElementChild.remove();
  setTotals(items[items.length - 1].totals);
  document.getElementById("empty")?.remove();
}

function connect() {
  const source = new EventSource("/ui/live/feed");
  source.addEventListener("open", () => { state.textContent = "live"; });
  source.addEventListener("error", () => { state.textContent = "reconnecting"; });
  source.addEventListener("guard", (e) => {
    pending.push(JSON.parse(e.data));
    if (pending.length > MAX_ITEMS) pending = pending.slice(-MAX_ITEMS);
    if (!scheduled) {
      scheduled = true;
      setTimeout(() => requestAnimationFrame(flush), FLUSH_MS);
    }
  });
  source.addEventListener("lagged", (e) => {
    const { missed } = JSON.parse(e.data);
    state.textContent = `live (skipped ${missed} events to keep up)`;
  });
}

filters.addEventListener("change", () => {
  const f = current();
  for (const node of timeline.children) node.hidden = !admits(node, f);
});
filters.addEventListener("submit", (e) => {
  e.preventDefault();
  const f = current();
  for (const node of timeline.children) node.hidden = !admits(node, f);
  history.replaceState(null, "", "?" + new URLSearchParams(f));
});

timeline.addEventListener("submit", async (e) => {
  const form = e.target.closest("form.report");
  if (!form) return;
  e.preventDefault();
  const res = await fetch(form.action, {
    method: "POST",
    headers: { accept: "application/json", "x-deloop-csrf": csrf() },
    body: new URLSearchParams(new FormData(form)),
  });
  const out = await res.json();
  const note = document.createElement("span");
  note.className = "hint";
  note.setAttribute("role", "status");
  note.textContent = out.ok ? "Reported as not a loop" : out.error;
  form.replaceWith(note);
  if (out.totals) setTotals(out.totals);
});

connect();
