import { describe, expect, it } from "vitest";
import { formatLeft, sessionUse } from "./format";
import { gitState } from "./git";

describe("session list", () => {
  it("says how long until the idle time-out", () => {
    expect(formatLeft(0)).toBe("now");
    expect(formatLeft(42)).toBe("42 s");
    expect(formatLeft(59 * 60 + 5)).toBe("59 min");
    expect(formatLeft(2 * 3600 + 15 * 60)).toBe("2 h 15 min");
  });
  it("shows what a session uses", () => {
    expect(sessionUse(undefined)).toBe("—");
    expect(sessionUse({ workspace_bytes: 2048, workspace_limit_bytes: 1 << 30, busy: false, idle_seconds_left: 600 }))
      .toBe("disk 2.0 KiB of 1.0 GiB · idle ends in 10 min");
    expect(sessionUse({ workspace_bytes: 0, workspace_limit_bytes: 1 << 30, busy: true, idle_seconds_left: 600, cpu_ms: 1500, peak_memory_bytes: 50 << 20 }))
      .toBe("CPU 1.50 s · memory peak 50 MiB · disk 0 B of 1.0 GiB · busy (idle clock stopped)");
  });
});

describe("git", () => {
  it("says a file's state in words", () => {
    expect(gitState({ path: "a", index: "?", worktree: "?" })).toBe("untracked");
    expect(gitState({ path: "a", index: " ", worktree: "M" })).toBe("modified");
    expect(gitState({ path: "a", index: "A", worktree: " " })).toBe("added (staged)");
    expect(gitState({ path: "a", index: "M", worktree: "D" })).toBe("modified (staged), deleted");
  });
});
