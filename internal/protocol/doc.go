// Package protocol is the wire format between the service and the kiln agent
// inside a sandbox: length-prefixed JSON frames on one byte stream, with
// request ids so that many requests share the connection and results stream
// back as events.
//
// A frame is a 4-byte big-endian length followed by that many bytes of one
// JSON-encoded Message. Frames larger than MaxFrame are refused by both ends.
// The first message each way is a Hello carrying Version; a peer that speaks
// another version is refused before anything else is said.
package protocol
