import { describe, expect, it } from "vitest";
import { formatBytes, formatDuration, isDataFrameHTML, page, pickMime, stripAnsi, monacoLanguage, mimeText, utf8Len, utf8Prefix } from "./format";

describe("format", () => {
  it("prefers rich MIME types", () => {
    expect(pickMime({ "text/plain": "x", "image/png": "..." })).toBe("image/png");
    expect(pickMime({ "text/plain": "x", "text/html": "<b>" })).toBe("text/html");
    expect(pickMime({ "application/vnd.custom+json": {} })).toBe("application/vnd.custom+json");
  });
  it("formats sizes and durations", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(3 * 1024 * 1024)).toBe("3.0 MiB");
    expect(formatDuration(1_500_000)).toBe("1.5 ms");
    expect(formatDuration(2_500_000_000)).toBe("2.50 s");
  });
  it("strips terminal colours", () => {
    expect(stripAnsi("\x1b[31mValueError\x1b[0m: bad")).toBe("ValueError: bad");
  });
  it("tells a pandas table from other HTML", () => {
    expect(isDataFrameHTML('<div><table border="1" class="dataframe"><tr><td>1</td></tr></table></div>')).toBe(true);
    expect(isDataFrameHTML('<table class="dataframe"></table><script>alert(1)</script>')).toBe(false);
    expect(isDataFrameHTML("<b>hi</b>")).toBe(false);
  });
  it("pages rows and clamps the page", () => {
    expect(page(120, 0, 50)).toEqual({ start: 0, end: 50, pages: 3, page: 0 });
    expect(page(120, 9, 50)).toEqual({ start: 100, end: 120, pages: 3, page: 2 });
    expect(page(0, 0, 50)).toEqual({ start: 0, end: 0, pages: 1, page: 0 });
  });
  it("maps languages and MIME text", () => {
    expect(monacoLanguage("bash")).toBe("shell");
    expect(monacoLanguage("postgres")).toBe("pgsql");
    expect(monacoLanguage("unknown")).toBe("plaintext");
    expect(mimeText(["a", "b"])).toBe("ab");
  });
});

describe("inline output cap", () => {
  it("counts and cuts UTF-8 bytes, never inside a character", () => {
    const s = "aé€😀b"; // 1 + 2 + 3 + 4 + 1 bytes
    expect(utf8Len(s)).toBe(new TextEncoder().encode(s).length);
    expect(utf8Prefix(s, 0)).toBe("");
    expect(utf8Prefix(s, 2)).toBe("a");
    expect(utf8Prefix(s, 3)).toBe("aé");
    expect(utf8Prefix(s, 9)).toBe("aé€");
    expect(utf8Prefix(s, 10)).toBe("aé€😀");
    expect(utf8Prefix(s, 99)).toBe(s);
  });
});
