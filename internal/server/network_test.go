package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// TestSessionNetworkAPI: POST /v1/sessions takes a network policy (an
// object, or a bare mode string from older clients) and GET shows it; PUT
// /v1/sessions/{id}/network changes it within the ceiling for the owner
// (403 naming the ceiling beyond it), beyond it for an admin, and is 404
// for another user's session.
func TestSessionNetworkAPI(t *testing.T) {
	ceiling := kiln.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.com", "*.example.org"}}
	s := newShared(t, options{svc: service.Config{NetworkCeiling: ceiling}})
	ctx := ctxT(t)
	sess, err := s.owner.Session(ctx, s.session)
	if err != nil || sess.Network.Mode != "none" {
		t.Fatalf("a session made without a policy: %+v, %v; want none", sess.Network, err)
	}
	within := client.NetworkPolicy{Mode: "allowlist", Allow: []string{"pkgs.example.org"}}
	got, err := s.owner.SetNetwork(ctx, s.session, within)
	if err != nil || !slices.Equal(got.Network.Allow, within.Allow) {
		t.Fatalf("PUT within the ceiling: %+v, %v", got, err)
	}
	var p *client.Problem
	_, err = s.owner.SetNetwork(ctx, s.session, client.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.net"}})
	if !errors.As(err, &p) || p.Status != 403 || !strings.Contains(p.Detail, "ceiling") || !strings.Contains(p.Detail, "example.com") {
		t.Errorf("PUT beyond the ceiling: %v; want 403 naming the ceiling", err)
	}
	_, err = s.owner.SetNetwork(ctx, s.session, client.NetworkPolicy{Mode: "allowlist", Allow: []string{"http://example.com/"}})
	if !errors.As(err, &p) || p.Status != 400 || !strings.Contains(p.Detail, "not a host name") {
		t.Errorf("PUT a URL: %v; want 400 saying what a host is", err)
	}
	if _, err := s.stranger.SetNetwork(ctx, s.session, within); !errors.As(err, &p) || p.Status != 404 {
		t.Errorf("PUT on another user's session: %v; want 404", err)
	}
	if _, err := s.collab.SetNetwork(ctx, s.session, within); !errors.As(err, &p) || p.Status != 403 {
		t.Errorf("PUT by a collaborator: %v; want 403 (owner only)", err)
	}
	mine, err := s.e.admin.CreateSession(ctx, client.SessionRequest{Network: &client.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.net"}}})
	if err != nil || !slices.Equal(mine.Network.Allow, []string{"example.net"}) {
		t.Fatalf("an admin's session beyond the ceiling: %+v, %v", mine, err)
	}
	if _, err := s.e.admin.SetNetwork(ctx, mine.ID, client.NetworkPolicy{Mode: "allowlist", Allow: []string{"*.example.net"}}); err != nil {
		t.Errorf("an admin's PUT beyond the ceiling: %v", err)
	}
	// An older client's bare string is the mode.
	req, _ := http.NewRequestWithContext(ctx, "POST", s.e.url+"/v1/sessions", strings.NewReader(`{"network": "none"}`))
	req.Header.Set("Authorization", "Bearer "+s.keys[s.owner])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var old client.Session
	json.NewDecoder(resp.Body).Decode(&old)
	resp.Body.Close()
	if resp.StatusCode != 201 || old.Network.Mode != "none" {
		t.Errorf(`POST {"network": "none"}: %d %+v; want 201 and the policy none`, resp.StatusCode, old.Network)
	}
	_, err = s.owner.CreateSession(ctx, client.SessionRequest{Network: &client.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.net"}}})
	if !errors.As(err, &p) || p.Status != 403 {
		t.Errorf("POST beyond the ceiling: %v; want 403", err)
	}
}
