package client

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestProblems(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name        string
		status      int
		contentType string
		header      map[string]string
		body        string
		want        Problem
	}{
		{"problem body", 404, "application/problem+json", nil,
			`{"type":"about:blank","title":"Not Found","status":404,"code":"not_found","detail":"no session s1","request_id":"r1"}`,
			Problem{Type: "about:blank", Title: "Not Found", Status: 404, Code: "not_found", Detail: "no session s1", RequestID: "r1"}},
		{"status filled in", 409, "application/problem+json; charset=utf-8", nil,
			`{"code":"conflict","detail":"it exists"}`,
			Problem{Title: "Conflict", Status: 409, Code: "conflict", Detail: "it exists"}},
		{"retry-after seconds", 429, "application/problem+json", map[string]string{"Retry-After": "7"},
			`{"status":429,"code":"rate_limited","detail":"slow down"}`,
			Problem{Title: "Too Many Requests", Status: 429, Code: "rate_limited", Detail: "slow down", RetryAfterSeconds: 7}},
		{"retry-after in the body wins", 503, "application/problem+json", map[string]string{"Retry-After": "7"},
			`{"status":503,"code":"unavailable","detail":"busy","retry_after_seconds":3}`,
			Problem{Title: "Service Unavailable", Status: 503, Code: "unavailable", Detail: "busy", RetryAfterSeconds: 3}},
		{"retry-after date", 503, "text/plain", map[string]string{"Retry-After": now.Add(90 * time.Second).UTC().Format(http.TimeFormat)},
			"", Problem{Title: "Service Unavailable", Status: 503, Code: "unavailable", Detail: "the server answered 503 Service Unavailable", RetryAfterSeconds: 90}},
		{"proxy page", 502, "text/html", nil,
			"<html>\n<body>  bad\n gateway </body></html>",
			Problem{Title: "Bad Gateway", Status: 502, Code: "http_502", Detail: "the server answered 502 Bad Gateway: <html> <body> bad gateway </body></html>"}},
		{"JSON that is not a problem", 401, "application/json", nil, `{"message":"no"}`,
			Problem{Title: "Unauthorized", Status: 401, Code: "unauthenticated", Detail: `the server answered 401 Unauthorized: {"message":"no"}`}},
		{"long body cut", 500, "text/plain", nil, strings.Repeat("é", 300),
			Problem{Title: "Internal Server Error", Status: 500, Code: "http_500", Detail: "the server answered 500 Internal Server Error: " + strings.Repeat("é", 100) + "..."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			})
			_, err := c.Session(ctxT(t), "s1")
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("err = %v (%T); want a *Problem", err, err)
			}
			// A date has one-second resolution: allow a second less.
			if tt.want.RetryAfterSeconds == 90 && p.RetryAfterSeconds == 89 {
				p.RetryAfterSeconds = 90
			}
			diff(t, "problem", *p, tt.want)
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		h    string
		want int
	}{
		{"", 0}, {"0", 0}, {"12", 12}, {" 5 ", 5}, {"-3", 0}, {"soon", 0},
		{"Wed, 01 Jan 2025 00:00:30 GMT", 30},
		{"Tue, 31 Dec 2024 23:59:00 GMT", 0}, // in the past
	} {
		if got := retryAfter(tt.h, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %d; want %d", tt.h, got, tt.want)
		}
	}
}
