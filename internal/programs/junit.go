package programs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"os"
	"path"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Java test classes run with JUnit's console launcher, from Debian's
// junit5 (which brings junit4): its Jupiter engine runs JUnit 5 tests
// (org.junit.jupiter.api.Test), its Vintage engine JUnit 4 ones
// (org.junit.Test). A class is run as its tests when the caller asks
// (Program.Test), or when it has @Test methods and either its file is
// named *Test.java or *Tests.java, or it has no main (or an empty one).
// The launcher writes one XML report per engine, which gives each test's
// outcome.

// junitDir holds Debian's jars; the sandbox sees the host's /usr.
const junitDir = "/usr/share/java"

// junitLauncher is the console launcher; its manifest names the engines.
const junitLauncher = junitDir + "/junit-platform-console-standalone.jar"

// junitAPI are the jars a test class compiles and runs against: JUnit 4
// with Hamcrest, and JUnit 5's API with what its annotations need.
var junitAPI = []string{
	"junit4.jar", "hamcrest.jar",
	"junit-jupiter-api.jar", "junit-jupiter-params.jar", "junit-platform-commons.jar",
	"opentest4j.jar", "apiguardian-api.jar",
}

// junitReports are the report files of the engines that run tests.
var junitReports = []string{"TEST-junit-jupiter.xml", "TEST-junit-vintage.xml"}

// junitClasspath is the API jars, joined for -cp.
func junitClasspath() string {
	cp := make([]string, len(junitAPI))
	for i, j := range junitAPI {
		cp[i] = path.Join(junitDir, j)
	}
	return strings.Join(cp, ":")
}

// JUnitInstalled says how to install JUnit when it is missing: nil when
// Java tests can run here.
func JUnitInstalled() error {
	if _, err := os.Stat(junitLauncher); err != nil {
		return kiln.Errorf(kiln.Unsupported, "Java tests need JUnit, which is not installed on this host: "+
			"install the Debian packages junit4 and junit5 (kiln's scripts/deps does)")
	}
	return nil
}

var (
	javaTestAnno  = lazyRE(`@(?:org\.junit\.(?:jupiter\.api\.)?)?Test\b`)
	javaMain      = lazyRE(`\bvoid\s+main\s*\(`)
	javaEmptyMain = lazyRE(`\bvoid\s+main\s*\([^)]*\)\s*(?:throws\s+[\w.,\s]+)?\{(?:\s|//[^\n]*\n|/\*(?s:.*?)\*/)*\}`)
	javaTestName  = lazyRE(`Tests?\.java$`)
)

// javaTests decides whether a Java class runs as its tests: asked, or it
// has @Test methods (and imports JUnit) and its name or an absent main
// says so; otherwise a class with tests and a main gets a note.
func javaTests(src []byte, file string, asked bool) (bool, []kiln.Diagnostic) {
	if asked {
		return true, nil
	}
	hasTests := javaTestAnno.Match(src) && usesJUnit(src)
	if hasTests && javaTestName.MatchString(path.Base(file)) {
		return true, nil
	}
	return testsOrNote(hasTests, javaMain.Match(src), javaEmptyMain.Match(src), file,
		"@Test methods", "name the file *Test.java, remove main, or ask for tests")
}

// usesJUnit reports whether a Java source names JUnit: its jars then go
// on the class path, whether it runs as tests or its main runs.
func usesJUnit(src []byte) bool { return strings.Contains(string(src), "org.junit") }

// junitRun is the console launcher's command for j's tests: every class
// of the build with tests, whatever its name (a test class beside the
// entry's public class too); none is a failure, not a pass. Its reports
// go to j.reports.
func junitRun(j *job) step {
	argv := append([]string{path.Join(path.Dir(j.l.Binary), "java")}, jvm(j)...)
	return step{argv: append(argv, "-XX:MaxRAMPercentage=50",
		"-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8",
		"-jar", junitLauncher, "--disable-banner", "--disable-ansi-colors", "--details=tree",
		"--class-path", j.out+":"+junitClasspath(), "--scan-classpath", j.out, "--include-classname", ".*",
		"--fail-if-no-tests", "--reports-dir", j.reports)}
}

// newReportsDir names a fresh directory for one test run's reports.
func newReportsDir(area string) string {
	var b [8]byte
	rand.Read(b[:])
	return path.Join(area, "tests", hex.EncodeToString(b[:]))
}

// junitResults reads the engines' reports of a run, then removes them.
func junitResults(ctx context.Context, ex Execer, dir string) []kiln.TestCase {
	defer areaRemove(context.WithoutCancel(ctx), ex, dir)
	var cases []kiln.TestCase
	for _, name := range junitReports {
		if data, ok, err := areaRead(ctx, ex, path.Join(dir, name)); err == nil && ok {
			cases = append(cases, parseJUnitSuite(data)...)
		}
	}
	return bound(cases)
}

// junitSuite is the part of one JUnit platform report that is read: its
// root is a single testsuite.
type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string    `xml:"name,attr"`
	Class   string    `xml:"classname,attr"`
	Failure *junitMsg `xml:"failure"`
	Error   *junitMsg `xml:"error"`
	Skipped *junitMsg `xml:"skipped"`
}

// parseJUnitSuite reads a JUnit platform report; a test is Class.method.
func parseJUnitSuite(data []byte) []kiln.TestCase {
	var s junitSuite
	if xml.Unmarshal(data, &s) != nil {
		return nil
	}
	var cases []kiln.TestCase
	for _, c := range s.Cases {
		name := c.Name
		if c.Class != "" {
			name = c.Class + "." + c.Name
		}
		cases = append(cases, c.testCase(name))
	}
	return cases
}

// testCase is the outcome of one reported case.
func (c junitCase) testCase(name string) kiln.TestCase {
	tc := kiln.TestCase{Name: name, Status: "passed"}
	switch {
	case c.Failure != nil:
		tc.Status, tc.Message = "failed", clip(strings.TrimSpace(c.Failure.Message+"\n"+c.Failure.Text))
	case c.Error != nil:
		tc.Status, tc.Message = "failed", clip(strings.TrimSpace(c.Error.Message+"\n"+c.Error.Text))
	case c.Skipped != nil:
		tc.Status, tc.Message = "skipped", clip(strings.TrimSpace(c.Skipped.Message))
	}
	return tc
}
