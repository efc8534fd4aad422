// The console in headless Chromium: started by console_browser.rs with
// DELOOP_URL (a running `deloop serve` with the proxy mounted), DELOOP_KEY,
// PLAYWRIGHT_CORE (the package folder) and SHOT_DIR. Prints `ok <step>`
// for each step; exits 1 on the first failure.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const base = process.env.DELOOP_URL;
const key = process.env.DELOOP_KEY;
const shots = process.env.SHOT_DIR;
const profile = mkdtempSync(join(tmpdir(), "deloop-chromium-"));

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function ready() {
  for (let i = 0; i < 600; i++) {
    const r = await fetch(`${base}/readyz`).catch(() => null);
    if (r && r.ok) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error("deloop serve never became ready");
}

const context = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const problems = [];
try {
  await ready();
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => {
    // The live feed is closed on navigation; that is not a failure.
    if (!r.url().includes("/ui/live/feed")) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400 && !r.url().endsWith("/ui/login")) problems.push(`HTTP ${r.status()}: ${r.url()}`);
  });

  // Without a key: the login page, no data.
  await page.goto(`${base}/ui/live`);
  check(page.url().includes("/ui/login"), `not sent to login: ${page.url()}`);
  check(await page.locator("#timeline").count() === 0, "data shown without a key");
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL("**/ui/live");
  console.log("ok login");

  for (const name of ["Ask", "Live", "Sessions", "Check", "Clamp"]) {
    await page.getByRole("link", { name, exact: true }).click();
    await page.waitForLoadState("load");
    check((await page.locator("h1").textContent()) === name, `${name}: wrong page`);
    await page.screenshot({ path: join(shots, `${name.toLowerCase()}.png`), fullPage: true });
  }
  console.log("ok nav");

  // Ask: Enter submits; the extractive answer streams in with sources.
  await page.getByRole("link", { name: "Ask", exact: true }).click();
  await page.getByLabel("Question").fill("How does deloop cut a looping stream?");
  await page.getByLabel("Question").press("Enter");
  await page.waitForFunction(() => document.getElementById("answer").textContent.trim().length > 20, null, { timeout: 60000 });
  await page.waitForSelector("#sources li[id^=passage-]", { timeout: 60000 });
  await page.waitForFunction(() => document.getElementById("ask-status").textContent.startsWith("Answered"), null, { timeout: 60000 });
  await page.screenshot({ path: join(shots, "ask-answer.png"), fullPage: true });
  console.log("ok ask");

  // Clamp: the unit is marked, the cut struck through.
  await page.getByRole("link", { name: "Clamp", exact: true }).click();
  await page.getByLabel("Text").fill("Intro line. " + "the loop goes round and round and ".repeat(30));
  await page.getByRole("button", { name: "Clamp" }).click();
  await page.waitForSelector("#clamp-marked mark");
  check(await page.locator("#clamp-marked del").count() === 1, "no cut drawn");
  await page.screenshot({ path: join(shots, "clamp-result.png"), fullPage: true });
  console.log("ok clamp");

  // Check: the page's JSON lines are /v1/check's.
  let transcript = "";
  for (let i = 0; i < 12; i++) {
    transcript += JSON.stringify({ type: "call", id: `c${i}`, tool: "read", args: { path: "a.txt" } }) + "\n";
    transcript += JSON.stringify({ type: "result", id: `c${i}`, result: "same" }) + "\n";
  }
  await page.getByRole("link", { name: "Check", exact: true }).click();
  await page.getByLabel("Transcript", { exact: true }).fill(transcript);
  await page.getByRole("button", { name: "Check" }).click();
  await page.waitForSelector("#check-timeline");
  const shown = await page.locator("#check-json").textContent();
  const api = await (await fetch(`${base}/v1/check`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: transcript })).text();
  check(shown === api, `check lines differ:\n${shown}\n---\n${api}`);
  check(await page.locator("#check-timeline .span-bar").count() > 0, "no loop span drawn");
  await page.screenshot({ path: join(shots, "check-result.png"), fullPage: true });
  console.log("ok check");

  // Live: a looping stream through the mounted proxy appears as a cut.
  await page.getByRole("link", { name: "Live", exact: true }).click();
  await page.waitForFunction(() => document.getElementById("feed-state").textContent === "live");
  const before = await page.locator('#timeline .event[data-kind="text_cut"][data-model="looper-1"]').count();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-deloop-key": key },
    body: JSON.stringify({ model: "looper-1", stream: true, messages: [{ role: "user", content: "plan" }] }),
  });
  const streamed = await res.text();
  check(res.ok, `proxy answered ${res.status}`);
  check(!streamed.includes("we check the cache and then ".repeat(20)), "the loop was not cut");
  const cut = page.locator('#timeline .event[data-kind="text_cut"][data-model="looper-1"]');
  await page.waitForFunction((n) => document.querySelectorAll('#timeline .event[data-kind="text_cut"][data-model="looper-1"]').length > n, before, { timeout: 10000 });
  check(await cut.first().locator(".context mark").count() > 0, "the unit is not highlighted");
  await page.screenshot({ path: join(shots, "live-cut.png"), fullPage: true });
  console.log("ok live");

  check(problems.length === 0, `problems:\n${problems.join("\n")}`);
} catch (e) {
  console.error(e.stack || String(e));
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
