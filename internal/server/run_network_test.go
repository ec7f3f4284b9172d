package server_test

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestRunNetworkAPI: POST /v1/run and POST /v1/batches take a network
// policy and packages: a run's network beyond the ceiling is a 403
// naming it for a user and allowed for an admin; packages under none
// (the default) are a 403 naming the policy, for a run and a batch.
func TestRunNetworkAPI(t *testing.T) {
	ceiling := kiln.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.com"}}
	s := newShared(t, options{svc: service.Config{NetworkCeiling: ceiling}})
	ctx := ctxT(t)
	beyond := &client.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.net"}}
	_, err := s.owner.Run(ctx, client.RunRequest{Language: "python", Code: "print(1)", Network: beyond})
	if p := wantProblem(t, "a run beyond the ceiling", err, 403, "forbidden"); !strings.Contains(p.Detail, "ceiling") {
		t.Errorf("a run beyond the ceiling: %q; want the ceiling named", p.Detail)
	}
	if res, err := s.e.admin.Run(ctx, client.RunRequest{Language: "python", Code: "print(1)", Network: beyond}); err != nil || res.Result.Stdout != "1\n" {
		t.Errorf("an admin's run beyond the ceiling: %+v, %v; want it run", res.Result, err)
	}
	_, err = s.owner.Run(ctx, client.RunRequest{Language: "python", Code: "1", Packages: []string{"requests"}, Network: &client.NetworkPolicy{Mode: "none"}})
	if p := wantProblem(t, "a run's packages under none", err, 403, "forbidden"); !strings.Contains(p.Detail, `"none"`) {
		t.Errorf("a run's packages under none: %q; want the policy named", p.Detail)
	}
	_, err = s.owner.CreateBatch(ctx, client.BatchRequest{Packages: []string{"requests"}, Items: []client.BatchItem{{Language: "python", Code: "1"}}})
	if p := wantProblem(t, "a batch's packages under none", err, 403, "forbidden"); !strings.Contains(p.Detail, `"none"`) || !strings.Contains(p.Detail, "item 0") {
		t.Errorf("a batch's packages under none: %q; want the item and the policy named", p.Detail)
	}
}
