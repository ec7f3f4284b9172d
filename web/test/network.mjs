// The network browser test: a session made with network none, a cell that
// tries the network, and the denied egress line with the policy's reason
// under its output; the install dialog refused under none; the owner's
// policy dialog shows the server's refusal plainly and then sets an
// allowlist. test/browser (Go) starts kiln serve and runs this script:
//   KILN_URL=... KILN_KEY=... node test/network.mjs
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

async function shot(page, name) {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`) });
}

let page;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "kiln-chromium-"));
  const ctx = await chromium.launchPersistentContext(dir, { executablePath: chromiumPath, args, headless: true, viewport: { width: 1280, height: 860 } });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  await page.locator("#key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForSelector("body[data-ready=sessions]");

  // A session with network none, chosen in the form.
  await page.locator("#net-mode").selectOption("none");
  check(await page.locator("#net-allow").isDisabled(), "the allow list is off while the policy is none");
  await page.getByRole("button", { name: "Create session" }).click();
  await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  const status = page.getByRole("button", { name: "the session's network policy: change it" });
  check((await status.innerText()) === "network: none", "the session view shows the policy none");

  // A cell that tries the network: refused at once, and the egress line says why.
  const cell = page.locator("section.cell").nth(0);
  await cell.locator(".monaco-editor").waitFor();
  await cell.locator(".monaco-editor .view-lines").click();
  await page.keyboard.press("Control+A");
  // No line ends in ":", so Monaco's auto-indent leaves the code as it is.
  await page.keyboard.insertText([
    "import urllib.request as u",
    "try: u.urlopen('http://example.com/', timeout=20)",
    "except Exception as e: print('refused:', e)",
  ].join("\n"));
  await page.keyboard.press("Escape");
  const t0 = Date.now();
  await page.keyboard.press("Control+Enter");
  await page.waitForFunction(() => {
    const c = document.querySelector("section.cell");
    return c && c.dataset.state && !["queued", "running"].includes(c.dataset.state);
  }, undefined, { timeout: 60000 });
  const took = Date.now() - t0;
  check((await cell.locator("pre.stdout").innerText()).includes("refused:"), `the cell's request failed (in ${took} ms)`);
  const denied = cell.locator("ul.egress li.denied", { hasText: "example.com:80" });
  await denied.waitFor({ timeout: 10000 });
  const line = await denied.innerText();
  check(/denied: .*network policy is none/.test(line), `the denied egress line names the policy: ${line}`);
  check((await cell.locator(".egress-wrap summary").innerText()).includes("denied"), "the egress summary counts the denied attempt");
  await shot(page, "network-01-denied");

  // Installing under none is refused, and the dialog says so plainly.
  await page.getByRole("button", { name: "install pip or npm packages into the session" }).click();
  await page.locator("#pkg-names").fill("left-pad");
  await page.locator("#pkg-manager").selectOption("npm");
  await page.getByRole("button", { name: "Install", exact: true }).click();
  const perr = page.locator("dialog.packages p.error");
  await page.waitForFunction(() => document.querySelector("dialog.packages p.error")?.textContent !== "", undefined, { timeout: 30000 });
  check(/none/.test(await perr.innerText()), `the install under none is refused naming the policy: ${await perr.innerText()}`);
  await shot(page, "network-02-install-refused");
  await page.getByRole("button", { name: "close the install dialog" }).click();

  // The owner changes the policy: a bad host is the server's error, shown as it said it; a good list is set.
  await status.click();
  await page.locator("#netdlg-mode").selectOption("allowlist");
  await page.locator("#netdlg-allow").fill("10.0.0.1");
  await page.getByRole("button", { name: "Save policy" }).click();
  const nerr = page.locator("dialog.network p.error");
  await page.waitForFunction(() => document.querySelector("dialog.network p.error")?.textContent !== "", undefined, { timeout: 30000 });
  check((await nerr.innerText()).length > 0, `an IP address in the allow list is refused by the server: ${await nerr.innerText()}`);
  await shot(page, "network-03-policy-error");
  await page.locator("#netdlg-allow").fill("example.com\n*.example.org:8443");
  await page.getByRole("button", { name: "Save policy" }).click();
  await page.locator("dialog.network").waitFor({ state: "detached", timeout: 30000 });
  check((await status.innerText()) === "network: example.com, *.example.org:8443", "the session view shows the new allowlist");
  const sid = decodeURIComponent(page.url().split("#/s/")[1]);
  const s = await page.evaluate(async (id) => (await fetch(`/v1/sessions/${encodeURIComponent(id)}`)).json(), sid);
  check(s.network?.mode === "allowlist" && s.network.allow?.includes("example.com"), `the server has the new policy: ${JSON.stringify(s.network)}`);

  // With the host's npm registry reachable (KILN_NPM=1), an install under
  // the allowlist streams npm's output, lists the version, and a
  // JavaScript cell requires the package.
  if (process.env.KILN_NPM === "1") {
    await page.getByRole("button", { name: "install pip or npm packages into the session" }).click();
    await page.locator("#pkg-manager").selectOption("npm");
    await page.locator("#pkg-names").fill("is-number@7.0.0");
    await page.getByRole("button", { name: "Install", exact: true }).click();
    await page.locator("dialog.packages pre.installed").waitFor({ timeout: 120000 });
    const log = await page.locator("dialog.packages pre.pkg-log").innerText();
    check(log.includes("installing is-number@7.0.0 with npm"), `the install's progress streamed: ${log.slice(0, 300)}`);
    const got = await page.locator("dialog.packages pre.installed").innerText();
    check(/is-number 7\.0\.0/.test(got), `the dialog lists the installed version: ${got}`);
    await shot(page, "network-04-installed");
    await page.getByRole("button", { name: "close the install dialog" }).click();
    await page.getByRole("button", { name: "add a code cell", exact: true }).click();
    const js = page.locator("section.cell").nth(1);
    await js.locator("select.lang").selectOption("javascript");
    await js.locator(".monaco-editor .view-lines").click();
    await page.keyboard.insertText("console.log('is 5 a number:', require('is-number')(5))");
    await page.keyboard.press("Escape");
    await page.keyboard.press("Control+Enter");
    await js.locator("pre.stdout", { hasText: "is 5 a number: true" }).waitFor({ timeout: 60000 });
    check(true, "a JavaScript cell requires the installed package");
  } else {
    console.log("skip: the host's npm registry is not reachable (KILN_NPM unset): no real install");
  }

  check(errors.length === 0, `no page errors (${errors.join("; ")})`);
  await ctx.close();
  rmSync(dir, { recursive: true, force: true });
  console.log("NETWORK OK");
}

main().catch(async (e) => {
  console.error(e);
  if (page) {
    await shot(page, "network-failed").catch(() => {});
    console.error("cells:", await page.evaluate(() => [...document.querySelectorAll("section.cell")]
      .map((c) => `${c.dataset.state}|${c.querySelector(".outputs")?.textContent}`).join("\n")).catch(() => ""));
  }
  process.exit(1);
});
