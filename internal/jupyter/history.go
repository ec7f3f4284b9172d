package jupyter

import (
	"context"
	"encoding/json"
	"path"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// maxHistory bounds the cells a history_request reads from the
// session's history.
const maxHistory = 10000

// history answers a history_request from the kiln session's own history
// (every cell, across kernel restarts), as IPython answers from its
// database: entries [session, line, input], line being the cell's number
// in the kiln session. Only the current session (0) is known.
func (k *kernel) history(m *inMsg) {
	var c struct {
		Output         bool   `json:"output"`
		HistAccessType string `json:"hist_access_type"`
		Session        int    `json:"session"`
		Start          int64  `json:"start"`
		Stop           int64  `json:"stop"`
		N              int    `json:"n"`
		Pattern        string `json:"pattern"`
	}
	json.Unmarshal(m.Content, &c)
	entries := []any{}
	cells, err := k.cells(k.ctx)
	if err != nil {
		k.reply(m, "history_reply", errorContent("HistoryError", kiln.Message(err)))
		return
	}
	if c.Session == 0 {
		switch c.HistAccessType {
		case "tail":
			if c.N > 0 && len(cells) > c.N {
				cells = cells[len(cells)-c.N:]
			}
		case "range":
			var in []histCell
			for _, h := range cells {
				if h.seq >= c.Start && (c.Stop <= 0 || h.seq < c.Stop) {
					in = append(in, h)
				}
			}
			cells = in
		case "search":
			pattern := c.Pattern
			if pattern == "" {
				pattern = "*"
			}
			var in []histCell
			for _, h := range cells {
				if ok, _ := path.Match(pattern, h.code); ok {
					in = append(in, h)
				}
			}
			if c.N > 0 && len(in) > c.N {
				in = in[len(in)-c.N:]
			}
			cells = in
		default:
			cells = nil
		}
		for _, h := range cells {
			if c.Output {
				entries = append(entries, []any{0, h.seq, []any{h.code, nil}})
			} else {
				entries = append(entries, []any{0, h.seq, h.code})
			}
		}
	}
	k.reply(m, "history_reply", map[string]any{"status": "ok", "history": entries})
}

type histCell struct {
	seq  int64
	code string
}

// cells reads the session's history, oldest first, up to maxHistory.
func (k *kernel) cells(ctx context.Context) ([]histCell, error) {
	var out []histCell
	page := store.Page{Limit: store.MaxLimit}
	for len(out) < maxHistory {
		es, next, err := k.g.svc.History(ctx, k.owner, k.session, page)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			out = append(out, histCell{seq: e.Seq, code: e.Code})
		}
		if next == "" {
			break
		}
		page.Cursor = next
	}
	return out, nil
}
