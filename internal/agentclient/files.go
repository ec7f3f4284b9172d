package agentclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

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

// WriteFrom streams r into a workspace file, creating or replacing it, in
// chunks that each fit a frame, so a large file never sits in memory
// whole. It returns the bytes written. If it fails after the first chunk,
// the file holds what was written so far.
func (c *Client) WriteFrom(ctx context.Context, path string, r io.Reader, mode uint32) (int64, error) {
	return c.writeFrom(ctx, path, r, mode, false)
}

// CreateFrom is WriteFrom for a file that must not exist yet: if anything
// is there (a symlink too), it fails with code protocol.ErrExists and
// writes nothing.
func (c *Client) CreateFrom(ctx context.Context, path string, r io.Reader, mode uint32) (int64, error) {
	return c.writeFrom(ctx, path, r, mode, true)
}

func (c *Client) writeFrom(ctx context.Context, path string, r io.Reader, mode uint32, exclusive bool) (int64, error) {
	buf := make([]byte, protocol.ChunkSize)
	var total int64
	for first := true; ; first = false {
		n, rerr := io.ReadFull(r, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return total, rerr
		}
		// The first write happens even when r is empty: it makes the file.
		if n > 0 || first {
			op := protocol.FileOp{Op: protocol.FileWrite, Path: path, Data: buf[:n], Mode: mode,
				Append: !first, Exclusive: first && exclusive}
			if _, err := c.fileOp(ctx, op, nil); err != nil {
				return total, err
			}
			total += int64(n)
		}
		if rerr != nil {
			return total, nil
		}
	}
}

// ReadFile reads up to limit bytes of a workspace file.
func (c *Client) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := c.ReadTo(ctx, path, &buf, limit)
	return buf.Bytes(), err
}

// ReadTo streams up to limit bytes of a workspace file into w as the
// agent's data chunks arrive, and returns how many it wrote. A file over
// protocol.MaxRead takes several requests. An error from w ends the read
// and is returned as it is.
func (c *Client) ReadTo(ctx context.Context, path string, w io.Writer, limit int64) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("read %s: the limit must be positive, not %d", path, limit)
	}
	var total int64
	for total < limit {
		ask := min(limit-total, protocol.MaxRead)
		var got int64
		op := protocol.FileOp{Op: protocol.FileRead, Path: path, Offset: total, Limit: ask}
		_, err := c.fileOp(ctx, op, func(m *protocol.Message) error {
			if m.Type != protocol.TData {
				return fmt.Errorf("unexpected %q event during read", m.Type)
			}
			var d protocol.Data
			if err := m.Decode(&d); err != nil {
				return err
			}
			// The agent is not trusted to respect the limit.
			if got+int64(len(d.Data)) > ask {
				return fmt.Errorf("agent sent more than the %d bytes asked for", ask)
			}
			n, err := w.Write(d.Data)
			got += int64(n)
			return err
		})
		total += got
		if err != nil {
			return total, err
		}
		if got < ask {
			break // end of file
		}
	}
	return total, nil
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

// Move renames a workspace entry, creating the target's parents. Without
// overwrite an existing target fails with code protocol.ErrExists; with
// it, a file or an empty directory there is replaced. A directory cannot
// move into itself, and neither name can leave the workspace.
func (c *Client) Move(ctx context.Context, from, to string, overwrite bool) error {
	_, err := c.fileOp(ctx, protocol.FileOp{Op: protocol.FileMove, Path: from, To: to, Overwrite: overwrite}, nil)
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

// ErrorCode returns the protocol.Err* code of an error the agent reported
// (not_found, exists, not_dir, is_dir, not_empty, no_space, too_large,
// invalid, ...), or "" for any other error: a broken connection, a
// canceled context, a writer's error.
func ErrorCode(err error) string {
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	return ""
}

// Is lets errors.Is(err, fs.ErrNotExist) and errors.Is(err, fs.ErrExist)
// work on the agent's file errors as on local ones.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == protocol.ErrNotFound
	case fs.ErrExist:
		return e.Code == protocol.ErrExists
	}
	return false
}
