package pg

import (
	"crypto/sha256"
	"fmt"
	"unicode/utf8"
)

// A domain is 1 to worklease.MaxDomainLen arbitrary bytes, more than an
// index entry holds (a btree's holds at most 2,704 bytes), so the schema
// indexes what fits (see 006_domain_keys.sql): every table has the
// domain's key, the domain itself if it is at most keyBytes long, else its
// first keyBytes bytes and its SHA-256, and finds a domain by it. The
// statements write their conditions with the functions below, so that
// they read those indexes.

// keyBytes is the longest domain that is its own key. It is part of the
// schema: never change it.
const keyBytes = 1024

// domainIs returns the SQL condition that the row alias is of the domain
// param, an argument ($n) or a column: its key, which the indexes hold,
// and its bytes.
func domainIs(schema, alias, param string) string {
	return fmt.Sprintf("%[2]s.key = %[1]s._key(%[3]s::bytea) AND %[2]s.domain = %[3]s", schema, alias, param)
}

// keyIs returns the SQL condition that the row alias is of the domain
// param, an argument ($n), whose key (see key) the argument keyParam holds.
// The hottest statements take the key from the caller: a plain parameter
// costs a statement less to set up and to compare than _key's expression,
// which a generic plan evaluates on every run.
func keyIs(alias, param, keyParam string) string {
	return fmt.Sprintf("%[1]s.key = %[3]s::bytea AND %[1]s.domain = %[2]s", alias, param, keyParam)
}

// shortKeyIs returns the SQL condition that the row alias is of the domain
// param, an argument of at most keyBytes bytes: such a domain is its own
// key, and no longer domain's key is that short, so the key alone decides.
// The hottest statements have a version for such domains, the usual ones,
// that compares nothing else.
func shortKeyIs(alias, param string) string {
	return fmt.Sprintf("%s.key = %s::bytea", alias, param)
}

// backlogHead returns the SQL of a query of the head of the backlog of the
// domain of the row alias (one with its key and domain): the columns cols
// of the backlog's row y, each named (y.off, y.ctid AS btid), and no row if
// the backlog is empty. It finds the head by the key alone, first in the
// index of positions, and then checks that it is of the domain: checked in
// the scan, the domain would make PostgreSQL expect one row at most, and
// read all of the domain's backlog and sort it rather than its first row. A
// key is one domain's only (the domains' keys are unique, and the backlog
// holds rows of known domains only), so both find the same head.
func backlogHead(schema, alias, cols string) string {
	return fmt.Sprintf(`SELECT h.* FROM (SELECT y.domain AS head_domain, %[3]s FROM %[1]s.backlog y
		WHERE y.key = %[2]s.key ORDER BY y.pos LIMIT 1) h WHERE h.head_domain = %[2]s.domain`, schema, alias, cols)
}

// sameDomain returns the SQL condition that the rows a and b are of the
// same domain: the same key and the same bytes.
func sameDomain(a, b string) string {
	return fmt.Sprintf("%[1]s.key = %[2]s.key AND %[1]s.domain = %[2]s.domain", a, b)
}

// shortDomain is how an error names domain, as the in-memory Manager's
// errors do: quoted whole if short, else a quoted prefix and its length,
// so that a domain of kilobytes never makes an error of kilobytes.
func shortDomain(domain string) string {
	const show = 64
	if len(domain) <= show {
		return fmt.Sprintf("%q", domain)
	}
	n := show
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(domain[n]); i++ { // a rune cut in two: leave it out
		n--
	}
	return fmt.Sprintf("%q… (%d bytes)", domain[:n], len(domain))
}

// key returns domain's key, as the schema's _key function makes it.
func key(domain []byte) []byte {
	if len(domain) <= keyBytes {
		return domain
	}
	sum := sha256.Sum256(domain)
	return append(domain[:keyBytes:keyBytes], sum[:]...)
}
