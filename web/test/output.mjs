// Long and cut output in the browser: a 100,000-line output is drawn as a
// virtual view (only the lines in view are in the page), scrolls to its
// last line, expands and downloads whole; a cell cut at the session's
// output limit says so, at how many bytes, and where to keep all of it.
// test/browser's TestLongOutputInBrowser runs it.
import { readFileSync } from "node:fs";
import { api, cells, check, newSession, run, runIn, shot } from "./lib.mjs";

await run("OUTPUT OK", async (page) => {
  await newSession(page);
  let cell = await runIn(page, 0, "for i in range(100000):\n    print(i)");
  const view = cell.locator(".stream-out.virtual");
  await view.waitFor();
  check((await view.locator(".v-info").innerText()) === "100,000 lines", "the output says it has 100,000 lines");
  const drawn = await view.locator("pre.v-window").evaluate((el) => el.textContent.split("\n").length);
  check(drawn < 200, `only the lines in view are in the page (${drawn} of 100,000)`);
  check((await page.locator("pre.v-window").innerText()).includes("99999"), "a streamed output follows its end");

  // Scroll to the top and then through it, timing frames.
  const box = view.locator(".v-scroll");
  const frames = await box.evaluate(async (el) => {
    el.scrollTop = 0;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    const times = [];
    let last = performance.now();
    for (let i = 0; i < 60; i++) {
      el.scrollTop += 2000;
      await new Promise((r) => requestAnimationFrame(r));
      const now = performance.now();
      times.push(now - last);
      last = now;
    }
    return times.sort((a, b) => a - b)[30];
  });
  console.log(`scrolling a 100,000-line output: median frame ${frames.toFixed(1)} ms`);
  await box.evaluate((el) => { el.scrollTop = 500 * 18; });
  await page.waitForFunction(() => document.querySelector("pre.v-window")?.dataset.first === String(500 - 20));
  check((await view.locator("pre.v-window").innerText()).split("\n").includes("500"), "scrolled to line 500, the view draws it");
  await shot(page, "output-virtual");

  const h0 = await box.evaluate((el) => el.clientHeight);
  await view.getByRole("button", { name: "show more of the stdout output at once" }).click();
  const h1 = await box.evaluate((el) => el.clientHeight);
  check(h1 > h0, `Expand makes the view taller (${h0} to ${h1} px)`);
  const [download] = await Promise.all([page.waitForEvent("download"), view.getByRole("button", { name: "download the whole stdout output as a text file" }).click()]);
  const text = readFileSync(await download.path(), "utf8");
  check(text.split("\n").filter((l) => l !== "").length === 100000 && text.startsWith("0\n1\n") && text.includes("\n99999"), "Download gives all 100,000 lines");

  // A session whose output limit is 4 KiB: the cell is cut and says so.
  const created = await api(page, "POST", "/v1/sessions", { languages: ["python"], limits: { output_bytes: 4096 } });
  check(created.status === 201, `a session with a 4 KiB output limit (${created.status} ${created.text.slice(0, 200)})`);
  await page.goto(new URL(`#/s/${JSON.parse(created.text).id}`, page.url()).href);
  await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  cell = await runIn(page, 0, 'for i in range(2000):\n    print("line", i)');
  const marker = cell.locator(".cut-marker");
  await marker.waitFor();
  const said = await marker.innerText();
  check(said.includes("Output cut at 4.0 KiB") && said.includes("file in the workspace"), `the cut output says where it was cut and where to keep it all: ${said.slice(0, 120)}`);
  check((await cell.locator("pre.stdout").innerText()).includes("line 0"), "what was kept is shown");
  await shot(page, "output-cut");
  check((await cells(page).count()) >= 1, "the notebook is still there");
});
