// Long and cut output in the browser: a 100,000-line output is drawn as a
// virtual view (only the lines in view are in the page), scrolls to its
// last line, expands and downloads whole; a cell cut at the session's
// output limit says so, at how many bytes, and where to keep all of it,
// and its button says plainly that kiln stored no more; a cell printing
// more than the notebook keeps inline (1 MiB) is marked, and its button
// shows the stored output down to the last line.
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
  await marker.getByRole("button", { name: "show all of the output kiln stored for this cell" }).click();
  await marker.locator(".cut-note", { hasText: "kiln stored no more than is shown here." }).waitFor({ timeout: 30000 });
  check(true, "expanding output cut at the session's limit says plainly that kiln stored no more");

  // A session whose output limit is 4 MiB, and a cell printing about
  // 2 MiB: the notebook keeps the first 1 MiB, and the rest is fetched.
  const big = await api(page, "POST", "/v1/sessions", { languages: ["python"], limits: { output_bytes: 4 << 20 } });
  check(big.status === 201, `a session with a 4 MiB output limit (${big.status} ${big.text.slice(0, 200)})`);
  await page.goto(new URL(`#/s/${JSON.parse(big.text).id}`, page.url()).href);
  await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  cell = await runIn(page, 0, 'for i in range(120000):\n    print("line", i, "x" * 4)');
  check((await cell.getAttribute("data-state")) === "ok", "the 2 MiB cell ran whole (under the session's 4 MiB limit)");
  const inline = cell.locator(".cut-marker");
  await inline.waitFor();
  const says = await inline.innerText();
  check(says.includes("Output shown up to 1.0 MiB") && !says.includes("Output cut at"), `the cell says the notebook shows its first 1 MiB: ${says.slice(0, 160)}`);
  const lastLine = "line 119999 xxxx";
  const before = await cell.locator(".stream-out .v-info").innerText();
  check(before !== "120,000 lines" && Number(before.replace(/\D/g, "")) > 50000, `before expanding, the page holds the first 1 MiB only (${before})`);
  await inline.getByRole("button", { name: "show all of the output kiln stored for this cell" }).click();
  const full = cell.locator(".stream-out.virtual");
  await full.locator(".v-info", { hasText: "120,000 lines" }).waitFor({ timeout: 60000 });
  await page.waitForFunction((want) => document.querySelector("section.cell .stream-out.virtual pre.v-window")?.textContent.includes(want), lastLine, { timeout: 30000 });
  check(await full.locator("pre.v-window").evaluate((el, want) => {
    const r = el.getBoundingClientRect();
    const box = el.closest(".v-scroll").getBoundingClientRect();
    return el.textContent.trimEnd().endsWith(want) && r.bottom >= box.top && r.top <= box.bottom;
  }, lastLine), "after expanding, the stored output's last line is drawn in the view");
  check((await cell.locator(".cut-marker").count()) === 0, "the marker goes once the whole output is shown");
  await shot(page, "output-expanded");
  check((await cells(page).count()) >= 1, "the notebook is still there");
});
