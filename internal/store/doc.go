// Package store keeps kiln's durable state: users, API keys, sessions,
// executions, artifact metadata and the append-only audit log.
//
// Store is the interface the service consumes. DB implements it once over
// database/sql with one portable schema ($n placeholders, TEXT, BIGINT,
// BOOLEAN, JSON as TEXT, times as unix nanoseconds, ids made by the
// application); the adapters store/sqlite and store/postgres only open a
// connection and describe their dialect. Migrations are embedded numbered .sql
// files applied at start; store/storetest is the conformance suite both
// adapters run.
package store
