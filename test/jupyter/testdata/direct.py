"""jupyter_client as a direct client of kiln's kernel WebSocket.

Messages are made and read by jupyter_client's own Session (headers,
msg_id, protocol version); the transport is tornado's WebSocket client,
as the notebook server's gateway client uses. Usage:
    direct.py URL KEY
Prints one JSON line per check; exits 1 on the first failure.
"""
import json
import re
import sys
import urllib.error
import urllib.request

from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from tornado.httpclient import HTTPRequest
from tornado.ioloop import IOLoop
from tornado.websocket import websocket_connect

URL, KEY = sys.argv[1], sys.argv[2]
HEADERS = {"Authorization": "token " + KEY}


def rest(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
    req = urllib.request.Request(URL + path, data=data, method=method,
                                 headers=dict(HEADERS, **{"Content-Type": "application/json"}))
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            code, body = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read()
    return code, (json.loads(body) if body else None)


def fail(what, got):
    print(json.dumps({"fail": what, "got": got}, default=json_default))
    sys.exit(1)


class Kernel:
    def __init__(self, ws):
        self.ws = ws
        self.session = Session(username="tester")

    async def send(self, channel, msg_type, content):
        msg = self.session.msg(msg_type, content)
        msg["channel"] = channel
        self.ws.write_message(json.dumps(msg, default=json_default))
        return msg

    async def recv(self):
        raw = await self.ws.read_message()
        if raw is None:
            fail("websocket closed", None)
        return json.loads(raw)

    async def request(self, msg_type, content, channel="shell", on_input=None):
        """Send a request; collect its iopub messages until idle and its reply."""
        req = await self.send(channel, msg_type, content)
        mid = req["header"]["msg_id"]
        iopub, reply, idle = [], None, False
        while reply is None or (channel == "shell" and not idle):
            m = await self.recv()
            if m["parent_header"].get("msg_id") != mid:
                continue
            for key in ("msg_id", "session", "username", "date", "msg_type", "version"):
                if key not in m["header"]:
                    fail("header without " + key, m)
            if m["header"]["version"] != "5.3":
                fail("protocol version", m["header"])
            if m["parent_header"] != json.loads(json.dumps(req["header"], default=json_default)):
                fail("parent_header does not echo the request header", [m["parent_header"], req["header"]])
            ch = m["channel"]
            if ch == "iopub":
                if m["msg_type"] == "status":
                    idle = m["content"]["execution_state"] == "idle"
                else:
                    iopub.append(m)
            elif ch == "stdin" and m["msg_type"] == "input_request":
                if on_input is None:
                    fail("unexpected input_request", m)
                await self.send("stdin", "input_reply", {"value": on_input(m["content"])})
            elif ch == channel:
                reply = m
        return reply, iopub

    async def execute(self, code, allow_stdin=False, on_input=None):
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": allow_stdin, "stop_on_error": True}
        return await self.request("execute_request", content, on_input=on_input)


def types(iopub):
    return [m["msg_type"] for m in iopub]


async def main():
    code, kernel = rest("POST", "/api/kernels", {"name": "python3"})
    if code != 201:
        fail("start kernel", [code, kernel])
    print(json.dumps({"ok": "start", "id": kernel["id"]}))
    code, listed = rest("GET", "/api/kernels")
    if code != 200 or kernel["id"] not in [k["id"] for k in listed]:
        fail("list kernels", [code, listed])
    conn = await websocket_connect(HTTPRequest(URL.replace("http", "ws", 1) + "/api/kernels/" + kernel["id"] + "/channels", headers=HEADERS))
    k = Kernel(conn)

    reply, _ = await k.request("kernel_info_request", {})
    c = reply["content"]
    if reply["msg_type"] != "kernel_info_reply" or c["protocol_version"] != "5.3" or c["language_info"]["name"] != "python" \
            or not re.fullmatch(r"3\.\d+\.\d+", c["language_info"]["version"]):
        fail("kernel_info", reply)
    print(json.dumps({"ok": "kernel_info"}))

    reply, iopub = await k.execute("1+1")
    res = [m for m in iopub if m["msg_type"] == "execute_result"]
    if reply["content"]["status"] != "ok" or not res or res[0]["content"]["data"]["text/plain"] != "2":
        fail("1+1", [reply, iopub])
    n = reply["content"]["execution_count"]
    if res[0]["content"]["execution_count"] != n or types(iopub)[0] != "execute_input":
        fail("execution_count", [reply, iopub])
    print(json.dumps({"ok": "execute_result", "count": n}))

    reply, iopub = await k.execute("print('hello from kiln')")
    text = "".join(m["content"]["text"] for m in iopub if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
    if text != "hello from kiln\n" or reply["content"]["execution_count"] != n + 1:
        fail("print", [reply, iopub])
    print(json.dumps({"ok": "stream"}))

    reply, iopub = await k.execute("1/0")
    errs = [m for m in iopub if m["msg_type"] == "error"]
    if reply["content"]["status"] != "error" or not errs or errs[0]["content"]["ename"] != "ZeroDivisionError" \
            or reply["content"]["ename"] != "ZeroDivisionError" or not isinstance(errs[0]["content"]["traceback"], list):
        fail("error", [reply, iopub])
    print(json.dumps({"ok": "error", "evalue": errs[0]["content"]["evalue"]}))

    prompts = []

    def answer(content):
        prompts.append(content["prompt"])
        return "Ada"
    reply, iopub = await k.execute("name = input('Your name: ')\nprint('hi', name)", allow_stdin=True, on_input=answer)
    text = "".join(m["content"]["text"] for m in iopub if m["msg_type"] == "stream")
    if prompts != ["Your name: "] or "hi Ada" not in text or reply["content"]["status"] != "ok":
        fail("input", [prompts, reply, iopub])
    print(json.dumps({"ok": "input", "prompt": prompts[0], "stream": text}))

    secrets = []

    def secret(content):
        secrets.append(content)
        return "hunter2"
    reply, iopub = await k.execute("import getpass\nprint(len(getpass.getpass('Secret: ')))", allow_stdin=True, on_input=secret)
    text = "".join(m["content"]["text"] for m in iopub if m["msg_type"] == "stream")
    if len(secrets) != 1 or secrets[0] != {"prompt": "Secret: ", "password": True} or text != "7\n":
        fail("getpass", [secrets, reply, iopub])
    print(json.dumps({"ok": "password"}))

    reply, _ = await k.request("complete_request", {"code": "import os\nos.pa", "cursor_pos": 14})
    if reply["content"]["status"] != "ok" or "path" not in [m.split(".")[-1] for m in reply["content"]["matches"]]:
        fail("complete", reply)
    print(json.dumps({"ok": "complete", "matches": reply["content"]["matches"][:5]}))

    reply, _ = await k.request("is_complete_request", {"code": "for i in range(3):"})
    if reply["content"]["status"] != "incomplete":
        fail("is_complete incomplete", reply)
    reply, _ = await k.request("is_complete_request", {"code": "x = 1"})
    if reply["content"]["status"] != "complete":
        fail("is_complete complete", reply)
    print(json.dumps({"ok": "is_complete"}))

    reply, _ = await k.request("inspect_request", {"code": "len", "cursor_pos": 3, "detail_level": 0})
    if reply["content"]["status"] != "ok" or "found" not in reply["content"]:
        fail("inspect", reply)
    reply, _ = await k.request("comm_info_request", {})
    if reply["content"]["status"] != "ok":
        fail("comm_info", reply)
    print(json.dumps({"ok": "inspect_comm"}))

    # interrupt_request on the control channel stops a running cell.
    run = await k.send("shell", "execute_request", {"code": "import time\nprint('looping', flush=True)\nwhile True:\n    time.sleep(0.1)", "silent": False,
                                                     "store_history": True, "user_expressions": {}, "allow_stdin": False})
    run_id, intr_id, exec_reply, intr_reply, ename = run["header"]["msg_id"], None, None, None, None
    while exec_reply is None or intr_reply is None:
        m = await k.recv()
        pid = m["parent_header"].get("msg_id")
        if pid == run_id and m["msg_type"] == "stream" and intr_id is None:  # the loop runs
            intr_id = (await k.send("control", "interrupt_request", {}))["header"]["msg_id"]
        elif pid == run_id and m["msg_type"] == "error":
            ename = m["content"]["ename"]
        elif pid == run_id and m["msg_type"] == "execute_reply":
            exec_reply = m
        elif intr_id is not None and pid == intr_id and m["msg_type"] == "interrupt_reply":
            intr_reply = m
    if intr_reply["channel"] != "control" or intr_reply["content"]["status"] != "ok" or ename != "KeyboardInterrupt" \
            or exec_reply["content"]["status"] != "error":
        fail("interrupt_request", [intr_reply, exec_reply, ename])
    print(json.dumps({"ok": "interrupt"}))

    reply, _ = await k.request("shutdown_request", {"restart": True}, channel="control")
    if reply["msg_type"] != "shutdown_reply" or reply["content"]["status"] != "ok":
        fail("restart", reply)
    reply, iopub = await k.execute("'name' in dir()")
    res = [m for m in iopub if m["msg_type"] == "execute_result"]
    if not res or res[0]["content"]["data"]["text/plain"] != "False" or reply["content"]["execution_count"] != 1:
        fail("state after restart", [reply, iopub])
    print(json.dumps({"ok": "restart"}))

    conn.close()
    code, _ = rest("DELETE", "/api/kernels/" + kernel["id"])
    if code != 204:
        fail("delete", code)
    code, _ = rest("GET", "/api/kernels/" + kernel["id"])
    if code != 404:
        fail("get after delete", code)
    print(json.dumps({"ok": "delete"}))


IOLoop.current().run_sync(main, timeout=300)
