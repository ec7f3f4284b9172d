package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/batch"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
	"github.com/kiln-dev/kiln/internal/store"
)

// createBatch starts a batch. With "Accept: text/event-stream" it streams
// an item event per result as items finish, then done with the batch;
// otherwise it answers 202 with the batch at once.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request, c *call) error {
	var req client.BatchRequest
	if err := decode(w, r, s.cfg.MaxRunBytes, &req); err != nil {
		return err
	}
	br := service.BatchRequest{Cache: req.Cache, Items: make([]batch.Item, len(req.Items)),
		Network: req.Network, Packages: req.Packages, PackageManager: req.PackageManager}
	for i, it := range req.Items {
		br.Items[i] = toBatchItem(it)
	}
	sum, watch, err := s.svc.CreateBatch(r.Context(), c.user, br)
	if err != nil {
		return err
	}
	// Results are kept for the watch only while it is read: not at all
	// for a 202, and not after the client of a stream has left.
	defer watch.Stop()
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return writeJSON(w, http.StatusAccepted, toBatch(sum))
	}
	st := newSSE(w)
	defer st.close()
	st.start()
	for {
		select {
		case res, ok := <-watch.Results:
			if !ok {
				// Done, or the service stops (the batch resumes at its
				// next start): the batch as the store has it says which.
				sum, err := s.svc.Batch(r.Context(), c.user, sum.ID)
				if err == nil && sum.Status != store.BatchDone {
					err = kiln.Errorf(kiln.Unavailable, "kiln is stopping; batch %s goes on when it starts again (GET /v1/batches/%s)", sum.ID, sum.ID)
				}
				if err != nil {
					p := problemFor(err)
					st.sendBatch(client.BatchEvent{Type: "error", Error: &p})
					return nil
				}
				b := toBatch(sum)
				st.sendBatch(client.BatchEvent{Type: "done", Batch: &b})
				return nil
			}
			item := toItemResult(res)
			st.sendBatch(client.BatchEvent{Type: "item", Item: &item})
		case <-r.Context().Done():
			return nil // the client left; the batch goes on
		}
	}
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request, c *call) error {
	sum, err := s.svc.Batch(r.Context(), c.user, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toBatch(sum))
}

func (s *Server) batchItems(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := page(r)
	if err != nil {
		return err
	}
	items, next, err := s.svc.BatchItems(r.Context(), c.user, r.PathValue("id"), p)
	if err != nil {
		return err
	}
	out := client.BatchItemList{Items: make([]client.BatchItemResult, 0, len(items)), NextCursor: next}
	for _, it := range items {
		out.Items = append(out.Items, toItemResult(it))
	}
	return writeJSON(w, http.StatusOK, out)
}

// sendBatch writes one batch event, named by its type.
func (s *sse) sendBatch(e client.BatchEvent) {
	s.start()
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Write([]byte("event: " + e.Type + "\ndata: "))
	s.w.Write(b)
	s.w.Write([]byte("\n\n"))
	s.rc.Flush()
}

func toBatchItem(it client.BatchItem) batch.Item {
	out := batch.Item{ID: it.ID, Language: it.Language, Code: it.Code, FileName: it.FileName, Stdin: it.Stdin, Args: it.Args, BuildOptions: it.BuildOptions,
		Limits: toLimits(it.Limits), Packages: it.Packages, PackageManager: it.PackageManager,
		Check: batch.Check{ExitCode: it.Check.ExitCode, Stdout: it.Check.Stdout, Trim: it.Check.Trim, Test: it.Check.Test}}
	for _, f := range it.Files {
		out.Files = append(out.Files, batch.File{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	return out
}

func toItemResult(r service.BatchItemResult) client.BatchItemResult {
	return client.BatchItemResult{Index: r.Index, ID: r.ID, Passed: r.Passed, Reason: string(r.Reason), Detail: r.Detail,
		Result: r.Result, Cached: r.Cached}
}

func toBatch(b service.BatchSummary) client.Batch {
	out := client.Batch{ID: b.ID, Status: b.Status, Cache: b.Cache, Total: b.Total, Done: b.Done, Passed: b.Passed,
		Failed: b.Done - b.Passed, Reasons: b.Reasons, Created: b.Created}
	if out.Reasons == nil {
		out.Reasons = map[string]int{}
	}
	if !b.Finished.IsZero() {
		f := b.Finished
		out.Finished = &f
	}
	return out
}
