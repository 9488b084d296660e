// Package riverbench compares the pg package's pull queue with River
// (github.com/riverqueue/river), a job queue for Go on PostgreSQL, on the
// same server in the same run. It is a module of its own, so that the pg
// module does not depend on River. It holds benchmarks only: make bench
// runs them on a throwaway server.
package riverbench
