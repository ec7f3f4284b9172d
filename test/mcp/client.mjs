// Drives kiln's MCP server with the official MCP TypeScript SDK, as an MCP
// host would. mcp_test.go runs it:
//   node client.mjs stdio KILN_BINARY      starts `kiln mcp` over stdio
//   node client.mjs remote KILN_BINARY URL KEY   `kiln mcp --server URL --key KEY`
//   node client.mjs http URL KEY           streamable HTTP at URL (…/mcp)
//   node client.mjs badkey URL             a wrong key must be refused
// It prints "ok: <step>" per step and exits 1 with the reason on a failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, key, remoteKey] = process.argv.slice(2);

function fail(msg) {
  console.error("FAIL: " + msg);
  process.exit(1);
}

function check(cond, msg, result) {
  if (!cond) fail(msg + (result ? "\nresult: " + JSON.stringify(result).slice(0, 2000) : ""));
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

function transport() {
  if (mode === "stdio") {
    return new StdioClientTransport({ command: target, args: ["mcp"], stderr: "inherit" });
  }
  if (mode === "remote") {
    return new StdioClientTransport({ command: target, args: ["mcp", "--server", key, "--key", remoteKey], stderr: "inherit" });
  }
  const auth = mode === "badkey" ? "Bearer kiln_not-a-real-key" : "Bearer " + key;
  return new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers: { Authorization: auth } } });
}

async function main() {
  const client = new Client({ name: "kiln-mcp-test", version: "1.0.0" });
  if (mode === "badkey") {
    try {
      await client.connect(transport());
    } catch (e) {
      check(/401|unauth|API key/i.test(String(e)), "a wrong key was refused, but not as unauthenticated: " + e);
      console.log("ok: wrong key refused: " + String(e).slice(0, 200));
      return;
    }
    fail("a wrong key was accepted");
  }
  await client.connect(transport());
  console.log("ok: connected to " + client.getServerVersion()?.name);

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const want of ["run_code", "create_session", "execute_code", "install_packages", "list_files", "read_file", "write_file",
    "interrupt", "restart_session", "close_session", "list_languages"]) {
    check(names.includes(want), `tool ${want} is listed (got ${names})`);
  }
  const run = tools.find((t) => t.name === "run_code");
  check(run.inputSchema?.properties?.timeout_ms?.maximum > 0, "run_code's schema states the timeout's limit", run);
  console.log("ok: listed " + names.length + " tools");

  let progress = 0;
  const plot = await client.callTool({
    name: "run_code",
    arguments: {
      language: "python",
      code: "print('hello from kiln')\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
    },
  }, undefined, { onprogress: () => progress++, timeout: 120000 });
  check(!plot.isError, "run_code with a plot succeeded", plot);
  check(text(plot).includes("hello from kiln"), "stdout came back as text", plot);
  const img = plot.content.find((c) => c.type === "image");
  check(img && img.mimeType === "image/png" && img.data.length > 100, "a PNG image content arrived", plot);
  check(Buffer.from(img.data, "base64").subarray(1, 4).toString() === "PNG", "the image is a PNG");
  console.log(`ok: plot arrived as image/png (${img.data.length} base64 chars, ${progress} progress notifications)`);

  const s = await client.callTool({ name: "create_session", arguments: {} }, undefined, { timeout: 120000 });
  check(!s.isError, "create_session succeeded", s);
  const id = /session_id: (\S+)/.exec(text(s))?.[1];
  check(id, "create_session named the session", s);
  let r = await client.callTool({ name: "execute_code", arguments: { session_id: id, code: "x = 41" } });
  check(!r.isError, "set a variable", r);
  progress = 0;
  r = await client.callTool({ name: "execute_code", arguments: { session_id: id, code: "print(x + 1)" } },
    undefined, { onprogress: () => progress++ });
  check(!r.isError && text(r).includes("42"), "the variable was kept between calls", r);
  check(progress > 0, "execute_code sent progress notifications", r);
  console.log(`ok: session ${id} kept x between calls (${progress} progress notifications)`);

  r = await client.callTool({ name: "execute_code", arguments: { session_id: id, code: "import time\ntime.sleep(30)", timeout_ms: 500 } });
  check(r.isError === true && /timeout/.test(text(r)), "a cell stopped by its time limit is a tool error that says so", r);
  r = await client.callTool({ name: "execute_code", arguments: { session_id: id, code: "print(x)" } });
  check(!r.isError && text(r).includes("41"), "the session goes on after the timeout", r);
  console.log("ok: a timeout is a tool error, and the session kept its state");

  r = await client.callTool({ name: "write_file", arguments: { session_id: id, path: "notes/a.txt", content: "kiln was here\n" } });
  check(!r.isError, "write_file", r);
  r = await client.callTool({ name: "read_file", arguments: { session_id: id, path: "notes/a.txt" } });
  check(!r.isError && text(r).includes("kiln was here"), "read_file returns what write_file wrote", r);
  r = await client.callTool({ name: "execute_code", arguments: { session_id: id, code: "print(open('notes/a.txt').read().upper())" } });
  check(text(r).includes("KILN WAS HERE"), "the code sees the written file", r);
  r = await client.callTool({ name: "list_files", arguments: { session_id: id } });
  check(text(r).includes("notes/"), "list_files shows the directory", r);
  console.log("ok: wrote, read and listed a file");

  r = await client.callTool({ name: "execute_code", arguments: { session_id: id, code: "open('out.csv', 'w').write('a,b\\n1,2\\n')" } });
  const link = r.content.find((c) => c.type === "resource_link");
  check(link && link.uri.endsWith("/files/out.csv"), "a written file comes back as a resource link", r);
  const res = await client.readResource({ uri: link.uri });
  check(res.contents[0]?.text === "a,b\n1,2\n", "the resource link reads back the file", res);
  const { resourceTemplates } = await client.listResourceTemplates();
  check(resourceTemplates.some((t) => t.uriTemplate.includes("{session_id}")), "workspace files are a resource template", resourceTemplates);
  console.log("ok: artifact " + link.uri + " read as a resource");

  check(text(s).includes("network: none"), "create_session says the session's network policy", s);
  r = await client.callTool({ name: "execute_code", arguments: { session_id: id,
    code: "import urllib.request as u\ntry: u.urlopen('http://example.com/', timeout=20)\nexcept Exception as e: print('refused')" } });
  check(/network:\nexample\.com:80 denied: network policy is none/.test(text(r)), "the result's text lists the denied attempt with the policy's reason", r);
  const egress = text(r).slice(text(r).indexOf("network:"));
  r = await client.callTool({ name: "install_packages", arguments: { session_id: id, manager: "pip", packages: ["requests"] } });
  check(r.isError === true && /none/.test(text(r)), "install_packages under none is a tool error naming the policy", r);
  console.log("ok: egress in the text (" + JSON.stringify(egress) + "), install_packages refused under none");

  r = await client.callTool({ name: "run_code", arguments: { language: "klingon", code: "Qapla'" } });
  check(r.isError === true, "an unknown language is a tool error", r);
  check(/klingon/.test(text(r)) && /language/i.test(text(r)), "the tool error names the language", r);
  console.log("ok: unknown language is a tool error: " + text(r).slice(0, 200));

  r = await client.callTool({ name: "close_session", arguments: { session_id: id } });
  check(!r.isError, "close_session", r);
  r = await client.callTool({ name: "execute_code", arguments: { session_id: id, code: "1" } });
  check(r.isError === true, "a closed session is a tool error", r);
  console.log("ok: closed the session");
  await client.close();
}

main().then(() => process.exit(0), (e) => fail(e?.stack ?? String(e)));
