package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// Text the server sends (file names, code, metadata) is printed through
// clean, so a control character in it cannot drive the terminal.

// clean replaces control characters with "?".
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

// table writes aligned columns; cells are cleaned.
type table struct{ w *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	fmt.Fprintln(t.w, strings.Join(header, "\t"))
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = clean(c)
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() { t.w.Flush() }

// stamp prints a time as the server sent it, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("2006-01-02 15:04:05Z07:00")
}

// stampPtr is stamp for optional times.
func stampPtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

// pairs prints a map as sorted k=v,k=v.
func pairs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	if len(keys) == 0 {
		return "-"
	}
	return strings.Join(keys, ",")
}

// firstLine is the first non-blank line of code, at most max characters,
// with "..." when anything was left out.
func firstLine(code string, max int) string {
	lines := strings.Split(strings.TrimSpace(code), "\n")
	line := strings.TrimRight(lines[0], " \t\r")
	cut := len(lines) > 1
	if utf8.RuneCountInString(line) > max {
		line, cut = string([]rune(line)[:max]), true
	}
	if cut {
		line += " ..."
	}
	return line
}
