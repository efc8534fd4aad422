// Ask: streams the answer from /api/{mode} (server-sent events), shows the
// sources as links to their passages and any guard that fired.
import { csrf, el, readEvents } from "./console.js";

const form = document.getElementById("ask");
const answer = document.getElementById("answer");
const sources = document.getElementById("sources");
const notes = document.getElementById("notes");
const status = document.getElementById("ask-status");

function note(text, kind = "guard") {
  notes.append(el("p", { class: `notice ${kind}`, role: "status" }, text));
}

function showSources(list) {
  sources.replaceChildren();
  list.forEach((p, i) => {
    const n = i + 1;
    const li = el("li", { id: `passage-${n}` });
    li.append(el("strong", {}, `[${n}] ${p.source}:${p.start_line}-${p.end_line}`));
    if (p.heading_trail?.length) li.append(" ", el("span", { class: "hint" }, p.heading_trail.join(" › ")));
    const details = el("details");
    details.append(el("summary", {}, "Passage"), el("pre", {}, p.text));
    li.append(details);
    sources.append(li);
  });
}

/** The answer with each [N] citation linked to its passage. */
function linked(text) {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of text.matchAll(/\[(\d+)\]/g)) {
    frag.append(text.slice(last, m.index));
    frag.append(el("a", { href: `#passage-${m[1]}` }, m[0]));
    last = m.index + m[0].length;
  }
  frag.append(text.slice(last));
  return frag;
}

function done(report) {
  answer.replaceChildren(linked(report.answer));
  if (report.loop_cut) note(`A loop in the answer was cut (${report.loop_detector}); ${report.saved_chars} characters were not generated.`);
  else if (report.clamped) note("A loop guard clamped the answer.");
  if (report.degraded) note(`The answer is a fallback (${report.degraded_reason || "degraded"})${report.llm_error ? ": " + report.llm_error : ""}.`);
  for (const n of report.notes || []) note(n, "info");
  status.textContent = `Answered by ${report.provider} (${report.model}).`;
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const data = new FormData(form);
  const mode = data.get("mode");
  const body = { question: data.get("question"), lang: data.get("lang") };
  answer.replaceChildren();
  sources.replaceChildren();
  notes.replaceChildren();
  status.textContent = "Asking…";
  let res;
  try {
    res = await fetch(`/api/${encodeURIComponent(mode)}`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", "x-deloop-csrf": csrf() },
      body: JSON.stringify(body),
    });
  } catch (err) {
    status.textContent = "";
    note(`The server could not be reached: ${err}`, "error");
    return;
  }
  if (!res.ok) {
    const problem = await res.json().catch(() => ({}));
    status.textContent = "";
    note(problem.detail || `The server answered ${res.status}.`, "error");
    return;
  }
  await readEvents(res, (name, data) => {
    const ev = JSON.parse(data);
    if (name === "sources") showSources(ev.sources || []);
    else if (name === "delta") answer.append(ev.text);
    else if (name === "cut") note(`The loop guard cut the stream (${ev.detector}).`);
    else if (name === "done") done(ev);
    else if (name === "error") { status.textContent = ""; note(ev.message, "error"); }
  });
});
