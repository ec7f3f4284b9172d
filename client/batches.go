package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxBatchItems is the most items one batch may have.
const MaxBatchItems = 5000

// BatchRequest is a batch of programs to run and judge (POST
// /v1/batches), each in a fresh sandbox.
type BatchRequest struct {
	Items []BatchItem `json:"items"`
	// Cache lets items take their result from the caller's result cache
	// of one-shot runs (and fills it), as RunRequest.Cache.
	Cache bool `json:"cache,omitempty"`
	// Network is every item's network policy, as RunRequest.Network;
	// Packages (and PackageManager) are installed for every item that
	// names none of its own, as RunRequest.Packages.
	Network        *NetworkPolicy `json:"network,omitempty"`
	Packages       []string       `json:"packages,omitempty"`
	PackageManager string         `json:"package_manager,omitempty"`
}

// BatchItem is one program and how to judge it.
type BatchItem struct {
	ID       string   `json:"id,omitempty"` // the caller's name, echoed in the result
	Language string   `json:"language"`
	Code     string   `json:"code"`
	FileName string   `json:"file_name,omitempty"`
	Files    []File   `json:"files,omitempty"`
	Stdin    string   `json:"stdin,omitempty"`
	Args     []string `json:"args,omitempty"`
	// BuildOptions: as RunRequest's.
	BuildOptions []string   `json:"build_options,omitempty"`
	Limits       Limits     `json:"limits,omitempty"`
	Check        BatchCheck `json:"check"`
	// Packages: as RunRequest's, under the batch's network policy.
	Packages       []string `json:"packages,omitempty"`
	PackageManager string   `json:"package_manager,omitempty"`
}

// BatchCheck is how an item is judged: the exit code (0 unless given),
// and either the standard output (exact, or with trailing whitespace
// trimmed when Trim is set) or a test program run after the solution in
// the same sandbox (assert-style): in the same kernel for Python,
// JavaScript and TypeScript; joined to the solution for C, C++, Rust,
// Java and Go as HumanEval-X does (see the API's BatchCheck).
type BatchCheck struct {
	ExitCode *int    `json:"exit_code,omitempty"`
	Stdout   *string `json:"stdout,omitempty"`
	Trim     bool    `json:"trim,omitempty"`
	Test     string  `json:"test,omitempty"`
}

// Reasons of a failed item.
const (
	ReasonWrongAnswer  = "wrong_answer"
	ReasonRuntimeError = "runtime_error"
	ReasonCompileError = "compile_error"
	ReasonTimeout      = "timeout"
	ReasonMemory       = "memory"
	ReasonOutputLimit  = "output_limit"
	ReasonRejected     = "rejected" // kiln would not run it; Detail says why
)

// BatchItemResult is one judged item; its outputs are cut to 64 KiB each.
type BatchItemResult struct {
	Index  int        `json:"index"`
	ID     string     `json:"id,omitempty"`
	Passed bool       `json:"passed"`
	Reason string     `json:"reason,omitempty"`
	Detail string     `json:"detail,omitempty"`
	Result CellResult `json:"result"`
	Cached bool       `json:"cached,omitempty"`
}

// Batch is a batch's state and counts so far.
type Batch struct {
	ID       string         `json:"id"`
	Status   string         `json:"status"` // running, done
	Cache    bool           `json:"cache"`
	Total    int            `json:"total"`
	Done     int            `json:"done"`
	Passed   int            `json:"passed"`
	Failed   int            `json:"failed"`
	Reasons  map[string]int `json:"reasons"` // failed items by reason
	Created  time.Time      `json:"created"`
	Finished *time.Time     `json:"finished,omitempty"`
}

// BatchItemList is one page of a batch's results, in item order.
type BatchItemList struct {
	Items      []BatchItemResult `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// BatchEvent is one event of a batch's stream: "item" with an item's
// result as it finishes, then "done" with the batch, or "error".
type BatchEvent struct {
	Type  string           `json:"type"`
	Item  *BatchItemResult `json:"item,omitempty"`
	Batch *Batch           `json:"batch,omitempty"`
	Error *Problem         `json:"error,omitempty"`
}

// CreateBatch starts a batch and returns it at once (202); its results
// come with BatchItems.
func (c *Client) CreateBatch(ctx context.Context, req BatchRequest) (*Batch, error) {
	var out Batch
	if err := c.doJSON(ctx, http.MethodPost, "/v1/batches", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchStream starts a batch and streams it: fn gets every item's result
// as it finishes (in any order), and BatchStream returns the finished
// batch. Cancelling ctx closes the stream; the batch goes on on the
// server.
func (c *Client) BatchStream(ctx context.Context, req BatchRequest, fn func(BatchItemResult)) (*Batch, error) {
	sr, body, err := c.postStream(ctx, "/v1/batches", req)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	for {
		_, data, err := sr.nextData(ctx, "the batch")
		if err != nil {
			return nil, err
		}
		var ev BatchEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("kiln client: a batch event that is not JSON: %w", err)
		}
		switch {
		case ev.Type == "item" && ev.Item != nil:
			if fn != nil {
				fn(*ev.Item)
			}
		case ev.Type == "done" && ev.Batch != nil:
			return ev.Batch, nil
		case ev.Type == "error" && ev.Error != nil:
			return nil, ev.Error
		}
	}
}

// Batch returns a batch's state and counts.
func (c *Client) Batch(ctx context.Context, id string) (*Batch, error) {
	var out Batch
	if err := c.get(ctx, route("/v1/batches/", id, ""), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchItems returns one page of a batch's results (items still running
// are left out); limit 0 is the server's default, cursor "" the first
// page.
func (c *Client) BatchItems(ctx context.Context, id string, limit int, cursor string) (*BatchItemList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out BatchItemList
	if err := c.get(ctx, route("/v1/batches/", id, "/items"), q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
