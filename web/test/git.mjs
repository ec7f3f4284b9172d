// The Git tab in the browser: initialise the workspace as a repository,
// see a file a cell wrote as untracked, commit it with a message and find
// it in the log, see a later change in the diff view, then restore the
// file as it was in the commit.
// test/browser's TestGitPanelInBrowser runs it.
import { check, newSession, run, runIn, shot } from "./lib.mjs";

await run("GIT OK", async (page) => {
  await newSession(page);
  const gitTab = page.getByRole("tab", { name: "the workspace as a git repository" });
  await gitTab.click();
  await page.getByRole("button", { name: "make the workspace a git repository (git init)" }).click();
  await page.locator(".git-tab p", { hasText: "On branch main" }).waitFor();
  check(true, "Initialise makes the workspace a repository on main");

  await page.getByRole("tab", { name: "the notebook", exact: true }).click();
  await runIn(page, 0, 'open("data.csv", "w").write("a,b\\n1,2\\n")');
  await gitTab.click();
  const row = page.locator('.git-files tr[data-path="data.csv"]');
  await row.waitFor();
  check((await row.innerText()).includes("untracked"), "the file the cell wrote is untracked");
  await page.getByRole("button", { name: "stage the selected files", exact: true }).click();
  await page.locator('.git-files tr[data-path="data.csv"]', { hasText: "added (staged)" }).waitFor();
  await page.getByRole("button", { name: "unstage the selected files (they stay in the workspace)" }).click();
  await page.locator('.git-files tr[data-path="data.csv"]', { hasText: "untracked" }).waitFor();
  check(true, "Stage and Unstage move the file into the index and out again");
  await page.getByRole("textbox", { name: "commit message" }).fill("Add the data");
  await page.getByRole("button", { name: "stage the selected files and commit them" }).click();
  await page.locator(".git-log li", { hasText: "Add the data" }).waitFor();
  check((await page.locator(".git-log li").first().innerText()).includes("admin"), "the commit is in the log, by the signed-in user");

  await page.getByRole("tab", { name: "the notebook", exact: true }).click();
  await runIn(page, 0, 'open("data.csv", "a").write("3,4\\n")');
  await gitTab.click();
  await row.waitFor();
  check((await row.innerText()).includes("modified"), "the changed file is modified");
  await row.getByRole("button", { name: "show the diff of data.csv" }).click();
  const diff = page.locator("pre.diff");
  await diff.waitFor();
  check((await diff.locator("span.add").allInnerTexts()).some((l) => l.trim() === "+3,4"), "the diff view shows the added line");
  await shot(page, "git-panel");

  // Restore the file as it was in the commit: it is no longer changed.
  const item = page.locator(".git-log li", { hasText: "Add the data" });
  await item.getByRole("button", { name: /^restore a file as it was in/ }).click();
  await item.getByRole("textbox").fill("data.csv");
  await item.getByRole("button", { name: /^restore the file as it was in/ }).click();
  await page.locator(".toast", { hasText: "restored data.csv" }).waitFor();
  await page.waitForFunction(() => !document.querySelector('.git-files tr[data-path="data.csv"]'));
  check(true, "restoring data.csv from the commit leaves it unchanged");
});
