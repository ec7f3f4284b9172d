package programs

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// The parsers below read a compiler's output into diagnostics. They keep
// errors and warnings (not notes), and ignore what they do not understand:
// the raw output is in CompileLog anyway.

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func severity(s string) string {
	if strings.Contains(strings.ToLower(s), "warning") {
		return "warning"
	}
	return "error"
}

// caretColumn is the 1-based column of the caret in a line that marks a
// place in the line above ("      ^"), or 0 when line is not such a line.
func caretColumn(line string) int {
	t := strings.TrimRight(line, " \t\r")
	if !strings.HasSuffix(strings.TrimRight(t, "~"), "^") || strings.TrimLeft(t, " \t^~") != "" {
		return 0
	}
	return utf8.RuneCountInString(t[:strings.IndexByte(t, '^')]) + 1
}

var (
	// main.c:4:10: error: 'y' undeclared
	gccLine = lazyRE(`^(.+?):(\d+):(?:(\d+):)? (fatal error|error|warning): (.*)$`)
	// gfortran puts the message a few lines below its location:
	//   main.f90:3:9:
	//   (source and a marker)
	//   Error: Syntax error in expression at (1)
	gfortranLocation = lazyRE(`^(.+?):(\d+):(?:(\d+)(?:-\d+)?:)?$`)
	gfortranMessage  = lazyRE(`^(Error|Fatal Error|Warning): (.*)$`)
	// main.c:(.text.startup+0x5): undefined reference to `foo'
	ldUndefined = lazyRE(`^(.+?):\([^)]*\): (undefined reference to .*)$`)
)

// parseGCC reads gcc, g++ and gfortran.
func parseGCC(log string) []kiln.Diagnostic {
	var out []kiln.Diagnostic
	var loc *kiln.Diagnostic
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := gccLine.FindStringSubmatch(line); m != nil {
			out = append(out, kiln.Diagnostic{File: m[1], Line: atoi(m[2]), Column: atoi(m[3]), Severity: severity(m[4]), Message: m[5]})
			loc = nil
		} else if m := gfortranLocation.FindStringSubmatch(line); m != nil {
			loc = &kiln.Diagnostic{File: m[1], Line: atoi(m[2]), Column: atoi(m[3])}
		} else if m := gfortranMessage.FindStringSubmatch(line); m != nil && loc != nil {
			d := *loc
			d.Severity, d.Message = severity(m[1]), m[2]
			out = append(out, d)
			loc = nil
		} else if m := ldUndefined.FindStringSubmatch(line); m != nil {
			out = append(out, kiln.Diagnostic{File: m[1], Severity: "error", Message: m[2]})
		}
	}
	return out
}

// ./main.go:3:5: undefined: x
var goLine = lazyRE(`^(?:\./)?(.+?\.go):(\d+)(?::(\d+))?: (.*)$`)

// parseGo reads `go build`. Lines indented with a tab continue the message
// above them.
func parseGo(log string) []kiln.Diagnostic {
	var out []kiln.Diagnostic
	for _, line := range strings.Split(log, "\n") {
		if m := goLine.FindStringSubmatch(line); m != nil {
			out = append(out, kiln.Diagnostic{File: m[1], Line: atoi(m[2]), Column: atoi(m[3]), Severity: "error", Message: m[4]})
		} else if strings.HasPrefix(line, "\t") && len(out) > 0 {
			out[len(out)-1].Message += "\n" + strings.TrimSpace(line)
		}
	}
	return out
}

var (
	// Main.java:3: error: ';' expected
	javacLine = lazyRE(`^(.+\.java):(\d+): (error|warning): (.*)$`)
	// The lines after the caret that say more: "  symbol:   method foo()".
	javacDetail = lazyRE(`^\s+(symbol|location|required|found|reason)\b`)
)

// parseJavac reads javac: a header, the source line, a caret line that gives
// the column, and sometimes details.
func parseJavac(log string) []kiln.Diagnostic {
	var out []kiln.Diagnostic
	open := false // the last diagnostic may still get a column or details
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := javacLine.FindStringSubmatch(line); m != nil {
			out = append(out, kiln.Diagnostic{File: m[1], Line: atoi(m[2]), Severity: m[3], Message: m[4]})
			open = true
			continue
		}
		if !open {
			continue
		}
		d := &out[len(out)-1]
		if c := caretColumn(line); c > 0 && d.Column == 0 {
			d.Column = c
		} else if javacDetail.MatchString(line) {
			d.Message += "\n" + strings.TrimSpace(line)
		} else if d.Column > 0 {
			open = false
		}
	}
	return out
}

var (
	// error[E0308]: mismatched types
	rustHeader = lazyRE(`^(error|warning)(?:\[(\w+)\])?: (.*)$`)
	//  --> main.rs:3:5
	rustLocation = lazyRE(`^\s*--> (.+?):(\d+):(\d+)$`)
)

// parseRustc reads rustc's human format: a header, then the location on a
// line of its own. Errors without a location (a failed link) are kept;
// warnings without one ("2 warnings emitted") and the closing "aborting due
// to ..." are not.
func parseRustc(log string) []kiln.Diagnostic {
	var out []kiln.Diagnostic
	var head *kiln.Diagnostic
	flush := func() {
		if head != nil && head.Severity == "error" && !strings.HasPrefix(head.Message, "aborting due to") {
			out = append(out, *head)
		}
		head = nil
	}
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := rustHeader.FindStringSubmatch(line); m != nil {
			flush()
			msg := m[3]
			if m[2] != "" {
				msg += " [" + m[2] + "]"
			}
			head = &kiln.Diagnostic{Severity: m[1], Message: msg}
		} else if m := rustLocation.FindStringSubmatch(line); m != nil && head != nil {
			head.File, head.Line, head.Column = m[1], atoi(m[2]), atoi(m[3])
			out = append(out, *head)
			head = nil
		}
	}
	flush()
	return out
}

// PHP Parse error: syntax error, unexpected ... in main.php on line 3
var phpLine = lazyRE(`^(?:PHP )?(Parse error|Fatal error|Compile error|Warning|Deprecated|Notice):\s+(.*) in (.+?) on line (\d+)$`)

// parsePHP reads php -l.
func parsePHP(log string) []kiln.Diagnostic {
	var out []kiln.Diagnostic
	for _, line := range strings.Split(log, "\n") {
		if m := phpLine.FindStringSubmatch(strings.TrimRight(line, "\r")); m != nil {
			sev := "error"
			if !strings.HasSuffix(m[1], "error") {
				sev = "warning"
			}
			out = append(out, kiln.Diagnostic{File: m[3], Line: atoi(m[4]), Severity: sev, Message: m[2]})
		}
	}
	return out
}

// main.rb:3: syntax error, unexpected `end'
// main.rb:2: warning: assigned but unused variable - x
var rubyLine = lazyRE(`^(.+?\.rb):(\d+): (warning: )?(.*)$`)

// parseRuby reads ruby -wc, and a syntax error when ruby runs a file. A
// source line and a caret line may follow and give the column.
func parseRuby(log string) []kiln.Diagnostic {
	var out []kiln.Diagnostic
	lines := strings.Split(log, "\n")
	for i, line := range lines {
		m := rubyLine.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil {
			continue
		}
		d := kiln.Diagnostic{File: m[1], Line: atoi(m[2]), Severity: "error", Message: m[4]}
		if m[3] != "" {
			d.Severity = "warning"
		}
		if i+2 < len(lines) && !rubyLine.MatchString(lines[i+1]) {
			d.Column = caretColumn(lines[i+2])
		}
		out = append(out, d)
	}
	return out
}
