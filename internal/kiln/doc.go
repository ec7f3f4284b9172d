// Package kiln is the vocabulary of the project: limits, execution results and
// error kinds. It imports nothing else from the module; every other package
// speaks in its terms.
package kiln
