package pg

import (
	"fmt"
	"unicode/utf8"
)

// A domain is 1 to worklease.MaxDomainLen arbitrary bytes, more than an
// index entry holds (a btree's holds at most 2,704 bytes), so the schema
// indexes what fits (see 006_domain_keys.sql): every table has the
// domain's key, the SHA-256 of its bytes, and finds a domain by it, and
// the listings order domains through indexes of their first nameBytes
// bytes. The statements write their conditions with the functions below,
// so that they read those indexes.

// nameBytes is how many of a domain's first bytes the schema's indexes
// of domains by name hold. It is part of the schema: never change it.
const nameBytes = 1024

// domainIs returns the SQL condition that the row alias is of the domain
// param, an argument ($n) or a column: its key, which the indexes hold,
// and its bytes.
func domainIs(alias, param string) string {
	return fmt.Sprintf("%[1]s.key = sha256(%[2]s::bytea) AND %[1]s.domain = %[2]s", alias, param)
}

// sameDomain returns the SQL condition that the rows a and b are of the
// same domain: the same key and the same bytes.
func sameDomain(a, b string) string {
	return fmt.Sprintf("%[1]s.key = %[2]s.key AND %[1]s.domain = %[2]s.domain", a, b)
}

// name returns the SQL of the first nameBytes bytes of expr, a domain,
// as the indexes of domains by name hold them. Ordered by name and then
// by the domain itself, domains are in the order of their bytes.
func name(expr string) string {
	return fmt.Sprintf("substr(%s, 1, %d)", expr, nameBytes)
}

// backlogOf returns the SQL condition that the backlog's row b is of the
// domain of the row d, as the backlog's order index (by name, key and
// position) reads it: with ORDER BY b.pos, the domain's backlog front
// first.
func backlogOf(b, d string) string {
	return fmt.Sprintf("%s = %s AND %s", name(b+".domain"), name(d+".domain"), sameDomain(b, d))
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
