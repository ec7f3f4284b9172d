package jupyter

import (
	"encoding/binary"
	"encoding/json"
	"testing"
)

// clientV1 makes a v1 message as JupyterLab does.
func clientV1(channel string, parts ...string) []byte {
	all := append([]string{channel}, parts...)
	n := len(all) + 1
	out := make([]byte, 8*(n+1))
	binary.LittleEndian.PutUint64(out, uint64(n))
	off := uint64(len(out))
	for i, p := range all {
		binary.LittleEndian.PutUint64(out[8*(i+1):], off)
		off += uint64(len(p))
	}
	binary.LittleEndian.PutUint64(out[8*n:], off)
	for _, p := range all {
		out = append(out, p...)
	}
	return out
}

func TestV1RoundTrip(t *testing.T) {
	m, err := parseV1(clientV1("shell", `{"msg_id": "1", "msg_type": "execute_request"}`, `{}`, `{}`, `{"code": "1+1"}`))
	if err != nil || m.Channel != "shell" || m.hdr.MsgType != "execute_request" || string(m.Content) != `{"code": "1+1"}` {
		t.Fatalf("parse: %+v %v", m, err)
	}
	b, err := encodeV1(outMsg{Channel: "iopub", Header: header{MsgID: "2", MsgType: "status"}, ParentHeader: m.Header,
		Metadata: map[string]any{}, Content: map[string]string{"execution_state": "idle"}})
	if err != nil {
		t.Fatal(err)
	}
	// Read it back as jupyter_server's deserialize_msg_from_ws_v1 does.
	n := binary.LittleEndian.Uint64(b)
	off := func(i uint64) uint64 { return binary.LittleEndian.Uint64(b[8*(i+1):]) }
	if n != 6 || off(n-1) != uint64(len(b)) {
		t.Fatalf("%d offsets, the last %d of %d bytes", n, off(n-1), len(b))
	}
	var parent, content map[string]any
	json.Unmarshal(b[off(2):off(3)], &parent)
	json.Unmarshal(b[off(4):off(5)], &content)
	if string(b[off(0):off(1)]) != "iopub" || parent["msg_id"] != "1" || content["execution_state"] != "idle" {
		t.Errorf("channel %q, parent %v, content %v", b[off(0):off(1)], parent, content)
	}
}

func TestV1RefusesGarbage(t *testing.T) {
	good := clientV1("shell", `{"msg_id": "1", "msg_type": "x"}`, `{}`, `{}`, `{}`)
	huge := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	backwards := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(backwards[16:], 0)
	past := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(past[24:], 1<<40)
	for name, data := range map[string][]byte{"empty": nil, "short": good[:7], "a huge count": huge, "an offset into the table": backwards,
		"an offset past the end": past, "a header that is not JSON": clientV1("shell", `{`, `{}`, `{}`, `{}`)} {
		if _, err := parseV1(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzParseV1(f *testing.F) {
	f.Add(clientV1("shell", `{"msg_id": "1", "msg_type": "x"}`, `{}`, `{}`, `{}`))
	f.Fuzz(func(t *testing.T, data []byte) { parseV1(data) })
}
