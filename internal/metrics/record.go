package metrics

import "time"

// Execution records an execution that ended: its language (a name or
// alias from internal/lang), its status (a kiln.CellStatus), the time it
// waited in the queue and the time it ran.
func (m *Metrics) Execution(language, status string, queued, run time.Duration) {
	l := languageLabel(language)
	m.executions.WithLabelValues(l, fold(statuses, status)).Inc()
	m.executionTime.WithLabelValues(l).Observe(run.Seconds())
	m.queueWait.Observe(queued.Seconds())
}

// SessionCreated records a new session, whose sandbox came from the pool
// or was made for it, and how long creating it took.
func (m *Metrics) SessionCreated(pooled bool, d time.Duration) {
	source := "fresh"
	if pooled {
		source = "pool"
	}
	m.sessionsCreated.WithLabelValues(source).Inc()
	m.sessionCreate.WithLabelValues(source).Observe(d.Seconds())
}

// SessionEnded records a session that ended. reason is one of deleted,
// idle, restart_lost, service_stop or error (see endReasons); anything
// else counts as "other".
func (m *Metrics) SessionEnded(reason string) {
	m.sessionsEnded.WithLabelValues(fold(endReasons, reason)).Inc()
}

// SandboxFailure records a sandbox failure at stage create, exec,
// destroy or pool; anything else counts as "other".
func (m *Metrics) SandboxFailure(stage string) {
	m.sandboxFailures.WithLabelValues(fold(failureStages, stage)).Inc()
}

// Rejected records a request refused before any work, for reason
// rate_limit, queue_full, quota, too_large, auth_failures or spool;
// anything else counts as "other".
func (m *Metrics) Rejected(reason string) {
	m.rejected.WithLabelValues(fold(rejectReasons, reason)).Inc()
}

// HTTP records an answered request. route must be the pattern the mux
// matched (http.Request.Pattern, e.g. "GET /v1/sessions/{id}"), never the
// URL: URLs carry ids and would make a series per session.
func (m *Metrics) HTTP(route string, code int, d time.Duration) {
	r := routeLabel(route)
	m.httpRequests.WithLabelValues(r, codeLabel(code)).Inc()
	m.httpTime.WithLabelValues(r).Observe(d.Seconds())
}

// SetPoolReady sets the number of sandboxes waiting in the pool.
func (m *Metrics) SetPoolReady(n int) { m.poolReady.Set(float64(n)) }
