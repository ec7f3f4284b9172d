package metrics

import (
	"strconv"

	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/lang"
)

// other replaces every label value outside its set.
const other = "other"

// The label sets. They are data so that a reviewer sees every series the
// service can export; adding a value here is a deliberate choice.
var (
	// statuses are how an execution ended: kiln.CellStatus. An execution
	// that could not run at all has no cell status and counts as "other".
	statuses = set(
		string(kiln.StatusOK), string(kiln.StatusError), string(kiln.StatusTimeout),
		string(kiln.StatusInterrupted), string(kiln.StatusMemory), string(kiln.StatusOutput),
	)

	// sources say where a new session's sandbox came from.
	sources = [2]string{"fresh", "pool"}

	// endReasons say why a session ended:
	//   deleted       the owner deleted it (DELETE /v1/sessions/{id})
	//   idle          its idle TTL ran out
	//   restart_lost  the service restarted and its sandbox was gone
	//   service_stop  the service shut down
	//   error         its sandbox broke
	endReasons = set("deleted", "idle", "restart_lost", "service_stop", "error")

	// failureStages say which step of a sandbox's life failed.
	failureStages = set("create", "exec", "destroy", "pool")

	// rejectReasons say why a request was refused before any work.
	//   auth_failures  the client address failed authentication too often
	//   spool          the archive-upload spool was full
	rejectReasons = set("rate_limit", "queue_full", "quota", "too_large", "auth_failures", "spool")
)

func set(vs ...string) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

func fold(known map[string]bool, v string) string {
	if known[v] {
		return v
	}
	return other
}

// languageLabel is a language's canonical name, so "py" and "python"
// are one series; a name the language table does not know is "other".
func languageLabel(name string) string {
	l, err := lang.Lookup(name)
	if err != nil {
		return other
	}
	return l.Name
}

// routeLabel keeps the mux pattern; a request no pattern matched (the
// mux's 404 and 405) has none and gets "unmatched" rather than its URL.
func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	return pattern
}

// codeLabel is the status code; a value that is not an HTTP status is a
// caller's bug and must not make a series of its own.
func codeLabel(code int) string {
	if code < 100 || code > 599 {
		return other
	}
	return strconv.Itoa(code)
}
