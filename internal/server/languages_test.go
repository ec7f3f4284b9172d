package server

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/lang"
)

// TestLanguagesListsTheRegistry: GET /v1/languages answers one entry per
// language of the registry, in its order, with its kind and aliases, and
// no other.
func TestLanguagesListsTheRegistry(t *testing.T) {
	w := httptest.NewRecorder()
	if err := (&Server{}).languages(w, httptest.NewRequest("GET", "/v1/languages", nil), nil); err != nil {
		t.Fatal(err)
	}
	var got []client.Language
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
		t.Fatalf("status %d, body %q: %v", w.Code, w.Body.String(), err)
	}
	var names []string
	for _, g := range got {
		names = append(names, g.Name)
		l, err := lang.Lookup(g.Name)
		if err != nil || string(l.Kind) != g.Kind || !slices.Equal(l.Aliases, g.Aliases) {
			t.Errorf("%+v: the registry says %+v (%v)", g, l, err)
		}
	}
	if want := lang.Names(); !slices.Equal(names, want) {
		t.Errorf("GET /v1/languages lists %q, want the registry's %q", names, want)
	}
}
