// A terminal tab: xterm.js attached over a WebSocket to a shell on a pty in
// the session's sandbox (GET /v1/sessions/{id}/terminal). Binary frames
// carry the terminal's bytes both ways; text frames are JSON control
// messages (resize from here, exit from the server). Closing the tab hangs
// the shell up; the session stays.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import { h } from "./dom";

export interface TerminalPanel {
  el: HTMLElement;
  // show fits the terminal to its pane; call it when the tab is shown.
  show(): void;
  dispose(): void;
}

export function openTerminal(sessionID: string, dark: boolean): TerminalPanel {
  const status = h("span", { class: "muted", "aria-live": "polite" }, "connecting…");
  const screen = h("div", { class: "term-screen" });
  const el = h("div", { class: "term-tab" }, h("div", { class: "file-bar" }, h("strong", {}, "Terminal"), " ", status), screen);
  const term = new Terminal({
    cursorBlink: true,
    fontSize: 13,
    scrollback: 5000,
    theme: dark ? { background: "#1e1e1e" } : { background: "#ffffff", foreground: "#1e1e1e", cursor: "#1e1e1e", selectionBackground: "#b4d5fe" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(screen);
  const textarea = screen.querySelector("textarea");
  textarea?.setAttribute("aria-label", "terminal input");
  try {
    fit.fit();
  } catch {
    // not laid out yet: show() fits it
  }
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/v1/sessions/${encodeURIComponent(sessionID)}/terminal?rows=${term.rows}&cols=${term.cols}`);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  ws.onopen = () => {
    // The tab may have been laid out (and fitted) while the socket opened.
    ws.send(JSON.stringify({ type: "resize", rows: term.rows, cols: term.cols }));
    status.textContent = "connected";
    term.focus();
  };
  ws.onmessage = (m) => {
    if (m.data instanceof ArrayBuffer) {
      term.write(new Uint8Array(m.data));
      return;
    }
    try {
      const c = JSON.parse(m.data as string) as { type: string; code?: number; signal?: string };
      if (c.type === "exit") status.textContent = c.signal ? `the shell was ended by ${c.signal}` : `the shell exited with ${c.code}`;
    } catch {
      // the server sends only JSON text frames; ignore anything else
    }
  };
  ws.onclose = (e) => {
    if (!/exited|ended by/.test(status.textContent ?? "")) status.textContent = e.reason ? `disconnected: ${e.reason}` : "disconnected";
    term.options.disableStdin = true;
  };
  term.onData((d) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d));
  });
  term.onBinary((d) => {
    if (ws.readyState !== WebSocket.OPEN) return;
    const b = new Uint8Array(d.length);
    for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 0xff;
    ws.send(b);
  });
  term.onResize(({ rows, cols }) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", rows, cols }));
  });
  const onWindow = () => show();
  window.addEventListener("resize", onWindow);
  function show(): void {
    if (!el.isConnected) return;
    try {
      fit.fit();
    } catch {
      // hidden
    }
    term.focus();
  }
  return {
    el,
    show,
    dispose() {
      window.removeEventListener("resize", onWindow);
      ws.close(1000);
      term.dispose();
    },
  };
}
