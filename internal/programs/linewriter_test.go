package programs

import "testing"

// TestCompileLogKeepsLinesWhole: php -l writes its error in pieces to
// stderr while "Errors parsing" goes to stdout; the log must not cut the
// error line, or the diagnostic parser misses it.
func TestCompileLogKeepsLinesWhole(t *testing.T) {
	log := &boundedBuffer{max: maxCompileLog}
	stdout, stderr := &lineWriter{w: log}, &lineWriter{w: log}
	stderr.Write([]byte(`PHP Parse error:  syntax error, unexpected token ";"`))
	stdout.Write([]byte("Errors parsing main.php\n"))
	stderr.Write([]byte(" in main.php on line 3\n"))
	stdout.Write([]byte("no newline at the end"))
	stdout.Flush()
	stderr.Flush()
	want := "Errors parsing main.php\nPHP Parse error:  syntax error, unexpected token \";\" in main.php on line 3\nno newline at the end"
	if got := log.String(); got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
	ds := parsePHP(log.String())
	if len(ds) != 1 || ds[0].Line != 3 || ds[0].File != "main.php" {
		t.Errorf("parsePHP = %+v, want one error at main.php:3", ds)
	}
}
