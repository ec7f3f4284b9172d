package agentclient

import (
	"bytes"
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/internal/protocol"
)

func (c *Client) fileOp(ctx context.Context, op protocol.FileOp, each func(*protocol.Message) error) (protocol.FileResult, error) {
	id, ch, err := c.request(protocol.TFileOp, op)
	if err != nil {
		return protocol.FileResult{}, err
	}
	defer c.forget(id)
	m, err := c.final(ctx, ch, each)
	if err != nil {
		return protocol.FileResult{}, err
	}
	var res protocol.FileResult
	if len(m.Body) > 0 {
		err = m.Decode(&res)
	}
	return res, err
}

// WriteFile creates or replaces a file in the workspace, in chunks that
// each fit a frame.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	first := true
	for first || len(data) > 0 {
		n := min(len(data), protocol.ChunkSize)
		op := protocol.FileOp{Op: protocol.FileWrite, Path: path, Data: data[:n], Mode: mode, Append: !first}
		if _, err := c.fileOp(ctx, op, nil); err != nil {
			return err
		}
		data = data[n:]
		first = false
	}
	return nil
}

// ReadFile reads up to limit bytes of a workspace file.
func (c *Client) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := c.fileOp(ctx, protocol.FileOp{Op: protocol.FileRead, Path: path, Limit: limit}, func(m *protocol.Message) error {
		if m.Type != protocol.TData {
			return fmt.Errorf("unexpected %q event during read", m.Type)
		}
		var d protocol.Data
		if err := m.Decode(&d); err != nil {
			return err
		}
		if int64(buf.Len()+len(d.Data)) > limit {
			return fmt.Errorf("agent sent more than the %d bytes asked for", limit)
		}
		buf.Write(d.Data)
		return nil
	})
	return buf.Bytes(), err
}

// List lists a workspace directory.
func (c *Client) List(ctx context.Context, path string) ([]protocol.FileInfo, error) {
	res, err := c.fileOp(ctx, protocol.FileOp{Op: protocol.FileList, Path: path}, nil)
	return res.Entries, err
}

// Stat describes one workspace entry without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (protocol.FileInfo, error) {
	res, err := c.fileOp(ctx, protocol.FileOp{Op: protocol.FileStat, Path: path}, nil)
	if err == nil && res.Info == nil {
		err = fmt.Errorf("agent answered stat without info")
	}
	if err != nil {
		return protocol.FileInfo{}, err
	}
	return *res.Info, nil
}

// Delete removes a file or an empty directory, or a whole tree if recursive.
func (c *Client) Delete(ctx context.Context, path string, recursive bool) error {
	_, err := c.fileOp(ctx, protocol.FileOp{Op: protocol.FileDelete, Path: path, Recursive: recursive}, nil)
	return err
}

// Mkdir creates a directory and its parents.
func (c *Client) Mkdir(ctx context.Context, path string) error {
	_, err := c.fileOp(ctx, protocol.FileOp{Op: protocol.FileMkdir, Path: path}, nil)
	return err
}

// Walk lists every regular file of the workspace with its path, size and
// time (protocol.FileWalk), for comparing before and after a program.
func (c *Client) Walk(ctx context.Context) ([]protocol.FileInfo, error) {
	res, err := c.fileOp(ctx, protocol.FileOp{Op: protocol.FileWalk}, nil)
	return res.Entries, err
}
