// Package store keeps warren's durable state in SQLite (modernc.org/sqlite,
// pure Go, so the binary stays static and cgo-free): today the session
// records behind session.Store, later tenants, API keys and the audit log.
//
// The package owns the schema. Each change is a file migrations/NNNN_name.sql,
// embedded in the binary and applied in order, in one transaction, when the
// database is opened; the database's version is its PRAGMA user_version. A
// database from a newer warren is refused rather than guessed at. To change
// the schema, add the next file; never edit one that has shipped.
//
// The store records what it is told and classifies its errors with errdefs;
// it makes no lifecycle decisions, which belong to session.Manager.
package store
