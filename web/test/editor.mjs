// Kernel completion and formatting in the cell editor: Tab after
// "collections.Ordered" offers the kernel's OrderedDict (a name the cell
// never contains) and Enter takes it; Ctrl+Space offers a variable an
// earlier cell defined; the format button runs black on a Python cell
// and gofmt on a Go cell in the sandbox, and a syntax error shows the
// formatter's message. test/browser's TestEditorInBrowser runs it.
import { cells, check, run, runIn, shot } from "./lib.mjs";

const text = async (cell) => (await cell.locator(".view-lines").innerText()).replace(/\u00a0/g, " ");

async function typeIn(page, cell, code) {
  await cell.locator(".monaco-editor .view-lines").click();
  await page.keyboard.press("Control+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(code);
}

async function suggestion(page, label) {
  const row = page.locator(".suggest-widget .monaco-list-row", { hasText: label }).first();
  await row.waitFor({ timeout: 30000 });
  return row;
}

// shows waits until cell i's drawn lines include want. Monaco puts an
// accepted completion into its model at once, but draws the lines at the
// next animation frame, which on a loaded machine comes after the key
// press returns: reading them at once failed in CI (TestEditorInBrowser
// read "alpha_v" with "alpha_value" already in the model).
async function shows(page, i, want) {
  try {
    await page.waitForFunction(([i, want]) =>
      document.querySelectorAll("section.cell")[i].querySelector(".view-lines").innerText.replace(/\u00a0/g, " ").includes(want),
    [i, want], { timeout: 10000 });
    return true;
  } catch {
    return false;
  }
}

await run("EDITOR OK", async (page) => {
  await page.locator("input[name=lang][value=go]").check();
  await page.getByRole("button", { name: "Create session" }).click();
  await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  await runIn(page, 0, "import collections\nalpha_value = 41");
  await page.getByRole("button", { name: "add a code cell", exact: true }).click();
  const cell = cells(page).nth(1);
  await typeIn(page, cell, "collections.Ordered");
  await page.keyboard.press("Tab");
  await suggestion(page, "OrderedDict");
  check(true, "Tab after collections.Ordered offers the kernel's OrderedDict");
  await shot(page, "editor-complete");
  await page.keyboard.press("Enter");
  check(await shows(page, 1, "collections.OrderedDict"), `Enter takes the completion into the cell (it shows ${JSON.stringify(await text(cell))})`);
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  await page.keyboard.insertText("alpha_v");
  await page.keyboard.press("Control+Space");
  await suggestion(page, "alpha_value");
  await page.keyboard.press("Enter");
  check(await shows(page, 1, "alpha_value"), `Ctrl+Space offers a variable an earlier cell defined, and Enter takes it (it shows ${JSON.stringify(await text(cell))})`);

  await typeIn(page, cell, "x = {  'a':1 }");
  await cell.getByRole("button", { name: "format the cell's code (Shift+Alt+F)" }).click();
  await page.waitForFunction(() => document.querySelectorAll("section.cell")[1].querySelector(".view-lines").innerText.replace(/\u00a0/g, " ").includes('x = {"a": 1}'), null, { timeout: 60000 });
  check(true, "the format button runs black on the Python cell");

  await typeIn(page, cell, "def f(:");
  await cell.getByRole("button", { name: "format the cell's code (Shift+Alt+F)" }).click();
  await page.locator(".toast", { hasText: "could not format" }).waitFor({ timeout: 60000 });
  check((await text(cell)).includes("def f(:"), "a syntax error is not formatted and the formatter's message is shown");

  await page.getByRole("button", { name: "add a code cell", exact: true }).click();
  const goCell = cells(page).nth(2);
  await goCell.locator("select.lang").selectOption("go");
  await typeIn(page, goCell, "package main\nfunc main(){println( 1 )}");
  await goCell.getByRole("button", { name: "format the cell's code (Shift+Alt+F)" }).click();
  await page.waitForFunction(() => document.querySelectorAll("section.cell")[2].querySelector(".view-lines").innerText.replace(/\u00a0/g, " ").includes("func main() { println(1) }"), null, { timeout: 60000 });
  check(true, "the format button runs gofmt on the Go cell");
  await shot(page, "editor-format");
});
