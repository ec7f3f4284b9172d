package service

import (
	"bytes"
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

// formatter is a program that reads code on stdin and writes it
// formatted on stdout. It runs inside the session's sandbox, from the
// host's /usr (the sandbox's read-only /usr), so a formatter is there
// only when the host has it installed.
type formatter struct {
	argv    []string
	install string // what to install where it is missing
}

// formatters is the table of formatters by kiln language, for review:
// no option names a file or runs another program.
var formatters = map[string]formatter{
	"python": {[]string{"/usr/bin/black", "--quiet", "-"}, "Debian's black package (scripts/deps installs it)"},
	"go":     {[]string{"/usr/local/go/bin/gofmt"}, "Go in /usr/local/go"},
	"rust":   {[]string{"/usr/bin/rustfmt", "--edition", "2021"}, "Debian's rustfmt package"},
	"c":      {[]string{"/usr/bin/clang-format", "--assume-filename=main.c"}, "Debian's clang-format package"},
	"cpp":    {[]string{"/usr/bin/clang-format", "--assume-filename=main.cpp"}, "Debian's clang-format package"},
}

const formatTimeout = 20 * time.Second

// Formatters lists the languages whose formatter is installed on this host.
func Formatters() []string {
	var out []string
	for l, f := range formatters {
		if _, err := os.Stat(f.argv[0]); err == nil {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// Format formats code of language (default: the session's first) with
// the language's formatter, run in the session's sandbox as user code
// runs, with the code on its stdin. An owner or collaborator may format;
// code a formatter refuses (a syntax error) is Invalid with its message.
func (s *Service) Format(ctx context.Context, u kiln.User, sessionID, language, code string) (string, error) {
	if err := s.checkQuery(code, 0); err != nil {
		return "", err
	}
	a, err := s.liveAs(ctx, u, sessionID, kiln.RoleCollaborator)
	if err != nil {
		return "", err
	}
	l := a.l
	if language == "" {
		language = l.rec.Languages[0]
	}
	f, ok := formatters[strings.ToLower(language)]
	if !ok {
		return "", kiln.Errorf(kiln.Invalid, "kiln has no formatter for %q; it formats %s", trunc(language, 40), strings.Join(slices.Sorted(maps.Keys(formatters)), ", "))
	}
	if _, err := os.Stat(f.argv[0]); err != nil {
		return "", kiln.Errorf(kiln.Unsupported, "the %s formatter (%s) is not installed on this server; install %s", language, f.argv[0], f.install)
	}
	release := l.hold()
	defer release()
	sess, err := l.sandbox(ctx, s.engine)
	if err != nil {
		return "", err
	}
	var out, errs bytes.Buffer
	info, err := sess.Agent().Exec(ctx, protocol.Exec{Argv: f.argv, Stdin: []byte(code), Env: []string{"HOME=/tmp"},
		TimeoutMs: formatTimeout.Milliseconds(), OutputBytes: int64(len(code))*2 + 64<<10, KillScope: protocol.KillGroup}, &out, &errs)
	switch {
	case err != nil:
		return "", kiln.Wrap(kiln.SandboxError, err, "the sandbox did not run the %s formatter", language)
	case info.TimedOut:
		return "", kiln.Errorf(kiln.Invalid, "the %s formatter took longer than %v and was stopped", language, formatTimeout)
	case info.Code != 0:
		msg := strings.TrimSpace(strings.ToValidUTF8(errs.String(), "?"))
		if len(msg) > 2000 {
			msg = msg[:2000] + "..."
		}
		return "", kiln.Errorf(kiln.Invalid, "the %s formatter could not format the code: %s", language, msg)
	case !utf8.Valid(out.Bytes()):
		return "", kiln.Errorf(kiln.Invalid, "the %s formatter wrote output that is not UTF-8", language)
	}
	return out.String(), nil
}
