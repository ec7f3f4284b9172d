package programs

import (
	"regexp"
	"sync"
)

// lazyRegexp is a regular expression compiled on its first use, not at
// package init. Every sandbox stage (boot, agent, each spawn) is the kiln
// binary itself, so whatever this package compiles at init each of them
// pays before main, though none of them builds a program; compiled at
// init, these cost about 0.5 MB and 0.3-0.9 ms per process.
type lazyRegexp struct {
	src  string
	once sync.Once
	re   *regexp.Regexp
}

// allRegexps are every lazyRegexp of the package, so a test compiles them
// all (a bad expression fails the tests, not a run).
var allRegexps []*lazyRegexp

func lazyRE(src string) *lazyRegexp {
	l := &lazyRegexp{src: src}
	allRegexps = append(allRegexps, l)
	return l
}

func (l *lazyRegexp) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.src) })
	return l.re
}

func (l *lazyRegexp) MatchString(s string) bool            { return l.get().MatchString(s) }
func (l *lazyRegexp) Match(b []byte) bool                  { return l.get().Match(b) }
func (l *lazyRegexp) FindStringSubmatch(s string) []string { return l.get().FindStringSubmatch(s) }
func (l *lazyRegexp) FindSubmatch(b []byte) [][]byte       { return l.get().FindSubmatch(b) }
func (l *lazyRegexp) FindAllSubmatch(b []byte, n int) [][][]byte {
	return l.get().FindAllSubmatch(b, n)
}
