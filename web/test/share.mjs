// The shared-session browser test: two browsers (two chromium profiles),
// signed in as two users, against a real kiln serve. test/browser (Go)
// starts the server, makes the users and runs this script:
//   KILN_URL=... KILN_KEY_A=... KILN_KEY_B=... KILN_USER_B=... node test/share.mjs
// A makes a session and shares it with B as a collaborator; each runs a
// cell and sees the other's appear live in the notebook; A revokes and B
// gets 404. Exits non-zero on the first failed check.
import { chromium } from "playwright-core";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const url = process.env.KILN_URL;
const keyA = process.env.KILN_KEY_A;
const keyB = process.env.KILN_KEY_B;
const userB = process.env.KILN_USER_B;
const shots = process.env.KILN_SCREENSHOTS || "";
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
if (!url || !keyA || !keyB || !userB) throw new Error("set KILN_URL, KILN_KEY_A, KILN_KEY_B and KILN_USER_B");
if (shots) mkdirSync(shots, { recursive: true });

const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

async function browser(key) {
  const dir = mkdtempSync(join(tmpdir(), "kiln-chromium-"));
  const ctx = await chromium.launchPersistentContext(dir, { executablePath: chromiumPath, args, headless: true, viewport: { width: 1280, height: 860 } });
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  await page.locator("#key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForSelector("body[data-ready=sessions]");
  return { page, errors, close: async () => { await ctx.close(); rmSync(dir, { recursive: true, force: true }); } };
}

async function shot(page, name) {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`) });
}

// run types code into the notebook's cell i and runs it, then waits for it.
async function run(page, i, code) {
  const cell = page.locator("section.cell").nth(i);
  await cell.locator(".monaco-editor").waitFor();
  await cell.locator(".monaco-editor .view-lines").click();
  await page.keyboard.press("Control+A");
  await page.keyboard.insertText(code);
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+Enter");
  await page.waitForFunction((i) => {
    const c = document.querySelectorAll("section.cell")[i];
    return c && c.dataset.state && !["queued", "running"].includes(c.dataset.state);
  }, i, { timeout: 60000 });
  return cell;
}

// seesRemote waits for a cell that another user ran, with text in its output.
async function seesRemote(page, text) {
  const cell = page.locator("section.cell[data-remote=true]", { hasText: text });
  await cell.locator("pre.stdout", { hasText: text }).waitFor({ timeout: 60000 });
  await page.waitForFunction((text) => [...document.querySelectorAll("section.cell[data-remote=true]")]
    .some((c) => c.textContent.includes(text) && c.dataset.state === "ok"), text, { timeout: 60000 });
  return cell;
}

const open = [];

async function main() {
  const a = await browser(keyA);
  const b = await browser(keyB);
  open.push(["a", a.page], ["b", b.page]);

  // A makes a session and shares it with B as a collaborator.
  await a.page.getByRole("button", { name: "Create session" }).click();
  await a.page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  const session = decodeURIComponent(a.page.url().split("#/s/")[1]);
  await a.page.getByRole("button", { name: "share the session with other users" }).click();
  await a.page.locator("#share-user").fill(userB);
  await a.page.locator("#share-role").selectOption("collaborator");
  await a.page.getByRole("button", { name: "Share", exact: true }).click();
  await a.page.locator(`tr[data-share="${userB}"]`).waitFor();
  check((await a.page.locator(`tr[data-share="${userB}"]`).innerText()).includes("collaborator"), "A shared the session with B as a collaborator");
  await shot(a.page, "share-01-dialog");
  await a.page.getByRole("button", { name: "close the share dialog" }).click();

  // B sees it in the session list with its role and opens it.
  await b.page.reload();
  await b.page.waitForSelector("body[data-ready=sessions]");
  const row = b.page.locator(`tr[data-session="${session}"]`);
  check((await row.innerText()).includes("collaborator"), "B's session list shows A's session with B's role");
  check((await row.getByRole("button", { name: `delete session ${session}` }).count()) === 0, "B has no Delete button for A's session");
  await row.getByRole("button", { name: `open session ${session}` }).click();
  await b.page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  check((await b.page.locator(".nb-bar").innerText()).includes("shared with you as collaborator"), "B's notebook says it is shared with B");
  await b.page.waitForTimeout(500); // the event stream is open

  // A runs a cell; B sees it appear and fill in.
  await run(a.page, 0, 'print("hello from A")');
  let remote = await seesRemote(b.page, "hello from A");
  check((await remote.locator(".cell-status").innerText()).includes("run by"), "B sees A's cell, its output and who ran it");
  await shot(b.page, "share-02-b-sees-a");

  // B runs a cell; A sees it.
  await run(b.page, 0, 'print("hello from B")');
  remote = await seesRemote(a.page, "hello from B");
  check((await remote.locator(".cell-status").innerText()).includes(`run by`), "A sees B's cell, its output and who ran it");
  await shot(a.page, "share-03-a-sees-b");

  // A makes B a viewer: B's notebook reads, runs nothing, and still sees A's cells live.
  await a.page.getByRole("button", { name: "share the session with other users" }).click();
  await a.page.locator("#share-user").fill(userB);
  await a.page.locator("#share-role").selectOption("viewer");
  await a.page.getByRole("button", { name: "Share", exact: true }).click();
  await a.page.locator(`tr[data-share="${userB}"]`, { hasText: "viewer" }).waitFor();
  await a.page.getByRole("button", { name: "close the share dialog" }).click();
  await b.page.reload();
  await b.page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  check((await b.page.locator(".nb-bar").innerText()).includes("shared with you as viewer"), "B's notebook says B is now a viewer");
  check((await b.page.getByRole("button", { name: "run all cells" }).count()) === 0, "a viewer's notebook has no Run all");
  await b.page.waitForTimeout(500); // the event stream is open
  await run(a.page, 0, 'print("A again, for the viewer")');
  await seesRemote(b.page, "A again, for the viewer");
  check(true, "the viewer B sees A's new cell live");
  await shot(b.page, "share-04-viewer");

  // A revokes: B's next request is a 404.
  await a.page.getByRole("button", { name: "share the session with other users" }).click();
  await a.page.getByRole("button", { name: `revoke the share of ${userB}` }).click();
  await a.page.locator(".shares", { hasText: "Not shared with anyone." }).waitFor();
  const status = await b.page.evaluate(async (id) => (await fetch(`/v1/sessions/${encodeURIComponent(id)}`)).status, session);
  check(status === 404, "after A revokes, B gets 404 for the session at once");
  await b.page.locator(".toast", { hasText: "no longer shared with you" }).waitFor({ timeout: 30000 });
  check(true, "B's notebook says its live updates stopped");

  check(a.errors.length === 0 && b.errors.length === 0, `no page errors (${[...a.errors, ...b.errors].join("; ")})`);
  await a.close();
  await b.close();
  console.log("SHARED OK");
}

main().catch(async (e) => {
  console.error(e);
  for (const [name, page] of open) {
    await shot(page, `share-failed-${name}`).catch(() => {});
    console.error(`${name}'s cells:`, await page.evaluate(() => [...document.querySelectorAll("section.cell")]
      .map((c) => `${c.dataset.state}|${c.dataset.remote ?? ""}|${c.querySelector(".cell-status")?.textContent}|${c.querySelector(".outputs")?.textContent}`).join("\n")).catch(() => ""));
  }
  process.exit(1);
});
