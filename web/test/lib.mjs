// Helpers shared by the browser scripts of the session list, output,
// export, editor and git features (test/browser runs each against a kiln
// serve of its own, with KILN_URL and KILN_KEY set).
import { chromium } from "playwright-core";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const url = process.env.KILN_URL;
export const key = process.env.KILN_KEY;
const shots = process.env.KILN_SCREENSHOTS || "";
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
if (!url || !key) throw new Error("set KILN_URL and KILN_KEY");
if (shots) mkdirSync(shots, { recursive: true });

const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];

export function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

export async function shot(page, name) {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`) });
}

// run opens a fresh browser, signs in and calls fn(page, errors); page
// errors fail the script; done is printed when fn returns.
export async function run(done, fn) {
  const dir = mkdtempSync(join(tmpdir(), "kiln-chromium-"));
  const ctx = await chromium.launchPersistentContext(dir, { executablePath: chromiumPath, args, headless: true, acceptDownloads: true,
    viewport: { width: 1280, height: 860 } });
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.locator("#key").fill(key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForSelector("body[data-ready=sessions]");
    await fn(page, errors);
    check(errors.length === 0, `no page errors (${errors.join("; ")})`);
    console.log(done);
  } finally {
    await ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// newSession creates a Python session from the list and opens it.
export async function newSession(page) {
  await page.getByRole("button", { name: "Create session" }).click();
  await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
}

export const cells = (page) => page.locator("section.cell");

// runIn types code into cell i (replacing what is there), runs it with
// Ctrl+Enter and waits for it to finish.
export async function runIn(page, i, code) {
  const cell = cells(page).nth(i);
  await cell.locator(".monaco-editor").waitFor();
  await cell.locator(".monaco-editor .view-lines").click();
  await page.keyboard.press("Control+A");
  await page.keyboard.insertText(code);
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+Enter");
  await page.waitForFunction((i) => {
    const c = document.querySelectorAll("section.cell")[i];
    return c && c.dataset.state && !["queued", "running"].includes(c.dataset.state);
  }, i, { timeout: 120000 });
  return cell;
}

// api calls the HTTP API as the signed-in page (cookie and CSRF token).
export async function api(page, method, path, body) {
  return page.evaluate(async ([method, path, body]) => {
    const csrf = document.cookie.split(";").map((c) => c.trim().split("=")).find(([k]) => k === "kiln_csrf")?.[1] ?? "";
    const r = await fetch(path, { method, headers: { "Content-Type": "application/json", "X-Kiln-Csrf": decodeURIComponent(csrf) },
      body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    return { status: r.status, text };
  }, [method, path, body]);
}
