package worklease

// domainMap is a shard's map from domain names to records. It is keyed by
// the 64-bit hash the Manager computes once per call to pick the shard, so a
// call hashes its domain name once, not twice, and a lookup compares one
// name. Two names with the same hash are vanishingly rare but handled: the
// second goes into overflow, keyed by name.
//
// The zero domainMap is not usable; see newDomainMap. It does no locking.
type domainMap struct {
	byHash   map[uint64]*record
	overflow map[string]*record // domains whose hash another domain holds in byHash; nil until then
}

func newDomainMap() domainMap {
	return domainMap{byHash: make(map[uint64]*record)}
}

// get returns the record of domain, whose hash is h, or nil.
func (d *domainMap) get(h uint64, domain string) *record {
	if r := d.byHash[h]; r != nil && r.domain == domain {
		return r
	}
	if d.overflow == nil { // the common case: no collision ever
		return nil
	}
	return d.overflow[domain]
}

// put adds r, whose domain hashes to h and has no record in d.
func (d *domainMap) put(h uint64, r *record) {
	if d.byHash[h] == nil {
		d.byHash[h] = r
		return
	}
	if d.overflow == nil {
		d.overflow = make(map[string]*record)
	}
	d.overflow[r.domain] = r
}

// remove deletes r, whose domain hashes to h, if d still holds it.
func (d *domainMap) remove(h uint64, r *record) {
	if d.byHash[h] == r {
		delete(d.byHash, h)
		return
	}
	if d.overflow[r.domain] == r {
		delete(d.overflow, r.domain)
		if len(d.overflow) == 0 {
			d.overflow = nil
		}
	}
}

// len returns the number of records in d.
func (d *domainMap) len() int { return len(d.byHash) + len(d.overflow) }

// all calls f with every record in d, in no particular order.
func (d *domainMap) all(f func(*record)) {
	for _, r := range d.byHash {
		f(r)
	}
	for _, r := range d.overflow {
		f(r)
	}
}
