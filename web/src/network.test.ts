import { describe, expect, it } from "vitest";
import type { EgressRecord } from "./api";
import { egressLine, parseAllow, policyText } from "./network";
import { installedText, parseSSE } from "./packages";

const rec = (r: Partial<EgressRecord>): EgressRecord =>
  ({ time: "2026-11-24T17:00:00Z", host: "example.com", port: 443, kind: "connect", allowed: false, bytes_up: 0, bytes_down: 0, ...r });

describe("network", () => {
  it("says a denied attempt with the policy's reason", () => {
    expect(egressLine(rec({ reason: 'network policy is "none"' }))).toBe('example.com:443 denied: network policy is "none"');
    expect(egressLine(rec({ reason: "" }))).toBe("example.com:443 denied: refused by the network policy");
  });
  it("says an allowed attempt with bytes, package and cache", () => {
    expect(egressLine(rec({ host: "mirror.example", allowed: true, kind: "npm", bytes_up: 300, bytes_down: 3 * 1024 * 1024, package: "left-pad", cached: true })))
      .toBe("mirror.example:443 allowed (npm, 300 B up, 3.0 MiB down, package left-pad, cached)");
  });
  it("cuts a long host and passes the dropped note through", () => {
    expect(egressLine(rec({ host: "a".repeat(300) })).startsWith("a".repeat(255) + "…:443 denied")).toBe(true);
    expect(egressLine(rec({ kind: "dropped", reason: "12 more attempts are in the audit log" }))).toBe("12 more attempts are in the audit log");
  });
  it("reads an allow list typed as text", () => {
    expect(parseAllow(" api.example.com,\n*.example.org:8443  x.test ,, ")).toEqual(["api.example.com", "*.example.org:8443", "x.test"]);
    expect(parseAllow("  ")).toEqual([]);
  });
  it("says a policy", () => {
    expect(policyText(undefined)).toBe("network: none");
    expect(policyText({ mode: "none" })).toBe("network: none");
    expect(policyText({ mode: "allowlist", allow: [] })).toBe("network: package indexes only");
    expect(policyText({ mode: "allowlist", allow: ["a.test", "*.b.test"] })).toBe("network: a.test, *.b.test");
  });
});

describe("packages", () => {
  it("parses a server-sent event stream across chunks", () => {
    const a = parseSSE('event: started\ndata: {"type":"started"}\n\nevent: stdout\r\ndata: {"type":"stdout",');
    expect(a.events).toEqual([{ event: "started", data: '{"type":"started"}' }]);
    const b = parseSSE(a.rest + '"data":"Collecting x: 1"}\r\n\r\n: keep-alive\n\n');
    expect(b.events).toEqual([{ event: "stdout", data: '{"type":"stdout","data":"Collecting x: 1"}' }]);
    expect(b.rest).toBe("");
  });
  it("says what an install did", () => {
    expect(installedText({ manager: "pip", wall_ms: 2345, packages: [
      { name: "requests", version: "2.31.0", requested: true }, { name: "idna", version: "3.6", requested: false },
      { name: "numpy", version: "2.1.0", requested: true, present: true }] }))
      .toBe("pip: 3 packages in 2.3 s\nrequests 2.31.0\nidna 3.6 (dependency)\nnumpy 2.1.0 (already there)");
  });
});
