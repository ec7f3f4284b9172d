package egress

import (
	"net/http"
	"time"
)

// mirrors serves the package mirrors.
type mirrors struct {
	p *Proxy
}

func newMirrors(p *Proxy) (*mirrors, error) {
	return &mirrors{p: p}, nil
}

func (m *mirrors) servePyPI(s *Session, w http.ResponseWriter, r *http.Request) {
	m.skeleton(s, w, KindPyPI)
}

func (m *mirrors) serveNPM(s *Session, w http.ResponseWriter, r *http.Request) {
	m.skeleton(s, w, KindNPM)
}

func (m *mirrors) skeleton(s *Session, w http.ResponseWriter, kind string) {
	rec := Record{Time: time.Now(), Kind: kind}
	if s.pol.Load().IsNone() {
		rec.Reason = "network policy is none"
		s.record(rec)
		refuse(w, http.StatusForbidden, "%s", noneMessage)
		return
	}
	rec.Reason = "the mirrors are not built yet"
	s.record(rec)
	refuse(w, http.StatusNotImplemented, "kiln: the package mirrors are not built yet")
}
