// A smoke test of the notebook in Firefox: Debian's firefox-esr, driven by
// puppeteer-core over WebDriver BiDi (Playwright's Firefox needs a patched
// build of its own, which nothing here may download). Sign in, create a
// session, a Python cell that prints, a matplotlib plot with a non-zero
// size, and a markdown cell that renders. test/browser's TestFirefoxSmoke
// runs it against a kiln serve of its own (KILN_URL, KILN_KEY, FIREFOX).
import puppeteer from "puppeteer-core";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const url = process.env.KILN_URL;
const key = process.env.KILN_KEY;
const shots = process.env.KILN_SCREENSHOTS || "";
const firefox = process.env.FIREFOX || "/usr/bin/firefox-esr";
if (!url || !key) throw new Error("set KILN_URL and KILN_KEY");
if (shots) mkdirSync(shots, { recursive: true });

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

// clickButton clicks the button whose accessible name (aria-label, or its
// text) is name.
async function clickButton(page, name) {
  const sel = `::-p-aria([name="${name}"][role="button"])`;
  await page.waitForSelector(sel, { timeout: 30000 });
  await page.click(sel);
}

async function chord(page, mod, k) {
  await page.keyboard.down(mod);
  await page.keyboard.press(k);
  await page.keyboard.up(mod);
}

// typeInto types code into cell i, which is empty, key by key as a user
// would (Monaco closes brackets and quotes as they are typed and types
// over them when the closing one comes). The code is one line: puppeteer
// sends Enter over WebDriver BiDi as WebDriver's numpad Enter (U+E007,
// code NumpadEnter, an insertLineBreak input), and with it Monaco in
// firefox-esr put a second new line before the first line ("# Res",
// Enter, "xy", Enter gave "xy\n# Res"). Whether a real Enter key in
// Firefox does the same is not checked here.
async function typeInto(page, i, code) {
  const lines = await page.waitForSelector(`section.cell:nth-child(${i + 1}) .monaco-editor .view-lines`, { timeout: 60000 });
  const focused = () => page.evaluate(() => [...document.querySelectorAll("section.cell")].indexOf(document.activeElement?.closest("section.cell")));
  // A cell just added has the focus already; the first one is clicked.
  if ((await focused()) !== i) await lines.click();
  const where = await focused();
  check(where === i, `the editor of cell ${i} has the focus (cell ${where} has it)`);
  // Headless firefox-esr's window never has the system focus
  // (document.hasFocus() is false, and neither bringToFront nor
  // focusmanager.testmode changes it), so the editor that loses the focus
  // gets no blur event. Monaco then still counts it focused and takes the
  // focus back when it next draws: keys typed in a new cell went into the
  // cell above. Send the blur a focused window sends.
  await page.evaluate((i) => {
    document.querySelectorAll("section.cell").forEach((c, j) => {
      if (j !== i) c.querySelector(".monaco-editor textarea")?.dispatchEvent(new FocusEvent("blur"));
    });
  }, i);
  await page.keyboard.type(code);
  await page.waitForFunction((i, code) =>
    document.querySelectorAll("section.cell")[i].querySelector(".view-lines").innerText.replace(/\u00a0/g, " ") === code, { timeout: 10000 }, i, code);
}

// runIn types code into the empty cell i, runs it with Ctrl+Enter and waits for it
// to finish.
async function runIn(page, i, code) {
  await typeInto(page, i, code);
  await page.keyboard.press("Escape");
  await chord(page, "Control", "Enter");
  await page.waitForFunction((i) => {
    const c = document.querySelectorAll("section.cell")[i];
    return c && c.dataset.state && !["queued", "running"].includes(c.dataset.state);
  }, { timeout: 120000, polling: 100 }, i);
  return page.$(`section.cell:nth-child(${i + 1})`);
}

const dir = mkdtempSync(join(tmpdir(), "kiln-firefox-"));
const browser = await puppeteer.launch({ browser: "firefox", executablePath: firefox, headless: true, userDataDir: dir,
  defaultViewport: { width: 1280, height: 860 } });
let page;
try {
  console.log(`browser: ${await browser.version()}`);
  page = (await browser.pages())[0] ?? (await browser.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));

  await page.goto(url);
  await page.waitForSelector("#key");
  await page.type("#key", key);
  await clickButton(page, "Sign in");
  await page.waitForSelector("body[data-ready=sessions]", { timeout: 30000 });
  check(true, "signed in");

  await clickButton(page, "Create session");
  await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  check(true, "created a session");

  let cell = await runIn(page, 0, 'print("hello from firefox")');
  const out = await cell.$eval("pre.stdout", (el) => el.innerText).catch(() => "");
  check(out.includes("hello from firefox"), `a Python cell prints (${JSON.stringify(out.slice(0, 80))}; state ${await cell.evaluate((el) => el.dataset.state)})`);

  await clickButton(page, "add a code cell at the end");
  cell = await runIn(page, 1, "import matplotlib.pyplot as plt; plt.plot([1, 3, 2]); plt.show()");
  const img = await cell.waitForSelector("img.image-output", { timeout: 30000 });
  await page.waitForFunction((el) => el.complete, { timeout: 30000 }, img);
  const size = await img.evaluate((el) => [el.naturalWidth, el.naturalHeight, el.getBoundingClientRect().width]);
  check(size[0] > 0 && size[1] > 0 && size[2] > 0, `a matplotlib plot renders with a non-zero size (${size})`);

  await clickButton(page, "add a markdown cell at the end");
  await typeInto(page, 2, "# Results: the **total** is 42");
  await chord(page, "Shift", "Enter");
  const h1 = await page.waitForSelector("section.cell:nth-child(3) .markdown.rendered h1", { timeout: 30000 });
  const strong = await page.$eval("section.cell:nth-child(3) .markdown.rendered strong", (el) => el.textContent);
  check((await h1.evaluate((el) => el.textContent)) === "Results: the total is 42" && strong === "total", "a markdown cell renders (a heading with bold in it)");

  if (shots) await page.screenshot({ path: join(shots, "firefox-notebook.png") });
  check(errors.length === 0, `no page errors (${errors.join("; ")})`);
  console.log("FIREFOX OK");
} catch (e) {
  // What the cells held and showed, for the failure's log.
  const cellsNow = await page?.$$eval("section.cell", (cs) => cs.map((c) => ({ state: c.dataset.state, code: c.querySelector(".view-lines")?.innerText,
    out: c.querySelector(".outputs")?.innerText.slice(0, 300), status: c.querySelector(".cell-status")?.innerText }))).catch(() => "?");
  console.log("cells:", JSON.stringify(cellsNow, null, 1));
  if (shots && page) await page.screenshot({ path: join(shots, "firefox-failure.png") }).catch(() => {});
  throw e;
} finally {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
}
