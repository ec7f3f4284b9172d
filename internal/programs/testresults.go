package programs

import (
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Test results, parsed from what a test run printed: Go's test binary
// runs with -test.v, so each test's end is a "--- PASS/FAIL/SKIP: Name"
// line; Rust's harness prints "test name ... ok/FAILED/ignored" and then
// each failure's output under "---- name stdout ----".

// maxTestLog bounds the output kept for parsing; tests past it are not
// reported (the counts say what was parsed).
const maxTestLog = 4 << 20

// maxTestMessage bounds one test's message.
const maxTestMessage = 4 << 10

// maxTestCases bounds the cases reported.
const maxTestCases = 10000

var (
	goRun    = lazyRE(`^=== (?:RUN|CONT|PAUSE)\s+(\S+)`)
	goEnd    = lazyRE(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)
	rustLine = lazyRE(`^test (\S+) \.\.\. (ok|FAILED|ignored)\b`)
	rustOut  = lazyRE(`^---- (\S+) stdout ----$`)
)

var statusOf = map[string]string{
	"PASS": "passed", "FAIL": "failed", "SKIP": "skipped",
	"ok": "passed", "FAILED": "failed", "ignored": "skipped",
}

// parseGoTests reads go test -test.v output. A test's message is what it
// logged (the indented lines while it ran), for a failure or a skip.
func parseGoTests(out string) []kiln.TestCase {
	var cases []kiln.TestCase
	logs := map[string]*strings.Builder{}
	current := ""
	for _, line := range strings.Split(out, "\n") {
		if m := goRun.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if m := goEnd.FindStringSubmatch(line); m != nil {
			c := kiln.TestCase{Name: m[2], Status: statusOf[m[1]]}
			if b := logs[m[2]]; b != nil && c.Status != "passed" {
				c.Message = clip(strings.TrimSpace(b.String()))
			}
			cases = append(cases, c)
			current = m[2] // the lines after a --- FAIL are its log too (non-verbose order)
			continue
		}
		if current != "" && strings.HasPrefix(line, "    ") {
			b := logs[current]
			if b == nil {
				b = &strings.Builder{}
				logs[current] = b
			}
			if b.Len() < maxTestMessage {
				b.WriteString(strings.TrimSpace(line) + "\n")
			}
		}
	}
	return bound(cases)
}

// parseRustTests reads the output of a rustc --test harness.
func parseRustTests(out string) []kiln.TestCase {
	var cases []kiln.TestCase
	index := map[string]int{}
	lines := strings.Split(out, "\n")
	for i := 0; i < len(lines); i++ {
		if m := rustLine.FindStringSubmatch(lines[i]); m != nil {
			index[m[1]] = len(cases)
			cases = append(cases, kiln.TestCase{Name: m[1], Status: statusOf[m[2]]})
			continue
		}
		if m := rustOut.FindStringSubmatch(lines[i]); m != nil {
			var b strings.Builder
			for i+1 < len(lines) && !rustOut.MatchString(lines[i+1]) && lines[i+1] != "failures:" {
				i++
				if b.Len() < maxTestMessage {
					b.WriteString(lines[i] + "\n")
				}
			}
			if k, ok := index[m[1]]; ok {
				cases[k].Message = clip(strings.TrimSpace(b.String()))
			}
		}
	}
	return bound(cases)
}

func clip(s string) string {
	if len(s) > maxTestMessage {
		return s[:maxTestMessage] + "..."
	}
	return s
}

func bound(cases []kiln.TestCase) []kiln.TestCase {
	if len(cases) > maxTestCases {
		return cases[:maxTestCases]
	}
	return cases
}

// Report counts the cases.
func Report(cases []kiln.TestCase) *kiln.TestReport {
	r := &kiln.TestReport{Cases: cases}
	if r.Cases == nil {
		r.Cases = []kiln.TestCase{}
	}
	for _, c := range cases {
		switch c.Status {
		case "passed":
			r.Passed++
		case "failed":
			r.Failed++
		case "skipped":
			r.Skipped++
		}
	}
	return r
}
