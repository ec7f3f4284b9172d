// Package metrics is the service's Prometheus instrumentation: one
// private registry (never the process-wide default, so tests and several
// services in one process do not collide) holding kiln's own series plus
// the Go runtime and process collectors, served by Handler.
//
// Every label takes its value from a small fixed set; a value outside it
// is counted as "other", so a caller passing user input by mistake cannot
// grow the number of series without bound.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Buckets in seconds. Executions and HTTP requests (a streamed execution
// is one request) run up to the longest timeout, so they reach minutes;
// queue waits and sandbox creation should be short, and the finer low end
// shows when the pool stops hiding creation cost.
var (
	longBuckets  = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	shortBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

// Metrics records the service's events. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	executions    *prometheus.CounterVec
	executionTime *prometheus.HistogramVec
	queueWait     prometheus.Histogram

	sessionsCreated *prometheus.CounterVec
	sessionCreate   *prometheus.HistogramVec
	sessionsEnded   *prometheus.CounterVec

	sandboxFailures *prometheus.CounterVec
	rejected        *prometheus.CounterVec

	httpRequests *prometheus.CounterVec
	httpTime     *prometheus.HistogramVec

	poolReady prometheus.Gauge
}

// New builds the registry. The callbacks are read at scrape time, so the
// gauges always show the service's current state without the service
// having to push every change: sessions counts active sessions,
// queueDepth the executions waiting for a slot, running the executions
// running now. A nil callback leaves its gauge out rather than report a
// made-up zero.
func New(sessions, queueDepth, running func() float64) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_executions_total",
			Help: "Executions (cells and one-shot runs) that ended, by language and status.",
		}, []string{"language", "status"}),
		executionTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kiln_execution_seconds",
			Help:    "Time executions ran, excluding the wait in the queue.",
			Buckets: longBuckets,
		}, []string{"language"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kiln_queue_wait_seconds",
			Help:    "Time executions waited in the queue before they ran.",
			Buckets: shortBuckets,
		}),
		sessionsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_sessions_created_total",
			Help: "Sessions created, by where the sandbox came from (pool or fresh).",
		}, []string{"source"}),
		sessionCreate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kiln_session_create_seconds",
			Help:    "Time to create a session, by where the sandbox came from (pool or fresh).",
			Buckets: shortBuckets,
		}, []string{"source"}),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_sessions_ended_total",
			Help: "Sessions ended, by reason.",
		}, []string{"reason"}),
		sandboxFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_sandbox_failures_total",
			Help: "Sandbox failures, by the stage that failed.",
		}, []string{"stage"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_rejected_total",
			Help: "Requests refused before any work, by reason.",
		}, []string{"reason"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kiln_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		httpTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kiln_http_request_seconds",
			Help:    "Time to answer HTTP requests (a streamed execution counts whole), by route pattern.",
			Buckets: longBuckets,
		}, []string{"route"}),
		poolReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kiln_pool_ready",
			Help: "Sandboxes created ahead of need and waiting in the pool.",
		}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.executions, m.executionTime, m.queueWait,
		m.sessionsCreated, m.sessionCreate, m.sessionsEnded,
		m.sandboxFailures, m.rejected,
		m.httpRequests, m.httpTime,
		m.poolReady,
	)
	m.gaugeFunc("kiln_sessions_active", "Sessions active now.", sessions)
	m.gaugeFunc("kiln_queue_depth", "Executions waiting in the queue now.", queueDepth)
	m.gaugeFunc("kiln_executions_running", "Executions running now.", running)

	// Series of the small fixed sets exist from the start at zero, so a
	// rate() or an alert on them works before the first event.
	for _, s := range sources {
		m.sessionsCreated.WithLabelValues(s)
		m.sessionCreate.WithLabelValues(s)
	}
	for r := range endReasons {
		m.sessionsEnded.WithLabelValues(r)
	}
	for s := range failureStages {
		m.sandboxFailures.WithLabelValues(s)
	}
	for r := range rejectReasons {
		m.rejected.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) gaugeFunc(name, help string, f func() float64) {
	if f == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// Handler serves the registry in the Prometheus exposition formats. When
// a collector fails it serves what the others collected, so one broken
// reading (say, /proc unreadable) does not hide the rest.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
