// The session list's browser test: rename a session in place (Enter
// saves, the name stays after a reload, a bad name shows the server's
// reason) and the list's use column (disk of the workspace, idle time-out
// left). test/browser's TestSessionListInBrowser runs it.
import { api, check, newSession, run, runIn, shot } from "./lib.mjs";

await run("SESSIONS OK", async (page) => {
  await newSession(page);
  const id = decodeURIComponent(page.url().match(/#\/s\/([^/]+)$/)[1]);
  // A cell that uses CPU and memory, and a file, so the workspace uses some disk.
  await runIn(page, 0, "x = bytearray(50 * 1024 * 1024)\nsum(range(3_000_000))");
  const put = await api(page, "PUT", `/v1/sessions/${id}/files/data.bin`, "x".repeat(200000));
  check(put.status === 200 || put.status === 201, `a 200 kB file is written (${put.status})`);
  await page.goto(new URL("#/", page.url()).href);
  await page.waitForSelector("body[data-ready=sessions]");
  const row = page.locator(`tr[data-session="${id}"]`);
  // The cell's end reaches the page before the service has marked the
  // session idle again on a loaded machine; the list is read as a user
  // would, again after a reload, until it shows the idle clock.
  let use = await row.locator("td.use").innerText();
  for (let i = 0; i < 20 && /busy/.test(use); i++) {
    await page.waitForTimeout(500);
    await page.reload();
    await page.waitForSelector("body[data-ready=sessions]");
    use = await row.locator("td.use").innerText();
  }
  check(/disk \d+(\.\d)? KiB of \d/.test(use) && /idle ends in \d+ min/.test(use), `the list shows the workspace's disk use and the idle time-out left: ${use}`);
  const peak = use.match(/memory peak (\d+(?:\.\d)?) MiB/);
  check(/CPU \d/.test(use) && peak && Number(peak[1]) >= 50, `the list shows the sandbox's CPU time and a memory peak over the cell's 50 MiB: ${use}`);

  await row.getByRole("button", { name: `rename session ${id}` }).click();
  const box = row.getByRole("textbox", { name: `new name for session ${id}` });
  await box.fill("x".repeat(101));
  // maxlength stops typing past 100; the API's own check is what a paste of
  // a control character meets.
  check((await box.inputValue()).length === 100, "the name box takes at most 100 characters");
  await box.fill("bad\u0007name");
  await box.press("Enter");
  await row.locator(".error", { hasText: "control" }).waitFor();
  check(true, "a name with a control character is refused with the server's reason");
  await box.fill("Quarterly sales");
  await box.press("Enter");
  await row.locator("a", { hasText: "Quarterly sales" }).waitFor();
  check(true, "Enter saves the new name and the row shows it");
  await shot(page, "sessions-rename");
  await page.reload();
  await page.waitForSelector("body[data-ready=sessions]");
  check((await page.locator(`tr[data-session="${id}"] a`).first().innerText()) === "Quarterly sales", "the name is still there after a reload");
  await page.locator(`tr[data-session="${id}"] a`).first().click();
  await page.waitForSelector("body[data-ready=notebook]", { timeout: 120000 });
  check((await page.locator(".crumb").innerText()).includes("Quarterly sales"), "the notebook's header shows the name");
});
