package client

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// problemFrom turns a non-2xx answer into a *Problem: the server's own
// application/problem+json body when it sent one, else a synthesized
// problem with the status and the start of the body (a proxy's HTML page,
// say). Retry-After fills RetryAfterSeconds when the body did not.
func problemFrom(resp *http.Response) *Problem {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	var p Problem
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON := mt == "application/problem+json" || mt == "application/json"
	if !isJSON || json.Unmarshal(body, &p) != nil || (p.Code == "" && p.Detail == "") {
		p = Problem{
			Title:  http.StatusText(resp.StatusCode),
			Code:   codeForStatus(resp.StatusCode),
			Detail: synthesizedDetail(resp, body),
		}
	}
	if p.Status == 0 {
		p.Status = resp.StatusCode
	}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	if p.RetryAfterSeconds == 0 {
		p.RetryAfterSeconds = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return &p
}

// codeForStatus names a status without a problem body with the code a
// kiln server uses for it, so callers can test Code alone.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "http_" + strconv.Itoa(status)
}

// synthesizedDetail says what came back, with at most 200 characters of
// the body on one line.
func synthesizedDetail(resp *http.Response, body []byte) string {
	d := fmt.Sprintf("the server answered %s", resp.Status)
	text := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "?")), " ")
	if text == "" {
		return d
	}
	if len(text) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "..."
	}
	return d + ": " + text
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
// Zero means absent or unreadable.
func retryAfter(h string, now time.Time) int {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil {
		return max(n, 0)
	}
	if t, err := http.ParseTime(h); err == nil {
		// Round up: retrying early would be refused again.
		return max(int((t.Sub(now)+time.Second-1)/time.Second), 0)
	}
	return 0
}
