package service

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/store"
)

// TestCompleteAndCheck: the kernels' completion and check reach front
// ends through the service, with a cell's ownership and bounds: the
// owner gets completions and a verdict, another user's session is not
// found, a cursor outside the code or code over --max-code is refused.
func TestCompleteAndCheck(t *testing.T) {
	ts := newTestService(t, Config{MaxCodeBytes: 1024})
	ctx := ctxT(t, 2*time.Minute)
	owner, other := ts.user(t, "owner", false), ts.user(t, "other", false)
	s, err := ts.CreateSession(ctx, owner, SessionSpec{Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ts.Complete(ctx, owner, s.ID, "", "import os\nos.pa", 15)
	if err != nil || !slices.Contains(c.Matches, "path") || c.CursorStart != 13 || c.CursorEnd != 15 {
		t.Errorf("complete: %+v %v, want path among the matches of 13..15", c, err)
	}
	for code, want := range map[string]string{"for i in range(3):": "incomplete", "x = 1": "complete", "x = (1 +* 2)": "invalid"} {
		if r, err := ts.Check(ctx, owner, s.ID, "python", code); err != nil || r.Status != want {
			t.Errorf("check %q: %+v %v, want %s", code, r, err, want)
		}
	}
	if _, err := ts.Complete(ctx, other, s.ID, "", "import o", 8); !errors.Is(err, store.ErrNotFound) && kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("another user's session: %v, want not found", err)
	}
	if _, err := ts.Complete(ctx, owner, s.ID, "", "import o", 9); kiln.KindOf(err) != kiln.Invalid {
		t.Errorf("a cursor past the code: %v, want invalid", err)
	}
	if _, err := ts.Check(ctx, owner, s.ID, "", strings.Repeat("x", 2000)); kiln.KindOf(err) != kiln.TooLarge {
		t.Errorf("code over --max-code: %v, want too_large", err)
	}
}
