package egress

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestNoneRefusesEverything: under "none" the forward proxy, CONNECT and
// both mirrors answer 403 naming the policy, and each attempt is recorded.
func TestNoneRefusesEverything(t *testing.T) {
	p := mustNew(t, Config{Resolver: &fakeResolver{}})
	var rec recorder
	s := p.Open("s1", Policy{}, rec.add)
	client, addr := serveSession(t, s)

	resp, err := client.Get("http://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `network policy is "none"`) {
		t.Errorf("GET through proxy = %d %q, want 403 naming the policy", resp.StatusCode, body)
	}
	if _, err := client.Get("https://example.com/"); err == nil || !strings.Contains(err.Error(), `network policy is "none"`) {
		t.Errorf("HTTPS through proxy: err = %v, want the CONNECT refusal naming the policy", err)
	}
	for _, path := range []string{"/pypi/simple/requests/", "/npm/left-pad"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// pip shows the reason phrase; npm a JSON body's "error".
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Status+e.Error, `network policy is "none"`) {
			t.Errorf("GET %s = %q %q, want 403 naming the policy", path, resp.Status, body)
		}
	}
	recs := rec.all()
	if len(recs) != 4 {
		t.Fatalf("got %d records, want 4: %+v", len(recs), recs)
	}
	kinds := []string{KindHTTP, KindConnect, KindPyPI, KindNPM}
	for i, r := range recs {
		if r.Allowed || r.Reason != "network policy is none" || r.Kind != kinds[i] {
			t.Errorf("record %d = %+v, want denied, kind %s, reason %q", i, r, kinds[i], "network policy is none")
		}
	}
	if recs[0].Host != "example.com" || recs[0].Port != 80 || recs[1].Port != 443 {
		t.Errorf("records name %s:%d and %s:%d, want example.com:80 and example.com:443", recs[0].Host, recs[0].Port, recs[1].Host, recs[1].Port)
	}
}
