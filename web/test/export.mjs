// HTML export in the browser: a notebook with markdown, a printed line,
// a matplotlib plot and HTML output is downloaded with Export HTML; the
// file, opened from disk, shows the heading, the text and the plot (with
// a non-zero size) and runs none of the output's script.
// test/browser's TestExportHTMLInBrowser runs it.
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cells, check, newSession, run, runIn, shot } from "./lib.mjs";

await run("EXPORT OK", async (page) => {
  await newSession(page);
  await runIn(page, 0, 'print("exported line")');
  await page.getByRole("button", { name: "add a code cell", exact: true }).click();
  await runIn(page, 1, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()");
  await cells(page).nth(1).locator("img.image-output").waitFor();
  await page.getByRole("button", { name: "add a code cell", exact: true }).click();
  await runIn(page, 2, 'from IPython.display import HTML\nHTML("<table><tr><td>cell-42</td></tr></table><script>document.body.append(\'script-ran\')</script>")');
  // In the notebook the frame runs scripts (sandboxed): the same check on
  // the export below could fail.
  await cells(page).nth(2).frameLocator("iframe").locator("body", { hasText: "script-ran" }).waitFor();
  await page.getByRole("button", { name: "add a markdown cell", exact: true }).click();
  const md = cells(page).nth(3);
  await md.locator(".monaco-editor .view-lines").click();
  await page.keyboard.insertText("# Quarterly report\n\nSome *notes*.");
  await page.keyboard.press("Shift+Enter");

  const [download] = await Promise.all([page.waitForEvent("download"),
    page.getByRole("button", { name: "download the notebook as a standalone HTML file" }).click()]);
  const path = await download.path();
  const html = readFileSync(path, "utf8");
  check(download.suggestedFilename().endsWith(".html"), `the download is an HTML file (${download.suggestedFilename()})`);
  check(html.includes("exported line") && html.includes("<h1>Quarterly report</h1>") && html.includes("data:image/png;base64,"),
    "the file has the printed line, the rendered markdown and the plot inline");

  const view = await page.context().newPage();
  const errs = [];
  view.on("pageerror", (e) => errs.push(String(e)));
  // The download has no extension; as .html the browser opens it as a page.
  const file = join(mkdtempSync(join(tmpdir(), "kiln-export-")), download.suggestedFilename());
  copyFileSync(path, file);
  await view.goto(`file://${file}`);
  const img = view.locator("img").first();
  await img.waitFor();
  const size = await img.evaluate((el) => [el.naturalWidth, el.naturalHeight]);
  check(size[0] > 0 && size[1] > 0, `the exported plot renders from the file (${size})`);
  const frame = view.frameLocator("iframe").first();
  await frame.locator("td", { hasText: "cell-42" }).waitFor();
  check(true, "the HTML output's table shows in its frame");
  check(!(await frame.locator("body").innerText()).includes("script-ran"), "the HTML output's script did not run in the export");
  await shot(view, "export-html");
  await view.close();
});
