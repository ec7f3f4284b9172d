package server

import (
	"crypto/rand"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The web notebook signs in with an API key once and then holds a session
// cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's
// page sends it). The key stays in the server's memory, never in the
// browser's script-readable storage. A state-changing request made with
// the cookie must also carry the session's CSRF token in a header: the
// token comes in a second, readable cookie, which only a page of this
// origin can read and copy into the header (double submit).
const (
	sessionCookie = "kiln_session"
	csrfCookie    = "kiln_csrf"
	csrfHeader    = "X-Kiln-Csrf"

	// uiSessionTTL is how long a sign-in lasts without use.
	uiSessionTTL = 12 * time.Hour
	// maxUISessions bounds the sign-ins held in memory; the oldest go first.
	maxUISessions = 10000
)

// uiSession is one browser's sign-in.
type uiSession struct {
	key     string // the API key it signed in with: checked on every request, so a revoked key ends it
	csrf    string
	expires time.Time
}

// uiSessions are the sign-ins, in memory: a restart of kiln serve signs
// every browser out.
type uiSessions struct {
	mu sync.Mutex
	m  map[string]*uiSession
}

func (u *uiSessions) add(key string) (token, csrf string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]*uiSession{}
	}
	now := time.Now()
	if len(u.m) >= maxUISessions {
		u.evict(now)
	}
	token, csrf = rand.Text(), rand.Text()
	u.m[token] = &uiSession{key: key, csrf: csrf, expires: now.Add(uiSessionTTL)}
	return token, csrf
}

// evict drops expired sign-ins, and the one nearest expiry if none was.
func (u *uiSessions) evict(now time.Time) {
	var oldest string
	for t, s := range u.m {
		if now.After(s.expires) {
			delete(u.m, t)
		} else if oldest == "" || s.expires.Before(u.m[oldest].expires) {
			oldest = t
		}
	}
	if len(u.m) >= maxUISessions {
		delete(u.m, oldest)
	}
}

// get finds a live sign-in and extends it.
func (u *uiSessions) get(token string) (uiSession, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.m[token]
	if !ok {
		return uiSession{}, false
	}
	now := time.Now()
	if now.After(s.expires) {
		delete(u.m, token)
		return uiSession{}, false
	}
	s.expires = now.Add(uiSessionTTL)
	return *s, true
}

func (u *uiSessions) remove(token string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, token)
}

// cookieKey is the API key behind a request's session cookie. A request
// that changes state (any method but GET and HEAD) must carry the CSRF
// token in the X-Kiln-Csrf header. ok is false when the request has no
// session cookie at all.
func (s *Server) cookieKey(r *http.Request) (key string, ok bool, err error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return "", false, nil
	}
	sess, found := s.ui.get(c.Value)
	if !found {
		return "", true, kiln.Errorf(kiln.Unauthenticated, "the sign-in has ended (signed out, expired, or the server restarted); sign in again with an API key")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		got := r.Header.Get(csrfHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
			return "", true, kiln.Errorf(kiln.Forbidden, "a request signed in by cookie that changes state needs the %s header with the value of the %s cookie", csrfHeader, csrfCookie)
		}
	}
	return sess.key, true, nil
}

// signInRequest is POST /ui/signin's body.
type signInRequest struct {
	Key string `json:"key"`
}

// signIn checks an API key and answers with the session and CSRF cookies.
// Failures count against the client address like a bad bearer key.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	noteRoute(w, r)
	err := s.doSignIn(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
	}
}

func (s *Server) doSignIn(w http.ResponseWriter, r *http.Request) error {
	if err := pageOrigin(r); err != nil {
		return err
	}
	var req signInRequest
	if err := decode(w, r, 4*kiln.KiB, &req); err != nil {
		return err
	}
	key := strings.TrimSpace(req.Key)
	if key == "" {
		return kiln.Errorf(kiln.Invalid, "send {\"key\": \"API key\"}; the admin key is printed on the server's first start")
	}
	addr := clientAddr(r)
	if err := s.fails.check(addr); err != nil {
		s.svc.Metrics().Rejected("auth_failures")
		return err
	}
	u, k, err := s.svc.Authenticate(r.Context(), key)
	if err != nil {
		if kiln.KindOf(err) == kiln.Unauthenticated {
			s.fails.failed(addr)
		}
		return err
	}
	if err := checkScope(r, k); err != nil {
		return err
	}
	noteUser(w, u.ID)
	token, csrf := s.ui.add(key)
	secure := r.TLS != nil
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(uiSessionTTL.Seconds())})
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrf, Path: "/", Secure: secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(uiSessionTTL.Seconds())})
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// signOut ends the browser's sign-in on the server and clears its cookies.
// It needs the CSRF header, so another site cannot sign a user out.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	noteRoute(w, r)
	if err := pageOrigin(r); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c, err := r.Cookie(sessionCookie)
	if err == nil && c.Value != "" {
		if _, _, err := s.cookieKey(r); err != nil && kiln.KindOf(err) == kiln.Forbidden {
			writeError(w, r, s.log, err)
			return
		}
		s.ui.remove(c.Value)
	}
	for _, name := range []string{sessionCookie, csrfCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: name == sessionCookie,
			SameSite: http.SameSiteStrictMode})
	}
	w.WriteHeader(http.StatusNoContent)
}

// pageOrigin refuses a sign-in or sign-out sent by another site's page
// (login CSRF): browsers name the page's origin in the Origin header of a
// POST. A client that sends none (curl) is not a browser page.
func pageOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Host != r.Host {
		return kiln.Errorf(kiln.Forbidden, "sign-in and sign-out are accepted only from kiln's own page: the request came from %q, not from %q", trunc(o, 100), r.Host)
	}
	return nil
}
