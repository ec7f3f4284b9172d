// The terminal browser test: a session's Terminal button opens a tab with
// xterm.js attached to a shell in the sandbox; a typed command's output
// appears; making the window smaller changes the size the shell sees
// (stty size); closing the tab says nothing is left to type into.
// test/browser (Go) starts kiln serve and runs this script:
//   KILN_URL=... KILN_KEY=... node test/terminal.mjs
// Exits non-zero on the first failed check.
import { chromium } from "playwright-core";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const url = process.env.KILN_URL;
const key = process.env.KILN_KEY;
const shots = process.env.KILN_SCREENSHOTS || "";
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
if (!url || !key) throw new Error("set KILN_URL and KILN_KEY");
if (shots) mkdirSync(shots, { recursive: true });

const args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

// screenText is what the terminal shows, row by row.
async function screenText(page) {
  return page.locator(".term-tab .xterm-rows").innerText();
}

async function waitScreen(page, re, what) {
  const deadline = Date.now() + 30000;
  let text = "";
  while (Date.now() < deadline) {
    text = await screenText(page);
    const m = text.match(re);
    if (m) return m;
    await page.waitForTimeout(100);
  }
  throw new Error(`check failed: ${what}; the terminal shows:\n${text}`);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "kiln-chromium-"));
  const ctx = await chromium.launchPersistentContext(dir, { executablePath: chromiumPath, args, headless: true, viewport: { width: 1280, height: 860 } });
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  try {
    await page.goto(url);
    await page.locator("#key").fill(key);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForSelector("body[data-ready=sessions]");
    await page.getByRole("button", { name: "Create session" }).click();
    await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });

    await page.getByRole("button", { name: "open a terminal: a shell in the session's sandbox" }).click();
    await page.locator(".term-tab .muted", { hasText: "connected" }).waitFor({ timeout: 60000 });
    check(true, "the terminal tab connected");
    await page.locator(".term-tab .xterm").click();
    await page.keyboard.type("echo kiln-$((6*7)); tty\n");
    // The typed line shows kiln-$((6*7)); only the shell's answer shows 42.
    await waitScreen(page, /kiln-42/, "the shell's answer to echo");
    await waitScreen(page, /\/dev\/pts\/\d+/, "tty names a pseudo-terminal");
    check(true, "echo's output and a /dev/pts terminal appear");
    if (shots) await page.screenshot({ path: join(shots, "terminal-01.png") });
    await page.keyboard.type("clear; stty size\n");
    const [, r1, c1] = await waitScreen(page, /^(\d+) (\d+)\s*$/m, "stty size");

    await page.setViewportSize({ width: 900, height: 600 });
    await page.waitForTimeout(500);
    await page.keyboard.type("clear; stty size\n");
    const deadline = Date.now() + 30000;
    let r2 = r1, c2 = c1;
    while (Date.now() < deadline && r2 === r1 && c2 === c1) {
      const m = (await screenText(page)).match(/^(\d+) (\d+)\s*$/m);
      if (m) [, r2, c2] = m;
      await page.waitForTimeout(100);
    }
    check(Number(r2) < Number(r1) && Number(c2) < Number(c1), `a smaller window gives the shell a smaller terminal: ${r1}x${c1} then ${r2}x${c2}`);

    await page.keyboard.type("exit\n");
    await page.locator(".term-tab .muted", { hasText: "the shell exited with 0" }).waitFor({ timeout: 30000 });
    check(true, "exit ends the shell and the tab says so");
    await page.getByRole("button", { name: "close Terminal 1" }).click();
    check((await page.locator(".term-tab").count()) === 0, "closing the tab removes the terminal");
    check(errors.length === 0, `no page errors (${errors.join("; ")})`);
    console.log("TERMINAL OK");
  } finally {
    await ctx.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
