// Package pgtest starts a throwaway PostgreSQL for tests outside the
// postgres package (the replicas test drives two kiln serve processes on
// one). It listens only on a unix socket in a new temporary directory. It
// runs the server as another user, so it is for Linux only.
package pgtest
