package jupyter

import (
	"encoding/binary"
	"encoding/json"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// SubprotocolV1 is Jupyter Server's binary kernel WebSocket protocol,
// used when a client offers it (JupyterLab does); other clients get the
// JSON form. A message is a count of offsets and the offsets (64-bit
// little-endian), then the channel's name, the header, the parent
// header, the metadata and the content (JSON), then any buffers; the
// last offset is the message's end.
const SubprotocolV1 = "v1.kernel.websocket.jupyter.org"

// parseV1 reads a message of the v1 protocol. Buffers (binary parts of
// comm messages) are not taken: kiln's kernels have no comms.
func parseV1(data []byte) (inMsg, error) {
	bad := func(why string) (inMsg, error) {
		return inMsg{}, kiln.Errorf(kiln.Invalid, "a message of the %s protocol %s", SubprotocolV1, why)
	}
	if len(data) < 8 {
		return bad("is too short")
	}
	n := binary.LittleEndian.Uint64(data)
	if n < 6 || n > uint64(len(data))/8 || 8*(n+1) > uint64(len(data)) {
		return bad("has a wrong number of parts (channel, header, parent_header, metadata, content, end)")
	}
	offsets := make([]uint64, n)
	for i := range offsets {
		offsets[i] = binary.LittleEndian.Uint64(data[8*(i+1):])
		if offsets[i] > uint64(len(data)) || offsets[i] < 8*(n+1) || i > 0 && offsets[i] < offsets[i-1] {
			return bad("has offsets outside it or out of order")
		}
	}
	part := func(i int) []byte { return data[offsets[i]:offsets[i+1]] }
	m := inMsg{Channel: string(part(0)), Header: json.RawMessage(part(1)), Content: json.RawMessage(part(4))}
	if !json.Valid(m.Header) || len(part(4)) > 0 && !json.Valid(m.Content) {
		return bad("has a header or content that is not JSON")
	}
	return checkMessage(m)
}

// encodeV1 writes m in the v1 protocol.
func encodeV1(m outMsg) ([]byte, error) {
	parts := [][]byte{[]byte(m.Channel)}
	for _, v := range []any{m.Header, m.ParentHeader, m.Metadata, m.Content} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		parts = append(parts, b)
	}
	n := len(parts) + 1
	out := make([]byte, 8*(n+1))
	binary.LittleEndian.PutUint64(out, uint64(n))
	offset := uint64(len(out))
	for i, p := range parts {
		binary.LittleEndian.PutUint64(out[8*(i+1):], offset)
		offset += uint64(len(p))
	}
	binary.LittleEndian.PutUint64(out[8*n:], offset)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}
