// Package replicabench measures throughput with one kiln serve and with
// two on one PostgreSQL (issue 15, "Load across replicas"). Its test is
// under the bench build tag: it only measures, and docs/PERFORMANCE.md
// has its figures. Run it as root:
//
//	go test -tags bench -count=1 -v -timeout 30m ./test/replicabench/
package replicabench
