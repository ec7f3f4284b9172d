"""Runs testdata/sample.ipynb with nbclient and prints its outputs, in a
form that can be compared, as one JSON document.

    nbrun.py local          a local ipykernel (Debian's python3-ipykernel)
    nbrun.py kiln URL KEY   a kernel of kiln, through its gateway API

nbclient takes a kernel manager; for kiln it gets one that starts the
kernel over kiln's REST API and a client that carries nbclient's
messages, made by jupyter_client's Session, over the kernel WebSocket.
"""
import asyncio
import json
import os
import queue
import sys
import urllib.error
import urllib.request

import nbformat
from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from nbclient import NotebookClient
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

HERE = os.path.dirname(os.path.abspath(__file__))


class Channel:
    def __init__(self):
        self.q = asyncio.Queue()

    async def get_msg(self, timeout=None):
        try:
            return await asyncio.wait_for(self.q.get(), timeout)
        except asyncio.TimeoutError:
            raise queue.Empty()


class GatewayClient:
    """The part of jupyter_client's KernelClient that nbclient uses."""

    def __init__(self, km):
        self.km = km
        self.session = Session(username="nbclient")
        self.shell_channel, self.iopub_channel, self.stdin_channel, self.control_channel = Channel(), Channel(), Channel(), Channel()
        self.allow_stdin = False
        self.ws = None

    async def start_channels(self):
        url = self.km.url.replace("http", "ws", 1) + "/api/kernels/" + self.km.kernel_id + "/channels"
        self.ws = await websocket_connect(HTTPRequest(url, headers=self.km.headers))
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self):
        while True:
            raw = await self.ws.read_message()
            if raw is None:
                return
            msg = json.loads(raw)
            getattr(self, msg.pop("channel") + "_channel").q.put_nowait(msg)

    def _send(self, channel, msg_type, content):
        msg = self.session.msg(msg_type, content)
        msg["channel"] = channel
        self.ws.write_message(json.dumps(msg, default=json_default))
        return msg["header"]["msg_id"]

    async def wait_for_ready(self, timeout=None):
        mid = self.kernel_info()
        while True:
            reply = await self.shell_channel.get_msg(timeout)
            if reply["parent_header"].get("msg_id") == mid:
                return

    def kernel_info(self):
        return self._send("shell", "kernel_info_request", {})

    def execute(self, code, silent=False, store_history=True, user_expressions=None, allow_stdin=None, stop_on_error=True):
        return self._send("shell", "execute_request", {"code": code, "silent": silent, "store_history": store_history,
                                                       "user_expressions": user_expressions or {},
                                                       "allow_stdin": bool(allow_stdin), "stop_on_error": stop_on_error})

    async def is_alive(self):
        return await self.km.is_alive()

    def stop_channels(self):
        if self.ws is not None:
            self.ws.close()
            self.reader.cancel()


class GatewayKernelManager:
    """The part of jupyter_client's KernelManager that nbclient uses."""

    ipykernel = False

    def __init__(self, url, key, kernel_name):
        self.url, self.kernel_name, self.kernel_id = url, kernel_name, None
        self.headers = {"Authorization": "token " + key, "Content-Type": "application/json"}

    @property
    def has_kernel(self):
        return self.kernel_id is not None

    def _rest(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    async def start_kernel(self, **kwargs):
        code, body = self._rest("POST", "/api/kernels", {"name": self.kernel_name})
        if code != 201:
            raise RuntimeError("start kernel: %s %s" % (code, body))
        self.kernel_id = json.loads(body)["id"]

    def client(self):
        return GatewayClient(self)

    async def is_alive(self):
        return self.kernel_id is not None and self._rest("GET", "/api/kernels/" + self.kernel_id)[0] == 200

    async def interrupt_kernel(self):
        self._rest("POST", "/api/kernels/" + self.kernel_id + "/interrupt")

    async def shutdown_kernel(self, now=False, restart=False):
        self._rest("DELETE", "/api/kernels/" + self.kernel_id)
        self.kernel_id = None

    async def cleanup_resources(self, restart=False):
        pass


def comparable(nb):
    """Each code cell's outputs: the text of each stream, the text/plain of
    results and displays with their MIME types, errors by name and value.
    Streams are compared per name: the order of stdout against stderr is
    not the protocol's to keep (ipykernel sends each on its own flush
    schedule, kiln as the sandbox's pipes deliver them)."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        streams, outs = {}, []
        for o in cell.outputs:
            if o.output_type == "stream":
                streams[o.name] = streams.get(o.name, "") + o.text
            elif o.output_type in ("execute_result", "display_data"):
                outs.append({"type": o.output_type, "text": o.data.get("text/plain"), "mimes": sorted(o.data)})
            elif o.output_type == "error":
                outs.append({"type": "error", "ename": o.ename, "evalue": o.evalue})
        cells.append({"streams": streams, "outputs": outs})
    return cells


async def main():
    nb = nbformat.read(os.path.join(HERE, "sample.ipynb"), as_version=4)
    if sys.argv[1] == "local":
        client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True)
        await client.async_execute()
    else:
        km = GatewayKernelManager(sys.argv[2], sys.argv[3], "python3")
        client = NotebookClient(nb, km=km, timeout=120, kernel_name="python3", allow_errors=True)
        try:
            await client.async_execute()
        finally:
            if client.kc is not None:
                client.kc.stop_channels()
            if km.has_kernel:
                await km.shutdown_kernel()
    counts = [c.get("execution_count") for c in nb.cells if c.cell_type == "code"]
    print(json.dumps({"cells": comparable(nb), "counts": counts, "language": nb.metadata.get("language_info", {}).get("name")}))


asyncio.run(main())
